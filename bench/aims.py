"""The performance aims, measured side by side with raw Redis in one run.

Usage::

    .venv/bin/python bench/aims.py [--quick] [--only CASE[,CASE]] [--json PATH]

One run starts one redis-server (temp dir, free port, AOF off) and one gateway on it, the
way ``bench/perf.py --start`` does (``harness.GatewayProcess`` with ``--workers 1``: the
source tree's ``pulsar_gateway``, so the compiled build runs when its ``.so`` files are in
the tree), and measures, with 100-byte messages:

raw (the reference, run when a case compares with it)
    redis-py (hiredis's reply parser) doing pipelined ``XADD``, 1000 per ``execute()``,
    from this process: its own CPU (user + system over the timed section) per message.
    The client is busy throughout (its CPU % is reported); the median of 3 rounds.
produce
    ``perf.py produce``: one message per SEND, 3 topics over 3 connections, as fast as
    receipts come back; gateway CPU per receipted message. Aim: <= 1.0x raw.
consume
    ``perf.py consume``: Shared, every message acknowledged individually, the ids of one
    read in one ACK command (``--ack grouped``: what the clients send with their default
    ack grouping), topics prefilled (untimed) with one message per entry; the window ends
    after 60% of the backlog was received (so it covers only draining); gateway CPU per
    message received. Aim: <= 0.5x raw.
consume-each
    The same with one ACK command per message (``--ack each``: ack grouping off), for
    scale; no aim of its own.
ws-produce, ws-consume, rest
    ``bench_http.py``'s cases (a WebSocket producer with 1000 unacked sends; a Shared
    WebSocket consumer acking each message; REST produce, 100 messages per request, 4 in
    flight), each after its own warm-up; gateway CPU per message over the timed section.
    Aims: <= 1.25x raw (WebSocket), <= 5 µs (REST).
e2e
    ``perf.py e2e --rate 10000``, unbatched, one topic: p99 of publish -> receive. Aim:
    <= 2 ms. The raw figure is the same hop on raw Redis (``perf.py --target redis``:
    ``XADD`` -> ``XREADGROUP BLOCK``) in the same run.
metrics
    ``bench_http.py``'s ``/metrics`` case: 1,000 topics (each with messages and a
    subscription), then timed scrapes; gateway CPU per scrape. Aim: <= 40 ms. The raw
    figure is the wall time (p50) of redis-py pipelining ``XINFO STREAM`` + ``XINFO GROUPS``
    for each topic, for scale (not a CPU figure: no ratio).

Every path also reports Redis's CPU per message. ``--quick`` shortens every case (under a
minute in all) to check that the tool works: its timed sections last about a second and the
CPU figures come in clock ticks, so its figures are rough. A case that fails prints its
error and shows as not measured in the table, and the exit code is then 1. The table gives
the build the gateway reported in its start-up line, the commit, the date and the command.
"""

from __future__ import annotations

import argparse
import datetime
import re
import secrets
import shlex
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import bench_http
import perf
import redis

from harness import (
    PAYLOAD_SIZE,
    BenchEnv,
    BenchError,
    GatewayProcess,
    RedisServer,
    git_describe,
    run_cli,
)

