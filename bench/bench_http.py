"""HTTP front benchmark: WebSocket API, REST produce and admin reads against raw Redis.

Usage::

    .venv/bin/python bench/bench_http.py [--messages N] [--quick] [--window W]
                                         [--metrics-topics M] [--only CASE ...]
                                         [--profile DIR] [--json PATH]

One run starts its own redis-server (temp dir, free port, no RDB snapshots, AOF off) and one
gateway subprocess on it (helpers shared with ``bench/harness.py``), then measures, with
100-byte payloads and aiohttp clients in this process:

1. WebSocket produce: one producer (``/ws/v2/producer/persistent/public/default/<topic>``)
   sending N messages (default 50,000; 5,000 with ``--quick``), the payload base64 in the
   JSON ``ProducerMessage``, with up to W (default 1000) sends not yet acknowledged (acks
   are read concurrently); from the first send to the last ack. Raw: redis-py pipelined
   ``XADD`` of N entries, 1000 per ``execute()``.
2. WebSocket consume: a Shared consumer (``subscriptionInitialPosition=Earliest``,
   ``receiverQueueSize=1000``) acking each message with ``{"messageId": ...}``, on a topic
   pre-filled (untimed) with N messages by the WebSocket producer; from the connect until
   all N are received and Redis holds no pending entry for the subscription. Raw:
   ``XGROUP CREATE`` + a loop of ``XREADGROUP COUNT 1000`` + ``XACK``.
3. REST produce (PIP-64): ``POST /topics/persistent/public/default/<topic>`` with 100
   messages per request (the default STRING schema: a 100-character text payload), 4
   requests in flight; N messages. Raw: as in 1.
4. Admin reads: ``GET /admin/v2/persistent/public/default/<topic>/stats`` latency (p50,
   p99 of 200 sequential requests) on a topic with 3 subscriptions and a backlog of 10,000
   messages; raw reference: one round trip of ``XINFO STREAM`` + ``XINFO GROUPS`` on that
   topic's stream. Then ``GET /metrics`` scrape time (p50, max of 20 scrapes) with M
   topics existing (default 1,000; each made by a REST produce of 10 messages and given a
   subscription from the earliest message), since every scrape reads every topic's stats
   from Redis; raw reference: one pipeline of ``XINFO STREAM`` + ``XINFO GROUPS`` for each
   of the M topics. Also, untimed: the latency of health checks sent every 5 ms while the
   gateway is idle and while it serves 5 scrapes, since a scrape renders in the event loop
   and every other client of the gateway waits meanwhile.

``--only CASE`` (repeatable: ws-produce, ws-consume, rest, stats, metrics) runs some cases;
``--profile DIR`` py-spies the gateway during each timed gateway section, as
``bench/bench.py`` does, and prints its hottest functions.

Raw figures are measured in the same run (absolute numbers move between runs on a shared
machine; compare ratios). Every gateway case uses fresh topics and is preceded by an
untimed warm-up on its own topic. Topics are deleted through the admin API
(``DELETE ...?force=true``) after each case, and the run checks that no key of a deleted
topic is left in Redis, that no WebSocket session is left open
(``pulsar_gateway_connections{protocol="websocket"}``), and reports warnings in the
gateway's log and its resident memory between cases.

Where the time goes: CPU (100% = one core) of the gateway, redis-server and this process
during each timed section, the gateway's CPU time per message, and Redis's ``INFO
commandstats`` (calls per message of the busiest commands; ``evalsha`` is the gateway's
scripts).

Robustness: every wait has a timeout (``asyncio.timeout`` around every gateway case), and the
watchdog of ``bench/harness.py`` ends the run (gateway SIGTERM, redis-server stop, temp dir
removal) when a phase overruns or the gateway dies.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import platform
import re
import secrets
import shlex
import statistics
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import psutil
import redis

from harness import (
    KEY_PREFIX,
    MIB,
    NAMESPACE,
    PAYLOAD_SIZE,
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
    run_cli,
)
from pulsar_gateway.core.storage.keys import KeySchema

T = TypeVar("T")

SUBSCRIPTION = "bench-http"
PIPELINE = 1000  # raw XADD commands per execute(), XREADGROUP COUNT
RECEIVER_QUEUE = 1000  # the WebSocket consumer's receiverQueueSize (Pulsar's maximum)
REST_BATCH = 100  # messages per REST produce request
REST_CONCURRENCY = 4  # REST produce requests in flight
STATS_SUBSCRIPTIONS = 3
METRICS_TOPIC_MESSAGES = 10  # messages in each topic of the /metrics case
SETUP_CONCURRENCY = 8  # untimed admin requests in flight when creating/deleting topics
KEYS = KeySchema(KEY_PREFIX)
#: The cases, in the order they run (``--only`` picks some).
CASES = ("ws-produce", "ws-consume", "rest", "stats", "metrics")


def quantile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) of ``values``, interpolated."""
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[max(0, min(98, int(q) - 1))]


@dataclass
class Section:
    """CPU and Redis command figures of one timed section."""

    seconds: float
    cpu: dict[str, float]
    units: int  # messages (or requests) the section handled, for the per-unit figures
    commands: dict[str, int] = field(default_factory=dict)  # Redis calls by command

    def per_unit(self, who: str, scale: float = 1e6) -> float:
        """CPU of ``who`` ("gateway", "redis", "client", "other") per unit (µs by default)."""
        return self.cpu[who] / 100 * self.seconds / self.units * scale


