"""A subscription's scheduled (delayed) messages over the admin REST API, with aiohttp:
list, cancel, reschedule (beyond Pulsar, whose delayed-delivery trackers cannot show or
change what they hold; see ``pulsar_gateway/adapters/http/topics/scheduled.py`` for the
paths and JSON).

Messages come from the official client's ``deliver_at`` / ``deliver_after``
(MessageMetadata.deliver_at_time); subscriptions are Shared, where delayed messages are
held until due. Times are generous: a message meant to stay held asks for minutes, one
meant to arrive is due within a couple of seconds.
"""

from __future__ import annotations

import time
from typing import Any

import pulsar
import pytest
import redis

from pulsar_gateway.core.model.topic_name import parse_topic_name
from pulsar_gateway.core.storage.keys import KeySchema
from tests.adminhttp import admin
from tests.conftest import TIMEOUT, GatewayThread, stream_key
from tests.helpers import assert_nothing_more

RECEIVE_MS = int(TIMEOUT * 1000)
#: A delivery time no test waits for.
FAR_MS = 120_000
#: How far ahead a message meant to arrive during the test is due: long enough for the admin
#: call that precedes its delivery on a slow shared machine.
SOON_MS = 2000
#: Client and Redis share this host's clock, read at millisecond granularity.
CLOCK_SLACK_MS = 20


# -- helpers ------------------------------------------------------------------------------


def scheduled_url(gw: GatewayThread, topic: str, sub: str) -> str:
    return f"{gw.http_url}/admin/v2/persistent/public/default/{topic}/subscription/{sub}/scheduled"


def listing(gw: GatewayThread, topic: str, sub: str, query: str = "") -> dict[str, Any]:
    status, body = admin("GET", scheduled_url(gw, topic, sub) + query)
    assert status == 200, body
    assert isinstance(body, dict)
    return body


def mid_path(mid: Any) -> str:
    return f"{mid.ledger_id()}:{mid.entry_id()}"


def cancel(gw: GatewayThread, topic: str, sub: str, mid: Any) -> tuple[int, Any]:
    return admin("DELETE", f"{scheduled_url(gw, topic, sub)}/{mid_path(mid)}")


def reschedule(gw: GatewayThread, topic: str, sub: str, mid: Any, body: Any) -> tuple[int, Any]:
    return admin("POST", f"{scheduled_url(gw, topic, sub)}/{mid_path(mid)}", body)


def now_ms() -> int:
    return int(time.time() * 1000)


def shared(client: Any, topic: str, sub: str) -> Any:
    return client.subscribe(topic, sub, consumer_type=pulsar.ConsumerType.Shared)


def create_subscription(client: Any, topic: str, sub: str) -> None:
    """A durable Shared subscription with no consumer connected."""
    shared(client, topic, sub).close()


def receive(consumer: Any) -> tuple[Any, int]:
    """The next message (acknowledged) and the wall-clock ms at which it arrived."""
    msg = consumer.receive(timeout_millis=RECEIVE_MS)
    consumer.acknowledge(msg)
    return msg, now_ms()


def stored_sizes(r: redis.Redis, topic: str) -> dict[str, int]:
    """Stream id -> size of the stored blob (field ``m``) of every entry of ``topic``."""
    return {sid.decode(): len(fields[b"m"]) for sid, fields in r.xrange(stream_key(topic))}


def pending_count(r: redis.Redis, topic: str, sub: str) -> int:
    return int(r.xpending(stream_key(topic), sub)["pending"])


def delayed_key(topic: str, sub: str) -> str:
    return KeySchema().topic(parse_topic_name(topic)).delayed(sub)


# -- listing --------------------------------------------------------------------------------


