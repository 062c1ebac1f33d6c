"""Throughput and memory benchmark: the gateway against raw redis-py on the same Redis.

Usage::

    .venv/bin/python bench/bench.py [--messages N] [--quick] [--passes K] [--aof]
                                    [--profile DIR] [--json PATH]

One run starts its own redis-server (temp dir, free port, no RDB snapshots, AOF off or,
with ``--aof``, ``appendfsync everysec``) and one gateway subprocess on it
(``python -m pulsar_gateway.server.main``), then measures, with 100-byte payloads:

1. produce, batching ON: the official client (``send_async`` + ack callback, then
   ``flush()``; from the first send to the last ack) against raw redis-py pipelined ``XADD``,
   one entry per message, 1000 commands per ``execute()``, one connection.
2. produce, batching OFF: same client, ``batching_enabled=False``; same raw figure.
3. consume, Shared subscription, ``receive()`` + ``acknowledge()`` of each message, on a topic
   pre-filled (untimed) by a batching producer and, second row, by a non-batching one;
   from ``subscribe()`` until Redis holds no pending entry for the subscription (the
   client groups acks for up to 100 ms, so that tail is included). Raw: ``XGROUP CREATE`` +
   loop of ``XREADGROUP COUNT 1000`` + ``XACK`` of the ids read, one connection, on a stream
   pre-filled with N entries.

Raw figures are measured in the same run because absolute numbers move 5-30% between runs on
shared machines (``shared/reference/redis-limits.md``); compare ratios. The official client
and redis-py run in this process, the gateway and Redis in their own. Every gateway case is
preceded by a short untimed warm-up on its own topic, every case uses fresh topics (streams)
which are deleted afterwards, so Redis memory does not grow across cases.

Memory: the gateway's RSS at start, after the produce cases, after the consume cases, and
around a soak of 1,000,000 messages (100,000 with ``--quick``) through a batching producer
and a concurrent Shared consumer acking each message.

Reading the output: besides msg/s, a second table gives the CPU (100% = one core) of the
gateway, redis-server, this process (the official client's C++ threads and Python) and every
other process on the host (a shared machine's other work, py-spy) during each timed section,
and the gateway's CPU time per message, the figure least affected by the client: when this
process sits near 100% the client, not the gateway, sets the rate.

Robustness: every wait has a timeout, and a watchdog thread ends the run (stopping the
gateway with SIGTERM and redis-server, removing the temp dir) if a phase overruns or the
gateway dies, since a blocked call of the official client cannot be interrupted. Child
processes also get SIGTERM if this process dies.

``--profile DIR`` runs ``py-spy record`` (found on PATH, next to this Python, or given with
``--py-spy``) against the gateway during each timed gateway case and prints the 15 hottest
gateway functions of each; profiling costs CPU on small machines, so do not take the
throughput figures of a profiled run as the benchmark's.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import platform
import secrets
import shlex
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pulsar
import redis

ROOT = Path(__file__).resolve().parent.parent
PAYLOAD_SIZE = 100
KEY_PREFIX = "pgw"
NAMESPACE = "public/default"
SUBSCRIPTION = "bench"
PIPELINE = 1000  # raw XADD commands per execute(), XREADGROUP COUNT
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


# -- the bench --------------------------------------------------------------------------------


@dataclass
class Sample:
    rate: float
    seconds: float
    cpu: dict[str, float]
    extra: dict[str, Any] = field(default_factory=dict)


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


class Bench:
    def __init__(self, args: argparse.Namespace, rds: RedisServer, gw: GatewayProcess) -> None:
        self.args = args
        self.n: int = args.messages
        self.rds = rds
        self.gw = gw
        self.run_id = secrets.token_hex(3)
        self.payload = os.urandom(PAYLOAD_SIZE)
        self.client = pulsar.Client(
            gw.url,
            operation_timeout_seconds=30,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        )
        self.raw = redis.Redis(host="127.0.0.1", port=rds.port, protocol=2)
        self.cpu = CpuMeter(
            {"gateway": gw.ps, "redis": psutil.Process(rds.proc.pid), "client": psutil.Process()}
        )
        self.profiler = Profiler(
            find_py_spy(args.py_spy) if args.profile else None,
            Path(args.profile) if args.profile else None,
            gw.pid,
            args.profile_rate,
        )
        self._topics = 0

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()
        with contextlib.suppress(Exception):
            self.raw.close()

    # -- topics and keys --

    def topic(self, label: str) -> str:
        self._topics += 1
        return f"persistent://{NAMESPACE}/bench-{self.run_id}-{self._topics:03d}-{label}"

    @staticmethod
    def stream_key(topic: str) -> str:
        tag = topic.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")
        return f"{KEY_PREFIX}:{{{tag}}}:stream"

    def drop(self, topic: str) -> None:
        """Delete every key of a bench topic (after its producers/consumers are closed)."""
        base = self.stream_key(topic)[: -len(":stream")]
        pattern = base.replace("\\", "\\\\").replace("[", "\\[").replace("?", "\\?") + ":*"
        keys = list(self.raw.scan_iter(match=pattern, count=1000))
        if keys:
            self.raw.delete(*keys)
        self.raw.srem(f"{KEY_PREFIX}:ns:{NAMESPACE}:topics", topic)

    def case_timeout(self, n: int) -> float:
        return 60.0 + n / 1000.0

    # -- gateway: produce --

    def _producer(self, topic: str, batching: bool) -> Any:
        return self.client.create_producer(
            topic,
            batching_enabled=batching,
            batching_max_messages=1000,
            batching_max_publish_delay_ms=10,
            block_if_queue_full=True,
            max_pending_messages=self.args.max_pending,
            send_timeout_millis=30000,
        )

    def _produce(self, producer: Any, n: int) -> tuple[float, float]:
        """Send n messages; returns (first send, last ack) perf_counter times."""
        counter = AckCounter(n)
        payload = self.payload
        send = producer.send_async
        t0 = time.perf_counter()
        for _ in range(n):
            send(payload, counter)
        producer.flush()
        if not counter.done.wait(self.case_timeout(n)):
            raise BenchError(f"only {counter.acks} of {n} sends acknowledged")
        if counter.errors:
            raise BenchError(f"send errors: {dict(counter.errors)}")
        return t0, counter.last

    def fill(self, topic: str, n: int, batching: bool) -> None:
        producer = self._producer(topic, batching)
        try:
            self._produce(producer, n)
        finally:
            producer.close()

    def gw_produce(self, batching: bool, label: str) -> Sample:
        warm = self.topic(f"warm-{label}")
        self.fill(warm, self.args.warmup, batching)
        self.drop(warm)
        topic = self.topic(label)
        producer = self._producer(topic, batching)
        try:
            with self.profiler.record(label):
                c0 = self.cpu.snapshot()
                t0, t1 = self._produce(producer, self.n)
                c1 = self.cpu.snapshot()
        finally:
            producer.close()
        entries = self.raw.xlen(self.stream_key(topic))
        self.drop(topic)
        self.gw.check_alive()
        wall = t1 - t0
        return Sample(
            self.n / wall, wall, CpuMeter.percent(c0, c1, wall), {"stream entries": entries}
        )

    # -- gateway: consume --

    def _pending(self, topic: str) -> int:
        summary = self.raw.xpending(self.stream_key(topic), SUBSCRIPTION)
        return int(summary["pending"])

    def _consume(self, topic: str, n: int) -> tuple[float, float, float]:
        """Subscribe, receive + ack n messages, wait until Redis has no pending entry.

        Returns (start, last receive, all acks in Redis) perf_counter times.
        """
        deadline = time.monotonic() + self.case_timeout(n)
        t0 = time.perf_counter()
        consumer = self.client.subscribe(
            topic,
            SUBSCRIPTION,
            consumer_type=pulsar.ConsumerType.Shared,
            receiver_queue_size=RECEIVER_QUEUE,
            initial_position=pulsar.InitialPosition.Earliest,
        )
        try:
            t1, t2 = receive_and_ack(consumer, n, deadline, lambda: self._pending(topic))
        finally:
            consumer.close()
        return t0, t1, t2

    def gw_consume(self, fill_batching: bool, label: str) -> Sample:
        warm = self.topic(f"warm-{label}")
        self.fill(warm, self.args.warmup, fill_batching)
        self._consume(warm, self.args.warmup)
        self.drop(warm)
        topic = self.topic(label)
        self.fill(topic, self.n, fill_batching)
        entries = self.raw.xlen(self.stream_key(topic))
        with self.profiler.record(label):
            c0 = self.cpu.snapshot()
            t0, t1, t2 = self._consume(topic, self.n)
            c1 = self.cpu.snapshot()
        self.drop(topic)
        self.gw.check_alive()
        wall = t2 - t0
        return Sample(
            self.n / wall,
            wall,
            CpuMeter.percent(c0, c1, wall),
            {
                "stream entries": entries,
                "receive-loop msg/s": round(self.n / (t1 - t0)),
                "ack tail ms": round(1000 * (t2 - t1), 1),
            },
        )

    # -- the lean load generator (bench/perf.py) --

    def lean(self, mode: str, label: str, batch: int = 1) -> Sample:
        """bench/perf.py's load generator against the gateway: what the gateway does when
        the client is not the limit (the official client tops out near 30k msg/s per
        process). ``consume`` drains a topic prefilled (untimed) with N messages, one per
        entry; ``produce`` runs for --lean-seconds."""
        import perf  # bench/ is on sys.path (this script's directory)

        prefix = f"bench-{self.run_id}-{label}"
        argv = [mode, "--service-url", self.gw.url, "--topic-prefix", prefix]
        argv += ["--batch", str(batch), "--size", str(PAYLOAD_SIZE)]
        if mode == "consume":
            argv += ["--messages", str(self.n), "--duration", "600", "--warmup", "0"]
        else:
            argv += ["--duration", str(self.args.lean_seconds), "--warmup", "1"]
        lean_args = perf.parse_args(argv)
        if mode == "consume":
            perf.prefill(lean_args, self.n)
        with self.profiler.record(label):
            result = perf.run(lean_args, [self.gw.pid], self.rds.proc.pid)
        for topic in perf.topic_names(lean_args):
            self.drop(topic)
        self.gw.check_alive()
        return Sample(
            result["msg_per_s"],
            result["elapsed_s"],
            {
                "gateway": result["gateway_cpu_pct"],
                "redis": result["redis_cpu_pct"],
                "client": result["perf_cpu_pct"],
                "other": 0.0,
            },
            {
                "messages": result["messages"],
                "gateway µs/msg": round(result["gateway_us_per_msg"], 2),
                "Redis µs/msg": round(result["redis_us_per_msg"], 2),
            },
        )

    # -- raw redis-py --

    def _raw_xadd(self, key: str, n: int) -> None:
        pipe = self.raw.pipeline(transaction=False)
        payload = self.payload
        for start in range(0, n, PIPELINE):
            for _ in range(min(PIPELINE, n - start)):
                pipe.execute_command("XADD", key, "*", "m", payload)
            pipe.execute()

    def raw_produce(self) -> Sample:
        warm = self.topic("warm-raw-xadd")
        self._raw_xadd(self.stream_key(warm), self.args.warmup)
        self.drop(warm)
        topic = self.topic("raw-xadd")
        key = self.stream_key(topic)
        c0 = self.cpu.snapshot()
        t0 = time.perf_counter()
        self._raw_xadd(key, self.n)
        t1 = time.perf_counter()
        c1 = self.cpu.snapshot()
        if self.raw.xlen(key) != self.n:
            raise BenchError("raw XADD: stream length mismatch")
        self.drop(topic)
        return Sample(self.n / (t1 - t0), t1 - t0, CpuMeter.percent(c0, c1, t1 - t0))

    def _raw_consume(self, key: str, n: int) -> int:
        r = self.raw
        r.xgroup_create(key, SUBSCRIPTION, id="0")
        got = 0
        while True:
            reply = r.xreadgroup(SUBSCRIPTION, "c1", {key: ">"}, count=PIPELINE)
            if not reply or not reply[0][1]:
                break
            ids = [entry_id for entry_id, _ in reply[0][1]]
            r.xack(key, SUBSCRIPTION, *ids)
            got += len(ids)
        return got

    def raw_consume(self) -> Sample:
        warm = self.topic("warm-raw-consume")
        self._raw_xadd(self.stream_key(warm), self.args.warmup)
        self._raw_consume(self.stream_key(warm), self.args.warmup)
        self.drop(warm)
        topic = self.topic("raw-consume")
        key = self.stream_key(topic)
        self._raw_xadd(key, self.n)
        c0 = self.cpu.snapshot()
        t0 = time.perf_counter()
        got = self._raw_consume(key, self.n)
        t1 = time.perf_counter()
        c1 = self.cpu.snapshot()
        if got != self.n or self._pending(topic) != 0:
            raise BenchError(f"raw consume read {got} of {self.n}")
        self.drop(topic)
        return Sample(self.n / (t1 - t0), t1 - t0, CpuMeter.percent(c0, c1, t1 - t0))

    # -- memory soak --

    def soak(self, n: int) -> dict[str, Any]:
        topic = self.topic("soak")
        deadline = time.monotonic() + 120 + n / 1000
        consumer = self.client.subscribe(
            topic,
            SUBSCRIPTION,
            consumer_type=pulsar.ConsumerType.Shared,
            receiver_queue_size=RECEIVER_QUEUE,
            initial_position=pulsar.InitialPosition.Earliest,
        )
        producer = self._producer(topic, batching=True)
        peak = [self.gw.rss()]
        stop = threading.Event()
        errors: list[BaseException] = []

        def sample_rss() -> None:
            while not stop.wait(0.25):
                with contextlib.suppress(psutil.Error):
                    peak[0] = max(peak[0], self.gw.rss())

        def produce() -> None:
            try:
                self._produce(producer, n)
            except BaseException as exc:
                errors.append(exc)

        sampler = threading.Thread(target=sample_rss, daemon=True)
        sender = threading.Thread(target=produce, daemon=True)
        sampler.start()
        t0 = time.perf_counter()
        sender.start()
        try:
            receive, ack = consumer.receive, consumer.acknowledge
            for i in range(n):
                if errors:
                    raise BenchError(f"soak producer failed: {errors[0]}")
                try:
                    msg = receive(10_000)
                except pulsar.Timeout:
                    raise BenchError(f"soak: receive timed out after {i} of {n}") from None
                ack(msg)
                if not i % 10_000 and time.monotonic() > deadline:
                    raise BenchError(f"soak timed out after {i} of {n} messages")
            sender.join(max(1.0, deadline - time.monotonic()))
            if sender.is_alive() or errors:
                raise BenchError(f"soak producer did not finish: {errors[:1]}")
            wait_until(lambda: self._pending(topic) == 0, 30, "the soak's acks to reach Redis")
            t1 = time.perf_counter()
            rss_loaded = self.gw.rss()
        finally:
            stop.set()
            sampler.join(2)
            producer.close()
            consumer.close()
        self.drop(topic)
        time.sleep(1.0)
        self.gw.check_alive()
        return {
            "seconds": t1 - t0,
            "rate": n / (t1 - t0),
            "peak": peak[0],
            "clients attached": rss_loaded,
            "after": self.gw.rss(),
        }


# -- main -------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--messages",
        "-n",
        type=int,
        default=None,
        help="messages per case (default 200000; 20000 with --quick)",
    )
    p.add_argument("--quick", action="store_true", help="small run: N=20000, soak 100000")
    p.add_argument("--passes", type=int, default=1, help="passes per case; medians are printed")
    p.add_argument(
        "--aof",
        action="store_true",
        help="run redis-server with --appendonly yes --appendfsync everysec",
    )
    p.add_argument(
        "--soak",
        type=int,
        default=None,
        help="messages in the memory soak (default 1000000; 100000 with --quick; 0 skips it)",
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=None,
        help="messages per warm-up (default N/20, between 1000 and 10000)",
    )
    p.add_argument(
        "--max-pending",
        type=int,
        default=10_000,
        help="producers' max_pending_messages (default 10000)",
    )
    add_profile_arguments(p)
    p.add_argument(
        "--lean-seconds",
        type=float,
        default=None,
        help="seconds of each lean-generator produce case (default 5; 2 with --quick)",
    )
    p.add_argument("--json", metavar="PATH", default=None, help="also write results as JSON")
    args = p.parse_args(argv)
    if args.lean_seconds is None:
        args.lean_seconds = 2.0 if args.quick else 5.0
    if args.messages is None:
        args.messages = 20_000 if args.quick else 200_000
    if args.soak is None:
        args.soak = 100_000 if args.quick else 1_000_000
    if args.warmup is None:
        args.warmup = max(1000, min(10_000, args.messages // 20))
    if args.messages <= 0 or args.passes <= 0 or args.warmup <= 0 or args.soak < 0:
        p.error("--messages, --passes and --warmup must be positive, --soak >= 0")
    return args


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


CASES = [
    ("produce-batching", "1. produce, batching ON", "xadd"),
    ("produce-nobatch", "2. produce, batching OFF", "xadd"),
    ("consume-batch-filled", "3a. consume Shared, ack each (batch-filled topic)", "consume"),
    ("consume-nobatch-filled", "3b. consume Shared, ack each (non-batch-filled topic)", "consume"),
    ("lean-produce-batch100", "4. produce, lean generator, 100 msgs per SEND", "xadd"),
    ("lean-produce-nobatch", "5. produce, lean generator, 1 msg per SEND", "xadd"),
    ("lean-consume-nobatch", "6. consume Shared, lean generator (non-batch-filled)", "consume"),
]
RAW_LABEL = {
    "xadd": "pipelined XADD, 1 entry/msg",
    "consume": "XREADGROUP 1000 + XACK",
}


def run(args: argparse.Namespace) -> dict[str, Any]:
    env = BenchEnv("pgw-bench-")
    log, cleanup, watchdog = env.log, env.cleanup, env.watchdog
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
        if find_py_spy(args.py_spy) is None:
            raise BenchError("--profile needs py-spy (pip install py-spy, or --py-spy PATH)")
    bench: Bench | None = None
    results: dict[str, list[Sample]] = {}
    memory: dict[str, int] = {}
    soak: dict[str, Any] = {}

    case_limit = 2 * (60.0 + args.messages / 1000.0) + 60.0

    def guarded(name: str, fn: Callable[[], Sample]) -> None:
        with watchdog.phase(name, case_limit):
            record(name, fn())

    def record(key: str, sample: Sample) -> None:
        results.setdefault(key, []).append(sample)
        cpu = ", ".join(f"{k} {v:.0f}%" for k, v in sample.cpu.items())
        log(
            f"{key}: {sample.rate:,.0f} msg/s in {sample.seconds:.2f}s (cpu: {cpu}) "
            f"{sample.extra or ''}"
        )

    try:
        with watchdog.phase("start-up", 120):
            rds = env.rds = RedisServer(env.workdir, args.aof)
            log(
                f"redis-server {rds.version} on port {rds.port} "
                f"(AOF {'everysec' if args.aof else 'off'})"
            )
            gw = env.gw = GatewayProcess(rds.url, env.workdir)
            watchdog.gateway = gw
            log(f"gateway pid {gw.pid} on {gw.url}")
            time.sleep(0.5)
            memory["start"] = gw.rss()
            bench = Bench(args, rds, gw)

        for p in range(args.passes):
            log(f"produce pass {p + 1}/{args.passes}")
            guarded("produce-batching", lambda: bench.gw_produce(True, "produce-batching"))
            guarded("produce-nobatch", lambda: bench.gw_produce(False, "produce-nobatch"))
            guarded("lean-produce-nobatch", lambda: bench.lean("produce", "lean-produce-nobatch"))
            guarded(
                "lean-produce-batch100",
                lambda: bench.lean("produce", "lean-produce-batch100", batch=100),
            )
            guarded("raw-xadd", bench.raw_produce)
        memory["after produce cases"] = gw.rss()

        for p in range(args.passes):
            log(f"consume pass {p + 1}/{args.passes}")
            guarded("consume-batch-filled", lambda: bench.gw_consume(True, "consume-batch-filled"))
            guarded(
                "consume-nobatch-filled",
                lambda: bench.gw_consume(False, "consume-nobatch-filled"),
            )
            guarded("lean-consume-nobatch", lambda: bench.lean("consume", "lean-consume-nobatch"))
            guarded("raw-consume", bench.raw_consume)
        memory["after consume cases"] = gw.rss()

        if args.soak:
            log(f"memory soak: {args.soak:,} messages")
            memory["before soak"] = gw.rss()
            with watchdog.phase("memory soak", 2 * (120 + args.soak / 1000) + 60):
                soak = bench.soak(args.soak)
            log(f"soak: {soak['rate']:,.0f} msg/s in {soak['seconds']:.1f}s")
        redis_mem = int(rds.client.info("memory")["used_memory"])
        env.failed = False
    except KeyboardInterrupt:
        env.failed = False  # no log dump on ^C / SIGTERM
        raise
    finally:
        watchdog.gateway = None  # stopping it is no longer a failure
        with watchdog.phase("shutdown", 90):
            if bench is not None:
                bench.close()
            cleanup()
        watchdog.stop()

    runtime = time.monotonic() - env.started
    report(args, rds, gw, bench, results, memory, soak, redis_mem, runtime)
    return {
        "args": vars(args),
        "redis_version": rds.version,
        "results": {k: [s.__dict__ for s in v] for k, v in results.items()},
        "memory_bytes": memory,
        "soak": soak,
        "runtime_seconds": runtime,
    }


def report(
    args: argparse.Namespace,
    rds: RedisServer,
    gw: GatewayProcess,
    bench: Bench,
    results: dict[str, list[Sample]],
    memory: dict[str, int],
    soak: dict[str, Any],
    redis_mem: int,
    runtime: float,
) -> None:
    def med(key: str) -> float:
        return median([s.rate for s in results[key]])

    out: list[str] = []
    cmd = shlex.join([sys.executable, *sys.argv])
    out += [
        "# pulsar-redis-gateway bench",
        "",
        f"- command: `{cmd}`",
        f'- Redis {rds.version}, AOF {"everysec" if args.aof else "off"} (`--save ""`); '
        f"gateway {git_describe()}",
        f"- N = {args.messages:,} messages per case, {PAYLOAD_SIZE}-byte payloads, "
        f"{args.passes} pass(es){' (medians)' if args.passes > 1 else ''}, "
        f"warm-up {args.warmup:,} messages before each case",
        f"- client: pulsar-client {pulsar.__version__} in the bench process, "
        f"max_pending_messages={args.max_pending}, receiver_queue_size={RECEIVER_QUEUE}; "
        f"redis-py {redis.__version__} (hiredis "
        f"{'yes' if redis.utils.HIREDIS_AVAILABLE else 'no'}); Python "
        f"{platform.python_version()}; {os.cpu_count()} CPUs"
        + (" — PROFILED RUN (py-spy attached)" if args.profile else ""),
        "",
        "| case | gateway msg/s | raw redis-py msg/s | ratio |",
        "|---|---:|---:|---:|",
    ]
    for key, label, raw_kind in CASES:
        raw_key = "raw-xadd" if raw_kind == "xadd" else "raw-consume"
        g, r = med(key), med(raw_key)
        out.append(
            f"| {label} | {fmt_rate(g)} | {fmt_rate(r)} ({RAW_LABEL[raw_kind]}) | {g / r:.2f} |"
        )

    out += [
        "",
        "CPU during the timed section (100% = one core; medians), and details:",
        "",
        "| case | seconds | gateway CPU | gateway CPU µs/msg | redis CPU | bench process CPU "
        "| other processes CPU | details |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for key in [c[0] for c in CASES] + ["raw-xadd", "raw-consume"]:
        samples = results[key]
        cpu = {k: median([s.cpu[k] for s in samples]) for k in samples[0].cpu}
        secs = median([s.seconds for s in samples])
        details = "; ".join(f"{k} {v}" for k, v in samples[-1].extra.items())
        if len(samples) > 1:
            details += (
                ("; " if details else "")
                + "passes: "
                + ", ".join(fmt_rate(s.rate) for s in samples)
            )
        per_msg = samples[-1].extra.get("gateway µs/msg")
        if len(samples) > 1 or per_msg is None:
            messages = samples[-1].extra.get("messages", args.messages)
            per_msg = cpu["gateway"] / 100 * secs / messages * 1e6
        out.append(
            f"| {key} | {secs:.2f} | {cpu['gateway']:.0f}% | {per_msg:.1f} | "
            f"{cpu['redis']:.0f}% | {cpu['client']:.0f}% | {cpu['other']:.0f}% | {details} |"
        )

    out += ["", "Gateway resident memory (RSS, MiB):", ""]
    for name, value in memory.items():
        out.append(f"- {name}: {mib(value)}")
    if soak:
        out += [
            f"- memory soak ({args.soak:,} messages, batching producer + concurrent Shared "
            f"consumer acking each; {soak['rate']:,.0f} msg/s, {soak['seconds']:.1f}s):",
            f"  - before {mib(memory['before soak'])}, peak {mib(soak['peak'])}, "
            f"at the end with clients attached {mib(soak['clients attached'])}, "
            f"after (clients closed, 1 s later) {mib(soak['after'])}",
            f"  - difference after - before: {(soak['after'] - memory['before soak']) / MIB:+.1f}"
            " MiB",
        ]
    out.append(f"- Redis used_memory at the end (bench streams deleted): {mib(redis_mem)} MiB")
    out.append(f"- load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    out += ["", f"Runtime: {runtime:.1f}s"]
    if bench.profiler.reports:
        out += ["", "## Gateway profiles (py-spy, hottest functions by own time)"]
        for name, text in bench.profiler.reports.items():
            out += ["", f"### {name}", "", text]
    print("\n".join(out), flush=True)


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


def main(argv: list[str] | None = None) -> int:
    return run_cli(parse_args(argv), run)


if __name__ == "__main__":
    sys.exit(main())