#: The cases, in the order they run (``--only`` picks some). ``metrics`` is last: its
#: 1,000 topics stay until the end of the run.
CASES = (
    "produce",
    "consume",
    "consume-each",
    "ws-produce",
    "ws-consume",
    "rest",
    "e2e",
    "metrics",
)
#: The cases compared with the raw XADD reference (the factor of its aim); REST is shown
#: against it too, for scale, though its aim is absolute.
RATIO_AIMS = {"produce": 1.0, "consume": 0.5, "ws-produce": 1.25, "ws-consume": 1.25}
ABSOLUTE_AIMS = {"rest": 5.0, "metrics": 40.0, "e2e": 2.0}
#: compared with the raw reference for scale, without an aim of their own
FOR_SCALE = {"rest", "consume-each"}
NEEDS_RAW = {*RATIO_AIMS, *FOR_SCALE}
PERF_TOPICS = 3  # produce and consume: 3 topics over 3 connections, as docs/benchmarks.md
E2E_RATE = 10_000
METRICS_TOPICS = 1000
CASE_LIMIT = 900.0  # the watchdog's last resort per case, seconds
#: The table's first column.
PATHS = {
    "raw": "raw reference: redis-py pipelined `XADD`, 1000 per execute (client CPU)",
    "produce": "binary produce, 1 msg per SEND",
    "consume": "binary consume, Shared, every message acked (grouped per read), 1 msg per entry",
    "consume-each": "the same, one ACK command per message",
    "ws-produce": "WebSocket produce, 1000 unacked",
    "ws-consume": "WebSocket consume, Shared, ack each",
    "rest": f"REST produce, {bench_http.REST_BATCH} per request",
    "e2e": f"end-to-end p99, {E2E_RATE:,} msg/s unbatched",
    "metrics": f"`/metrics`, {METRICS_TOPICS:,} topics",
}
#: The unit of the gateway figure (default µs/msg).
UNITS = {"metrics": "ms", "e2e": "ms"}


@dataclass(frozen=True)
class Plan:
    """How long each case runs."""

    raw_messages: int
    raw_rounds: int
    perf_duration: float
    perf_warmup: float
    consume_prefill: int  # per topic
    consume_warmup: float
    e2e_duration: float
    e2e_warmup: float
    http_messages: int
    scrapes: int


NORMAL = Plan(200_000, 3, 8, 2, 150_000, 0.5, 8, 2, 100_000, 20)
# short, but each timed section still lasts a good part of a second: the CPU figures come
# from /proc in clock ticks (10 ms)
QUICK = Plan(100_000, 3, 3, 1, 40_000, 0.1, 3, 1, 30_000, 10)


@dataclass
class Row:
    """One line of the table: a path's gateway figure against its aim."""

    case: str
    path: str
    unit: str
    gateway: float | None = None
    raw: float | None = None
    raw_label: str = ""
    redis_us_per_msg: float | None = None
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.gateway is None or not self.raw or self.case == "metrics":
            return None  # metrics: CPU against a wall time, no ratio
        return self.gateway / self.raw

    @property
    def aim(self) -> str:
        if self.case in RATIO_AIMS:
            return f"≤ {RATIO_AIMS[self.case]:g}x raw"
        if self.case in ABSOLUTE_AIMS:
            return f"≤ {ABSOLUTE_AIMS[self.case]:g} {self.unit}"
        return ""

    @property
    def met(self) -> bool | None:
        """None: not measured (the gateway figure, or the raw one a ratio needs, is missing)."""
        if self.gateway is None or self.case == "raw" or not self.aim:
            return None
        if self.case in RATIO_AIMS:
            ratio = self.ratio
            return None if ratio is None else ratio <= RATIO_AIMS[self.case]
        return self.gateway <= ABSOLUTE_AIMS[self.case]