def test_list_without_consumer_in_deliver_at_order(gateway, client, topic, redis_clean):
    create_subscription(client, topic, "s")
    producer = client.create_producer(topic)
    base = now_ms() + FAR_MS
    # Sent out of deliver-at order, with and without a partition key, of different sizes.
    sends = [
        (b"x" * 10, "k-40", base + 40_000),
        (b"x" * 200, "k-10", base + 10_000),
        (b"x" * 30, None, base + 30_000),
        (b"x" * 5, "k-20", base + 20_000),
    ]
    sent = []
    for payload, key, at in sends:
        kwargs = {} if key is None else {"partition_key": key, "properties": {"key": key}}
        sent.append((producer.send(payload, deliver_at=at, **kwargs), key, at))
    sizes = stored_sizes(redis_clean, topic)

    page = listing(gateway, topic, "s")
    assert page["total"] == 4
    assert page["offset"] == 0
    expected = [
        {
            "messageId": mid_path(mid),
            "ledgerId": mid.ledger_id(),
            "entryId": mid.entry_id(),
            "partition": mid.partition(),
            "deliverAt": at,
            "key": key,
            "properties": {} if key is None else {"key": key},
            "size": sizes[f"{mid.ledger_id()}-{mid.entry_id()}"],
        }
        for mid, key, at in sorted(sent, key=lambda s: s[2])
    ]
    assert page["messages"] == expected
    # Indexed at the subscription's cursor although no consumer is connected.
    assert redis_clean.zcard(delayed_key(topic, "s")) == 4

    # Paging: offset and limit over the same order; total is the whole count.
    assert listing(gateway, topic, "s", "?offset=1&limit=2") == {
        "total": 4,
        "inWindow": 4,
        "offset": 1,
        "messages": expected[1:3],
    }
    assert listing(gateway, topic, "s", "?offset=3&limit=10")["messages"] == expected[3:]
    assert listing(gateway, topic, "s", "?limit=1")["messages"] == expected[:1]
    assert listing(gateway, topic, "s", "?offset=4") == {
        "total": 4,
        "inWindow": 4,
        "offset": 4,
        "messages": [],
    }
    assert listing(gateway, topic, "s", "?offset=0&limit=1000")["messages"] == expected


def test_a_delivery_time_beyond_any_calendar_is_listed(gateway, client, topic):
    """A producer may ask for deliver_at 2**63 - 1: Redis then writes the index's score in
    exponent form, which answered 500 (the fuzzer's admin reads found it)."""
    create_subscription(client, topic, "s")
    mid = client.create_producer(topic).send(b"never", deliver_at=2**63 - 1)
    [entry] = listing(gateway, topic, "s")["messages"]
    assert entry["messageId"] == mid_path(mid)
    assert entry["deliverAt"] == int(float(2**63 - 1))  # the double Redis keeps


def test_listing_is_per_subscription_and_empties_as_messages_are_delivered(gateway, client, topic):
    create_subscription(client, topic, "idle")
    consumer = shared(client, topic, "live")
    producer = client.create_producer(topic)
    due = now_ms() + SOON_MS
    mid = producer.send(b"soon", deliver_at=due)
    assert [m["messageId"] for m in listing(gateway, topic, "idle")["messages"]] == [mid_path(mid)]
    msg, received_at = receive(consumer)
    assert msg.data() == b"soon"
    assert received_at >= due - CLOCK_SLACK_MS
    # Delivered (and acknowledged) on "live": no longer scheduled there; still due on "idle"
    # until a consumer reads it, since the idle subscription's cursor has not moved.
    assert listing(gateway, topic, "live") == {
        "total": 0,
        "inWindow": 0,
        "offset": 0,
        "messages": [],
    }
    assert listing(gateway, topic, "idle")["total"] == 1


def test_list_unknown_subscription_and_bad_paging(gateway, client, topic):
    status, body = admin("GET", scheduled_url(gateway, topic, "missing"))
    assert status == 404
    assert body["reason"]
    create_subscription(client, topic, "s")
    assert listing(gateway, topic, "s") == {
        "total": 0,
        "inWindow": 0,
        "offset": 0,
        "messages": [],
    }
    for query in ("?limit=0", "?limit=1001", "?limit=-3", "?limit=ten", "?offset=-1", "?offset=x"):
        status, body = admin("GET", scheduled_url(gateway, topic, "s") + query)
        assert status == 400, query
        assert body["reason"], query
    # The gateway keeps serving.
    assert listing(gateway, topic, "s", "?limit=1000")["total"] == 0


# -- windows and histograms -------------------------------------------------------------------


def histogram(gw: GatewayThread, topic: str, sub: str, query: str = "") -> tuple[int, Any]:
    return admin("GET", f"{scheduled_url(gw, topic, sub)}/histogram{query}")


def schedule_at(client: Any, topic: str, offsets: list[int]) -> tuple[int, list[Any]]:
    """A Shared subscription "s" and one message due at ``base + offset`` for each offset
    (``base`` minutes ahead); returns ``base`` and the message ids."""
    create_subscription(client, topic, "s")
    producer = client.create_producer(topic)
    base = now_ms() + FAR_MS
    return base, [producer.send(b"x", deliver_at=base + offset) for offset in offsets]


