"""consumer_backlog_eviction, and the backlog measures every quota uses, on a real Redis.

The scripts first (``backlog_usage.lua``, ``backlog_evict.lua``, the shared skip of
``lib.lua``), on streams written entry by entry in the ledger id format, so each count and
time is known; then eviction by size and by age with the official client, on two gateways
checking the same topic at once. The age test steps both gateways' checks itself, between
two readings of the Redis clock, so what must have been evicted and what must have stayed
is exact whatever the machine's load.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any

import pytest

from pulsar_gateway.core.model.entry import BLOB, BROKER_TIME
from pulsar_gateway.core.model.topic_name import parse_topic_name
from pulsar_gateway.core.policies.backlog_quota_monitor import CheckRound
from pulsar_gateway.core.storage.keys import KeySchema, TopicKeys
from pulsar_gateway.core.storage.scripts import cursors, topics
from pulsar_gateway.core.storage.scripts.topics import BacklogUsage, EvictionMode
from tests.adminhttp import admin
from tests.conftest import TIMEOUT, GatewayThread, broker_time, wait_for

# The cluster pass of ./dev test runs this file on a Redis Cluster too: backlog quotas:
# refusals by policy and type, connected producers disconnected, eviction by size and by age
# on two gateways (backlog_usage.lua, backlog_evict.lua)
pytestmark = pytest.mark.cluster

RECEIVE_MS = int(TIMEOUT * 1000)
EVICT = "consumer_backlog_eviction"


def topic_keys(topic: str) -> TopicKeys:
    return KeySchema().topic(parse_topic_name(topic))


def on_lane(gw: GatewayThread, call: Callable[[Any], Any]) -> Any:
    """Run a typed script call on the gateway's own lane (its cluster lane on a cluster)."""

    async def run() -> Any:
        return await call(gw.gateway.core.lane)

    return gw.call(run())


def usage(gw: GatewayThread, topic: str) -> BacklogUsage:
    return on_lane(gw, lambda lane: topics.backlog_usage(lane, topic_keys(topic)))


def redis_ms(redis: Any) -> int:
    seconds, micros = redis.time()
    return int(seconds) * 1000 + int(micros) // 1000


def write_ledgers(redis: Any, stream: str, ledgers: list[int], entries: int) -> list[str]:
    """``entries`` entries in each ledger, ids ``<ledger>-<n>``, stored at ledger + n ms."""
    ids = []
    for ledger in ledgers:
        for n in range(entries):
            redis.xadd(stream, {BLOB: b"x" * 200, BROKER_TIME: ledger + n}, id=f"{ledger}-{n}")
            ids.append(f"{ledger}-{n}")
    return ids


def groups(redis: Any, stream: str) -> dict[str, tuple[str, int]]:
    """Each group's cursor and pending count."""
    return {
        g["name"].decode(): (g["last-delivered-id"].decode(), int(g["pending"]))
        for g in redis.xinfo_groups(stream)
    }


def evict(gw: GatewayThread, topic: str, mode: EvictionMode, limit: int, target: int) -> Any:
    names = ["a", "b", "c"]
    return on_lane(
        gw,
        lambda lane: topics.backlog_evict(
            lane, topic_keys(topic), mode=mode, limit=limit, target=target, subscriptions=names
        ),
    )


# -- the scripts ---------------------------------------------------------------------------


def test_usage_counts_backlogs_ledger_by_ledger(gateway, redis_clean, topic):
    keys = topic_keys(topic)
    assert usage(gateway, topic) == BacklogUsage(0, -1)  # no stream
    now = redis_ms(redis_clean)
    first, second, third = now - 9000, now - 6000, now - 3000
    write_ledgers(redis_clean, keys.stream, [first, second, third], 10)
    assert usage(gateway, topic) == BacklogUsage(0, -1)  # no subscription: no backlog
    # "b" was moved by XGROUP SETID (Redis no longer knows its lag): counted by ledgers
    redis_clean.xgroup_create(keys.stream, "b", f"{second}-4")
    redis_clean.xreadgroup("b", "reader", {keys.stream: ">"}, count=3)  # 3 pending
    got = usage(gateway, topic)
    # pending 3 + 12 after the cursor, of 30 entries (the script's arithmetic, in doubles)
    assert got.size == math.floor(redis_clean.memory_usage(keys.stream) / 30 * 15)
    assert 6000 - 5 <= got.age_ms < 6000 + TIMEOUT * 1000  # the oldest, second-5
    redis_clean.xgroup_create(keys.stream, "a", "0")  # everything: the slowest, the oldest
    got = usage(gateway, topic)
    assert got.size == math.floor(redis_clean.memory_usage(keys.stream) / 30 * 30)
    assert 9000 <= got.age_ms < 9000 + TIMEOUT * 1000