class Aims:
    def __init__(self, args: argparse.Namespace, env: BenchEnv) -> None:
        self.args = args
        self.plan: Plan = QUICK if args.quick else NORMAL
        self.env = env
        self.run_id = secrets.token_hex(3)
        self.rds: RedisServer | None = None
        self.gw: GatewayProcess | None = None
        self.http: bench_http.HttpBench | None = None
        self.gateways_started = 0
        self.builds: list[str] = []
        self.raw_rounds: list[dict[str, float]] = []
        self.perf_results: dict[str, Any] = {}
        self.warnings: list[str] = []

    # -- the processes ---------------------------------------------------------------------

    def start(self) -> None:
        self.rds = self.env.rds = RedisServer(self.env.workdir, aof=False)
        self.env.log(f"redis-server {self.rds.version} on port {self.rds.port} (AOF off)")
        self.ensure_gateway()

    def ensure_gateway(self) -> bench_http.HttpBench:
        """The gateway and the HTTP bench driving it; a fresh gateway when the last one
        died (a failed case should not fail the cases after it)."""
        if self.gw is not None and self.http is not None and self.gw.proc.poll() is None:
            return self.http
        assert self.rds is not None
        if self.gw is not None:
            self.env.log(f"the gateway died ({self.gw.proc.returncode}); starting a fresh one")
            if self.http is not None:
                self.http.close()
        self.gateways_started += 1
        name = "" if self.gateways_started == 1 else str(self.gateways_started)
        # as perf.py --start starts it: same harness class, same flags
        self.gw = self.env.gw = GatewayProcess(
            self.rds.url, self.env.workdir, name=name, extra=("--workers", "1")
        )
        build = self.gateway_build()
        self.builds.append(build)
        self.env.log(f"gateway pid {self.gw.pid} ({build}), HTTP on port {self.gw.http_port}")
        time.sleep(0.5)
        self.http = bench_http.HttpBench(self.http_args(), self.rds, self.gw)
        return self.http

    def gateway_build(self) -> str:
        """What the gateway says it runs in its first log line ("pulsar-gateway VERSION
        (BUILD) starting"): pure Python, or how many modules run compiled."""
        assert self.gw is not None
        found = re.search(r"pulsar-gateway (\S+) \((.+?)\) starting", self.gw.log_text())
        return f"{found[2]} (pulsar-gateway {found[1]})" if found else "unknown (no start line)"

    def http_args(self) -> argparse.Namespace:
        p = self.plan
        return bench_http.parse_args(
            [
                "--messages",
                str(p.http_messages),
                "--scrapes",
                str(p.scrapes),
                "--metrics-topics",
                str(METRICS_TOPICS),
            ]
        )

    # -- the raw reference -------------------------------------------------------------------

    def raw_reference(self) -> Row:
        """redis-py's own CPU per pipelined XADD: the median of the rounds."""
        b = self.ensure_gateway()
        for i in range(self.plan.raw_rounds):
            name = f"raw XADD {i + 1}"
            rate = b.raw_produce(self.plan.raw_messages, section=name)
            s = b.sections[name]
            self.raw_rounds.append(
                {
                    "client_us_per_msg": s.per_unit("client"),
                    "redis_us_per_msg": s.per_unit("redis"),
                    "client_cpu_pct": s.cpu["client"],
                    "msg_per_s": rate,
                    "seconds": s.seconds,
                }
            )
        client = statistics.median(r["client_us_per_msg"] for r in self.raw_rounds)
        return Row(
            "raw",
            PATHS["raw"],
            "µs/msg",
            raw=client,
            raw_label="client CPU",
            redis_us_per_msg=statistics.median(r["redis_us_per_msg"] for r in self.raw_rounds),
            details={
                "rounds": self.raw_rounds,
                "messages per round": self.plan.raw_messages,
                "client µs/msg by round": [
                    round(r["client_us_per_msg"], 2) for r in self.raw_rounds
                ],
                "client CPU %": [round(r["client_cpu_pct"]) for r in self.raw_rounds],
                "msg/s": [round(r["msg_per_s"]) for r in self.raw_rounds],
            },
        )

    # -- the binary protocol (perf.py) -------------------------------------------------------

    def perf_args(self, mode: str, *argv: str) -> argparse.Namespace:
        assert self.gw is not None
        return perf.parse_args(
            [
                mode,
                "--service-url",
                self.gw.url,
                "--size",
                str(PAYLOAD_SIZE),
                "--topic-prefix",
                f"aims-{self.run_id}-{mode}",
                *argv,
            ]
        )

    def run_perf(self, name: str, args: argparse.Namespace) -> dict[str, Any]:
        assert self.rds is not None and self.gw is not None
        result = perf.run(args, self.gw.pids(), self.rds.proc.pid)
        self.perf_results[name] = result
        self.env.log(perf.report(result).replace("\n", "\n    "))
        return result

    def drop_perf_topics(self, args: argparse.Namespace) -> None:
        """Delete a perf case's topics (untimed), so later cases find Redis as small."""
        try:
            self.ensure_gateway().drop(*perf.topic_names(args))
        except Exception as exc:  # not a measurement: noted, the run goes on
            self.warnings.append(f"deleting the topics of {args.topic_prefix}: {exc!r}")

    def produce(self) -> Row:
        self.ensure_gateway()
        p = self.plan
        args = self.perf_args(
            "produce",
            *("--topics", str(PERF_TOPICS), "--connections", str(PERF_TOPICS)),
            *("--duration", str(p.perf_duration), "--warmup", str(p.perf_warmup)),
        )
        r = self.run_perf("produce", args)
        self.drop_perf_topics(args)
        return Row(
            "produce",
            PATHS["produce"],
            "µs/msg",
            gateway=r["gateway_us_per_msg"],
            redis_us_per_msg=r["redis_us_per_msg"],
            details={"msg/s": round(r["msg_per_s"]), "messages": r["messages"]},
        )

    def consume(self) -> Row:
        """Every message acknowledged individually, the ids of one read in one ACK
        command: what the clients send with their default ack grouping (the Java client's
        ``acknowledgmentGroupTime``, 100 ms; the C++ client's ``ackGroupingTimeMs``)."""
        return self._consume("consume", "grouped")

    def consume_each(self) -> Row:
        """One ACK command per message (ack grouping off): for scale, no aim of its own."""
        return self._consume("consume-each", "each")

    def _consume(self, case: str, ack: str) -> Row:
        self.ensure_gateway()
        p = self.plan
        total = p.consume_prefill * PERF_TOPICS
        args = self.perf_args(
            "consume",
            *("--topics", str(PERF_TOPICS), "--connections", str(PERF_TOPICS)),
            *("--subscription-type", "Shared", "--ack", ack),
            *("--duration", str(max(p.perf_duration, 30)), "--warmup", str(p.consume_warmup)),
            # the window ends while the backlog still drains: CPU of draining only
            *("--messages", str(int(total * 0.6))),
        )
        args.topic_prefix = f"aims-{self.run_id}-{case}"  # each consume case its own topics
        fill = argparse.Namespace(**{**vars(args), "mode": "produce", "rate": 0})
        fill.duration, fill.warmup = 3600.0, 0.0
        self.env.log(f"prefilling {PERF_TOPICS} x {p.consume_prefill:,} messages (untimed)")
        perf.prefill(fill, p.consume_prefill)
        r = self.run_perf(case, args)
        self.drop_perf_topics(args)
        return Row(
            case,
            PATHS[case],
            "µs/msg",
            gateway=r["gateway_us_per_msg"],
            redis_us_per_msg=r["redis_us_per_msg"],
            details={"msg/s": round(r["msg_per_s"]), "messages": r["messages"]},
        )

    def e2e(self) -> Row:
        self.ensure_gateway()
        assert self.rds is not None
        p = self.plan
        argv = ["--rate", str(E2E_RATE), "--batch", "1"]
        argv += ["--duration", str(p.e2e_duration), "--warmup", str(p.e2e_warmup)]
        args = self.perf_args("e2e", *argv)
        r = self.run_perf("e2e", args)
        self.drop_perf_topics(args)
        # the same hop on raw Redis, the same rate (perf.py --compare-raw's)
        raw_args = self.perf_args("e2e", *argv, "--target", "redis")
        raw_args.redis_url = self.rds.url
        raw = perf.run(raw_args, [], self.rds.proc.pid)
        self.perf_results["e2e raw"] = raw
        self.env.log(perf.report(raw).replace("\n", "\n    "))
        with redis.Redis.from_url(self.rds.url) as client:
            client.delete(*(perf.raw_key(t) for t in perf.topic_names(raw_args)))
        e2e, raw_e2e = r["e2e_latency_ms"], raw["e2e_latency_ms"]
        if not e2e:
            raise BenchError("e2e: no message was received in the window")
        return Row(
            "e2e",
            PATHS["e2e"],
            "ms",
            gateway=e2e["p99"],
            raw=raw_e2e["p99"] if raw_e2e else None,
            raw_label="XADD -> XREADGROUP",
            redis_us_per_msg=r["redis_us_per_msg"],
            details={
                "msg/s": round(r["msg_per_s"]),
                "p50 ms": e2e["p50"],
                "gateway µs/msg": perf.fmt(r["gateway_us_per_msg"], ".2f"),
            },
        )

    # -- the HTTP front (bench_http.py) ------------------------------------------------------

    def http_row(self, case: str, run: Callable[[bench_http.HttpBench], Any]) -> Row:
        b = self.ensure_gateway()
        result = run(b)
        key = {"ws-produce": "ws-produce", "ws-consume": "ws-consume", "rest": "rest-produce"}
        s = b.sections[key[case]]
        return Row(
            case,
            PATHS[case],
            "µs/msg",
            gateway=s.per_unit("gateway"),
            redis_us_per_msg=s.per_unit("redis"),
            details={"msg/s": round(result.gateway), "messages": s.units, **result.details},
        )

    def ws_produce(self) -> Row:
        return self.http_row("ws-produce", lambda b: b.gw_ws_produce())

    def ws_consume(self) -> Row:
        return self.http_row("ws-consume", lambda b: b.gw_ws_consume())

    def rest(self) -> Row:
        return self.http_row("rest", lambda b: b.gw_rest_produce())

    def metrics(self) -> Row:
        b = self.ensure_gateway()
        p50, worst, _topics = b.gw_metrics()  # the topics stay: this case runs last
        s = b.sections["metrics scrape"]
        return Row(
            "metrics",
            PATHS["metrics"],
            "ms",
            gateway=s.per_unit("gateway", 1e3),
            raw=p50.raw,
            raw_label=f"wall, XINFO x {METRICS_TOPICS:,} pipelined",
            details={
                "scrapes": s.units,
                "scrape p50 ms": round(p50.gateway, 1),
                "scrape max ms": round(worst.gateway, 1),
                "Redis ms/scrape": round(s.per_unit("redis", 1e3), 1),
            },
        )