def test_list_a_window_of_deliver_at_times(gateway, client, topic):
    base, mids = schedule_at(client, topic, [0, 1000, 2000, 3000, 4000])
    page = listing(gateway, topic, "s", f"?from={base + 1000}&to={base + 3000}")
    # inclusive from, exclusive to
    assert [m["messageId"] for m in page["messages"]] == [mid_path(m) for m in mids[1:3]]
    assert (page["total"], page["inWindow"], page["offset"]) == (5, 2, 0)
    # paging within the window
    page = listing(gateway, topic, "s", f"?from={base + 1000}&limit=2&offset=1")
    assert [m["messageId"] for m in page["messages"]] == [mid_path(m) for m in mids[2:4]]
    assert (page["total"], page["inWindow"]) == (5, 4)
    page = listing(gateway, topic, "s", f"?to={base + 1}")
    assert [m["messageId"] for m in page["messages"]] == [mid_path(mids[0])]
    assert page["inWindow"] == 1
    # an empty window (from == to) is no error
    page = listing(gateway, topic, "s", f"?from={base}&to={base}")
    assert (page["total"], page["inWindow"], page["messages"]) == (5, 0, [])


@pytest.mark.parametrize(
    "query",
    ["?from=abc", "?to=1.5", "?from=10&to=9", "?from=-1", f"?to={2**63}", "?from=1e3", "?to="],
)
def test_list_window_bad_values_are_400(gateway, client, topic, query):
    create_subscription(client, topic, "s")
    status, body = admin("GET", scheduled_url(gateway, topic, "s") + query)
    assert status == 400, (query, body)
    assert isinstance(body, dict) and body["reason"]


def test_histogram_counts_by_bucket(gateway, client, topic):
    # due at base + 0, 0.5 s, 1 s, 2.5 s, 9 s and 11 s; plus one before the window
    base, _ = schedule_at(client, topic, [-5000, 0, 500, 1000, 2500, 9000, 11_000])
    status, body = histogram(gateway, topic, "s", f"?from={base}&to={base + 10_000}&buckets=4")
    assert status == 200, body
    assert body == {
        "from": base,
        "to": base + 10_000,
        "bucketMs": 2500,
        "counts": [3, 1, 0, 1],  # [0, 2.5 s), [2.5, 5), [5, 7.5), [7.5, 10)
        "before": 1,
        "after": 1,
        "total": 7,
    }
    # the buckets may end after `to`: ceil(10_000 / 3) ms each; `to` is their end
    status, body = histogram(gateway, topic, "s", f"?from={base}&to={base + 10_000}&buckets=3")
    assert status == 200, body
    assert (body["bucketMs"], body["to"]) == (3334, base + 10_002)
    assert body["counts"] == [4, 0, 1] and (body["before"], body["after"]) == (1, 1)
    assert body["before"] + sum(body["counts"]) + body["after"] == body["total"]


def test_histogram_defaults_now_an_hour_and_60_buckets(gateway, client, topic):
    create_subscription(client, topic, "s")
    producer = client.create_producer(topic)
    producer.send(b"x", deliver_at=now_ms() + FAR_MS)  # two minutes ahead
    producer.send(b"x", deliver_at=now_ms() + 2 * 3_600_000)  # after the hour
    before = now_ms()
    status, body = histogram(gateway, topic, "s")
    assert status == 200, body
    assert before - CLOCK_SLACK_MS <= body["from"] <= now_ms() + CLOCK_SLACK_MS
    assert body["bucketMs"] == 60_000 and body["to"] == body["from"] + 3_600_000
    assert len(body["counts"]) == 60 and sum(body["counts"]) == 1
    assert (body["before"], body["after"], body["total"]) == (0, 1, 2)
    # `to` alone: from now; `from` alone: an hour from it
    status, body = histogram(gateway, topic, "s", f"?from={before}&buckets=1")
    assert status == 200 and body["counts"] == [1] and body["to"] == before + 3_600_000


@pytest.mark.parametrize(
    "query",
    [
        "?from=100&to=100",
        "?from=200&to=100",
        "?from=0&to=400000000000",  # over ten years
        "?buckets=0",
        "?buckets=501",
        "?buckets=x",
        "?from=abc",
        "?to=1.5",
        "?from=-5&to=10",
        f"?from=0&to={2**63}",
        "?buckets=" + "9" * 5000,
    ],
)
def test_histogram_bad_parameters_are_400(gateway, client, topic, query):
    create_subscription(client, topic, "s")
    status, body = histogram(gateway, topic, "s", query)
    assert status == 400, (query, body)
    assert isinstance(body, dict) and body["reason"]