def test_admin_skip_moves_across_ledgers(gateway, redis_clean, topic):
    keys = topic_keys(topic)
    ledgers = [1_000_000, 2_000_000, 3_000_000]
    write_ledgers(redis_clean, keys.stream, ledgers, 10)
    redis_clean.xgroup_create(keys.stream, "a", "0")
    redis_clean.xreadgroup("a", "reader", {keys.stream: ">"}, count=2)

    def skip(entries: int | None) -> Any:
        sub = keys.subscription("a")
        return on_lane(
            gateway,
            lambda lane: cursors.subscription_skip(lane, sub, subscription="a", entries=entries),
        )

    assert skip(3) == 3  # the two pending, then one after the cursor
    assert groups(redis_clean, keys.stream)["a"] == ("1000000-2", 0)
    assert skip(20) == 20
    assert groups(redis_clean, keys.stream)["a"] == ("3000000-2", 0)
    assert skip(100) == 7  # the rest
    assert groups(redis_clean, keys.stream)["a"] == ("3000000-9", 0)
    assert skip(1) == 0


def test_size_eviction_cuts_each_subscription_over_the_target_once(gateway, redis_clean, topic):
    keys = topic_keys(topic)
    write_ledgers(redis_clean, keys.stream, [1_000_000, 2_000_000, 3_000_000], 10)
    redis_clean.xgroup_create(keys.stream, "a", "0")  # 30 unacknowledged
    redis_clean.xgroup_create(keys.stream, "b", "2000000-4")  # 15
    redis_clean.xgroup_create(keys.stream, "c", "3000000-7")  # 2
    redis_clean.xreadgroup("b", "reader", {keys.stream: ">"}, count=4)  # 4 of them pending
    per_entry = redis_clean.memory_usage(keys.stream) / 30
    # (targets halfway between entry counts, so no rounding decides the expected counts)
    limit, target = int(per_entry * 20), int(per_entry * 12.5)
    assert evict(gateway, topic, EvictionMode.SIZE, int(per_entry * 30), target) is None
    assert groups(redis_clean, keys.stream)["a"] == ("0-0", 0)  # not over: nothing done
    assert evict(gateway, topic, EvictionMode.SIZE, limit, target) == 2
    # Pulsar's count, int((backlog - target) / backlog * entries): 17 of "a"'s 30 ...
    state = groups(redis_clean, keys.stream)
    assert state["a"] == ("2000000-6", 0)
    # ... and 2 of "b"'s 15, its oldest pending ones first; "c" is under the target
    assert state["b"] == ("2000000-8", 2)
    assert redis_clean.xpending(keys.stream, "b")["min"].decode() == "2000000-7"
    assert state["c"] == ("3000000-7", 0)
    # at most once: the backlog is under the limit now, another gateway's call is a no-op
    assert evict(gateway, topic, EvictionMode.SIZE, limit, target) is None
    assert groups(redis_clean, keys.stream) == state


def test_age_eviction_drops_what_is_older_than_the_target(gateway, redis_clean, topic):
    keys = topic_keys(topic)
    now = redis_ms(redis_clean)
    old, middle, young = now - 9000, now - 6000, now - 1000
    write_ledgers(redis_clean, keys.stream, [old, middle, young], 10)
    redis_clean.xgroup_create(keys.stream, "a", "0")
    redis_clean.xgroup_create(keys.stream, "b", "0")
    redis_clean.xreadgroup("b", "reader", {keys.stream: ">"}, count=12)
    redis_clean.xgroup_create(keys.stream, "c", f"{young}-0")  # nothing older than 1 s
    # not over the limit (oldest 9 s): nothing done
    assert evict(gateway, topic, EvictionMode.AGE, 20_000, 3000) is None
    assert evict(gateway, topic, EvictionMode.AGE, 8000, 3000) == 2
    state = groups(redis_clean, keys.stream)
    assert state["a"] == (f"{middle}-9", 0)
    assert state["b"] == (f"{middle}-9", 0)
    assert state["c"] == (f"{young}-0", 0)
    assert evict(gateway, topic, EvictionMode.AGE, 8000, 3000) is None


# -- with the official client, two gateways at once ----------------------------------------


def set_quota(gw: GatewayThread, topic: str, quota_type: str, quota: dict[str, Any]) -> None:
    path = f"persistent/public/default/{topic}/backlogQuota?backlogQuotaType={quota_type}"
    assert admin("POST", f"{gw.http_url}/admin/v2/{path}", quota) == (204, None)