# -- the run -------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> tuple[dict[str, Any], bool]:
    """Every case selected; the results, and whether all were measured."""
    env = BenchEnv("pgw-aims-")
    aims = Aims(args, env)
    rows: list[Row] = []
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")

    def case(name: str, fn: Callable[[], Row]) -> None:
        env.log(f"{name} ...")
        try:
            with env.watchdog.phase(name, CASE_LIMIT):
                row = fn()
        except Exception as exc:  # reported as not measured; the run goes on
            traceback.print_exc(file=sys.stderr)
            error = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:300]
            print(f"! {name} failed: {error}", file=sys.stderr, flush=True)
            row = Row(name, PATHS.get(name, name), UNITS.get(name, "µs/msg"), error=error)
        rows.append(row)

    selected = [c for c in CASES if c in args.only]
    try:
        with env.watchdog.phase("start-up", 120):
            aims.start()
        if NEEDS_RAW & set(selected):
            case("raw", aims.raw_reference)
        for name in selected:
            case(name, getattr(aims, name.replace("-", "_")))
        # a failed case: the cleanup prints the gateway's log tail
        env.failed = any(row.error is not None for row in rows)
    finally:
        with env.watchdog.phase("shutdown", 90):
            if aims.http is not None:
                aims.http.close()
            env.cleanup()
        env.watchdog.stop()

    # the ratio rows take the raw reference of this run
    raw_row = next((r for r in rows if r.case == "raw"), None)
    for row in rows:
        if row.case in NEEDS_RAW:
            row.raw = raw_row.raw if raw_row is not None else None
            row.raw_label = "client CPU per pipelined XADD"
    measured = all(
        r.error is None and (r.case not in RATIO_AIMS or r.met is not None) for r in rows
    )
    header = {
        "command": shlex.join([sys.executable, *sys.argv]),
        "date": date,
        "commit": git_describe(),
        "build": ", then ".join(aims.builds) or "unknown (no gateway started)",
        "redis_version": aims.rds.version if aims.rds else None,
        "redis_py": f"redis-py {redis.__version__}, hiredis {_hiredis_version()}",
        "mode": "quick" if args.quick else "normal",
    }
    print(report(header, rows, aims.warnings), flush=True)
    data = {
        **header,
        "plan": asdict(aims.plan),
        "rows": [
            {**asdict(r), "ratio": r.ratio, "aim": r.aim, "met": r.met, "measured": r.error is None}
            for r in rows
        ],
        "perf": aims.perf_results,
        "warnings": aims.warnings,
        "runtime_seconds": time.monotonic() - env.started,
    }
    return data, measured