def test_histogram_errors_and_the_path_is_no_message_id(gateway, client, topic):
    status, body = histogram(gateway, topic, "missing")
    assert status == 404 and body["reason"]
    create_subscription(client, topic, "s")
    status, body = histogram(gateway, topic, "s", "?buckets=500")
    assert status == 200 and len(body["counts"]) == 500 and body["total"] == 0
    # "histogram" is not a ledgerId:entryId for the cancel and reschedule routes
    url = f"{scheduled_url(gateway, topic, 's')}/histogram"
    assert admin("DELETE", url)[0] == 400
    assert admin("POST", url, {"deliverAt": 1})[0] == 400
    status, body = admin(
        "GET",
        f"{gateway.http_url}/admin/v2/non-persistent/public/default/{topic}"
        "/subscription/s/scheduled/histogram",
    )
    assert status in (404, 405) and body["reason"]


# -- cancel ---------------------------------------------------------------------------------


def test_cancel_one_message(gateway, client, topic, redis_clean):
    first = shared(client, topic, "a")
    other = shared(client, topic, "b")
    producer = client.create_producer(topic)
    start = now_ms()
    # The cancelled message is due first: had it not been cancelled, it would arrive before
    # the two others.
    target = producer.send(b"cancelled", deliver_at=start + SOON_MS)
    producer.send(b"kept-1", deliver_at=start + SOON_MS + 500)
    producer.send(b"kept-2", deliver_at=start + SOON_MS + 500)
    assert cancel(gateway, topic, "a", target) == (204, None)
    assert listing(gateway, topic, "a")["total"] == 2
    assert listing(gateway, topic, "b")["total"] == 3

    got = sorted(receive(first)[0].data() for _ in range(2))
    assert got == [b"kept-1", b"kept-2"]
    assert_nothing_more(first, quiet_ms=500)
    # Another subscription of the topic keeps its own schedule.
    got_other = [receive(other)[0] for _ in range(3)]
    assert sorted(m.data() for m in got_other) == [b"cancelled", b"kept-1", b"kept-2"]
    cancelled = next(m for m in got_other if m.data() == b"cancelled")
    assert mid_path(cancelled.message_id()) == mid_path(target)

    # Cancelled means acknowledged on "a": nothing is pending, and a reconnected consumer
    # gets nothing redelivered.
    assert pending_count(redis_clean, topic, "a") == 0
    first.close()
    again = shared(client, topic, "a")
    assert_nothing_more(again, quiet_ms=1000)

    # Twice, or an id that was never scheduled: 404.
    status, body = cancel(gateway, topic, "a", target)
    assert status == 404
    assert body["reason"]
    status, body = admin("DELETE", f"{scheduled_url(gateway, topic, 'a')}/1:0")
    assert status == 404
    assert body["reason"]


def test_cancel_without_consumer_and_errors(gateway, client, topic, redis_clean):
    create_subscription(client, topic, "s")
    producer = client.create_producer(topic)
    at = now_ms() + FAR_MS
    mids = [producer.send(f"m-{i}".encode(), deliver_at=at + i) for i in range(3)]
    assert cancel(gateway, topic, "s", mids[1]) == (204, None)
    page = listing(gateway, topic, "s")
    assert page["total"] == 2
    assert [m["messageId"] for m in page["messages"]] == [mid_path(mids[0]), mid_path(mids[2])]
    assert redis_clean.zcard(delayed_key(topic, "s")) == 2
    # Unknown subscription: 404; malformed ids: 400.
    status, body = cancel(gateway, topic, "missing", mids[0])
    assert status == 404 and body["reason"]
    for bad in ("x", "1", "1:2:3:4", "-1:0", "a:b"):
        status, body = admin("DELETE", f"{scheduled_url(gateway, topic, 's')}/{bad}")
        assert status == 400, bad
        assert body["reason"], bad
    assert listing(gateway, topic, "s")["total"] == 2


# -- reschedule -----------------------------------------------------------------------------


