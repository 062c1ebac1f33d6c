"""What a backlog quota enforces, as data: which quota applies, when a backlog is over it,
what a producer is told and what eviction is asked to do; and one round of the monitor on
an in-memory lane (no Redis)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp import web

from pulsar_gateway.adapters.pulsar_binary.errors import server_error
from pulsar_gateway.adapters.resource import http_error, websocket_status
from pulsar_gateway.core import (
    ProducerBlockedQuotaExceededError,
    ProducerBlockedQuotaExceededException,
    StorageError,
)
from pulsar_gateway.core.policies.backlog_quota import (
    Eviction,
    Quota,
    enforced_quota,
    first_exceeded,
    parse_backlog_quota,
    resolve_quotas,
)
from pulsar_gateway.core.policies.backlog_quota_monitor import BacklogQuotaMonitor, CheckRound
from pulsar_gateway.core.policies.policies import Policies
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.core.storage.scripts.topics import BacklogUsage, EvictionMode
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.unit.fake_lane import FakeLane

SIZE, AGE = "destination_storage", "message_age"
HOLD, EXCEPTION, EVICT = "producer_request_hold", "producer_exception", "consumer_backlog_eviction"


def stored(size: int = -1, time: int = -1, policy: str = HOLD) -> dict[str, Any]:
    """A quota as the admin API stores it."""
    return parse_backlog_quota({"limitSize": size, "limitTime": time, "policy": policy})


@pytest.mark.parametrize(
    ("quota_type", "value", "expected"),
    [
        (SIZE, stored(size=1024), Quota(SIZE, 1024, HOLD)),
        (SIZE, stored(size=0, policy=EVICT), Quota(SIZE, 0, EVICT)),  # 0 bytes is a limit
        (SIZE, stored(size=-1, time=60), None),  # a size quota's limit is its size
        (AGE, stored(time=60, policy=EXCEPTION), Quota(AGE, 60, EXCEPTION)),
        (AGE, stored(size=1024, time=0), None),  # limitTime <= 0: no age check (Pulsar)
        (AGE, stored(time=-1), None),
        (SIZE, None, None),
        (SIZE, {"limitSize": "big", "policy": HOLD}, None),
        (SIZE, {"limitSize": 5, "policy": "drop_everything"}, None),
        (SIZE, {"limitSize": True, "policy": HOLD}, None),
    ],
)
def test_enforced_quota(quota_type: str, value: Any, expected: Quota | None) -> None:
    assert enforced_quota(quota_type, value) == expected


def test_quotas_resolve_per_type_topic_first() -> None:
    namespace = {SIZE: stored(size=100), AGE: stored(time=60, policy=EVICT)}
    assert resolve_quotas(None, namespace) == [Quota(SIZE, 100, HOLD), Quota(AGE, 60, EVICT)]
    # the topic's size quota replaces its namespace's; the namespace's age quota stays
    topic = {SIZE: stored(size=5, policy=EXCEPTION)}
    assert resolve_quotas(topic, namespace) == [Quota(SIZE, 5, EXCEPTION), Quota(AGE, 60, EVICT)]
    # a topic quota without a limit still replaces its namespace's of that type
    assert resolve_quotas({AGE: stored(time=-1)}, namespace) == [Quota(SIZE, 100, HOLD)]
    assert resolve_quotas({}, {}) == []
    assert resolve_quotas("junk", [1]) == []


@pytest.mark.parametrize(
    ("quota", "usage", "over"),
    [
        (Quota(SIZE, 1000, HOLD), BacklogUsage(1000, 5_000_000), False),  # at the limit
        (Quota(SIZE, 1000, HOLD), BacklogUsage(1001, -1), True),
        (Quota(SIZE, 0, HOLD), BacklogUsage(0, -1), False),  # nothing unacknowledged
        (Quota(AGE, 2, HOLD), BacklogUsage(10**9, 2000), False),  # exactly 2 s old
        (Quota(AGE, 2, HOLD), BacklogUsage(0, 2001), True),
        (Quota(AGE, 2, HOLD), BacklogUsage(10**9, -1), False),
    ],
)
def test_exceeded_by(quota: Quota, usage: BacklogUsage, over: bool) -> None:
    assert quota.exceeded_by(usage) is over


def test_size_is_checked_before_age() -> None:
    size, age = Quota(SIZE, 1000, EVICT), Quota(AGE, 1, HOLD)
    assert first_exceeded([size, age], BacklogUsage(2000, 5000)) is size
    assert first_exceeded([size, age], BacklogUsage(10, 5000)) is age
    assert first_exceeded([size, age], BacklogUsage(10, 10)) is None
    assert first_exceeded([], BacklogUsage(2000, 5000)) is None


def test_refusals_and_evictions() -> None:
    hold, exception = Quota(SIZE, 10, HOLD).refusal(), Quota(AGE, 10, EXCEPTION).refusal()
    assert isinstance(hold, ProducerBlockedQuotaExceededError)
    assert isinstance(exception, ProducerBlockedQuotaExceededException)
    assert str(hold) == "Cannot create producer on topic with backlog quota exceeded"
    assert hold.retriable and not exception.retriable
    assert Quota(SIZE, 10, HOLD).blocks_producers
    assert not Quota(SIZE, 10, EVICT).blocks_producers
    # by size down to 90% of the limit (dropBacklogForSizeLimit), by age what is older
    assert Quota(SIZE, 10_000, EVICT).eviction() == Eviction(EvictionMode.SIZE, 10_000, 9_000)
    assert Quota(AGE, 30, EVICT).eviction() == Eviction(EvictionMode.AGE, 30_000, 30_000)


def test_each_policy_has_its_own_answer() -> None:
    """The binary protocol's ServerError per policy (ServerCnx.handleProducer), and 503 on
    HTTP for both (AbstractWebSocketHandler.getErrorCode: SC_SERVICE_UNAVAILABLE)."""
    hold, exception = Quota(SIZE, 10, HOLD).refusal(), Quota(SIZE, 10, EXCEPTION).refusal()
    assert server_error(hold)[0] == pb.ProducerBlockedQuotaExceededError
    assert server_error(exception)[0] == pb.ProducerBlockedQuotaExceededException
    for refusal in (hold, exception):
        assert isinstance(http_error(refusal), web.HTTPServiceUnavailable)
        assert websocket_status(refusal) is web.HTTPServiceUnavailable


# -- the monitor's round, on an in-memory lane ---------------------------------------------

SCHEMA = KeySchema()
HELD = "persistent://public/default/held"
EVICTED = "persistent://public/default/evicted"
FREE = "persistent://public/default/free"
UNDER = "persistent://public/default/under"


async def test_a_round_applies_each_topic_s_policy() -> None:
    policies = {
        SCHEMA.topic_policies(HELD): {SIZE: stored(size=10_000, policy=EXCEPTION)},
        SCHEMA.topic_policies(EVICTED): {AGE: stored(time=30, policy=EVICT)},
        SCHEMA.topic_policies(UNDER): {SIZE: stored(size=50_000, policy=HOLD)},
    }
    lane = FakeLane()

    def hget(args: list[Any]) -> bytes | None:
        value = policies.get(args[0], {}) if args[1] == "backlogQuota" else {}
        return json.dumps(value).encode() if value else None

    lane.on_command("HGET", hget)
    lane.on_command("HKEYS", lambda args: [b"a", b"b"])
    lane.on_script("backlog_usage", lambda keys, args: [20_000, 45_000])
    lane.on_script("backlog_evict", lambda keys, args: [1, 2])
    disconnected: list[str] = []

    async def disconnect(topic: str) -> int:
        disconnected.append(topic)
        return 3

    served = [HELD, EVICTED, FREE, UNDER, HELD, "non-persistent://public/default/np"]
    monitor = BacklogQuotaMonitor(
        lane,  # type: ignore[arg-type]
        SCHEMA,
        Policies(lane, None, SCHEMA),  # type: ignore[arg-type]
        topics=lambda: served,
        disconnect_producers=disconnect,
        interval=60.0,
    )
    result = await monitor.run_once()
    assert result == CheckRound(topics=4, exceeded=2, disconnected=3, evicted=1)
    assert disconnected == [HELD]
    # no quota, no script; each topic with one is measured once
    measured = [call.keys[0] for call in lane.named("backlog_usage")]
    assert sorted(measured) == sorted(SCHEMA.topic(t).stream for t in (HELD, EVICTED, UNDER))
    (eviction,) = lane.named("backlog_evict")
    keys = SCHEMA.topic(EVICTED)
    assert eviction.args == ("age", 30_000, 30_000, "a", "b")
    assert eviction.keys == (
        keys.stream,
        keys.delayed("a"),
        keys.ack_sets("a"),
        keys.delayed("b"),
        keys.ack_sets("b"),
    )
    # another gateway evicted first: nothing counted
    lane.on_script("backlog_evict", lambda keys, args: [0, 0])
    assert await monitor.run_once() == CheckRound(topics=4, exceeded=2, disconnected=3)
    # Redis unavailable: that topic is tried again next round, the others are done
    lane.fail_next("HKEYS", StorageError("connection lost"))
    again = await monitor.run_once()
    assert again == CheckRound(topics=4, exceeded=2, disconnected=3, errors=1)
