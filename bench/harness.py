"""What every script in ``bench/`` shares: starting and stopping a redis-server and gateway
subprocesses, CPU and memory meters, the watchdog, py-spy profiling, the official client's
receive-and-ack loop, and the command-line conventions (:func:`run_cli`).

The scripts import it by name (``from harness import ...``): a script's own directory is
first on ``sys.path`` (Python's docs, "The Module Search Path"), so ``bench/`` needs no
package. ``bench/bench.py`` and ``bench/perf.py`` both use it and neither imports the other's
helpers: ``bench.py`` runs ``perf.py``'s load generator, ``perf.py --start`` starts its
processes here.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pulsar
import redis

ROOT = Path(__file__).resolve().parent.parent
PAYLOAD_SIZE = 100
KEY_PREFIX = "pgw"
NAMESPACE = "public/default"
RECEIVER_QUEUE = 1000
MIB = 1024 * 1024


# -- small helpers ----------------------------------------------------------------------------


class BenchError(RuntimeError):
    """A case did not complete (timeout, lost messages, a process died)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(
    predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.02
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def _die_with_parent() -> None:
    """preexec_fn: SIGTERM the child when the bench process dies (Linux only)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def fmt_rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def mib(value: int) -> str:
    return f"{value / MIB:.1f}"


def median(values: list[float]) -> float:
    return float(statistics.median(values))


# -- processes --------------------------------------------------------------------------------


class RedisServer:
    def __init__(self, workdir: Path, aof: bool) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise BenchError("redis-server is not on PATH")
        self.port = free_port()
        self.workdir = workdir
        persistence = (
            ["--appendonly", "yes", "--appendfsync", "everysec"] if aof else ["--appendonly", "no"]
        )
        self.proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                *persistence,
                "--dir",
                str(workdir),
                "--logfile",
                str(workdir / "redis.log"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        self.url = f"redis://127.0.0.1:{self.port}"
        self.client = redis.Redis(host="127.0.0.1", port=self.port, protocol=2)
        wait_until(self._pings, 20, "redis-server to answer PING")
        info = self.client.info("server")
        self.version = str(info["redis_version"])

    def _pings(self) -> bool:
        if self.proc.poll() is not None:
            raise BenchError(f"redis-server exited with {self.proc.returncode}")
        try:
            return bool(self.client.ping())
        except redis.ConnectionError:
            return False

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


def spawn(argv: list[str], log_path: Path, cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own session with its output in ``log_path`` (a fresh file), to
    be SIGTERMed if this process dies."""
    with log_path.open("xb") as log:  # a fresh file: "ready:" must be this process's
        return subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )


def stop_process(proc: subprocess.Popen[bytes], what: str, grace: float) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            print(
                f"! {what} did not stop within {grace:.0f}s of SIGTERM; killing it", file=sys.stderr
            )
            proc.kill()
            proc.wait(timeout=5)


class GatewayProcess:
    """A gateway subprocess on ``redis_url``: loopback, free ports, the benches' key prefix,
    ``extra`` flags. Waits for its ``ready:`` line unless ``wait`` is False (start several,
    then :meth:`wait_ready` each)."""

    def __init__(
        self,
        redis_url: str,
        workdir: Path,
        *,
        name: str = "",
        extra: tuple[str, ...] | list[str] = (),
        wait: bool = True,
    ) -> None:
        self.name = f"gateway {name}" if name else "gateway"
        self.port = free_port()
        self.http_port = free_port()
        self.log_path = workdir / (f"gateway-{name}.log" if name else "gateway.log")
        self.proc = spawn(
            [
                sys.executable,
                "-m",
                "pulsar_gateway.server.main",
                "--redis-url",
                redis_url,
                "--port",
                str(self.port),
                "--http-port",
                str(self.http_port),
                "--bind",
                "127.0.0.1",
                "--key-prefix",
                KEY_PREFIX,
                *extra,
            ],
            self.log_path,
            cwd=ROOT,
        )
        self.pid = self.proc.pid
        self.ps = psutil.Process(self.pid)
        self.url = f"pulsar://127.0.0.1:{self.port}"
        if wait:
            self.wait_ready()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self) -> None:
        wait_until(self._ready, 60, f"{self.name} to log 'ready:'", interval=0.05)

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise BenchError(
                f"{self.name} exited early ({self.proc.returncode}):\n{self.log_text()[-3000:]}"
            )
        return "ready:" in self.log_text()

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise BenchError(
                f"{self.name} died ({self.proc.returncode}):\n{self.log_text()[-3000:]}"
            )

    def rss(self) -> int:
        return int(self.ps.memory_info().rss)

    def pids(self) -> list[int]:
        """The gateway's pid and its workers' (none with ``--workers 1``): whose CPU counts."""
        return [p.pid for p in [self.ps, *self.ps.children()]]

    def stop(self) -> None:
        stop_process(self.proc, self.name, 20)