def test_reschedule_earlier(gateway, client, topic):
    consumer = shared(client, topic, "a")
    create_subscription(client, topic, "b")
    producer = client.create_producer(topic)
    old = now_ms() + FAR_MS
    target = producer.send(b"moved", deliver_at=old)
    new = now_ms() + SOON_MS
    assert reschedule(gateway, topic, "a", target, {"deliverAt": new}) == (204, None)
    [entry] = listing(gateway, topic, "a")["messages"]
    assert (entry["messageId"], entry["deliverAt"]) == (mid_path(target), new)
    # Only that subscription's schedule moved.
    [entry_b] = listing(gateway, topic, "b")["messages"]
    assert entry_b["deliverAt"] == old

    msg, received_at = receive(consumer)
    assert msg.data() == b"moved"
    assert received_at >= new - CLOCK_SLACK_MS
    assert received_at < old  # long before: the receive timeout is far shorter
    assert listing(gateway, topic, "a")["total"] == 0
    assert_nothing_more(consumer, quiet_ms=500)


def test_reschedule_later_then_deliver_after_ms(gateway, client, topic):
    consumer = shared(client, topic, "s")
    producer = client.create_producer(topic)
    due = now_ms() + SOON_MS
    target = producer.send(b"moved", deliver_at=due)
    producer.send(b"control", deliver_at=due)
    later = now_ms() + FAR_MS
    assert reschedule(gateway, topic, "s", target, {"deliverAt": later}) == (204, None)

    # The control message, due at the target's old time, arrives; the target does not.
    msg, _ = receive(consumer)
    assert msg.data() == b"control"
    assert_nothing_more(consumer, quiet_ms=1000)
    [entry] = listing(gateway, topic, "s")["messages"]
    assert (entry["messageId"], entry["deliverAt"]) == (mid_path(target), later)

    # deliverAfterMs counts from the request.
    before = now_ms()
    assert reschedule(gateway, topic, "s", target, {"deliverAfterMs": 800}) == (204, None)
    after = now_ms()
    [entry] = listing(gateway, topic, "s")["messages"]
    assert before + 800 <= entry["deliverAt"] <= after + 800
    msg, received_at = receive(consumer)
    assert msg.data() == b"moved"
    assert received_at >= before + 800 - CLOCK_SLACK_MS


def test_reschedule_to_the_past_delivers_now(gateway, client, topic):
    consumer = shared(client, topic, "s")
    producer = client.create_producer(topic)
    target = producer.send(b"moved", deliver_at=now_ms() + FAR_MS)
    assert reschedule(gateway, topic, "s", target, {"deliverAt": 0}) == (204, None)
    msg, _ = receive(consumer)
    assert msg.data() == b"moved"
    # Delivered: no longer scheduled, so a second move is a 404.
    status, body = reschedule(gateway, topic, "s", target, {"deliverAfterMs": 0})
    assert status == 404 and body["reason"]


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"{}",
        b"[]",
        b"123",
        b'{"deliverAt": -1}',
        b'{"deliverAt": "123"}',
        b'{"deliverAt": 1.5}',
        b'{"deliverAt": true}',
        b'{"deliverAt": null}',
        b'{"deliverAfterMs": -5}',
        b'{"deliverAt": 1, "deliverAfterMs": 1}',
        b'{"deliverAtMs": 1}',
    ],
)
def test_reschedule_bad_bodies(gateway, client, topic, raw):
    create_subscription(client, topic, "s")
    producer = client.create_producer(topic)
    at = now_ms() + FAR_MS
    target = producer.send(b"m", deliver_at=at)
    status, body = admin(
        "POST", f"{scheduled_url(gateway, topic, 's')}/{mid_path(target)}", raw=raw
    )
    assert status == 400
    assert body["reason"]
    # Unchanged, and the gateway keeps serving.
    [entry] = listing(gateway, topic, "s")["messages"]
    assert entry["deliverAt"] == at


def test_reschedule_unknown_subscription_or_message(gateway, client, topic):
    create_subscription(client, topic, "s")
    producer = client.create_producer(topic)
    at = now_ms() + FAR_MS
    target = producer.send(b"m", deliver_at=at)
    plain = producer.send(b"not-delayed")
    status, body = reschedule(gateway, topic, "missing", target, {"deliverAt": 1})
    assert status == 404 and body["reason"]
    # A message that is not delayed is not scheduled.
    status, body = reschedule(gateway, topic, "s", plain, {"deliverAt": 1})
    assert status == 404 and body["reason"]
    status, body = admin("POST", f"{scheduled_url(gateway, topic, 's')}/1:0", {"deliverAt": 1})
    assert status == 404 and body["reason"]
    [entry] = listing(gateway, topic, "s")["messages"]
    assert entry["deliverAt"] == at
