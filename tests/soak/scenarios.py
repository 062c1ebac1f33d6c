"""The soak scenarios: each an async function that starts a fresh ``redis-server`` and ONE
gateway process, runs the normal workload (:mod:`tests.soak.workload`) for a warm-up, takes
the gateway's RSS baseline, floods it for ``duration`` seconds with misbehaving clients,
stops them, drains the workload, kills both processes, and returns a :class:`Figures`.

Every scenario takes a :class:`Setup` (the gateway's extra flags and code, the RSS cap, the
byte budget of each flood, the payload size of the socket floods' messages, 1 KiB) and
keyword figures of its own; :data:`SCENARIOS` names them all.
A flood window ends at ``duration``, when a flood has offered its budget (1 GiB by
default; not in ``redis_stall`` and ``soak``, where the others go on), or when the
gateway's RSS passes the cap (3 GiB by default: the figures then say "aborted at cap").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from tests.soak import binary, rest, storm, websocket
from tests.soak.floods import FloodStats
from tests.soak.gateway import RedisServer
from tests.soak.run import Figures, Run, Setup, StallFigures, measured, unique_topic

__all__ = [
    "DEFAULT",
    "SCENARIOS",
    "Figures",
    "Setup",
    "StallFigures",
    "binary_slow_consumer",
    "binary_unread_receipts",
    "connection_storm",
    "redis_stall",
    "rest_flood",
    "soak",
    "websocket_slow_consumer",
    "websocket_unread_acks",
]

#: What a scenario runs with when not told (a frozen dataclass: one is enough).
DEFAULT = Setup()


#: Starts a hostile client: (the run, the topic, its counters) -> the flood's coroutine.
HostileClient = Callable[[Run, str, FloodStats], Coroutine[Any, Any, None]]


async def _slow_consumer(
    scenario: str, label: str, consumer: HostileClient, setup: Setup, duration: float
) -> Figures:
    """``consumer`` subscribes (subscription ``slow``) and never reads, while a fast raw
    producer publishes to its topic."""
    topic = unique_topic(label.replace(" ", "-"))
    consumed, produced = FloodStats(f"{label} consumer"), FloodStats("fast producer")
    async with measured(scenario, setup) as run:
        await run.flood(
            [
                consumer(run, topic, consumed),
                binary.fast_producer(
                    run.gateway.address,
                    topic,
                    produced,
                    budget=setup.budget,
                    size=setup.message_size,
                ),
            ],
            duration,
        )
        await run.note_subscription(topic, "slow")
    return run.figures([consumed, produced])


async def _unread_answers(
    scenario: str, label: str, producer: HostileClient, setup: Setup, duration: float
) -> Figures:
    """``producer`` publishes as fast as its socket takes it and never reads an answer."""
    topic = unique_topic(label.replace(" ", "-"))
    flood = FloodStats(label)
    async with measured(scenario, setup) as run:
        await run.flood([producer(run, topic, flood)], duration)
        await run.count_stored(topic, flood, setup.message_size)
    return run.figures([flood])


async def binary_slow_consumer(setup: Setup = DEFAULT, *, duration: float = 20.0) -> Figures:
    """A raw consumer (Shared, 1,000,000 permits, 64 KiB ``SO_RCVBUF``) that never reads,
    while a fast raw producer publishes to its topic."""
    return await _slow_consumer(
        "binary_slow_consumer",
        "slow",
        lambda run, topic, stats: binary.slow_consumer(run.gateway.address, topic, stats),
        setup,
        duration,
    )


async def binary_unread_receipts(setup: Setup = DEFAULT, *, duration: float = 20.0) -> Figures:
    """A raw producer writing SENDs as fast as its socket takes them, never reading a
    receipt."""
    return await _unread_answers(
        "binary_unread_receipts",
        "unread receipts",
        lambda run, topic, stats: binary.unread_receipts(
            run.gateway.address, topic, stats, budget=setup.budget, size=setup.message_size
        ),
        setup,
        duration,
    )


async def websocket_slow_consumer(setup: Setup = DEFAULT, *, duration: float = 20.0) -> Figures:
    """A WebSocket consumer (``receiverQueueSize=1000000``, 64 KiB ``SO_RCVBUF``) that never
    reads, while a fast raw producer publishes to its topic."""
    return await _slow_consumer(
        "websocket_slow_consumer",
        "ws slow",
        lambda run, topic, stats: websocket.slow_consumer(run.gateway.http_address, topic, stats),
        setup,
        duration,
    )


async def websocket_unread_acks(setup: Setup = DEFAULT, *, duration: float = 20.0) -> Figures:
    """A WebSocket producer writing messages as fast as its socket takes them, never reading
    an ack."""
    return await _unread_answers(
        "websocket_unread_acks",
        "ws unread acks",
        lambda run, topic, stats: websocket.unread_acks(
            run.gateway.http_address, topic, stats, budget=setup.budget, size=setup.message_size
        ),
        setup,
        duration,
    )


async def rest_flood(
    setup: Setup = DEFAULT, *, duration: float = 20.0, clients: int = 32
) -> Figures:
    """``clients`` concurrent REST produce clients POSTing the largest bodies the gateway
    takes (1 MiB tried first); the answers counted by status."""
    flood = FloodStats("rest")
    async with measured("rest_flood", setup) as run:
        await run.flood(
            [
                rest.rest_flood(
                    run.gateway.http_url,
                    unique_topic("rest"),
                    flood,
                    clients=clients,
                    budget=setup.budget,
                )
            ],
            duration,
        )
    return run.figures([flood])


async def connection_storm(
    setup: Setup = DEFAULT, *, duration: float = 20.0, clients: int = 64
) -> Figures:
    """``clients`` raw clients connecting, writing garbage and closing in a loop, while the
    probers time the health endpoint and a fresh client's CONNECT."""
    flood = FloodStats("storm")
    async with measured("connection_storm", setup) as run:
        await run.flood(
            [storm.connection_storm(run.gateway.address, flood, clients=clients)],
            duration,
            probe=True,
        )
    return run.figures([flood])


