"""The typed Redis commands of ``core/storage`` (:mod:`.registry`, :mod:`.policy_store`,
:mod:`.topic_store`, :mod:`.fleet_store`), run against fakeredis.

:class:`RedisLane` gives the functions the lane's interface over a fakeredis client speaking
RESP2 with redis-py's reply callbacks removed, so the decoders see raw replies in the shapes
the lane's hiredis reader hands out (flat ``HGETALL`` lists, ``[id, [fields]]`` stream
entries, integers for ``HEXISTS``/``SADD``).

What fakeredis cannot show, and where it is checked instead:

* the pipelining: the real lane sends everything queued in one loop tick as one pipeline;
  here each command runs on its own. That the functions queue at once and await nothing
  (so a gathered batch still shares one tick) is checked below with ``FakeLane``; that a
  tick's commands share one pipeline, by ``test_commands_of_one_tick_share_a_pipeline`` in
  ``tests/integration/storage/test_scripts.py`` on a real Redis;
* a Redis Cluster: whether a multi-key command's keys share a slot (``delete_topic_lists``)
  and the routing of each key to its node, checked by the cluster integration tests;
* the lane's RESP encoding (``pack_commands``), replica acknowledgements and errors of a
  lost connection;
* fakeredis's own fidelity: ``MAXLEN ~`` trimming, ``TIME`` and ``PEXPIRE`` are its
  emulation of Redis, not Redis.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import fakeredis
import pytest
from redis.client import CaseInsensitiveDict

from pulsar_gateway.core.model.topic_name import parse_topic_name
from pulsar_gateway.core.storage import fleet_store, policy_store, registry, topic_store
from pulsar_gateway.core.storage.keys import KeySchema
from tests.unit.fake_lane import FakeLane

KEYS = KeySchema()
TOPIC = parse_topic_name("persistent://public/default/orders")
TOPIC_KEYS = KEYS.topic(TOPIC)


class RedisLane:
    """The lane's ``call`` over fakeredis: one command at a time, raw RESP2 replies."""

    def __init__(self) -> None:
        self.redis = fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer(), protocol=2)
        # raw replies, as the lane's hiredis reader gives them (no redis-py decoding)
        self.redis.response_callbacks = CaseInsensitiveDict({})

    def call(self, *args: Any, decode: Callable[[Any], Any] | None = None) -> asyncio.Future[Any]:
        async def run() -> Any:
            reply = await self.redis.execute_command(*args)
            return reply if decode is None else decode(reply)

        return asyncio.ensure_future(run())


@pytest.fixture
async def lane() -> Any:
    redis_lane = RedisLane()
    yield redis_lane
    await redis_lane.redis.aclose()


# -- registry --------------------------------------------------------------------------


async def test_tenants(lane: RedisLane) -> None:
    assert await registry.tenant_names(lane, KEYS) == []
    assert await registry.add_tenant(lane, KEYS, "acme", '{"adminRoles": []}') is True
    assert await registry.add_tenant(lane, KEYS, "acme", "{}") is False  # the first one won
    assert await registry.tenant_exists(lane, KEYS, "acme") is True
    assert await registry.tenant_exists(lane, KEYS, "other") is False
    assert await registry.tenant_info(lane, KEYS, "acme") == b'{"adminRoles": []}'
    assert await registry.tenant_info(lane, KEYS, "other") is None
    assert await registry.tenant_names(lane, KEYS) == ["acme"]
    await registry.remove_tenant(lane, KEYS, "acme")
    assert await registry.tenant_exists(lane, KEYS, "acme") is False


async def test_namespaces_live_in_their_tenants_set(lane: RedisLane) -> None:
    assert await registry.add_namespace(lane, KEYS, "acme/ns") is True
    assert await registry.add_namespace(lane, KEYS, "acme/ns") is False
    assert await registry.add_namespace(lane, KEYS, "acme/cluster/legacy") is True
    assert await registry.namespace_exists(lane, KEYS, "acme/ns") is True
    assert await registry.namespace_exists(lane, KEYS, "other/ns") is False
    assert sorted(await registry.namespace_names(lane, KEYS, "acme")) == [
        "acme/cluster/legacy",
        "acme/ns",
    ]
    await registry.remove_namespace(lane, KEYS, "acme/ns")
    assert await registry.namespace_names(lane, KEYS, "acme") == ["acme/cluster/legacy"]
    await registry.delete_namespace_list(lane, KEYS, "acme")
    assert await registry.namespace_names(lane, KEYS, "acme") == []


