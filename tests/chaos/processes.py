"""Processes the chaos run kills: a ``redis-server`` with an AOF fsynced at every write, and
``pulsar-gateway`` processes that come back on the same ports, as a supervisor restarts them.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time

import redis

from tests.conftest import TIMEOUT, GatewayProcess, free_port


class AofRedis:
    """A redis-server of its own (``appendonly yes``, ``appendfsync always``: a write is on
    disk before Redis answers it) that can be SIGKILLed and started again on the same port
    and directory, where it reloads its AOF."""

    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="pgw-test-aof-redis-")
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"redis://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                *(self.binary, "--port", str(self.port), "--bind", "127.0.0.1"),
                *("--save", "", "--appendonly", "yes", "--appendfsync", "always"),
                *("--dir", self.dir, "--logfile", os.path.join(self.dir, "redis.log")),
            ]
        )

    def start_and_wait(self, timeout: float) -> None:
        """Start and wait until it answers; once more if it exits at once because its port
        is still taken (an outgoing connection of the machine may hold it for a moment)."""
        for _attempt in range(5):
            self.start()
            assert self.proc is not None
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.proc.poll() is None:
                if self.ready():
                    return
                time.sleep(0.02)
            if self.proc.poll() is None:
                raise AssertionError(f"redis-server not answering after {timeout} s")
            time.sleep(0.5)
        raise AssertionError("redis-server could not start on its port")

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port)

    def ready(self) -> bool:
        """Answers PING (it refuses while it loads its AOF)."""
        client = self.client()
        try:
            return bool(client.ping())
        except (redis.ConnectionError, redis.BusyLoadingError):
            return False
        finally:
            client.close()

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(TIMEOUT)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(TIMEOUT)
        shutil.rmtree(self.dir, ignore_errors=True)


class RestartableGateway:
    """One gateway of the fleet: a ``pulsar-gateway`` process on fixed ports, SIGKILLed and
    started again on the same ports (each life has a log file of its own)."""

    def __init__(self, args: list[str]) -> None:
        self.args = args
        self.port = free_port()
        self.http_port = free_port()
        self.lives: list[GatewayProcess] = []

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"pulsar://{self.address}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def running(self) -> bool:
        return bool(self.lives) and self.lives[-1].proc.poll() is None

    def start(self) -> None:
        """Start a new life on the same ports; once more while one of them is still taken
        (an outgoing connection of the machine may hold it as its local port for a moment)."""
        for attempt in range(5):
            life = GatewayProcess(self.args, port=self.port, http_port=self.http_port)
            self.lives.append(life)
            try:
                life.wait_ready(timeout=6 * TIMEOUT)
                return
            except AssertionError:
                if "address already in use" not in life.log() or attempt == 4:
                    raise
                time.sleep(0.5)

    def kill(self) -> None:
        self.lives[-1].stop(sig=signal.SIGKILL)

    def stop(self) -> None:
        if self.lives:
            self.lives[-1].stop()

    def logs(self) -> list[str]:
        return [life.log() for life in self.lives]

    def remove_logs(self) -> None:
        for life in self.lives:
            life.log_path.unlink(missing_ok=True)
