"""A fuzzing campaign: sessions of both kinds against one gateway process, up to a number of
inputs, while an official-client pair round-trips on the same gateway.

What counts as a finding (:meth:`Report.failures`):

* the gateway process exited, or logged an error of its own (a line at ERROR or CRITICAL, a
  traceback: an exception no handler caught);
* an HTTP answer of 500 or more;
* a frame from the gateway its own codec cannot decode, or a WebSocket text frame that is not
  JSON (``malformed_answers``);
* a pair message lost (sent, receipt received, never delivered) or a pair round trip that
  failed;
* an exception in the fuzzer itself (reported with the session's seed, so it can be replayed).
"""

from __future__ import annotations

import asyncio
import random
import re
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
import psutil

from tests.fuzz.admin_reads import read_operations, run_admin_reads
from tests.fuzz.binary_sessions import REPLY_WAIT, run_binary_session
from tests.fuzz.stats import SessionStats
from tests.fuzz.websocket_sessions import run_websocket_session

#: The topics and subscriptions the sessions aim at (the pair's topic is none of them).
TOPICS = (
    *(f"persistent://public/default/fuzz-{i}" for i in range(6)),
    "non-persistent://public/default/fuzz-np",
)
SUBSCRIPTIONS = ("fuzz-a", "fuzz-b", "fuzz-c")
#: Seconds a session may take beyond the answers it may wait for (REPLY_WAIT each): past
#: that the gateway stopped serving it.
SESSION_LIMIT = 30.0

#: a log record: ``2026-11-27 01:01:39,636 LEVEL logger: message``
_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \S+ (\w+) (\S+): (.*)$")


def read_log(log: str) -> tuple[list[str], dict[str, int]]:
    """The gateway's own errors (records at ERROR or CRITICAL, and any output that is not a
    log record nor the traceback of one: what Python prints of an exception nobody caught)
    and its warnings, counted by logger and the start of the message."""
    errors: list[str] = []
    warnings: dict[str, int] = {}
    level = ""
    # lines end at "\n" only, as in the file: a client's name may hold U+2028 or \x1c,
    # which str.splitlines would take for line ends too
    for line in log.split("\n"):
        record = _RECORD.match(line)
        if record is not None:
            level, name, message = record.groups()
            if level in ("ERROR", "CRITICAL"):
                errors.append(f"{name}: {message}"[:300])
            elif level == "WARNING":
                key = f"{name}: {re.sub(r'[0-9]+', '#', message[:60])}"
                warnings[key] = warnings.get(key, 0) + 1
        elif level not in ("ERROR", "CRITICAL", "WARNING") and line.strip():
            # a traceback line after a WARNING record with exc_info is that warning's
            errors.append(f"output: {line}"[:300])
    return errors, warnings


class Target(Protocol):
    """A gateway process (``tests.conftest.GatewayProcess``)."""

    port: int
    http_port: int
    proc: Any

    def log(self) -> str: ...