def _hiredis_version() -> str:
    try:
        import hiredis
    except ImportError:
        return "not installed (redis-py's Python parser)"
    return str(hiredis.__version__)


def _num(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    return f"{value:.3f} {unit}" if unit == "ms" and value < 10 else f"{value:,.2f} {unit}"


def report(header: dict[str, Any], rows: list[Row], warnings: list[str]) -> str:
    out = [
        "# pulsar-redis-gateway performance aims, against raw Redis in the same run",
        "",
        f"- command: `{header['command']}`",
        f"- date: {header['date']}; commit {header['commit']}",
        f"- gateway build: {header['build']}",
        f"- Redis {header['redis_version']} (AOF off); {header['redis_py']}; "
        f"{PAYLOAD_SIZE}-byte messages; {header['mode']} run",
        "- gateway and Redis figures are CPU (user + system) per message unless the unit "
        "says otherwise; ratio = gateway / raw",
        "",
        "| path | gateway | raw Redis | ratio | aim | met | Redis µs/msg |",
        "|---|---:|---:|---:|---|---|---:|",
    ]
    for r in rows:
        if r.error is not None:
            out.append(f"| {r.path} | not measured | | | {r.aim} | not measured | |")
            continue
        raw_unit = "µs/msg" if r.case in NEEDS_RAW or r.case == "raw" else r.unit
        raw = _num(r.raw, raw_unit) + (f" ({r.raw_label})" if r.raw_label else "")
        ratio = "n/a" if r.ratio is None else f"{r.ratio:.2f}"
        met = (
            ""
            if r.case == "raw" or (not r.aim and r.error is None)
            else {True: "yes", False: "no", None: "not measured"}[r.met]
        )
        gateway = "" if r.case == "raw" else _num(r.gateway, r.unit)
        redis_us = _num(r.redis_us_per_msg, "").strip()
        out.append(f"| {r.path} | {gateway} | {raw} | {ratio} | {r.aim} | {met} | {redis_us} |")
    out += ["", "Details:", ""]
    for r in rows:
        if r.error is not None:
            out.append(f"- {r.case}: FAILED: {r.error}")
        elif r.details:
            shown = {k: v for k, v in r.details.items() if k != "rounds"}
            out.append(f"- {r.case}: " + "; ".join(f"{k} {v}" for k, v in shown.items()))
    if warnings:
        out += ["", "Warnings:", ""] + [f"- {w}" for w in warnings]
    return "\n".join(out)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--quick", action="store_true", help="short cases (under a minute), to check the tool"
    )
    p.add_argument(
        "--only",
        metavar="CASE[,CASE]",
        action="append",
        help=f"run only these cases (repeatable; of {', '.join(CASES)}; default all)",
    )
    p.add_argument("--json", metavar="PATH", default=None, help="also write results as JSON")
    args = p.parse_args(argv)
    only = [c.strip() for item in args.only or [",".join(CASES)] for c in item.split(",")]
    unknown = [c for c in only if c not in CASES]
    if unknown:
        p.error(f"--only: unknown case(s) {', '.join(unknown)} (of {', '.join(CASES)})")
    args.only = only
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    measured = False

    def bench(args: argparse.Namespace) -> dict[str, Any]:
        nonlocal measured
        data, measured = run(args)
        return data

    code = run_cli(args, bench)
    if code == 0 and not measured:
        print("some cases were not measured (see above)", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