async def redis_stall(
    setup: Setup = DEFAULT,
    *,
    duration: float = 25.0,
    stall_after: float = 5.0,
    stall: float = 10.0,
    recovery: float = 10.0,
) -> Figures:
    """A fast raw producer beside the normal workload; ``stall_after`` seconds in, Redis is
    SIGSTOPped for ``stall`` seconds, then SIGCONTed; the floods go on until ``duration``,
    and at least ``recovery`` seconds after the SIGCONT."""
    producer = FloodStats("fast producer")
    marks: dict[str, float] = {}

    async def stop_redis(redis: RedisServer) -> None:
        await asyncio.sleep(stall_after)
        redis.pause()
        marks["paused"] = time.monotonic()
        try:
            await asyncio.sleep(stall)
        finally:
            redis.resume()
            marks["resumed"] = time.monotonic()
            marks["receipts"] = producer.messages

    async with measured("redis_stall", setup) as run:
        await run.flood(
            [
                binary.fast_producer(
                    run.gateway.address, unique_topic("stall"), producer, budget=setup.budget
                ),
                stop_redis(run.redis),
            ],
            max(duration, stall_after + stall + recovery),
            end_when_one_ends=False,
            probe=True,
        )
    assert run.workload is not None
    paused, resumed = marks.get("paused", run.flood_start), marks.get("resumed", run.flood_start)
    sent_after, received_after = run.workload.received_between(resumed)
    figures = StallFigures(
        seconds=resumed - paused,
        during=run.workload.latency(paused, resumed),
        after=run.workload.latency(resumed),
        sent_after=sent_after,
        received_after=received_after,
        producer_receipts_after=producer.messages - int(marks.get("receipts", 0)),
    )
    return run.figures([producer], figures)


async def soak(setup: Setup = DEFAULT, *, duration: float = 180.0) -> Figures:
    """Every flood but the Redis stall at once: the binary and WebSocket slow consumers on
    the topic of a fast producer, unread receipts, unread WebSocket acks, the connection
    storm and the REST flood, with the probers, for ``duration``; RSS every 10 s."""
    slow_topic = unique_topic("slow")
    floods = [
        FloodStats(name)
        for name in (
            "slow consumer",
            "ws slow consumer",
            "fast producer",
            "unread receipts",
            "ws unread acks",
            "storm",
            "rest",
        )
    ]
    slow, ws_slow, producer, unread, ws_unread, storm_stats, rest_stats = floods
    unread_topic, ws_topic = unique_topic("unread"), unique_topic("ws")
    async with measured("soak", setup) as run:
        address, http_address = run.gateway.address, run.gateway.http_address
        budget, size = setup.budget, setup.message_size
        await run.flood(
            [
                binary.slow_consumer(address, slow_topic, slow),
                websocket.slow_consumer(http_address, slow_topic, ws_slow, subscription="ws"),
                binary.fast_producer(address, slow_topic, producer, budget=budget, size=size),
                binary.unread_receipts(address, unread_topic, unread, budget=budget, size=size),
                websocket.unread_acks(http_address, ws_topic, ws_unread, budget=budget, size=size),
                storm.connection_storm(address, storm_stats),
                rest.rest_flood(
                    run.gateway.http_url, unique_topic("rest"), rest_stats, budget=budget
                ),
            ],
            duration,
            end_when_one_ends=False,
            probe=True,
        )
        await run.count_stored(unread_topic, unread, setup.message_size)
        await run.count_stored(ws_topic, ws_unread, setup.message_size)
        for subscription in ("slow", "ws"):
            await run.note_subscription(slow_topic, subscription)
    return run.figures(floods)


SCENARIOS: dict[str, Callable[..., Awaitable[Figures]]] = {
    "binary_slow_consumer": binary_slow_consumer,
    "binary_unread_receipts": binary_unread_receipts,
    "websocket_slow_consumer": websocket_slow_consumer,
    "websocket_unread_acks": websocket_unread_acks,
    "rest_flood": rest_flood,
    "connection_storm": connection_storm,
    "redis_stall": redis_stall,
    "soak": soak,
}