class CpuMeter:
    """CPU seconds (user + system) of the gateway, redis-server and this process."""

    def __init__(self, procs: dict[str, psutil.Process]) -> None:
        self.procs = procs

    def snapshot(self) -> dict[str, float]:
        out = {}
        for name, proc in self.procs.items():
            t = proc.cpu_times()
            out[name] = t.user + t.system
        m = psutil.cpu_times()
        out["machine"] = m.user + m.nice + m.system + m.irq + m.softirq + m.steal
        return out

    @staticmethod
    def percent(before: dict[str, float], after: dict[str, float], wall: float) -> dict[str, float]:
        """CPU % per process over ``wall``; ``other`` is everything else on the host
        (other users' work on a shared machine, py-spy when profiling)."""
        pct = {k: 100.0 * (after[k] - before[k]) / wall for k in before}
        machine = pct.pop("machine")
        pct["other"] = max(0.0, machine - sum(pct.values()))
        return pct


class Watchdog:
    """Last resort against hangs.

    The official client's blocking calls (``send_async`` on a full queue, ``flush``,
    ``close``) cannot be interrupted from Python, and with the gateway gone some of them
    never return. So a thread watches the deadline of the current phase and the gateway
    process; when the deadline passes or the gateway dies, it reports, runs the cleanup
    (gateway SIGTERM, redis-server stop, temp dir removal) and ends the process.
    """

    def __init__(self, cleanup: Callable[[], None]) -> None:
        self._cleanup = cleanup
        self._phase = "start-up"
        self._timeout = 0.0
        self._deadline: float | None = None
        self.gateway: GatewayProcess | None = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="watchdog", daemon=True)
        self._thread.start()

    @contextlib.contextmanager
    def phase(self, name: str, timeout: float) -> Iterator[None]:
        saved = (self._phase, self._timeout, self._deadline)
        self._phase, self._timeout = name, timeout
        self._deadline = time.monotonic() + timeout
        try:
            yield
        finally:
            self._phase, self._timeout, self._deadline = saved

    def stop(self) -> None:
        self._stopped.set()

    def _run(self) -> None:
        while not self._stopped.wait(0.5):
            gw = self.gateway
            reason = None
            if gw is not None and gw.proc.poll() is not None:
                reason = f"the gateway exited ({gw.proc.returncode}) during {self._phase}"
            elif self._deadline is not None and time.monotonic() > self._deadline:
                reason = f"{self._phase} did not finish within {self._timeout:.0f}s"
            if reason is None:
                continue
            print(f"bench failed (watchdog): {reason}", file=sys.stderr, flush=True)
            try:
                self._cleanup()
            finally:
                os._exit(3)


class BenchEnv:
    """What every bench's run() sets up and tears down: a temp dir, one redis-server and one
    gateway subprocess (set by the bench once started), a watchdog that cleans up when a
    phase overruns, and a log with the time since start."""

    def __init__(self, prefix: str) -> None:
        self.started = time.monotonic()
        self.workdir = Path(tempfile.mkdtemp(prefix=prefix))
        self.rds: RedisServer | None = None
        self.gw: GatewayProcess | None = None
        #: cleared by the bench once it got through; a failed run dumps the gateway log
        self.failed = True
        self.watchdog = Watchdog(self.cleanup)

    def log(self, msg: str) -> None:
        print(f"[{time.monotonic() - self.started:7.1f}s] {msg}", file=sys.stderr, flush=True)

    def cleanup(self) -> None:
        gw, rds = self.gw, self.rds
        if gw is not None:
            if gw.proc.poll() is not None or self.failed:
                print("--- gateway log (tail) ---", file=sys.stderr)
                with contextlib.suppress(Exception):
                    print(gw.log_text()[-4000:], file=sys.stderr, flush=True)
            gw.stop()
        if rds is not None:
            rds.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


# -- profiling --------------------------------------------------------------------------------


def find_py_spy(explicit: str | None) -> str | None:
    if explicit:
        return explicit
    found = shutil.which("py-spy")
    if found:
        return found
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else None


def add_profile_arguments(p: argparse.ArgumentParser) -> None:
    """``--profile DIR``, ``--py-spy`` and ``--profile-rate``, for :class:`Profiler`."""
    p.add_argument(
        "--profile",
        metavar="DIR",
        default=None,
        help="py-spy record the gateway during each timed gateway case into DIR",
    )
    p.add_argument("--py-spy", default=None, help="path of the py-spy binary")
    p.add_argument("--profile-rate", type=int, default=100, help="py-spy samples per second")