async def test_topic_lists_and_partition_counts(lane: RedisLane) -> None:
    partitioned = parse_topic_name("persistent://public/default/wide")
    await lane.call("SADD", KEYS.namespace_topics("public/default"), str(TOPIC))
    await lane.call("HSET", KEYS.namespace_partitioned("public/default"), str(partitioned), 4)
    assert await registry.topic_listed(lane, KEYS, TOPIC) is True
    assert await registry.topic_listed(lane, KEYS, partitioned) is False
    assert await registry.topic_names(lane, KEYS, "public/default") == [str(TOPIC)]
    assert await registry.partition_count(lane, KEYS, partitioned) == 4
    assert await registry.partition_count(lane, KEYS, TOPIC) == 0
    assert await registry.partitioned_topic_names(lane, KEYS, "public/default") == [
        str(partitioned)
    ]
    await registry.unlist_topic(lane, KEYS, TOPIC)
    assert await registry.topic_listed(lane, KEYS, TOPIC) is False
    await registry.delete_topic_lists(lane, KEYS, "public/default")
    assert await registry.partitioned_topic_names(lane, KEYS, "public/default") == []


# -- policy_store ----------------------------------------------------------------------


async def test_policy_hashes(lane: RedisLane) -> None:
    key = KEYS.namespace_policies("public/default")
    assert await policy_store.stored_value(lane, key, "retention") is None
    assert await policy_store.stored_values(lane, key) == {}
    await policy_store.set_value(lane, key, "retention", '{"sizeInMB": 1}')
    await policy_store.set_value(lane, key, "ttl", "60")
    assert await policy_store.stored_value(lane, key, "retention") == b'{"sizeInMB": 1}'
    assert await policy_store.stored_values(lane, key) == {
        "retention": b'{"sizeInMB": 1}',
        "ttl": b"60",
    }
    await policy_store.delete_value(lane, key, "ttl")
    assert list(await policy_store.stored_values(lane, key)) == ["retention"]
    await policy_store.delete_hash(lane, key)
    assert await policy_store.stored_values(lane, key) == {}


# -- topic_store -----------------------------------------------------------------------


async def test_subscriptions(lane: RedisLane) -> None:
    assert await topic_store.subscription_names(lane, TOPIC_KEYS) == []
    assert await topic_store.subscription_records(lane, TOPIC_KEYS) == []
    await lane.call("HSET", TOPIC_KEYS.subscriptions, "sub", "record")
    assert await topic_store.subscription_names(lane, TOPIC_KEYS) == ["sub"]
    assert await topic_store.subscription_records(lane, TOPIC_KEYS) == [(b"sub", b"record")]
    assert await topic_store.subscription_exists(lane, TOPIC_KEYS, "sub") is True
    assert await topic_store.subscription_exists(lane, TOPIC_KEYS, "gone") is False


async def test_entries_both_ways(lane: RedisLane) -> None:
    stream = TOPIC_KEYS.stream
    for i in range(1, 4):
        await lane.call("XADD", stream, f"1-{i}", "m", f"blob{i}")
    assert await topic_store.entries(lane, stream, "-", "+") == [
        (b"1-1", [b"m", b"blob1"]),
        (b"1-2", [b"m", b"blob2"]),
        (b"1-3", [b"m", b"blob3"]),
    ]
    assert await topic_store.entries(lane, stream, b"(1-1", "+", 1) == [(b"1-2", [b"m", b"blob2"])]
    assert await topic_store.entries(lane, stream, b"1-9", b"1-9") == []
    newest = await topic_store.entries_reversed(lane, stream, "+", "-", 2)
    assert [entry_id for entry_id, _ in newest] == [b"1-3", b"1-2"]


async def test_acknowledge_and_ack_sets(lane: RedisLane) -> None:
    keys = TOPIC_KEYS.subscription("sub")
    await lane.call("XADD", keys.stream, "1-1", "m", "a")
    await lane.call("XGROUP", "CREATE", keys.stream, "sub", "0")
    await lane.call("XREADGROUP", "GROUP", "sub", "c", "STREAMS", keys.stream, ">")
    await lane.call("HSET", keys.ack_sets, "1-1", "set")
    await topic_store.drop_ack_sets(lane, keys, [b"1-1"])
    assert await lane.call("HLEN", keys.ack_sets) == 0
    assert await topic_store.acknowledge(lane, keys, "sub", [b"1-1", b"1-7"]) == 1
    assert await topic_store.acknowledge(lane, keys, "sub", [b"1-1"]) == 0


