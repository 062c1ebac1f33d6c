"""The notifier's pub/sub connection against a real Redis: wake-ups on subscription and on
every hint, data channels in order, unsubscription, re-subscription, a lost connection
taken up again with every channel (each woken once, since hints were missed), and this
gateway's own hints waking its listeners from the lane."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable

import pytest
import redis.asyncio as aioredis

from pulsar_gateway.core.storage import Lane, Notifier
from tests.conftest import TIMEOUT


async def eventually(predicate: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    redis = aioredis.Redis.from_url(redis_url)
    yield redis
    await redis.aclose()


@pytest.fixture
async def notifier(client: aioredis.Redis) -> AsyncIterator[Notifier]:
    notifier = Notifier(client)
    await notifier.start()
    yield notifier
    await notifier.close()


async def subscribers(client: aioredis.Redis, channel: str) -> int:
    counts = await client.pubsub_numsub(channel)
    return int(counts[0][1])


async def unsubscribed(client: aioredis.Redis, channel: str) -> None:
    """Wait until Redis counts no subscriber of ``channel`` (unsubscribing is written at
    once, and confirmed later)."""
    deadline = asyncio.get_running_loop().time() + TIMEOUT
    while await subscribers(client, channel):
        assert asyncio.get_running_loop().time() < deadline, f"{channel} still subscribed"
        await asyncio.sleep(0.01)


async def test_a_hint_wakes_its_channel_once_subscribed_and_on_every_publish(
    notifier: Notifier, client: aioredis.Redis, topic: str
) -> None:
    wakes: Counter[str] = Counter()
    a, b = f"{topic}:a", f"{topic}:b"
    notifier.subscribe(a, lambda: wakes.update([a]))
    notifier.subscribe(b, lambda: wakes.update([b]))
    # once when the subscription takes effect: hints sent before it were missed
    await eventually(lambda: wakes[a] == 1 and wakes[b] == 1)
    for _ in range(5):
        assert await client.publish(a, b"") == 1
    await client.publish(b, b"")
    await eventually(lambda: wakes[a] == 6 and wakes[b] == 2)

    notifier.unsubscribe(a)
    await unsubscribed(client, a)
    assert await client.publish(b, b"") == 1
    await eventually(lambda: wakes[b] == 3)
    assert wakes[a] == 6


async def test_listen_returns_once_subscribed_and_messages_come_in_order(
    notifier: Notifier, client: aioredis.Redis, topic: str
) -> None:
    got: list[bytes] = []
    await notifier.listen(topic, got.append)
    # published right after listen() returned: the subscription is confirmed by then
    sent = [b"m%d" % i for i in range(2000)]
    async with client.pipeline(transaction=False) as pipe:
        for data in sent:
            pipe.publish(topic, data)
        counts = await pipe.execute()
    assert counts == [1] * len(sent)
    await eventually(lambda: len(got) == len(sent))
    assert got == sent
    notifier.unlisten(topic)
    await unsubscribed(client, topic)


async def test_unsubscribing_and_subscribing_again_in_one_turn_keeps_the_channel(
    notifier: Notifier, client: aioredis.Redis, topic: str
) -> None:
    wakes: list[int] = []
    notifier.subscribe(topic, lambda: wakes.append(1))
    await eventually(lambda: len(wakes) == 1)
    notifier.unsubscribe(topic)
    notifier.subscribe(topic, lambda: wakes.append(2))
    await eventually(lambda: wakes[-1:] == [2])  # the new subscription confirmed
    await asyncio.sleep(0.05)
    assert await subscribers(client, topic) == 1
    assert await client.publish(topic, b"") == 1
    await eventually(lambda: wakes.count(2) == 2)


async def test_a_lost_connection_is_taken_up_again_and_every_channel_woken(
    notifier: Notifier, client: aioredis.Redis, topic: str
) -> None:
    wakes: Counter[str] = Counter()
    channels = [f"{topic}:{i}" for i in range(3)]
    for channel in channels:
        notifier.subscribe(channel, lambda c=channel: wakes.update([c]))  # type: ignore[misc]
    await eventually(lambda: all(wakes[c] == 1 for c in channels))

    killed = await client.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
    assert killed >= 1
    # subscribed again on a new connection: each channel woken once more
    await eventually(lambda: all(wakes[c] == 2 for c in channels))
    for channel in channels:
        assert await client.publish(channel, b"") == 1
    await eventually(lambda: all(wakes[c] == 3 for c in channels))


async def test_close_releases_the_connection(client: aioredis.Redis, topic: str) -> None:
    notifier = Notifier(client)
    await notifier.start()
    await notifier.listen(topic, lambda data: None)
    assert await subscribers(client, topic) == 1
    await asyncio.wait_for(notifier.close(), TIMEOUT)
    await unsubscribed(client, topic)


async def test_own_hints_wake_listeners_from_the_lane_and_are_dropped_on_return(
    client: aioredis.Redis, topic: str
) -> None:
    """A hint this gateway publishes wakes its own listeners as soon as the lane's pipeline
    is answered; when Redis sends it back it is dropped, so each hint wakes once. Another
    gateway's hints (another payload) still wake through pub/sub."""
    lane = Lane(client, hint=b"gateway-a")
    notifier = Notifier(client, own_hint=b"gateway-a")
    lane.on_notified = notifier.wake
    await notifier.start()
    watcher = client.pubsub()
    await watcher.subscribe(topic)
    try:
        wakes: list[int] = []
        notifier.subscribe(topic, lambda: wakes.append(1))
        await eventually(lambda: len(wakes) == 1)  # the subscription took effect

        lane.notify(topic)
        lane.notify(topic)  # one hint per channel and tick
        await lane.drain()
        assert len(wakes) == 2  # woken by the lane, before any pub/sub message came back
        published = []
        deadline = asyncio.get_running_loop().time() + TIMEOUT
        while not published:  # None for the subscription's own confirmation, skipped
            assert asyncio.get_running_loop().time() < deadline, "nothing published"
            message = await watcher.get_message(ignore_subscribe_messages=True, timeout=0.1)
            if message is not None:
                published.append(message["data"])
        assert published == [b"gateway-a"]
        await asyncio.sleep(0.1)  # the hint came back to the notifier too: dropped
        assert len(wakes) == 2

        assert await client.publish(topic, b"gateway-b") == 2
        await eventually(lambda: len(wakes) == 3)
    finally:
        await watcher.aclose()
        await notifier.close()
        await lane.close()
