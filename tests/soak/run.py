"""One scenario's measured run (:func:`measured`): a fresh ``redis-server`` and ONE gateway
process, the gateway's RSS sampled from the start, the normal workload warmed up before the
floods (the RSS baseline is taken as they start), the floods in a window
(:meth:`Run.flood`), the workload drained and both processes stopped at the end, whatever
happened; then :meth:`Run.figures`.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Coroutine, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.soak.floods import GIB, KIB, FloodStats, Window, run_floods
from tests.soak.gateway import GatewayServer, RedisServer, Stack
from tests.soak.measure import ConnectProber, HealthProber, Latency, Prober, RssFigures, RssSampler
from tests.soak.workload import NormalWorkload, WorkloadFigures


@dataclass(frozen=True)
class Setup:
    """How every scenario runs."""

    #: extra ``pulsar-gateway`` flags
    gateway_args: tuple[str, ...] = ()
    #: the checkout whose gateway runs (:mod:`tests.soak.gateway`); None: the default
    source: Path | None = None
    #: the floods stop when the gateway's RSS passes this
    rss_cap_mib: float = 3072.0
    #: bytes each flood may offer
    budget: int = GIB
    #: payload bytes of each message of the socket floods
    message_size: int = KIB
    #: messages a second of the normal workload
    rate: float = 200.0
    #: seconds of normal workload before the floods (the RSS baseline is taken at its end)
    warmup: float = 3.0


@dataclass(frozen=True)
class StallFigures:
    """What ``redis_stall`` saw around its SIGSTOP .. SIGCONT of Redis."""

    seconds: float
    #: send -> receive of the normal messages sent while Redis was stopped
    during: Latency
    #: ... and of those sent after SIGCONT
    after: Latency
    sent_after: int
    received_after: int
    #: receipts the fast producer got after SIGCONT
    producer_receipts_after: int


@dataclass
class Figures:
    """What one scenario measured."""

    scenario: str
    #: how long the floods ran, seconds
    seconds: float
    floods: list[FloodStats]
    rss: RssFigures
    workload: WorkloadFigures
    #: latency of the probers that ran beside the floods: "health", "connect"
    probes: dict[str, Latency] = field(default_factory=dict)
    #: their probes that failed, by prober and kind ("HTTP 503", "TimeoutError"...)
    probe_failures: dict[str, dict[str, int]] = field(default_factory=dict)
    #: (seconds since the floods started, RSS MiB) every 10 s
    timeline: list[tuple[float, float]] = field(default_factory=list)
    stall: StallFigures | None = None
    #: anything else worth reading: errors, a gateway that died, subscription stats
    notes: list[str] = field(default_factory=list)

    @property
    def offered_bytes(self) -> int:
        return sum(f.offered for f in self.floods)

    @property
    def accepted_bytes(self) -> int | None:
        """Payload bytes the gateway acknowledged or stored, over the floods that say."""
        measured = [f.accepted for f in self.floods if f.accepted is not None]
        return sum(measured) if measured else None


def unique_topic(label: str) -> str:
    return f"soak-{label}-{uuid.uuid4().hex[:8]}"


class Run:
    """One scenario's processes and measurements (made by :func:`measured`)."""

    def __init__(self, scenario: str, setup: Setup, stack: Stack, sampler: RssSampler) -> None:
        self.scenario = scenario
        self.setup = setup
        self.gateway: GatewayServer = stack.gateway
        self.redis: RedisServer = stack.redis
        self.sampler = sampler
        self.workload: NormalWorkload | None = None
        self.flood_start = time.monotonic()
        self.window = Window(0.0, False, [])
        self.probes: dict[str, Latency] = {}
        self.probe_failures: dict[str, dict[str, int]] = {}
        self.notes: list[str] = []

    async def flood(
        self,
        floods: Sequence[Coroutine[Any, Any, None]],
        duration: float,
        *,
        end_when_one_ends: bool = True,
        probe: bool = False,
    ) -> None:
        """Run ``floods`` (:func:`tests.soak.floods.run_floods`), with ``probe`` the
        health and connect probers beside them."""
        probers: dict[str, Prober] = {}
        if probe:
            probers = {
                "health": HealthProber(self.gateway.http_url),
                "connect": ConnectProber(self.gateway.address),
            }
        for prober in probers.values():
            prober.start()
        self.flood_start = time.monotonic()
        try:
            self.window = await run_floods(
                floods, duration, self.sampler.over_cap, end_when_one_ends=end_when_one_ends
            )
        finally:
            for name, prober in probers.items():
                self.probes[name] = await asyncio.to_thread(prober.stop)
                self.probe_failures[name] = dict(prober.failures)
                if prober.failures:
                    self.notes.append(f"{name} probes failed: {dict(prober.failures)}")
        if self.window.aborted_at_cap:
            self.notes.append(f"aborted at cap: RSS passed {self.setup.rss_cap_mib:.0f} MiB")
        self.notes += [f"flood error: {error}" for error in self.window.errors]
        if (code := self.gateway.proc.poll()) is not None:
            self.notes.append(f"the gateway exited with {code}:\n{self.gateway.log_tail()}")

    async def count_stored(self, topic: str, stats: FloodStats, size: int) -> None:
        """Set ``stats``' accepted figures from what ``topic`` stored (its
        ``entriesAddedCounter``, ``size`` payload bytes each), a second after the floods."""
        await asyncio.sleep(1)
        try:
            found = await asyncio.to_thread(self.gateway.topic_stats, topic)
        except OSError as exc:
            self.notes.append(f"stats of {topic}: {type(exc).__name__}: {exc}")
            return
        entries = int(found.get("entriesAddedCounter", 0))
        stats.accepted, stats.messages = entries * size, entries

    async def note_subscription(self, topic: str, subscription: str) -> None:
        """Note what ``subscription`` of ``topic`` got: delivered, unacked, backlog."""
        try:
            found = await asyncio.to_thread(self.gateway.topic_stats, topic)
        except OSError as exc:
            self.notes.append(f"stats of {topic}: {type(exc).__name__}: {exc}")
            return
        sub = found.get("subscriptions", {}).get(subscription, {})
        self.notes.append(
            f"subscription {subscription}: {sub.get('msgOutCounter')} delivered, "
            f"{sub.get('unackedMessages')} unacked, backlog {sub.get('msgBacklog')}"
        )

    def figures(self, floods: list[FloodStats], stall: StallFigures | None = None) -> Figures:
        """The figures, once :func:`measured` has ended (the workload drained)."""
        assert self.workload is not None
        return Figures(
            scenario=self.scenario,
            seconds=self.window.seconds,
            floods=floods,
            rss=self.sampler.figures(self.flood_start),
            workload=self.workload.figures(self.flood_start),
            probes=self.probes,
            probe_failures=self.probe_failures,
            timeline=self.sampler.timeline(self.flood_start),
            stall=stall,
            notes=self.notes,
        )


@asynccontextmanager
async def measured(scenario: str, setup: Setup) -> AsyncIterator[Run]:
    """A fresh Redis and gateway, the RSS sampler, the normal workload after its warm-up;
    at the end the workload drains, then both processes are stopped, whatever happened."""
    stack = await asyncio.to_thread(Stack, setup.gateway_args, setup.source)
    try:
        sampler = RssSampler(stack.gateway.pid, setup.rss_cap_mib)
        sampler.start()
        try:
            run = Run(scenario, setup, stack, sampler)
            run.workload = await asyncio.to_thread(
                NormalWorkload, stack.gateway.url, unique_topic("normal"), setup.rate
            )
            try:
                run.workload.start()
                await asyncio.sleep(setup.warmup)
                yield run
            finally:
                await asyncio.to_thread(run.workload.finish)
        finally:
            sampler.stop()
    finally:
        await asyncio.to_thread(stack.stop)