@dataclass
class Result:
    """One comparison row: the gateway's figure and raw Redis's."""

    label: str
    unit: str  # "msg/s" (higher is better) or "ms" (lower is better)
    gateway: float
    raw: float | None
    raw_label: str
    details: dict[str, Any] = field(default_factory=dict)


class HttpBench:
    def __init__(self, args: argparse.Namespace, rds: RedisServer, gw: GatewayProcess) -> None:
        self.args = args
        self.n: int = args.messages
        self.rds = rds
        self.gw = gw
        self.run_id = secrets.token_hex(3)
        self.payload = os.urandom(PAYLOAD_SIZE)
        self.http = f"http://127.0.0.1:{gw.http_port}"
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
        self.sections: dict[str, Section] = {}
        self.rss: dict[str, int] = {"start": gw.rss()}
        self.deleted: list[str] = []  # topics deleted through the admin API
        self._topics = 0

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.raw.close()

    # -- topics, keys, measuring ---------------------------------------------------------

    def topic(self, label: str) -> str:
        self._topics += 1
        return f"persistent://{NAMESPACE}/bench-{self.run_id}-{self._topics:04d}-{label}"

    @staticmethod
    def path(topic: str) -> str:
        """``persistent/public/default/<local>`` of a full topic name."""
        return topic.replace("://", "/", 1)

    @staticmethod
    def stream_key(topic: str) -> str:
        return KEYS.topic(topic).stream

    def pending(self, topic: str) -> int:
        return int(self.raw.xpending(self.stream_key(topic), SUBSCRIPTION)["pending"])

    def commandstats(self) -> dict[str, int]:
        info: dict[str, Any] = self.raw.info("commandstats")
        return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in info.items()}

    @contextlib.contextmanager
    def measure(self, key: str, units: int) -> Iterator[None]:
        """Time a section, its CPU and Redis calls (and py-spy it, a gateway section of a
        ``--profile`` run)."""
        profiled = self.profiler.record(key) if not key.startswith("raw") else None
        with profiled or contextlib.nullcontext():
            s0, c0, t0 = self.commandstats(), self.cpu.snapshot(), time.perf_counter()
            yield
            t1, c1, s1 = time.perf_counter(), self.cpu.snapshot(), self.commandstats()
        calls = {k: v - s0.get(k, 0) for k, v in s1.items() if v > s0.get(k, 0)}
        calls.pop("info", None)  # this method's own INFO commandstats
        self.sections[key] = Section(t1 - t0, CpuMeter.percent(c0, c1, t1 - t0), units, calls)

    def run_async(
        self, what: str, fn: Callable[[aiohttp.ClientSession], Awaitable[T]], timeout: float
    ) -> T:
        """Run ``fn`` with a fresh aiohttp session in a fresh event loop, within ``timeout``."""

        async def go() -> T:
            try:
                async with asyncio.timeout(timeout):
                    connector = aiohttp.TCPConnector(limit=SETUP_CONCURRENCY * 2)
                    async with aiohttp.ClientSession(self.http, connector=connector) as session:
                        return await fn(session)
            except TimeoutError:
                raise BenchError(f"{what} did not finish within {timeout:.0f}s") from None
            except ExceptionGroup as group:  # a TaskGroup's: report its first failure
                first: BaseException = group
                while isinstance(first, ExceptionGroup):
                    first = first.exceptions[0]
                raise BenchError(f"{what}: {first!r}") from group
            except (aiohttp.ClientError, OSError) as exc:
                raise BenchError(f"{what}: {exc!r}") from exc

        result = asyncio.run(go())
        self.gw.check_alive()
        return result

    def case_timeout(self, n: int) -> float:
        return 60.0 + n / 500.0

    # -- admin helpers (async) -----------------------------------------------------------

    @staticmethod
    async def expect(response: aiohttp.ClientResponse, status: int, what: str) -> str:
        text = await response.text()
        if response.status != status:
            raise BenchError(f"{what}: HTTP {response.status} {text[:300]}")
        return text

    async def put_topic(self, s: aiohttp.ClientSession, topic: str) -> None:
        async with s.put(f"/admin/v2/{self.path(topic)}") as r:
            await self.expect(r, 204, f"create {topic}")

    async def put_subscription(self, s: aiohttp.ClientSession, topic: str, sub: str) -> None:
        url = f"/admin/v2/{self.path(topic)}/subscription/{sub}"
        async with s.put(url, json="earliest") as r:
            await self.expect(r, 204, f"create subscription {sub} on {topic}")

    async def delete_topic(self, s: aiohttp.ClientSession, topic: str) -> None:
        async with s.delete(f"/admin/v2/{self.path(topic)}", params={"force": "true"}) as r:
            await self.expect(r, 204, f"delete {topic}")
        self.deleted.append(topic)

    async def for_each(
        self, items: list[str], fn: Callable[[str], Awaitable[None]], concurrency: int
    ) -> None:
        """``fn`` of every item, ``concurrency`` at a time (fails on the first error)."""
        todo = iter(items)

        async def worker() -> None:
            for item in todo:
                await fn(item)

        async with asyncio.TaskGroup() as group:
            for _ in range(concurrency):
                group.create_task(worker())

    def drop(self, *topics: str) -> None:
        async def go(s: aiohttp.ClientSession) -> None:
            await self.for_each(list(topics), lambda t: self.delete_topic(s, t), SETUP_CONCURRENCY)

        self.run_async("deleting topics", go, 60 + len(topics) / 20)

    # -- WebSocket producer --------------------------------------------------------------

    async def ws_produce(self, s: aiohttp.ClientSession, topic: str, n: int) -> tuple[float, float]:
        """Send n messages on one WebSocket producer with at most ``--window`` unacked;
        returns (first send, last ack) perf_counter times."""
        frame = json.dumps({"payload": base64.b64encode(self.payload).decode()})
        window = asyncio.Semaphore(self.args.window)
        errors: Counter[str] = Counter()
        stamps = [0.0, 0.0]
        async with s.ws_connect(f"/ws/v2/producer/{self.path(topic)}") as ws:

            async def send() -> None:
                stamps[0] = time.perf_counter()
                for _ in range(n):
                    await window.acquire()
                    await ws.send_str(frame)

            async def read_acks() -> None:
                acks = 0
                async for msg in ws:
                    if msg.type is not aiohttp.WSMsgType.TEXT:
                        raise BenchError(f"producer: unexpected frame {msg.type!r}")
                    reply = json.loads(msg.data)
                    if reply.get("result") != "ok":
                        errors[f"{reply.get('result')}: {reply.get('errorMsg')}"] += 1
                    acks += 1
                    window.release()
                    if acks == n:
                        stamps[1] = time.perf_counter()
                        return
                raise BenchError(
                    f"producer socket closed after {acks} of {n} acks "
                    f"(code {ws.close_code}, {ws.exception()!r})"
                )

            async with asyncio.TaskGroup() as group:
                group.create_task(send())
                group.create_task(read_acks())
        if errors:
            raise BenchError(f"WebSocket send errors: {dict(errors)}")
        return stamps[0], stamps[1]

    def ws_fill(self, topic: str, n: int) -> None:
        self.run_async(f"filling {topic}", lambda s: self.ws_produce(s, topic, n), 60 + n / 500)

    def gw_ws_produce(self) -> Result:
        warm = self.topic("warm-ws-produce")
        self.ws_fill(warm, self.args.warmup)
        self.drop(warm)
        topic = self.topic("ws-produce")
        with self.measure("ws-produce", self.n):
            t0, t1 = self.run_async(
                "WebSocket produce",
                lambda s: self.ws_produce(s, topic, self.n),
                self.case_timeout(self.n),
            )
        entries = int(self.raw.xlen(self.stream_key(topic)))
        if entries != self.n:
            raise BenchError(f"WebSocket produce stored {entries} of {self.n} entries")
        self.drop(topic)
        self.rss["after WebSocket produce"] = self.gw.rss()
        return Result(
            f"1. WebSocket produce, window {self.args.window}",
            "msg/s",
            self.n / (t1 - t0),
            None,
            f"pipelined XADD, {PIPELINE}/execute",
            {"seconds": round(t1 - t0, 2), "stream entries": entries},
        )

    # -- WebSocket consumer --------------------------------------------------------------

    async def ws_consume(self, s: aiohttp.ClientSession, topic: str, n: int) -> dict[str, float]:
        """Subscribe (Shared, from the earliest), receive and ack n messages, wait until Redis
        holds no pending entry; returns perf_counter times and counts."""
        url = (
            f"/ws/v2/consumer/{self.path(topic)}/{SUBSCRIPTION}?subscriptionType=Shared"
            f"&subscriptionInitialPosition=Earliest&receiverQueueSize={RECEIVER_QUEUE}"
        )
        seen: set[str] = set()
        received = 0
        t0 = time.perf_counter()
        async with s.ws_connect(url) as ws:
            async for msg in ws:
                if msg.type is not aiohttp.WSMsgType.TEXT:
                    raise BenchError(f"consumer: unexpected frame {msg.type!r}")
                message_id = json.loads(msg.data).get("messageId")
                if not isinstance(message_id, str):
                    raise BenchError(f"consumer: unexpected frame {msg.data[:300]}")
                await ws.send_str(f'{{"messageId":"{message_id}"}}')
                received += 1
                seen.add(message_id)
                if len(seen) == n:
                    break
            else:
                raise BenchError(
                    f"consumer socket closed after {len(seen)} of {n} messages "
                    f"(code {ws.close_code}, {ws.exception()!r})"
                )
            t1 = time.perf_counter()
            while self.pending(topic):
                await asyncio.sleep(0.002)
            t2 = time.perf_counter()
        return {"t0": t0, "t1": t1, "t2": t2, "received": received, "distinct": len(seen)}

    def gw_ws_consume(self) -> Result:
        warm = self.topic("warm-ws-consume")
        self.ws_fill(warm, self.args.warmup)
        self.run_async(
            "WebSocket consume warm-up",
            lambda s: self.ws_consume(s, warm, self.args.warmup),
            self.case_timeout(self.args.warmup),
        )
        self.drop(warm)
        topic = self.topic("ws-consume")
        self.ws_fill(topic, self.n)
        with self.measure("ws-consume", self.n):
            r = self.run_async(
                "WebSocket consume",
                lambda s: self.ws_consume(s, topic, self.n),
                self.case_timeout(self.n),
            )
        self.drop(topic)
        self.rss["after WebSocket consume"] = self.gw.rss()
        wall = r["t2"] - r["t0"]
        return Result(
            "2. WebSocket consume, Shared, ack each",
            "msg/s",
            self.n / wall,
            None,
            f"XREADGROUP COUNT {PIPELINE} + XACK",
            {
                "seconds": round(wall, 2),
                "receive-loop msg/s": round(self.n / (r["t1"] - r["t0"])),
                "ack tail ms": round(1000 * (r["t2"] - r["t1"]), 1),
                "redelivered": int(r["received"] - r["distinct"]),
            },
        )

    # -- REST produce --------------------------------------------------------------------

    async def rest_produce(
        self, s: aiohttp.ClientSession, topic: str, n: int, concurrency: int
    ) -> list[float]:
        """POST n messages, REST_BATCH per request, ``concurrency`` requests in flight;
        returns each request's latency in seconds."""
        text = self.payload.hex()[:PAYLOAD_SIZE]  # 100 ASCII characters, 100 bytes stored
        sizes = [min(REST_BATCH, n - i) for i in range(0, n, REST_BATCH)]
        bodies = {
            size: json.dumps({"messages": [{"payload": text}] * size}).encode()
            for size in set(sizes)
        }
        url = f"/topics/{self.path(topic)}"
        headers = {"Content-Type": "application/json"}
        latencies: list[float] = []
        todo = iter(sizes)

        async def worker() -> None:
            for size in todo:
                t0 = time.perf_counter()
                async with s.post(url, data=bodies[size], headers=headers) as r:
                    body = await self.expect(r, 200, f"REST produce to {topic}")
                latencies.append(time.perf_counter() - t0)
                results = json.loads(body)["messagePublishResults"]
                failed = [x for x in results if x.get("errorCode")]
                if len(results) != size or failed:
                    raise BenchError(f"REST produce: {len(results)} results, {failed[:3]}")

        async with asyncio.TaskGroup() as group:
            for _ in range(concurrency):
                group.create_task(worker())
        return latencies

    def gw_rest_produce(self) -> Result:
        warm = self.topic("warm-rest")
        self.run_async(
            "REST produce warm-up",
            lambda s: self.rest_produce(s, warm, self.args.warmup, REST_CONCURRENCY),
            self.case_timeout(self.args.warmup),
        )
        self.drop(warm)
        topic = self.topic("rest-produce")
        with self.measure("rest-produce", self.n):
            t0 = time.perf_counter()
            latencies = self.run_async(
                "REST produce",
                lambda s: self.rest_produce(s, topic, self.n, REST_CONCURRENCY),
                self.case_timeout(self.n),
            )
            t1 = time.perf_counter()
        entries = int(self.raw.xlen(self.stream_key(topic)))
        if entries != self.n:
            raise BenchError(f"REST produce stored {entries} of {self.n} entries")
        self.drop(topic)
        self.rss["after REST produce"] = self.gw.rss()
        return Result(
            f"3. REST produce, {REST_BATCH} msg/request, {REST_CONCURRENCY} in flight",
            "msg/s",
            self.n / (t1 - t0),
            None,
            f"pipelined XADD, {PIPELINE}/execute",
            {
                "seconds": round(t1 - t0, 2),
                "requests": len(latencies),
                "request p50 ms": round(1000 * quantile(latencies, 50), 1),
                "request p99 ms": round(1000 * quantile(latencies, 99), 1),
            },
        )

    # -- admin reads ---------------------------------------------------------------------

    async def timed_gets(self, s: aiohttp.ClientSession, url: str, count: int) -> list[float]:
        """``count`` sequential GETs of ``url`` (body read); their latencies in seconds."""
        out = []
        for _ in range(count):
            t0 = time.perf_counter()
            async with s.get(url) as r:
                await self.expect(r, 200, f"GET {url}")
            out.append(time.perf_counter() - t0)
        return out

    def gw_stats(self) -> tuple[Result, Result, str]:
        topic = self.topic("stats")
        backlog = self.args.stats_backlog
        subs = [f"{SUBSCRIPTION}-{i}" for i in range(STATS_SUBSCRIPTIONS)]
        url = f"/admin/v2/{self.path(topic)}/stats"
        requests = self.args.requests

        async def setup(s: aiohttp.ClientSession) -> None:
            await self.put_topic(s, topic)
            for sub in subs:
                await self.put_subscription(s, topic, sub)
            await self.rest_produce(s, topic, backlog, REST_CONCURRENCY)
            await self.timed_gets(s, url, 20)  # warm-up

        self.run_async("stats set-up", setup, self.case_timeout(backlog))
        with self.measure("topic stats", requests):
            latencies = self.run_async(
                "topic stats", lambda s: self.timed_gets(s, url, requests), 60 + requests
            )

        async def check(s: aiohttp.ClientSession) -> dict[str, Any]:
            async with s.get(url) as r:
                stats: dict[str, Any] = json.loads(await self.expect(r, 200, "stats"))
            return stats

        stats = self.run_async("stats check", check, 30)
        backlogs = {k: v.get("msgBacklog") for k, v in stats["subscriptions"].items()}
        if backlogs != dict.fromkeys(subs, backlog):
            raise BenchError(f"stats: unexpected subscription backlogs {backlogs}")
        key = self.stream_key(topic)

        def raw_once() -> None:
            pipe = self.raw.pipeline(transaction=False)
            pipe.xinfo_stream(key)
            pipe.xinfo_groups(key)
            groups = pipe.execute()[1]
            if len(groups) != STATS_SUBSCRIPTIONS:
                raise BenchError(f"raw XINFO GROUPS: {len(groups)} groups")

        raw = self.raw_latencies(raw_once, requests)
        p50 = Result(
            f"4a. topic stats ({STATS_SUBSCRIPTIONS} subscriptions, backlog {backlog:,}), p50",
            "ms",
            1000 * quantile(latencies, 50),
            1000 * quantile(raw, 50),
            "XINFO STREAM + XINFO GROUPS, 1 round trip",
            {"requests": requests, "body bytes": len(json.dumps(stats))},
        )
        p99 = Result(
            "4a. topic stats, p99",
            "ms",
            1000 * quantile(latencies, 99),
            1000 * quantile(raw, 99),
            "same",
            {"max ms": round(1000 * max(latencies), 1)},
        )
        self.rss["after topic stats"] = self.gw.rss()
        return p50, p99, topic

    def raw_latencies(self, fn: Callable[[], None], count: int) -> list[float]:
        for _ in range(min(20, count)):
            fn()
        out = []
        for _ in range(count):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return out

    async def scrape(self, s: aiohttp.ClientSession) -> tuple[float, str]:
        t0 = time.perf_counter()
        async with s.get("/metrics") as r:
            text = await self.expect(r, 200, "GET /metrics")
        return time.perf_counter() - t0, text

    def metrics_gauge(self, name: str, labels: str = "") -> float:
        async def go(s: aiohttp.ClientSession) -> str:
            return (await self.scrape(s))[1]

        text = self.run_async("scrape", go, 120)
        pattern = re.escape(name) + r"\{[^}]*" + re.escape(labels) + r"[^}]*\} (\S+)"
        return sum(float(v) for v in re.findall(pattern, text))

    def gw_metrics(self) -> tuple[Result, Result, list[str]]:
        m, scrapes = self.args.metrics_topics, self.args.scrapes
        topics = [self.topic("metrics") for _ in range(m)]

        async def create(s: aiohttp.ClientSession, topic: str) -> None:
            await self.rest_produce(s, topic, METRICS_TOPIC_MESSAGES, 1)
            await self.put_subscription(s, topic, SUBSCRIPTION)

        async def setup(s: aiohttp.ClientSession) -> tuple[int, int]:
            await self.for_each(topics, lambda t: create(s, t), SETUP_CONCURRENCY)
            for _ in range(2):  # warm-up
                _, text = await self.scrape(s)
            return len(text), sum(self.run_id in line for line in text.splitlines())

        t0 = time.perf_counter()
        size, lines = self.run_async(f"creating {m} topics", setup, 120 + m / 5)
        setup_seconds = time.perf_counter() - t0
        self.rss[f"after creating {m:,} topics and 2 scrapes"] = self.gw.rss()
        backlog_lines = self.metrics_lines("pulsar_msg_backlog")
        if backlog_lines < m:
            raise BenchError(f"/metrics lists {backlog_lines} topics, expected at least {m}")

        async def timed(s: aiohttp.ClientSession) -> list[float]:
            return [(await self.scrape(s))[0] for _ in range(scrapes)]

        with self.measure("metrics scrape", scrapes):
            latencies = self.run_async("/metrics scrapes", timed, 60 + scrapes * (5 + m / 100))
        keys = [self.stream_key(t) for t in topics]

        def raw_once() -> None:
            pipe = self.raw.pipeline(transaction=False)
            for key in keys:
                pipe.xinfo_stream(key)
                pipe.xinfo_groups(key)
            if len(pipe.execute()) != 2 * m:
                raise BenchError("raw XINFO pipeline: wrong reply count")

        raw = self.raw_latencies(raw_once, scrapes)
        idle = self.run_async("health probe", lambda s: self.health_probe(s, 0), 60)
        busy = self.run_async(
            "health probe during scrapes", lambda s: self.health_probe(s, 5), 60 + 5 * m / 100
        )
        p50 = Result(
            f"4b. /metrics scrape with {m:,} topics, p50",
            "ms",
            1000 * quantile(latencies, 50),
            1000 * quantile(raw, 50),
            f"pipeline of XINFO STREAM + XINFO GROUPS x {m:,}",
            {
                "scrapes": scrapes,
                "body bytes": size,
                "lines naming bench topics": lines,
                f"setup ({m:,} REST produce + subscription PUT) s": round(setup_seconds, 1),
                "GET /admin/v2/brokers/health every 5 ms, p99 / max ms, idle": (
                    f"{1000 * quantile(idle, 99):.1f} / {1000 * max(idle):.1f}"
                ),
                "same during 5 scrapes (the scrape holds the event loop)": (
                    f"{1000 * quantile(busy, 99):.1f} / {1000 * max(busy):.1f}"
                ),
            },
        )
        worst = Result(
            "4b. /metrics scrape, max",
            "ms",
            1000 * max(latencies),
            1000 * max(raw),
            "same",
        )
        self.rss[f"after {scrapes} more scrapes"] = self.gw.rss()
        return p50, worst, topics

    def clients(self) -> dict[str, str]:
        """Redis connections: id -> "name=.. age=..s cmd=.."."""
        out = {}
        for c in self.raw.client_list():
            out[str(c["id"])] = f"name={c.get('name')} age={c.get('age')}s cmd={c.get('cmd')}"
        return out

    def status_of_stats(self, topic: str) -> int:
        async def go(s: aiohttp.ClientSession) -> int:
            async with s.get(f"/admin/v2/{self.path(topic)}/stats") as r:
                await r.read()
                return r.status

        return self.run_async("stats of a deleted topic", go, 30)

    async def health_probe(self, s: aiohttp.ClientSession, scrapes: int) -> list[float]:
        """Latencies of health checks sent every 5 ms while ``scrapes`` /metrics scrapes run
        (for a second when 0): how long a scrape keeps the gateway from serving others."""
        stop = asyncio.Event()

        async def poll() -> list[float]:
            out = []
            while not stop.is_set():
                t0 = time.perf_counter()
                async with s.get("/admin/v2/brokers/health") as r:
                    await self.expect(r, 200, "health check")
                out.append(time.perf_counter() - t0)
                await asyncio.sleep(0.005)
            return out

        task = asyncio.create_task(poll())
        try:
            if scrapes:
                for _ in range(scrapes):
                    await self.scrape(s)
            else:
                await asyncio.sleep(1.0)
        finally:
            stop.set()
        return await task

    def metrics_lines(self, name: str) -> int:
        async def go(s: aiohttp.ClientSession) -> str:
            return (await self.scrape(s))[1]

        text = self.run_async("scrape", go, 120)
        return sum(1 for line in text.splitlines() if line.startswith(name + "{"))

    # -- raw redis-py --------------------------------------------------------------------

    def _raw_xadd(self, key: str, n: int) -> None:
        pipe = self.raw.pipeline(transaction=False)
        fields: dict[Any, Any] = {"m": self.payload}
        for start in range(0, n, PIPELINE):
            for _ in range(min(PIPELINE, n - start)):
                pipe.xadd(key, fields)
            pipe.execute()

    def _raw_consume(self, key: str) -> int:
        r = self.raw
        r.xgroup_create(key, SUBSCRIPTION, id="0")
        got = 0
        while True:
            reply: Any = r.xreadgroup(SUBSCRIPTION, "c1", {key: ">"}, count=PIPELINE)
            if not reply or not reply[0][1]:
                return got
            ids = [entry[0] for entry in reply[0][1]]
            r.xack(key, SUBSCRIPTION, *ids)
            got += len(ids)

    def raw_produce(self, n: int | None = None, section: str = "raw XADD") -> float:
        """Pipelined XADD of ``n`` entries (default N), timed as ``section``; msg/s.
        (bench/aims.py runs it several times, each round its own section.)"""
        n = self.n if n is None else n
        warm = f"rawbench:{{{self.run_id}}}:warm"
        self._raw_xadd(warm, self.args.warmup)
        self.raw.delete(warm)
        key = f"rawbench:{{{self.run_id}}}:xadd"
        with self.measure(section, n):
            t0 = time.perf_counter()
            self._raw_xadd(key, n)
            t1 = time.perf_counter()
        if self.raw.xlen(key) != n:
            raise BenchError("raw XADD: stream length mismatch")
        self.raw.delete(key)
        return n / (t1 - t0)

    def raw_consume(self) -> float:
        warm = f"rawbench:{{{self.run_id}}}:warm"
        self._raw_xadd(warm, self.args.warmup)
        self._raw_consume(warm)
        self.raw.delete(warm)
        key = f"rawbench:{{{self.run_id}}}:consume"
        self._raw_xadd(key, self.n)
        with self.measure("raw consume", self.n):
            t0 = time.perf_counter()
            got = self._raw_consume(key)
            t1 = time.perf_counter()
        pending = int(self.raw.xpending(key, SUBSCRIPTION)["pending"])
        if got != self.n or pending:
            raise BenchError(f"raw consume read {got} of {self.n}, {pending} pending")
        self.raw.delete(key)
        return self.n / (t1 - t0)

    # -- leak checks ---------------------------------------------------------------------

    def leftover_keys(self) -> dict[str, Any]:
        """Keys still in Redis of the topics deleted through the admin API."""
        out: dict[str, Any] = {}
        deleted = set(self.deleted)
        for key in self.raw.scan_iter(match=f"{KEY_PREFIX}:{{*", count=1000):
            text = key.decode(errors="replace") if isinstance(key, bytes) else str(key)
            tag = text[len(KEY_PREFIX) + 2 : text.rfind("}")]
            topic = tag.replace("%7B", "{").replace("%7D", "}").replace("%25", "%")
            if topic in deleted:
                suffix = text[text.rfind("}") + 2 :].split(":", 1)[0]
                ttl = int(self.raw.pttl(key))
                kind = f"{suffix} (no TTL)" if ttl < 0 else f"{suffix} (expiring)"
                out[kind] = out.get(kind, 0) + 1
                if ttl >= 0:
                    out["longest TTL s"] = max(out.get("longest TTL s", 0), round(ttl / 1000, 1))
        listed: Any = self.raw.smembers(KEYS.namespace_topics(NAMESPACE))
        still = len([t for t in listed if t.decode() in deleted])
        if still:
            out["namespace topic set members"] = still
        return out


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
        help="messages per throughput case (default 50000; 5000 with --quick)",
    )
    p.add_argument("--quick", action="store_true", help="small run: N=5000, fewer scrapes")
    p.add_argument(
        "--window", type=int, default=1000, help="WebSocket producer's unacked sends (1000)"
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=None,
        help="messages per warm-up (default N/20, between 1000 and 5000)",
    )
    p.add_argument(
        "--requests", type=int, default=200, help="timed topic stats requests (default 200)"
    )
    p.add_argument(
        "--stats-backlog",
        type=int,
        default=10_000,
        help="messages in the topic stats case's backlog (default 10000)",
    )
    p.add_argument(
        "--metrics-topics",
        type=int,
        default=1000,
        help="topics existing during the /metrics scrapes (default 1000)",
    )
    p.add_argument(
        "--scrapes", type=int, default=None, help="timed /metrics scrapes (20; 10 with --quick)"
    )
    p.add_argument(
        "--only",
        action="append",
        choices=CASES,
        help="run only this case (repeatable; default all)",
    )
    add_profile_arguments(p)
    p.add_argument("--json", metavar="PATH", default=None, help="also write results as JSON")
    args = p.parse_args(argv)
    if args.messages is None:
        args.messages = 5_000 if args.quick else 50_000
    if args.scrapes is None:
        args.scrapes = 10 if args.quick else 20
    if args.warmup is None:
        args.warmup = max(1000, min(5000, args.messages // 20))
    numbers = (args.messages, args.window, args.warmup, args.requests, args.stats_backlog)
    if min(*numbers, args.metrics_topics, args.scrapes) <= 0:
        p.error("counts must be positive")
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    env = BenchEnv("pgw-bench-http-")
    log, cleanup, watchdog = env.log, env.cleanup, env.watchdog
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
        if find_py_spy(args.py_spy) is None:
            raise BenchError("--profile needs py-spy (pip install py-spy, or --py-spy PATH)")
    bench: HttpBench | None = None
    results: list[Result] = []
    checks: dict[str, Any] = {}

    n = args.messages
    case_limit = 2 * (120 + n / 250) + 60

    def case(name: str, fn: Callable[[], T], limit: float = case_limit) -> T:
        log(f"{name} ...")
        with watchdog.phase(name, limit):
            return fn()

    def logged(r: Result) -> Result:
        raw = "n/a" if r.raw is None else f"{r.raw:,.1f}"
        log(f"{r.label}: gateway {r.gateway:,.1f} {r.unit}, raw {raw} {r.details}")
        return r

    try:
        with watchdog.phase("start-up", 120):
            rds = env.rds = RedisServer(env.workdir, aof=False)
            log(f"redis-server {rds.version} on port {rds.port} (AOF off)")
            gw = env.gw = GatewayProcess(rds.url, env.workdir)
            watchdog.gateway = gw
            log(f"gateway pid {gw.pid}, HTTP on port {gw.http_port}")
            time.sleep(0.5)
            bench = HttpBench(args, rds, gw)
            dbsize_start = int(bench.raw.dbsize())
            clients_start = bench.clients()

        b = bench
        only = set(args.only or CASES)
        if "ws-produce" in only:
            ws_produce = case("WebSocket produce", b.gw_ws_produce)
            ws_produce.raw = case("raw XADD", b.raw_produce)
            results.append(logged(ws_produce))
        if "ws-consume" in only:
            ws_consume = case("WebSocket consume", b.gw_ws_consume)
            ws_consume.raw = case("raw consume", b.raw_consume)
            results.append(logged(ws_consume))
        if "rest" in only:
            rest = case("REST produce", b.gw_rest_produce)
            rest.raw = case("raw XADD (for REST produce)", b.raw_produce)
            results.append(logged(rest))
        dropped: list[str] = []
        if "stats" in only:
            stats_p50, stats_p99, stats_topic = case("topic stats", b.gw_stats)
            results += [logged(stats_p50), logged(stats_p99)]
            dropped.append(stats_topic)
        m = args.metrics_topics
        if "metrics" in only:
            metrics_limit = 2 * (180 + m / 5 + args.scrapes * (5 + m / 100))
            metrics_p50, metrics_max, metrics_topics = case(
                "/metrics scrapes", b.gw_metrics, metrics_limit
            )
            results += [logged(metrics_p50), logged(metrics_max)]
            dropped += metrics_topics

        def finish() -> None:
            b.drop(*dropped)
            time.sleep(1.0)  # let the gateway release what it held for the topics
            checks["websocket sessions open at the end"] = b.metrics_gauge(
                "pulsar_gateway_connections", 'protocol="websocket"'
            )
            checks["gateway errors counted (pulsar_gateway_errors_total)"] = b.metrics_gauge(
                "pulsar_gateway_errors_total"
            )
            checks["keys left of deleted topics"] = b.leftover_keys() or "none"
            checks["Redis keys at start / end"] = f"{dbsize_start} / {int(b.raw.dbsize())}"
            clients_end = b.clients()
            checks["Redis connections at start / end"] = (
                f"{len(clients_start)} / {len(clients_end)}"
            )
            opened = [v for k, v in clients_end.items() if k not in clients_start]
            if opened:
                checks["Redis connections opened during the run and still open"] = opened
            checks["GET stats of deleted topics (expect 404)"] = [
                b.status_of_stats(t) for t in (dropped[:1] + dropped[-1:])
            ]
            b.rss["end (all bench topics deleted)"] = gw.rss()

        case("deleting topics and checking for leaks", finish, 120 + m / 5)
        env.failed = False
    except KeyboardInterrupt:
        env.failed = False
        raise
    finally:
        watchdog.gateway = None
        with watchdog.phase("shutdown", 90):
            log_text = gw.log_text() if gw is not None else ""
            if bench is not None:
                bench.close()
            cleanup()
        watchdog.stop()

    assert bench is not None and rds is not None
    problems = [
        line
        for line in log_text.splitlines()
        if re.search(r"WARNING|ERROR|CRITICAL|Traceback", line)
    ]
    checks["gateway log lines with WARNING/ERROR/Traceback"] = len(problems)
    runtime = time.monotonic() - env.started
    report(args, rds, bench, results, checks, problems, runtime)
    return {
        "args": vars(args),
        "redis_version": rds.version,
        "results": [r.__dict__ for r in results],
        "sections": {k: v.__dict__ for k, v in bench.sections.items()},
        "rss_bytes": bench.rss,
        "checks": checks,
        "gateway_log_problems": problems[:50],
        "runtime_seconds": runtime,
    }


def _ratio(r: Result) -> str:
    return "n/a" if not r.raw else f"{r.gateway / r.raw:.2f}"


def _value(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    return fmt_rate(value) if unit == "msg/s" else f"{value:.2f}"


def report(
    args: argparse.Namespace,
    rds: RedisServer,
    bench: HttpBench,
    results: list[Result],
    checks: dict[str, Any],
    problems: list[str],
    runtime: float,
) -> None:
    out = [
        "# pulsar-redis-gateway HTTP front bench"
        + (" — PROFILED RUN (py-spy attached)" if args.profile else ""),
        "",
        f"- command: `{shlex.join([sys.executable, *sys.argv])}`",
        f'- Redis {rds.version}, AOF off (`--save ""`); gateway {git_describe()}',
        f"- N = {args.messages:,} messages per throughput case, {PAYLOAD_SIZE}-byte payloads, "
        f"warm-up {args.warmup:,} messages before each case; aiohttp {aiohttp.__version__}, "
        f"redis-py {redis.__version__}; Python {platform.python_version()}; "
        f"{os.cpu_count()} CPUs",
        "- ratio = gateway / raw: below 1 the gateway is slower for msg/s rows, above 1 it is "
        "slower for ms rows",
        "",
        "| case | unit | gateway | raw Redis | ratio |",
        "|---|---|---:|---:|---:|",
    ]
    for r in results:
        out.append(
            f"| {r.label} | {r.unit} | {_value(r.gateway, r.unit)} "
            f"| {_value(r.raw, r.unit)} ({r.raw_label}) | {_ratio(r)} |"
        )
    out += ["", "Details:", ""]
    for r in results:
        if r.details:
            out.append(f"- {r.label}: " + "; ".join(f"{k} {v}" for k, v in r.details.items()))
    out += [
        "",
        "Where the time goes (timed sections; CPU 100% = one core; Redis calls per unit from "
        "INFO commandstats, unit = message, or request/scrape for 4a/4b; evalsha = the "
        "gateway's scripts, the commands they call are counted again under their own names):",
        "",
        "| section | seconds | gateway CPU | gateway CPU µs/unit | redis CPU | bench process CPU "
        "| other CPU | Redis calls per unit |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for key, s in bench.sections.items():
        per_unit = s.per_unit("gateway")
        busiest = sorted(s.commands.items(), key=lambda kv: -kv[1])[:5]
        calls = ", ".join(f"{name} {count / s.units:.3g}" for name, count in busiest)
        out.append(
            f"| {key} | {s.seconds:.2f} | {s.cpu['gateway']:.0f}% | {per_unit:,.1f} "
            f"| {s.cpu['redis']:.0f}% | {s.cpu['client']:.0f}% | {s.cpu['other']:.0f}% "
            f"| {calls} |"
        )
    out += ["", "Gateway resident memory (RSS, MiB):", ""]
    out += [f"- {k}: {v / MIB:.1f}" for k, v in bench.rss.items()]
    out += ["", "Checks:", ""]
    out += [f"- {k}: {v}" for k, v in checks.items()]
    if problems:
        out += ["", "Gateway log lines with WARNING/ERROR/Traceback (first 10):", ""]
        out += [f"    {line[:300]}" for line in problems[:10]]
    out += ["", f"- load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}"]
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