def backlog(gw: GatewayThread, topic: str, subscription: str) -> int:
    status, stats = admin("GET", f"{gw.http_url}/admin/v2/persistent/public/default/{topic}/stats")
    assert status == 200
    return int(stats["subscriptions"][subscription]["msgBacklog"])


def remaining(client: Any, topic: str, subscription: str, count: int) -> list[bytes]:
    """What the subscription still delivers: its ``count`` backlog messages."""
    consumer = client.subscribe(topic, subscription)
    out = []
    for _ in range(count):
        msg = consumer.receive(timeout_millis=RECEIVE_MS)
        consumer.acknowledge(msg)
        out.append(msg.data())
    consumer.close()
    return out


def both_at_once(gws: list[GatewayThread]) -> list[CheckRound]:
    """One backlog quota check on each gateway, concurrently (each on its own loop)."""
    futures = [
        asyncio.run_coroutine_threadsafe(gw.gateway.core.backlog_quota_monitor.run_once(), gw.loop)
        for gw in gws
    ]
    return [future.result(TIMEOUT) for future in futures]


def test_eviction_by_size_on_two_gateways(gateway_factory, client_factory, topic):
    gws = [gateway_factory(backlog_quota_check_interval_seconds=0.2) for _ in range(2)]
    clients = [client_factory(gw.url) for gw in gws]
    for name in ("a", "b"):  # durable subscriptions without consumers: nothing prefetched
        clients[0].subscribe(topic, name).close()
    # a producer on each gateway: both check the topic
    producers = [c.create_producer(topic, batching_enabled=False) for c in clients]
    sent = [f"{i:03d}".encode() + b"x" * 1000 for i in range(60)]
    for i, payload in enumerate(sent):
        producers[i % 2].send(payload)
    limit = usage(gws[0], topic).size // 2
    set_quota(gws[0], topic, "destination_storage", {"limitSize": limit, "policy": EVICT})
    wait_for(lambda: usage(gws[1], topic).size <= limit)
    # evicted down to about 90% of the limit, once (a second eviction would leave ~81%)
    assert usage(gws[0], topic).size > 0.85 * limit
    for gw in gws:  # no more checks: reading the rest below must not be raced
        gw.call(gw.gateway.core.backlog_quota_monitor.stop())
    for payload in (b"after-0", b"after-1"):  # producers were never blocked
        producers[0].send(payload)
    clients[1].create_producer(topic).close()
    for name in ("a", "b"):
        left = remaining(clients[1], topic, name, backlog(gws[1], topic, name))
        assert left[-2:] == [b"after-0", b"after-1"]
        kept = left[:-2]
        assert 0 < len(kept) < 30 and kept == sent[-len(kept) :]  # the oldest went


def test_eviction_by_age_on_two_gateways(gateway_factory, client_factory, redis_clean, topic):
    gws = [gateway_factory(backlog_quota_check_enabled=False) for _ in range(2)]
    clients = [client_factory(gw.url) for gw in gws]
    for name in ("a", "b"):
        clients[0].subscribe(topic, name).close()
    producers = [c.create_producer(topic, batching_enabled=False) for c in clients]
    sent = {}
    for i in range(10):
        sent[f"old-{i}".encode()] = producers[i % 2].send(f"old-{i}".encode())
    set_quota(gws[1], topic, "message_age", {"limitTime": 1, "policy": EVICT})
    wait_for(lambda: usage(gws[0], topic).age_ms > 1000)
    for i in range(10):
        sent[f"young-{i}".encode()] = producers[i % 2].send(f"young-{i}".encode())
    before = redis_ms(redis_clean)
    rounds = both_at_once(gws)
    after = redis_ms(redis_clean)
    assert sum(r.evicted for r in rounds) == 1  # one gateway evicted, the other found none
    assert all(r.errors == 0 for r in rounds)
    stored_at = {payload: broker_time(redis_clean, topic, mid) for payload, mid in sent.items()}
    # older than the limit at the earliest moment of the check: gone; younger than it at the
    # latest: kept (no message newer than the limit is lost)
    must_go = {p for p, at in stored_at.items() if at < before - 1000}
    must_stay = {p for p, at in stored_at.items() if at >= after - 1000}
    assert b"old-0" in must_go
    for name in ("a", "b"):
        left = remaining(clients[0], topic, name, backlog(gws[0], topic, name))
        assert not must_go & set(left)
        assert must_stay <= set(left)
        assert left == sorted(left, key=lambda p: stored_at[p])  # in order, a suffix