class Profiler:
    """``py-spy record --format raw`` of the gateway for the duration of a ``with`` block."""

    def __init__(self, py_spy: str | None, out_dir: Path | None, pid: int, rate: int) -> None:
        self.py_spy = py_spy
        self.out_dir = out_dir
        self.pid = pid
        self.rate = rate
        self.reports: dict[str, str] = {}

    @property
    def enabled(self) -> bool:
        return self.py_spy is not None and self.out_dir is not None

    @contextlib.contextmanager
    def record(self, name: str) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        assert self.out_dir is not None and self.py_spy is not None
        out = self.out_dir / f"{name}.txt"
        proc = subprocess.Popen(
            [
                self.py_spy,
                "record",
                "--pid",
                str(self.pid),
                "--rate",
                str(self.rate),
                "--format",
                "raw",
                "--function",
                "--nonblocking",
                "-o",
                str(out),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        time.sleep(1.0)  # let py-spy attach before the timed section starts
        try:
            yield
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                _, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            if out.exists():
                self.reports[name] = summarize_profile(out)
            else:
                self.reports[name] = (
                    f"(py-spy wrote nothing: {err.decode(errors='replace')[-500:]})"
                )


def _short_frame(frame: str) -> str:
    # "func (path/to/file.py:123)" -> "func (pkg/file.py:123)"
    if "(" not in frame:
        return frame
    func, _, loc = frame.partition(" (")
    loc = loc.rstrip(")")
    for marker in ("site-packages/", "/lib/python3"):
        if marker in loc:
            loc = loc.split(marker, 1)[1]
            if marker == "/lib/python3":
                loc = "stdlib" + loc[loc.find("/") :]
            break
    loc = loc.replace(str(ROOT) + "/", "")
    return f"{func} ({loc})"


def summarize_profile(path: Path, top: int = 15) -> str:
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack or not count_s.isdigit():
            continue
        count = int(count_s)
        frames = [_short_frame(f) for f in stack.split(";") if f]
        if frames and frames[0].startswith("process "):
            frames = frames[1:]
        if frames and frames[0].startswith("thread "):
            frames = frames[1:]
        if not frames:
            continue
        samples += count
        own[frames[-1]] += count
        for f in set(frames):
            total[f] += count
    if not samples:
        return "(no samples)"
    lines = [
        f"{samples} non-idle samples",
        "",
        "| # | %own | %total | function |",
        "|---:|---:|---:|---|",
    ]
    for i, (frame, count) in enumerate(own.most_common(top), 1):
        lines.append(
            f"| {i} | {100 * count / samples:.1f} | {100 * total[frame] / samples:.1f} "
            f"| `{frame}` |"
        )
    lines += ["", "Top inclusive (%total; event-loop and start-up frames left out):", ""]
    inclusive = [(f, c) for f, c in total.most_common() if not _is_boilerplate(f)]
    for frame, count in inclusive[:top]:
        lines.append(f"- {100 * count / samples:5.1f}%  `{frame}`")
    by_file: Counter[str] = Counter()
    for frame, count in own.items():
        by_file[frame.rpartition(" (")[2].rpartition(":")[0] or frame] += count
    lines += ["", "Own time by source file:", ""]
    for name, count in by_file.most_common(10):
        lines.append(f"- {100 * count / samples:5.1f}%  `{name}`")
    return "\n".join(lines)


_BOILERPLATE = (
    "<frozen runpy>",
    "asyncio/runners.py",
    "pulsar_gateway/server/main.py",
    "BaseEventLoop.run_forever ",
    "BaseEventLoop.run_until_complete ",
    "BaseEventLoop._run_once ",
    "Handle._run ",
)


def _is_boilerplate(frame: str) -> bool:
    return any(marker in frame for marker in _BOILERPLATE)


# -- the official client ---------------------------------------------------------------------


def receive_and_ack(
    consumer: Any, n: int, deadline: float, pending: Callable[[], int]
) -> tuple[float, float]:
    """Receive and acknowledge ``n`` messages with the official client, then wait until
    ``pending()`` (Redis's unacked entries) is 0, by the ``time.monotonic`` ``deadline``.
    Returns the perf_counter times of the last receive and of the acks all in Redis."""
    receive, ack = consumer.receive, consumer.acknowledge
    for i in range(n):
        try:
            msg = receive(10_000)
        except pulsar.Timeout:
            raise BenchError(f"receive timed out after {i} of {n} messages") from None
        ack(msg)
        if not i % 10_000 and time.monotonic() > deadline:
            raise BenchError(f"consume timed out after {i} of {n} messages")
    t1 = time.perf_counter()
    wait_until(
        lambda: pending() == 0,
        max(5.0, deadline - time.monotonic()),
        "the acks to reach Redis",
        interval=0.002,
    )
    return t1, time.perf_counter()


class AckCounter:
    """send_async callback: counts receipts, notes the time of the last one."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.acks = 0
        self.errors: Counter[str] = Counter()
        self.last = 0.0
        self.done = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, result: Any, _msg_id: Any) -> None:
        with self._lock:
            self.acks += 1
            if result != pulsar.Result.Ok:
                self.errors[str(result)] += 1
            if self.acks >= self.expected:
                self.last = time.perf_counter()
                self.done.set()


# -- results and the command line -----------------------------------------------------------


def git_describe() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
        return head + (" (+ uncommitted changes)" if dirty.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def run_cli(args: argparse.Namespace, run_bench: Callable[[argparse.Namespace], Any]) -> int:
    """Run a bench with the command-line conventions of every script in ``bench/``: SIGTERM
    stops it like Ctrl-C, a BenchError exits 1, an interrupt 130, ``--json`` saves the
    results."""

    def on_term(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    try:
        data = run_bench(args)
    except BenchError as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bench interrupted", file=sys.stderr)
        return 130
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=2, default=str))
    return 0
