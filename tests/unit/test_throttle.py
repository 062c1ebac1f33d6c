"""The binary connection's throttle and the gateway's gates, as data: when reading stops and
resumes, and when the publish buffer and lookups refuse (no sockets, no Redis)."""

from __future__ import annotations

import asyncio

from pulsar_gateway.adapters.pulsar_binary.throttle import (
    ConcurrencyLimit,
    PendingLimit,
    Throttle,
    ThrottleType,
)
from pulsar_gateway.core import Gate, PublishBuffer


def _throttle() -> tuple[Throttle, list[bool], list[tuple[ThrottleType, bool]]]:
    changes: list[bool] = []
    marks: list[tuple[ThrottleType, bool]] = []
    return Throttle(changes.append, lambda r, added: marks.append((r, added))), changes, marks


def test_reading_stops_at_the_first_reason_and_resumes_when_none_is_left() -> None:
    throttle, changes, marks = _throttle()
    throttle.mark(ThrottleType.PENDING_PUBLISHES)
    throttle.mark(ThrottleType.STORAGE_BACKLOG)
    throttle.mark(ThrottleType.STORAGE_BACKLOG)  # a reason counts once
    assert changes == [True]
    throttle.unmark(ThrottleType.PENDING_PUBLISHES)
    assert changes == [True] and throttle.throttled
    throttle.unmark(ThrottleType.STORAGE_BACKLOG)
    assert changes == [True, False] and not throttle.throttled
    assert marks == [
        (ThrottleType.PENDING_PUBLISHES, True),
        (ThrottleType.STORAGE_BACKLOG, True),
        (ThrottleType.PENDING_PUBLISHES, False),
        (ThrottleType.STORAGE_BACKLOG, False),
    ]


def test_clear_unmarks_every_reason_for_the_gauge() -> None:
    throttle, changes, marks = _throttle()
    throttle.mark(ThrottleType.OUTBOUND_BUFFER_FULL)
    throttle.mark(ThrottleType.PUBLISH_BUFFER)
    throttle.clear()
    assert changes == [True, False]
    assert sorted(r.value for r, added in marks if not added) == [
        "outbound_buffer_full",
        "publish_buffer",
    ]


def test_pending_limit_pauses_at_the_limit_and_resumes_at_half() -> None:
    """Pulsar's maxPendingPublishRequestsPerConnection: autoRead off at the 1000th pending
    send, on again once 500 are left."""
    throttle, changes, _ = _throttle()
    pending = PendingLimit(throttle, ThrottleType.PENDING_PUBLISHES, 1000)
    for _ in range(999):
        pending.add()
    assert changes == []
    pending.add()
    assert changes == [True]
    pending.done(499)
    assert changes == [True]  # 501 left
    pending.done()
    assert changes == [True, False]  # 500: half
    assert pending.count == 500


def test_concurrency_limit_refuses_past_the_limit_until_one_ends() -> None:
    lookups = ConcurrencyLimit(2)
    assert lookups.try_acquire() and lookups.try_acquire()
    assert not lookups.try_acquire()
    lookups.release()
    assert lookups.try_acquire()


async def test_publish_buffer_closes_at_the_limit_and_opens_below_half() -> None:
    buffer = PublishBuffer(1000)
    seen: list[bool] = []
    buffer.gate.subscribe(seen.append)
    buffer.acquire(600)
    buffer.acquire(400)
    assert seen == [False] and not buffer.gate.is_open
    buffer.release(500)
    assert buffer.gate.is_open is False  # 500: not below half
    buffer.release(1)
    assert seen == [False, True]
    buffer.release(499)
    assert buffer.size == 0


async def test_reservations_take_at_most_half_the_buffer_and_wait_their_turn() -> None:
    """REST requests reserve what they cost; together at most half the limit (one always
    fits), so streaming producers keep the other half."""
    buffer = PublishBuffer(1000)
    await asyncio.wait_for(buffer.reserve(2000), 1)  # the first fits, however large
    assert buffer.size == 2000 and not buffer.gate.is_open
    second = asyncio.ensure_future(buffer.reserve(100))
    await asyncio.sleep(0)
    assert not second.done()
    buffer.unreserve(2000)
    await asyncio.wait_for(second, 1)
    third = asyncio.ensure_future(buffer.reserve(300))
    fourth = asyncio.ensure_future(buffer.reserve(300))
    await asyncio.sleep(0)
    assert third.done() and not fourth.done()  # 100 + 300 fit in half, 700 would not
    assert buffer.gate.is_open  # streaming producers are not held back by them
    buffer.unreserve(300)
    await asyncio.wait_for(fourth, 1)
    assert buffer.reserved == 400


def test_a_publish_buffer_without_limit_never_closes() -> None:
    buffer = PublishBuffer(0)
    buffer.acquire(10**12)
    assert buffer.gate.is_open


async def test_gate_wait_open_returns_when_opened() -> None:
    gate = Gate("test")
    await asyncio.wait_for(gate.wait_open(), 1)  # open: at once
    gate.close()
    waiter = asyncio.ensure_future(gate.wait_open())
    await asyncio.sleep(0)
    assert not waiter.done()
    gate.open()
    await asyncio.wait_for(waiter, 1)
    assert gate.closings == 1
