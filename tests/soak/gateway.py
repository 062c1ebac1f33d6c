"""The processes a soak scenario measures: a fresh ``redis-server`` (no persistence) and ONE
``pulsar-gateway`` process on it, started and always killed by :class:`Stack`.

Which gateway code runs: the child is ``sys.executable -m pulsar_gateway.server.main``
with this process's environment. With ``source`` given, the child runs in that directory
with it first on ``PYTHONPATH`` (``--source /tmp/base`` measures an older checkout). Without
it, an inherited ``PYTHONPATH`` decides (the child's working directory is the scenario's
temp dir, so it shadows nothing); with neither, the checkout holding this package is the
source: the virtualenv's editable install is a link tree of the files that existed when it
was installed, so a module added since would be missing from it. :func:`code_location`
says which ``pulsar_gateway`` the child imports.

Nothing here imports the gateway: the harness must keep working while the gateway code is
being changed, and must measure an older checkout just as well.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import redis

#: The checkout holding this package: the default source of the gateway code.
CHECKOUT = Path(__file__).resolve().parents[2]
HEALTH_PATH = "/admin/v2/brokers/health"
#: How long a gateway or Redis may take to start, seconds.
START_TIMEOUT = 60.0


class StartFailed(RuntimeError):
    """A process did not come up; the message carries the end of its log."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _log_tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _stop(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout``; a SIGSTOPped process is continued first."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGCONT)
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


class RedisServer:
    """A ``redis-server`` from PATH on a free loopback port, files in ``workdir``, no
    persistence. :meth:`pause` and :meth:`resume` are SIGSTOP and SIGCONT."""

    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise StartFailed("no redis-server on PATH")
        self.log_path = workdir / "redis.log"
        for _attempt in range(5):  # a free port can be taken before Redis binds it
            self.port = free_port()
            self.proc = subprocess.Popen(
                [
                    *(binary, "--port", str(self.port), "--bind", "127.0.0.1"),
                    *("--save", "", "--appendonly", "no", "--dir", str(workdir)),
                    *("--logfile", str(self.log_path)),
                ]
            )
            if self._wait_answering():
                return
        raise StartFailed(f"redis-server did not start:\n{_log_tail(self.log_path)}")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def _wait_answering(self) -> bool:
        deadline = time.monotonic() + START_TIMEOUT
        with redis.Redis(port=self.port, socket_timeout=1) as client:
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    if client.ping():
                        return True
                except redis.ConnectionError:
                    time.sleep(0.05)
        _stop(self.proc)
        return False

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        _stop(self.proc)


class GatewayServer:
    """One ``pulsar-gateway`` process on free loopback ports, logging to ``workdir``; ready
    once ``GET /admin/v2/brokers/health`` answers 200 ``ok``."""

    def __init__(
        self, redis_url: str, args: tuple[str, ...], workdir: Path, source: Path | None
    ) -> None:
        self.log_path = workdir / "gateway.log"
        cwd, env = _child_environment(workdir, source)
        for _attempt in range(3):  # a free port can be taken before the gateway binds it
            self.port, self.http_port = free_port(), free_port()
            with self.log_path.open("wb") as log:
                self.proc = subprocess.Popen(
                    [
                        *(sys.executable, "-m", "pulsar_gateway.server.main"),
                        *("--port", str(self.port), "--http-port", str(self.http_port)),
                        *("--bind", "127.0.0.1", "--redis-url", redis_url, *args),
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=cwd,
                    env=env,
                )
            if self._wait_ready():
                return
            if "address already in use" not in self.log_path.read_text(errors="replace"):
                break
        raise StartFailed(f"the gateway did not start:\n{_log_tail(self.log_path)}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def address(self) -> tuple[str, int]:
        """The binary protocol's address."""
        return ("127.0.0.1", self.port)

    @property
    def http_address(self) -> tuple[str, int]:
        """The HTTP port's address (admin, REST produce, WebSocket)."""
        return ("127.0.0.1", self.http_port)

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                with urllib.request.urlopen(self.http_url + HEALTH_PATH, timeout=2) as answer:
                    if answer.status == 200 and answer.read().strip() == b"ok":
                        return True
            except OSError:
                pass
            time.sleep(0.1)
        _stop(self.proc)
        return False

    def topic_stats(self, topic: str, timeout: float = 30.0) -> dict[str, Any]:
        """Pulsar's ``TopicStats`` of ``persistent://public/default/{topic}``."""
        url = f"{self.http_url}/admin/v2/persistent/public/default/{topic}/stats"
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            stats: dict[str, Any] = json.load(answer)
            return stats

    def stop(self) -> None:
        _stop(self.proc)

    def log_tail(self, lines: int = 20) -> str:
        return _log_tail(self.log_path, lines)


def _child_environment(workdir: Path, source: Path | None) -> tuple[Path, dict[str, str]]:
    """The working directory and environment of a gateway child (see the module doc)."""
    env = dict(os.environ)
    if source is None and not env.get("PYTHONPATH"):
        source = CHECKOUT
    if source is None:
        return workdir, env
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(source), env.get("PYTHONPATH")) if p)
    return source, env


def code_location(source: Path | None) -> str:
    """The ``pulsar_gateway`` package a gateway child started with ``source`` imports."""
    cwd, env = _child_environment(Path(tempfile.gettempdir()), source)
    found = subprocess.run(
        [sys.executable, "-c", "import pulsar_gateway; print(pulsar_gateway.__file__)"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return str(Path(found.stdout.strip()).parent)


class Stack:
    """A fresh ``redis-server`` and one gateway on it, in a temp dir removed by
    :meth:`stop`. ``args`` are extra gateway flags."""

    def __init__(self, args: tuple[str, ...] = (), source: Path | None = None) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="pgw-soak-"))
        try:
            self.redis = RedisServer(self.workdir)
            try:
                self.gateway = GatewayServer(self.redis.url, args, self.workdir, source)
            except BaseException:
                self.redis.stop()
                raise
        except BaseException:
            shutil.rmtree(self.workdir, ignore_errors=True)
            raise

    def stop(self) -> None:
        """Stop both processes (the gateway first) and remove the temp dir."""
        try:
            self.gateway.stop()
        finally:
            self.redis.stop()
            shutil.rmtree(self.workdir, ignore_errors=True)
