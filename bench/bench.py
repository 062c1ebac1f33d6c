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
shared machines (docs/benchmarks.md "Raw Redis on this machine"); compare ratios. The official
client and redis-py run in this process, the gateway and Redis in their own. Every gateway case
is preceded by a short untimed warm-up on its own topic, every case uses fresh topics (streams)
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
import os
import platform
import secrets
import shlex
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pulsar
import redis

from harness import (
    KEY_PREFIX,
    MIB,
    NAMESPACE,
    PAYLOAD_SIZE,
    RECEIVER_QUEUE,
    AckCounter,
    BenchEnv,
    BenchError,
    CpuMeter,
    GatewayProcess,
    Profiler,
    RedisServer,
    add_profile_arguments,
    find_py_spy,
    fmt_rate,
    git_describe,
    median,
    mib,
    receive_and_ack,
    run_cli,
    wait_until,
)

SUBSCRIPTION = "bench"
PIPELINE = 1000  # raw XADD commands per execute(), XREADGROUP COUNT


# -- the bench --------------------------------------------------------------------------------


@dataclass
class Sample:
    rate: float
    seconds: float
    cpu: dict[str, float]
    extra: dict[str, Any] = field(default_factory=dict)


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


def main(argv: list[str] | None = None) -> int:
    return run_cli(parse_args(argv), run)


if __name__ == "__main__":
    sys.exit(main())
