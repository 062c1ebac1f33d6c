"""A chaos run: the workload of :mod:`tests.chaos.workload` on three gateways and one
``redis-server`` (AOF, fsync always) while gateways are SIGKILLed and restarted at random
and Redis is SIGKILLed and restarted ``redis_kills`` times; then every message is drained
and :mod:`tests.chaos.verdict` judges what was recorded.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pulsar

from tests.chaos.processes import AofRedis, RestartableGateway
from tests.chaos.verdict import Delivery, Outage, Sent, TopicVerdict, judge_topic
from tests.chaos.workload import NAMESPACE, PLANS, ConsumerLoop, ProducerLoop
from tests.conftest import TIMEOUT

GATEWAYS = 3
#: A gateway log line at these levels, or a traceback, fails the run: losing a peer or Redis
#: is expected and logged as a warning; an error is something the gateway did not handle.
LOUD = re.compile(r" (ERROR|CRITICAL) |^Traceback", re.MULTILINE)


@dataclass(frozen=True)
class ChaosConfig:
    duration: float = 300.0  # seconds of chaos
    seed: int = 1
    rate: float = 100.0  # messages a second per topic
    kill_every: tuple[float, float] = (4.0, 12.0)  # seconds between gateway kills
    gateway_down: tuple[float, float] = (0.2, 3.0)  # seconds a killed gateway stays down
    redis_kills: int = 2
    redis_down: tuple[float, float] = (0.5, 2.0)
    lease: float = 2.0  # --consumer-lease-seconds: a dead gateway's consumers expire
    drain_timeout: float = 120.0  # after the chaos, until everything sent was received
    quiet: float = 3.0  # after the drain, for late redeliveries to show up


@dataclass
class ChaosReport:
    config: ChaosConfig
    outages: list[Outage] = field(default_factory=list)
    verdicts: list[TopicVerdict] = field(default_factory=list)
    producer_errors: Counter[str] = field(default_factory=Counter)
    unanswered_sends: int = 0
    consumer_errors: Counter[str] = field(default_factory=Counter)
    gateway_log_lines: Counter[str] = field(default_factory=Counter)
    chaos_seconds: float = 0.0
    drain_seconds: float = 0.0
    # what was recorded, for a closer look (``--dump``)
    sent: dict[str, list[Sent]] = field(default_factory=dict)
    deliveries: list[Delivery] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)  # kept when the run found something

    def failures(self) -> list[str]:
        found = [f for v in self.verdicts for f in v.failures()]
        redis_kills = sum(1 for o in self.outages if o.gateway < 0)
        if redis_kills < self.config.redis_kills:
            found.append(f"Redis was killed {redis_kills} times, not {self.config.redis_kills}")
        if not any(o.gateway >= 0 for o in self.outages):
            found.append("no gateway was killed")
        if self.gateway_log_lines:
            found.append(
                f"the gateways logged {sum(self.gateway_log_lines.values())} lines at ERROR or "
                f"above: {dict(self.gateway_log_lines.most_common(3))}"
            )
        if self.unanswered_sends:
            found.append(f"{self.unanswered_sends} sends never got a receipt nor an error")
        for v in self.verdicts:
            # A run whose producers could not send would prove nothing.
            if v.sent < self.config.rate * self.config.duration * 0.25:
                found.append(f"{v.topic}: only {v.sent} messages sent")
        return found

    def table(self) -> str:
        c = self.config
        gateway_kills = [o for o in self.outages if o.gateway >= 0]
        redis_kills = [o for o in self.outages if o.gateway < 0]
        lines = [
            f"chaos run: seed {c.seed}, {self.chaos_seconds:.0f} s of chaos, "
            f"{c.rate:.0f} msg/s per topic, {GATEWAYS} gateways (lease {c.lease} s), "
            f"drained in {self.drain_seconds:.1f} s",
            f"  gateway SIGKILLs {len(gateway_kills)} "
            f"(by gateway {dict(sorted(Counter(o.gateway for o in gateway_kills).items()))}, "
            f"down {_spread(gateway_kills)} until ready again)",
            f"  Redis SIGKILLs {len(redis_kills)} (down {_spread(redis_kills)} until answering)",
            "",
            f"  {'topic':<11} {'sent':>7} {'received':>8} {'deliv.':>7} {'redeliv.':>8} "
            f"{'acked again':>11} {'lost':>5} {'dedup dup':>9} {'beyond':>6} {'early':>5} "
            f"{'order':>5}",
        ]
        for v in self.verdicts:
            order = str(len(v.out_of_order)) if v.ordered else "-"
            early = str(len(v.early)) if v.delayed else "-"
            lines.append(
                f"  {v.topic:<11} {v.sent:>7} {v.received:>8} {v.deliveries:>7} "
                f"{v.redelivered:>8} {v.acked_redelivered_in_window:>11} {len(v.lost):>5} "
                f"{len(v.dedup_duplicates):>9} {len(v.acked_redelivered_beyond_window):>6} "
                f"{early:>5} {order:>5}"
            )
        lines += [
            "",
            "  received: distinct messages; deliv.: deliveries; redeliv.: deliveries of a",
            "  message not yet acknowledged; acked again: of an acknowledged message while a",
            "  failure had it in flight (allowed); beyond: the same with no such failure;",
            "  order: first deliveries out of the producer's order (per key on Key_Shared).",
            f"  producer errors {dict(self.producer_errors) or 0}, consumer errors "
            f"{dict(self.consumer_errors) or 0}",
            f"  gateway log lines at ERROR or above: {sum(self.gateway_log_lines.values())} "
            f"{dict(self.gateway_log_lines.most_common(5))}",
        ]
        return "\n".join(lines)


def _spread(outages: list[Outage]) -> str:
    if not outages:
        return "-"
    downs = sorted(o.end - o.start for o in outages)
    return f"{downs[0]:.1f}..{downs[-1]:.1f} s"


def _enable_deduplication(gateway: RestartableGateway) -> None:
    """Deduplication on for the namespace (Pulsar admin ``setDeduplication``)."""
    request = urllib.request.Request(
        f"{gateway.http_url}/admin/v2/namespaces/{NAMESPACE}/deduplication",
        data=json.dumps(True).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
        assert answer.status in (200, 204), answer.status


def _summarize_log(text: str) -> Counter[str]:
    found: Counter[str] = Counter()
    for line in text.splitlines():
        if LOUD.search(line):
            # the logger's name and the start of the message name the kind
            found[" ".join(line.split()[2:6])[:80]] += 1
    return found


def run_chaos(
    config: ChaosConfig,
    redis_binary: str,
    progress: Callable[[str], None] = lambda line: None,
) -> ChaosReport:
    rng = random.Random(config.seed)
    report = ChaosReport(config)
    workdir = tempfile.mkdtemp(prefix="pgw-chaos-")
    redis_server = AofRedis(redis_binary)
    redis_server.start_and_wait(3 * TIMEOUT)
    args = [
        *("--redis-url", redis_server.url, "--log-level", "INFO"),
        *("--consumer-lease-seconds", str(config.lease)),
    ]
    gateways = [RestartableGateway(args) for _ in range(GATEWAYS)]
    clients: list[Any] = []
    producers: list[ProducerLoop] = []
    consumers: list[ConsumerLoop] = []
    sent: dict[str, list[Sent]] = {plan.tag: [] for plan in PLANS}
    deliveries: list[Delivery] = []
    try:
        for gw in gateways:
            gw.start()
        _enable_deduplication(gateways[0])

        # The client's logger is one per process: every client writes to this file.
        logger = pulsar.FileLogger(pulsar.LoggerLevel.Info, os.path.join(workdir, "client.log"))

        def client(*hosts: str) -> Any:
            made = pulsar.Client(
                "pulsar://" + ",".join(hosts), operation_timeout_seconds=30, logger=logger
            )
            clients.append(made)
            return made

        for index, gw in enumerate(gateways):
            consumer_client = client(gw.address)
            consumers += [ConsumerLoop(consumer_client, p, index, deliveries) for p in PLANS]
        producer_client = client(*(gw.address for gw in gateways))
        producers = [
            ProducerLoop(producer_client, plan, config.rate, config.seed * 100 + n, sent[plan.tag])
            for n, plan in enumerate(PLANS)
        ]
        for worker in [*consumers, *producers]:
            worker.start()

        started = time.time()
        report.outages = _cause_chaos(
            config, rng, redis_server, gateways, progress, sent, deliveries
        )
        report.chaos_seconds = time.time() - started

        drain_started = time.time()
        for producer in producers:
            producer.finish(config.drain_timeout)
        _drain(config, sent, deliveries)
        time.sleep(config.quiet)
        report.drain_seconds = time.time() - drain_started - config.quiet
        for consumer in consumers:
            consumer.stop(TIMEOUT)
    finally:
        for made in clients:
            try:
                made.close()
            except Exception:  # a client of a dead gateway
                pass
        for gw in gateways:
            gw.stop()
            for text in gw.logs():
                report.gateway_log_lines.update(_summarize_log(text))
        redis_server.stop()

    report.sent, report.deliveries = sent, deliveries
    for producer in producers:
        report.producer_errors.update(producer.errors)
        report.unanswered_sends += producer.unanswered
    for consumer in consumers:
        report.consumer_errors.update(consumer.errors)
    for plan in PLANS:
        report.verdicts.append(
            judge_topic(
                plan.tag,
                sent[plan.tag],
                [d for d in deliveries if d.topic == plan.tag],
                report.outages,
                ordered=plan.ordered,
                delayed=plan.delay_ms is not None,
            )
        )
    if report.failures():
        # Kept for a closer look: the gateways' logs and the client's.
        report.logs = [str(life.log_path) for gw in gateways for life in gw.lives]
        report.logs.append(os.path.join(workdir, "client.log"))
    else:
        for gw in gateways:
            gw.remove_logs()
        shutil.rmtree(workdir, ignore_errors=True)
    return report


def _cause_chaos(
    config: ChaosConfig,
    rng: random.Random,
    redis_server: AofRedis,
    gateways: list[RestartableGateway],
    progress: Callable[[str], None],
    sent: dict[str, list[Sent]],
    deliveries: list[Delivery],
) -> list[Outage]:
    """Kill and restart gateways at random, one at a time, and Redis ``redis_kills`` times
    spread evenly over the run; return the outages."""
    outages: list[Outage] = []
    start = time.time()
    end = start + config.duration
    redis_at = [
        start + config.duration * (n + 1) / (config.redis_kills + 1)
        for n in range(config.redis_kills)
    ]
    next_kill = start + rng.uniform(*config.kill_every)
    next_progress = start + 10
    while time.time() < end:
        now = time.time()
        if now >= next_progress:
            next_progress += 10
            progress(
                f"  {now - start:5.0f} s sent {sum(len(s) for s in sent.values()):>7}, "
                f"deliveries {len(deliveries):>7}, outages {len(outages)}"
            )
        if redis_at and now >= redis_at[0]:
            redis_at.pop(0)
            redis_server.kill()
            time.sleep(rng.uniform(*config.redis_down))
            redis_server.start_and_wait(6 * TIMEOUT)
            outages.append(Outage(-1, now, time.time()))
            progress(f"  {now - start:5.0f} s Redis killed, back after {time.time() - now:.1f} s")
        elif now >= next_kill:
            index = rng.randrange(len(gateways))
            gateways[index].kill()
            time.sleep(rng.uniform(*config.gateway_down))
            gateways[index].start()
            outages.append(Outage(index, now, time.time()))
            next_kill = time.time() + rng.uniform(*config.kill_every)
        else:
            time.sleep(0.05)
    return outages


def _drain(config: ChaosConfig, sent: dict[str, list[Sent]], deliveries: list[Delivery]) -> None:
    """Until every message with a receipt was received, or ``drain_timeout``."""
    want = {(s.topic, s.seq) for messages in sent.values() for s in messages}
    deadline = time.monotonic() + config.drain_timeout
    counted = 0
    while time.monotonic() < deadline:
        now_known = len(deliveries)
        want -= {(d.topic, d.seq) for d in deliveries[counted:now_known]}
        counted = now_known
        if not want:
            return
        time.sleep(0.25)