def rss_kib(pid: int) -> int:
    """Resident memory of a process, KiB."""
    return int(psutil.Process(pid).memory_info().rss // 1024)


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far."""
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def binary_connections(http_port: int) -> float:
    """The gateway's open binary connections, from its /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    for line in text.splitlines():
        if line.startswith("pulsar_gateway_connections{") and 'protocol="binary"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


# -- the official client pair --------------------------------------------------------------


class LivePair:
    """An official-client producer and Shared consumer on a topic of their own, round-tripping
    one message at a time in a thread for as long as the campaign runs."""

    def __init__(self, service_url: str, timeout: float = 10.0) -> None:
        import pulsar

        self.timeout = timeout
        self.client = pulsar.Client(
            service_url,
            operation_timeout_seconds=30,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        )
        self.topic = f"persistent://public/default/live-{uuid.uuid4().hex[:8]}"
        self.consumer = self.client.subscribe(
            self.topic, "live", consumer_type=pulsar.ConsumerType.Shared
        )
        self.producer = self.client.create_producer(self.topic, batching_enabled=False)
        self.sent: list[bytes] = []
        self.received: list[bytes] = []
        self.failures: list[str] = []
        self.slowest = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> LivePair:
        self._thread.start()
        return self

    def _run(self) -> None:
        import pulsar

        i = 0
        while not self._stop.is_set():
            payload = f"live-{i}-{uuid.uuid4().hex}".encode()
            began = time.monotonic()
            try:
                self.producer.send(payload)
                self.sent.append(payload)
                msg = self.consumer.receive(timeout_millis=int(self.timeout * 1000))
                self.received.append(msg.data())
                self.consumer.acknowledge(msg)
            except pulsar.PulsarException as exc:
                self.failures.append(f"round trip {i}: {exc!r}")
            self.slowest = max(self.slowest, time.monotonic() - began)
            i += 1
            time.sleep(0.02)  # some 40 round trips a second, leaving the fuzzer the CPU

    def stop(self) -> None:
        """Stop, then collect what is still on its way."""
        import pulsar

        self._stop.set()
        self._thread.join(3 * self.timeout)
        missing = set(self.sent) - set(self.received)
        while missing:
            try:
                msg = self.consumer.receive(timeout_millis=int(self.timeout * 1000))
            except pulsar.Timeout:
                break
            self.received.append(msg.data())
            self.consumer.acknowledge(msg)
            missing.discard(msg.data())
        self.client.close()

    @property
    def lost(self) -> int:
        return len(set(self.sent) - set(self.received))


# -- the campaign --------------------------------------------------------------------------


@dataclass
class Report:
    inputs_target: int
    seed: int
    seconds: float = 0.0
    binary: SessionStats = field(default_factory=SessionStats)
    websocket: SessionStats = field(default_factory=SessionStats)
    admin: SessionStats = field(default_factory=SessionStats)
    gateway_exited: bool = False
    unhandled_errors: list[str] = field(default_factory=list)
    warnings: dict[str, int] = field(default_factory=dict)
    fuzzer_errors: list[str] = field(default_factory=list)
    #: sessions still running after SESSION_LIMIT seconds (the gateway stopped serving them)
    stalled: list[str] = field(default_factory=list)
    pair_round_trips: int = 0
    pair_lost: int = 0
    pair_failures: list[str] = field(default_factory=list)
    pair_slowest_ms: float = 0.0
    rss_before_kib: int = 0
    rss_after_kib: int = 0
    gateway_cpu_seconds: float = 0.0
    connections_left: float = 0.0

    @property
    def kinds(self) -> tuple[SessionStats, ...]:
        return (self.binary, self.websocket, self.admin)

    @property
    def inputs(self) -> int:
        return sum(kind.inputs for kind in self.kinds)

    @property
    def server_errors(self) -> int:
        return sum(kind.server_errors for kind in self.kinds)

    @property
    def malformed_answers(self) -> int:
        return sum(kind.malformed_answers for kind in self.kinds)

    @property
    def crashes(self) -> int:
        return int(self.gateway_exited) + len(self.unhandled_errors)

    def failures(self) -> list[str]:
        out = []
        if self.gateway_exited:
            out.append("the gateway process exited")
        out += [f"unhandled error: {line}" for line in self.unhandled_errors[:20]]
        if self.server_errors:
            out.append(f"{self.server_errors} answers of 5xx (or WebSocket closes with 1011)")
        if self.malformed_answers:
            out.append(f"{self.malformed_answers} malformed answers from the gateway")
        out += [f"sample: {s}" for kind in self.kinds for s in kind.samples[:10]]
        if self.pair_lost:
            out.append(f"{self.pair_lost} pair messages lost")
        out += [f"pair: {f}" for f in self.pair_failures[:20]]
        out += [f"fuzzer: {f}" for f in self.fuzzer_errors[:20]]
        out += [f"stalled: {f}" for f in self.stalled[:20]]
        if self.inputs < self.inputs_target:
            out.append(f"only {self.inputs} of {self.inputs_target} inputs sent")
        return out

    def table(self) -> str:
        rows = [
            (
                "inputs",
                f"{self.inputs:,} ({self.binary.inputs:,} binary, "
                f"{self.websocket.inputs:,} WebSocket, {self.admin.inputs:,} admin reads) in "
                f"{self.seconds:.0f} s, "
                f"{self.inputs / max(self.seconds, 1e-9):,.0f}/s, seed {self.seed}",
            ),
            (
                "sessions",
                f"{self.binary.sessions:,} binary, {self.websocket.sessions:,} "
                f"WebSocket; closed by the gateway {self.binary.closed_by_gateway:,} / "
                f"{self.websocket.closed_by_gateway:,}; inputs per session-second "
                + " / ".join(f"{k.inputs / max(k.seconds, 1e-9):,.0f}" for k in self.kinds),
            ),
            (
                "crashes",
                f"{self.crashes} (process exited: {self.gateway_exited}, "
                f"unhandled errors logged: {len(self.unhandled_errors)})",
            ),
            ("5xx", f"{self.server_errors} (WebSocket 1011 closes included)"),
            ("malformed answers", str(self.malformed_answers)),
            (
                "pair",
                f"{self.pair_round_trips:,} round trips, {self.pair_lost} lost, "
                f"{len(self.pair_failures)} failed, slowest {self.pair_slowest_ms:.0f} ms",
            ),
            (
                "gateway memory",
                f"{self.rss_before_kib / 1024:.1f} MiB before, "
                f"{self.rss_after_kib / 1024:.1f} MiB after "
                f"({(self.rss_after_kib - self.rss_before_kib) / 1024:+.1f} MiB)",
            ),
            (
                "gateway CPU",
                f"{self.gateway_cpu_seconds:.1f} s, "
                f"{1e6 * self.gateway_cpu_seconds / max(self.inputs, 1):.0f} us/input",
            ),
            ("connections left", f"{self.connections_left:.0f} binary (the pair's: 1)"),
            ("binary answers", _top(self.binary.answers)),
            ("binary errors", _top(self.binary.errors)),
            ("upgrade statuses", _top(self.websocket.statuses)),
            ("admin read statuses", _top(self.admin.statuses)),
            ("WebSocket answers", _top(self.websocket.answers)),
            ("close codes", _top(self.websocket.close_codes)),
            ("gateway warnings", _top(self.warnings)),
        ]
        width = max(len(name) for name, _ in rows)
        return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def _top(counts: dict[Any, int], n: int = 12) -> str:
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    text = ", ".join(f"{k} {v:,}" for k, v in ranked[:n])
    return text + (f", ... ({len(ranked) - n} more)" if len(ranked) > n else "") or "-"


#: How many inputs a session sends, drawn by its seed.
BUDGETS = (1, 2, 5, 10, 20, 50, 100, 200)


async def run_session(
    host: str,
    target: Target,
    operations: Any,
    rng: random.Random,
    budget: int,
    websocket_share: float,
) -> tuple[str, SessionStats]:
    """One session drawn from ``rng``: one in twenty admin reads, a share of WebSocket
    sessions, binary sessions for the rest. Returns its kind and what it saw."""
    began = time.monotonic()
    roll = rng.random()
    if roll < 0.05:
        kind = "admin"
        http_url = f"http://{host}:{target.http_port}"
        stats = await run_admin_reads(
            http_url, operations, rng, TOPICS, SUBSCRIPTIONS, min(budget, 10)
        )
    elif roll < 0.05 + websocket_share:
        kind = "websocket"
        stats = await run_websocket_session(
            host, target.http_port, rng, TOPICS, SUBSCRIPTIONS, budget
        )
    else:
        kind = "binary"
        stats = await run_binary_session(host, target.port, rng, TOPICS, SUBSCRIPTIONS, budget)
    stats.seconds = time.monotonic() - began
    return kind, stats


def session_draw(seed: int) -> tuple[random.Random, int]:
    """A session's random source and its input budget (before the campaign's remaining
    inputs cap it), from the session's seed: what a campaign and a replay both draw."""
    rng = random.Random(seed)
    return rng, rng.choice(BUDGETS)


async def _fuzz(
    report: Report,
    host: str,
    target: Target,
    inputs: int,
    concurrency: int,
    websocket_share: float,
    session_ids: Any,
) -> None:
    """Run sessions on ``concurrency`` workers until ``inputs`` more inputs are sent."""
    goal = report.inputs + inputs
    operations = read_operations(f"http://{host}:{target.http_port}")
    kinds = {"admin": report.admin, "websocket": report.websocket, "binary": report.binary}

    async def worker() -> None:
        while report.inputs < goal:
            seed = report.seed * 1_000_003 + next(session_ids)
            rng, budget = session_draw(seed)
            budget = max(1, min(goal - report.inputs, budget))
            try:
                kind, stats = await asyncio.wait_for(
                    run_session(host, target, operations, rng, budget, websocket_share),
                    SESSION_LIMIT + REPLY_WAIT * budget,
                )
                kinds[kind].add(stats)
            except TimeoutError:
                report.stalled.append(f"session seed {seed}")
            except (ConnectionError, OSError, aiohttp.ClientError) as exc:
                # the gateway refused a connection: a finding only if it died
                if target.proc.poll() is not None:
                    return
                report.fuzzer_errors.append(f"session seed {seed}: connection failed: {exc!r}")
                await asyncio.sleep(0.1)
            except Exception as exc:  # the fuzzer's own bug: reported with its seed
                report.fuzzer_errors.append(f"session seed {seed}: {exc!r}")

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def replay_session(
    target: Target, seed: int, websocket_share: float = 0.3
) -> tuple[str, int, SessionStats]:
    """Run the session a campaign reported by ``seed`` (stalled, or the fuzzer failed) on
    its own: its kind, its input budget and what it saw, ``seconds`` included. The gateway's
    state differs from the campaign's (other sessions ran beside it there), so answers may
    differ; the inputs are the same."""
    rng, budget = session_draw(seed)
    operations = read_operations(f"http://127.0.0.1:{target.http_port}")
    kind, stats = asyncio.run(
        run_session("127.0.0.1", target, operations, rng, budget, websocket_share)
    )
    return kind, budget, stats


def run_campaign(
    target: Target,
    inputs: int,
    seed: int = 1,
    concurrency: int = 16,
    websocket_share: float = 0.3,
    progress: Any = None,
) -> Report:
    """Fuzz ``target`` with ``inputs`` inputs; the gateway must run at WARNING level or more
    verbose so its errors reach its log."""
    report = Report(inputs_target=inputs, seed=seed)
    pid = target.proc.pid
    pair = LivePair(f"pulsar://127.0.0.1:{target.port}").start()
    session_ids = iter(range(1 << 62))
    began = time.monotonic()

    async def fuzz(count: int) -> None:
        await _fuzz(report, "127.0.0.1", target, count, concurrency, websocket_share, session_ids)

    async def campaign() -> None:
        # A warm-up (1%) fills the gateway's caches before its memory is first measured.
        await fuzz(max(1, min(inputs // 100, 10_000)))
        report.rss_before_kib = rss_kib(pid)
        cpu_before = cpu_seconds(pid)
        main = asyncio.create_task(fuzz(inputs - report.inputs))
        while not main.done():
            await asyncio.wait([main], timeout=10)
            report.seconds = time.monotonic() - began
            if progress is not None:
                progress(report)
        await main
        if target.proc.poll() is None:
            report.gateway_cpu_seconds = cpu_seconds(pid) - cpu_before

    try:
        asyncio.run(campaign())
        report.gateway_exited = target.proc.poll() is not None
        if not report.gateway_exited:
            # Sessions are closed; wait for the gateway to have released them.
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                report.connections_left = binary_connections(target.http_port)
                if report.connections_left <= 1:
                    break
                time.sleep(0.2)
            report.rss_after_kib = rss_kib(pid)
    finally:
        report.seconds = time.monotonic() - began
        pair.stop()
        report.pair_round_trips = len(pair.received)
        report.pair_lost = pair.lost
        report.pair_failures = pair.failures
        report.pair_slowest_ms = pair.slowest * 1000
        report.gateway_exited = report.gateway_exited or target.proc.poll() is not None
        report.unhandled_errors, report.warnings = read_log(target.log())
    return report