async def test_compaction_state_and_view(lane: RedisLane) -> None:
    assert await topic_store.compaction_state(lane, TOPIC_KEYS) == {}
    assert await topic_store.compaction_horizon(lane, TOPIC_KEYS) is None
    await lane.call("HSET", TOPIC_KEYS.compaction, "status", "SUCCESS", "horizon", "1-5")
    assert await topic_store.compaction_state(lane, TOPIC_KEYS) == {
        b"status": b"SUCCESS",
        b"horizon": b"1-5",
    }
    assert await topic_store.compaction_horizon(lane, TOPIC_KEYS) == b"1-5"
    await topic_store.append_compacted(lane, TOPIC_KEYS, b"1-4", [b"m", b"blob", b"n", 3])
    assert await topic_store.entries(lane, TOPIC_KEYS.compacting, "-", "+") == [
        (b"1-4", [b"m", b"blob", b"n", b"3"])
    ]


async def test_schema_list(lane: RedisLane) -> None:
    assert await topic_store.schemas(lane, TOPIC_KEYS) == []
    assert await topic_store.schema_count(lane, TOPIC_KEYS) == 0
    assert await topic_store.append_schema(lane, TOPIC_KEYS, '{"v": 0}') == 1
    assert await topic_store.append_schema(lane, TOPIC_KEYS, '{"v": 1}') == 2
    assert await topic_store.schemas(lane, TOPIC_KEYS) == [b'{"v": 0}', b'{"v": 1}']
    assert await topic_store.schema_count(lane, TOPIC_KEYS) == 2
    await topic_store.delete_schemas(lane, TOPIC_KEYS)
    assert await topic_store.schema_count(lane, TOPIC_KEYS) == 0


# -- fleet_store -----------------------------------------------------------------------


async def test_gateway_descriptions(lane: RedisLane) -> None:
    info = KEYS.gateway_info
    assert await fleet_store.gateway_descriptions(lane, info) == {}
    await fleet_store.describe_gateway(lane, info, "gw-1", '{"started": 1}')
    await fleet_store.describe_gateway(lane, info, "gw-2", '{"started": 2}')
    assert await fleet_store.gateway_descriptions(lane, info) == {
        "gw-1": '{"started": 1}',
        "gw-2": '{"started": 2}',
    }
    await fleet_store.forget_gateways(lane, info, ["gw-1", "gw-3"])
    assert list(await fleet_store.gateway_descriptions(lane, info)) == ["gw-2"]


async def test_rate_reports(lane: RedisLane) -> None:
    await fleet_store.write_rate_report(lane, TOPIC_KEYS, "gw-1", '{"t": 1}')
    await fleet_store.expire_rate_report(lane, TOPIC_KEYS, 60_000)
    assert 0 < await lane.call("PTTL", TOPIC_KEYS.gateway_stats) <= 60_000
    await fleet_store.withdraw_rate_report(lane, TOPIC_KEYS, "gw-1")
    assert await lane.call("EXISTS", TOPIC_KEYS.gateway_stats) == 0


async def test_unload_announcements(lane: RedisLane) -> None:
    assert await fleet_store.newest_unload(lane, KEYS) is None
    first = await fleet_store.announce_unload(lane, KEYS, scope="public/default", kind="u", kept=10)
    second = await fleet_store.announce_unload(lane, KEYS, scope=str(TOPIC), kind="t", kept=10)
    assert await fleet_store.newest_unload(lane, KEYS) == second
    after = await fleet_store.unloads_after(lane, KEYS, first)
    assert after == [(second, [b"scope", str(TOPIC).encode(), b"kind", b"t"])]
    assert len(await fleet_store.unloads_after(lane, KEYS, b"0-0")) == 2


async def test_clock(lane: RedisLane) -> None:
    seconds, _ = await lane.call("TIME")
    now = await fleet_store.clock_ms(lane)
    assert int(seconds) * 1000 <= now < (int(seconds) + 2) * 1000


# -- pipelining ------------------------------------------------------------------------


async def test_functions_queue_at_once_and_await_nothing() -> None:
    # A gathered batch shares the lane's tick only if each function queues its command
    # when called and hands back the lane's own future (no coroutine, no task).
    lane = FakeLane()
    lane.on_command("SISMEMBER", lambda args: 1)
    lane.on_command("HKEYS", lambda args: [b"a", b"b"])
    lane.on_command("HGET", lambda args: b"3")
    queued = [
        registry.namespace_exists(lane, KEYS, "public/default"),
        topic_store.subscription_names(lane, TOPIC_KEYS),
        registry.partition_count(lane, KEYS, TOPIC),
    ]
    assert all(isinstance(fut, asyncio.Future) for fut in queued)
    assert [call.name for call in lane.calls] == ["SISMEMBER", "HKEYS", "HGET"]
    assert await asyncio.gather(*queued) == [True, ["a", "b"], 3]
