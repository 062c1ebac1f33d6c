"""The ``delayedDelivery`` policy (Pulsar ``DelayedDeliveryPolicies``, PIP-315, PIP-437) over
the admin REST API with aiohttp, and what it does to the official client's messages.

Policy paths and JSON follow Pulsar's ``Namespaces`` / ``PersistentTopics``; the fixed and
maximum delays follow PIP-437 / PIP-315 (``PersistentTopic.isExceedMaximumDeliveryDelay``).
Delayed messages are held only on Shared and Key_Shared subscriptions, so every consumer
here is Shared. What the gateway stored is read back from the topic's Redis stream (field
``d`` = deliver-at ms), and the counters from ``GET /metrics``.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta
from typing import Any

import pulsar
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from pulsar_gateway import frame_codec
from pulsar_gateway.core.policies.delayed_delivery import DelayedDeliveryPolicy
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.entry_codec import make_blob, parse_blob
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.adminhttp import admin, call_text
from tests.conftest import TIMEOUT, GatewayThread, stream_key, wait_for
from tests.frames import command
from tests.helpers import assert_nothing_more
from tests.rawclient import RawConnection

T = pb.BaseCommand.Type
RECEIVE_MS = int(TIMEOUT * 1000)
#: Pulsar's broker defaults, what a namespace without the policy reads as.
DEFAULTS = {
    "active": True,
    "tickTime": 1000,
    "maxDeliveryDelayInMillis": 0,
    "fixedDeliveryDelayInMillis": 0,
}
#: A delivery time the tests never wait for: a message asking for it and arriving within
#: the receive timeout was not held until then.
FAR = timedelta(seconds=120)
#: Slack for "not delivered before its time": client and Redis share this host's clock,
#: but publish times and TIME are read at millisecond granularity.
CLOCK_SLACK_MS = 20
REJECTED = "pulsar_broker_topic_messages_delayed_rejected"
OVERRIDDEN = "pulsar_broker_topic_messages_fixed_delay_overridden"


# -- helpers ------------------------------------------------------------------------------


def ns_url(gw: GatewayThread) -> str:
    return f"{gw.http_url}/admin/v2/namespaces/public/default/delayedDelivery"


def topic_url(gw: GatewayThread, topic: str) -> str:
    return f"{gw.http_url}/admin/v2/persistent/public/default/{topic}/delayedDelivery"


def policy(active: bool = True, max_ms: int = 0, fixed_ms: int = 0) -> dict[str, Any]:
    return {
        "active": active,
        "tickTime": 1000,
        "maxDeliveryDelayInMillis": max_ms,
        "fixedDeliveryDelayInMillis": fixed_ms,
    }


def full(topic: str) -> str:
    return f"persistent://public/default/{topic}"


def counter(gw: GatewayThread, name: str, topic: str) -> float:
    """A PIP-437 counter of ``topic`` from ``GET /metrics``; 0 when not exported yet."""
    status, text = asyncio.run(call_text("GET", f"{gw.http_url}/metrics"))
    assert status == 200
    wanted = {"cluster": "standalone", "namespace": "public/default", "topic": full(topic)}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == f"{name}_total" and sample.labels == wanted:
                return float(sample.value)
    return 0.0


def entries(r: redis.Redis, topic: str) -> list[dict[bytes, bytes]]:
    """The fields of every entry stored for ``topic``, oldest first."""
    return [fields for _, fields in r.xrange(stream_key(topic))]


def publish_time(fields: dict[bytes, bytes]) -> int:
    """The entry's ``MessageMetadata.publish_time``, from the stored blob."""
    return int(parse_blob(fields[b"m"]).metadata.publish_time)


def stored_deliver_at(fields: dict[bytes, bytes]) -> int | None:
    value = fields.get(b"d")
    return None if value is None else int(value)


def now_ms() -> int:
    return int(time.time() * 1000)


def shared(client: Any, topic: str, sub: str = "s") -> Any:
    return client.subscribe(topic, sub, consumer_type=pulsar.ConsumerType.Shared)


def receive_with_times(consumer: Any, count: int) -> list[tuple[Any, int]]:
    """``count`` messages, each with the wall-clock ms at which ``receive`` returned it."""
    got = []
    for _ in range(count):
        msg = consumer.receive(timeout_millis=RECEIVE_MS)
        got.append((msg, now_ms()))
        consumer.acknowledge(msg)
    return got


def producer_policies(gw: GatewayThread, topic: str) -> list[DelayedDeliveryPolicy]:
    """The delayed-delivery policy each of the gateway's producers on ``topic`` applies."""

    async def read() -> list[DelayedDeliveryPolicy]:
        return [
            p.delayed_delivery
            for p in gw.gateway.services.producers.producers()
            if p.topic.full_name == full(topic)
        ]

    return list(gw.call(read()))


# -- the admin API -------------------------------------------------------------------------


def test_namespace_policy_get_post_delete(gateway, redis_clean):
    url = ns_url(gateway)
    # Unset: Pulsar answers the broker's defaults at namespace level.
    assert admin("GET", url) == (200, DEFAULTS)
    value = policy(max_ms=5000, fixed_ms=0)
    value["tickTime"] = 250
    assert admin("POST", url, value) == (204, None)
    assert admin("GET", url) == (200, value)
    stored = redis_clean.hget(KeySchema().namespace_policies("public/default"), "delayedDelivery")
    assert stored is not None and json.loads(stored) == value
    assert admin("DELETE", url) == (204, None)
    assert admin("GET", url) == (200, DEFAULTS)
    assert (
        redis_clean.hget(KeySchema().namespace_policies("public/default"), "delayedDelivery")
        is None
    )


def test_topic_policy_get_post_delete(gateway, topic):
    url = topic_url(gateway, topic)
    # Unset at topic level: null (the topic inherits).
    assert admin("GET", url) == (200, None)
    value = policy(fixed_ms=1500)
    assert admin("POST", url, value) == (204, None)
    assert admin("GET", url) == (200, value)
    # The namespace is untouched.
    assert admin("GET", ns_url(gateway)) == (200, DEFAULTS)
    assert admin("DELETE", url) == (204, None)
    assert admin("GET", url) == (200, None)
    # Deleting what is not set is still a 204.
    assert admin("DELETE", url) == (204, None)


@pytest.mark.parametrize("level", ["namespace", "topic"])
@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b'{"active": true', 400),  # not JSON
        (b"not json", 400),
        (b"{}", 412),  # active is required
        (b'{"maxDeliveryDelayInMillis": 1000}', 412),
        (b'{"active": "true"}', 412),
        (b'{"active": 1}', 412),
        (b'{"active": null}', 412),
        (b'{"active": true, "maxDeliveryDelayInMillis": -1}', 412),
        (b'{"active": true, "fixedDeliveryDelayInMillis": 1.5}', 412),
        (b'{"active": true, "tickTime": "1000"}', 412),
        (b'{"active": true, "fixedDeliveryDelayInMillis": true}', 412),
        (b"[]", 412),
        (b"true", 412),
        (b"null", 412),
    ],
)
def test_invalid_bodies_are_refused(gateway, topic, level, body, status):
    url = ns_url(gateway) if level == "namespace" else topic_url(gateway, topic)
    code, reply = admin("POST", url, raw=body)
    assert code == status
    assert isinstance(reply, dict) and reply["reason"]
    # Nothing was stored, and the gateway keeps serving.
    assert admin("GET", url) == (200, DEFAULTS if level == "namespace" else None)
    assert admin("POST", url, policy()) == (204, None)


# -- which policy applies --------------------------------------------------------------------


def test_topic_level_overrides_namespace_and_delete_falls_back(gateway, client, topic, redis_clean):
    assert admin("POST", ns_url(gateway), policy(max_ms=3000)) == (204, None)
    # The topic's object replaces the namespace's whole: no maximum here.
    assert admin("POST", topic_url(gateway, topic), policy()) == (204, None)
    producer = client.create_producer(topic)
    asked = now_ms() + 60_000
    producer.send(b"long-ok", deliver_at=asked)
    [first] = entries(redis_clean, topic)
    assert stored_deliver_at(first) == asked

    # Without the topic's policy the namespace's maximum applies again, to a new producer...
    assert admin("DELETE", topic_url(gateway, topic)) == (204, None)
    assert admin("GET", topic_url(gateway, topic)) == (200, None)
    other = client.create_producer(topic)
    with pytest.raises(pulsar.ChecksumError):
        other.send(b"too-long", deliver_at=now_ms() + 60_000)
    # ... and to the producer that was open, once the change notification reaches it.
    wait_for(lambda: all(p.max_delay_ms == 3000 for p in producer_policies(gateway, topic)))
    with pytest.raises(pulsar.ChecksumError):
        producer.send(b"too-long-2", deliver_after=FAR)
    assert len(entries(redis_clean, topic)) == 1
    assert counter(gateway, REJECTED, topic) == 2

    # A later topic-level policy wins over the namespace for the open producers too.
    assert admin("POST", topic_url(gateway, topic), policy(max_ms=90_000)) == (204, None)
    wait_for(lambda: all(p.max_delay_ms == 90_000 for p in producer_policies(gateway, topic)))
    producer.send(b"long-ok-2", deliver_after=timedelta(seconds=60))
    other.send(b"long-ok-3", deliver_after=timedelta(seconds=60))
    assert len(entries(redis_clean, topic)) == 3


# -- fixed delay ----------------------------------------------------------------------------


def test_fixed_delay_wins_over_client_time(gateway, client, topic, redis_clean):
    fixed = 1500
    assert admin("POST", topic_url(gateway, topic), policy(fixed_ms=fixed)) == (204, None)
    consumer = shared(client, topic)
    producer = client.create_producer(topic)
    producer.send(b"asked-far", deliver_after=FAR)
    producer.send(b"asked-none")
    producer.send(b"asked-soon", deliver_at=now_ms() + 100)
    # A client batch without delivery times (the client never batches delayed messages).
    batcher = client.create_producer(
        topic, batching_enabled=True, batching_max_messages=3, batching_max_publish_delay_ms=60_000
    )
    for i in range(3):
        batcher.send_async(f"batched-{i}".encode(), None)
    batcher.flush()

    stored = entries(redis_clean, topic)
    assert [int(f.get(b"n", b"1")) for f in stored] == [1, 1, 1, 3]
    for fields in stored:
        # The stored time is the entry's publish time plus the fixed delay, whatever the
        # client asked.
        assert stored_deliver_at(fields) == publish_time(fields) + fixed

    got = receive_with_times(consumer, 6)
    assert sorted(m.data() for m, _ in got) == sorted(
        [b"asked-far", b"asked-none", b"asked-soon", b"batched-0", b"batched-1", b"batched-2"]
    )
    for msg, received_at in got:
        # Not before publish + fixed (the soon one asked for +100 ms), and long before the
        # far one's time (the receive timeout is well under FAR).
        assert received_at >= msg.publish_timestamp() + fixed - CLOCK_SLACK_MS, msg.data()
    assert_nothing_more(consumer, quiet_ms=500)
    # Only the messages that asked for a time had it overridden.
    assert counter(gateway, OVERRIDDEN, topic) == 2
    assert counter(gateway, REJECTED, topic) == 0


def test_fixed_delay_from_namespace_policy(gateway, client, topic, redis_clean):
    fixed = 1000
    assert admin("POST", ns_url(gateway), policy(fixed_ms=fixed)) == (204, None)
    consumer = shared(client, topic)
    producer = client.create_producer(topic)
    producer.send(b"plain")
    [fields] = entries(redis_clean, topic)
    assert stored_deliver_at(fields) == publish_time(fields) + fixed
    [(msg, received_at)] = receive_with_times(consumer, 1)
    assert received_at >= msg.publish_timestamp() + fixed - CLOCK_SLACK_MS
    assert counter(gateway, OVERRIDDEN, topic) == 0


# -- maximum delay --------------------------------------------------------------------------


def test_max_delay_refuses_longer_requests(gateway, client, topic, redis_clean):
    assert admin("POST", topic_url(gateway, topic), policy(max_ms=5000)) == (204, None)
    consumer = shared(client, topic)
    producer = client.create_producer(topic)

    producer.send(b"within", deliver_after=timedelta(milliseconds=1000))
    assert len(entries(redis_clean, topic)) == 1
    # Refused: the Python client raises ChecksumError (the only per-message SEND_ERROR the
    # C++ library fails just that message on) and nothing is stored.
    with pytest.raises(pulsar.ChecksumError):
        producer.send(b"beyond", deliver_after=FAR)
    assert len(entries(redis_clean, topic)) == 1
    # The producer still works.
    producer.send(b"plain")
    assert len(entries(redis_clean, topic)) == 2
    stored = entries(redis_clean, topic)
    assert [parse_blob(f[b"m"]).payload for f in stored] == [b"within", b"plain"]
    assert stored_deliver_at(stored[1]) is None
    assert counter(gateway, REJECTED, topic) == 1

    got = dict((m.data(), (m, at)) for m, at in receive_with_times(consumer, 2))
    assert set(got) == {b"within", b"plain"}
    msg, received_at = got[b"within"]
    assert received_at >= msg.publish_timestamp() + 1000 - CLOCK_SLACK_MS
    assert_nothing_more(consumer, quiet_ms=500)


def test_max_delay_refusal_in_a_pipeline_of_sends(gateway, client, topic, redis_clean):
    """Asynchronous sends: the refused message fails alone, its neighbours are stored."""
    assert admin("POST", ns_url(gateway), policy(max_ms=5000)) == (204, None)
    consumer = shared(client, topic)
    producer = client.create_producer(topic)
    results: dict[bytes, Any] = {}

    def callback(name: bytes) -> Any:
        return lambda res, _mid: results.__setitem__(name, res)

    producer.send_async(b"a", callback(b"a"))
    producer.send_async(b"b", callback(b"b"), deliver_after=FAR)
    producer.send_async(b"c", callback(b"c"), deliver_after=timedelta(milliseconds=200))
    producer.send_async(b"d", callback(b"d"))
    producer.flush()
    wait_for(lambda: len(results) == 4)
    assert results == {
        b"a": pulsar.Result.Ok,
        b"b": pulsar.Result.ChecksumError,
        b"c": pulsar.Result.Ok,
        b"d": pulsar.Result.Ok,
    }
    assert [parse_blob(f[b"m"]).payload for f in entries(redis_clean, topic)] == [
        b"a",
        b"c",
        b"d",
    ]
    assert sorted(m.data() for m, _ in receive_with_times(consumer, 3)) == [b"a", b"c", b"d"]
    assert_nothing_more(consumer, quiet_ms=500)
    assert counter(gateway, REJECTED, topic) == 1


def _raw_send(name: str, sequence_id: int, deliver_in_ms: int | None) -> bytes:
    """One SEND frame of producer 1, asking for a delivery ``deliver_in_ms`` after its
    publish time (MessageMetadata.deliver_at_time, field 19) unless None."""
    publish = now_ms()
    metadata = pb.MessageMetadata(producer_name=name, sequence_id=sequence_id, publish_time=publish)
    if deliver_in_ms is not None:
        metadata.deliver_at_time = publish + deliver_in_ms
    return frame_codec.encode_payload_command(
        command(T.SEND, producer_id=1, sequence_id=sequence_id, num_messages=1),
        make_blob(metadata, f"m-{sequence_id}".encode()),
    )


def test_refusal_answers_in_send_order(gateway, topic, redis_clean):
    """A producer's receipts and errors go back in the order of its SENDs: every client
    matches them against the head of its pending queue (the C++ client closes the
    connection and re-sends everything pending when a receipt skips the head)."""
    assert admin("POST", topic_url(gateway, topic), policy(max_ms=5000)) == (204, None)
    with RawConnection(gateway) as conn:
        conn.handshake()
        name = conn.create_producer(full(topic), producer_id=1)
        # One write: the refused SEND between accepted ones, all in flight at once.
        conn.send_bytes(
            b"".join(
                _raw_send(name, seq, delay)
                for seq, delay in enumerate([None, 60_000, 200, None, None])
            )
        )
        frames: list[pb.BaseCommand] = []
        deadline = time.monotonic() + TIMEOUT
        while len(frames) < 5 and time.monotonic() < deadline:
            frames += [c for c in conn.drain(0.2) if c.type in (T.SEND_RECEIPT, T.SEND_ERROR)]
        answers = [
            (
                "receipt" if c.type == T.SEND_RECEIPT else "error",
                c.send_receipt.sequence_id
                if c.type == T.SEND_RECEIPT
                else c.send_error.sequence_id,
            )
            for c in frames
        ]
    stored = [parse_blob(f[b"m"]).payload for f in entries(redis_clean, topic)]
    assert stored == [b"m-0", b"m-2", b"m-3", b"m-4"]
    assert answers == [
        ("receipt", 0),
        ("error", 1),
        ("receipt", 2),
        ("receipt", 3),
        ("receipt", 4),
    ]


@pytest.mark.parametrize(
    ("client_version", "error", "message"),
    [
        # Java, Go and the rest: Pulsar's own answer.
        (
            "raw-test",
            pb.NotAllowedError,
            "Exceeds max allowed delivery delay of 5000 milliseconds",
        ),
        # The C++ library (Python client): the per-message error it honours.
        (
            "Pulsar-CPP-v3.13.0",
            pb.ChecksumError,
            "NotAllowedError: Exceeds max allowed delivery delay of 5000 milliseconds",
        ),
    ],
)
def test_refusal_on_the_wire(gateway, topic, redis_clean, client_version, error, message):
    assert admin("POST", topic_url(gateway, topic), policy(max_ms=5000)) == (204, None)
    with RawConnection(gateway) as conn:
        conn.send(
            command(
                T.CONNECT,
                client_version=client_version,
                protocol_version=20,
                auth_method_name="none",
            )
        )
        conn.expect(T.CONNECTED)
        name = conn.create_producer(full(topic), producer_id=1)

        conn.send_bytes(_raw_send(name, 1, 60_000))
        refused = conn.expect(T.SEND_ERROR).send_error
        assert (refused.producer_id, refused.sequence_id) == (1, 1)
        assert refused.error == error
        assert refused.message == message
        # The connection and the producer stay usable.
        conn.assert_open()
        conn.send_bytes(_raw_send(name, 2, 1000))
        receipt = conn.expect(T.SEND_RECEIPT).send_receipt
        assert receipt.sequence_id == 2
        assert not [c for c in conn.drain() if c.type in (T.SEND_ERROR, T.CLOSE_PRODUCER)]
    stored = entries(redis_clean, topic)
    assert [parse_blob(f[b"m"]).payload for f in stored] == [b"m-2"]
    assert counter(gateway, REJECTED, topic) == 1


# -- active=false and the gateway's flags ---------------------------------------------------


def test_inactive_policy_delivers_at_once(gateway, client, topic, redis_clean):
    # Inactive: no delivery time is stored and the maximum is not enforced either
    # (Pulsar checks the maximum only when delayed delivery is enabled).
    assert admin("POST", ns_url(gateway), policy(active=False, max_ms=1000)) == (204, None)
    consumer = shared(client, topic)
    producer = client.create_producer(topic)
    producer.send(b"asked-far", deliver_after=FAR)
    [fields] = entries(redis_clean, topic)
    assert stored_deliver_at(fields) is None
    [(msg, _)] = receive_with_times(consumer, 1)
    assert msg.data() == b"asked-far"
    assert counter(gateway, REJECTED, topic) == 0


def test_gateway_max_delay_flag_is_the_default(gateway_factory, client_factory, topic, redis_clean):
    gw = gateway_factory(delayed_delivery_max_delay_ms=2000)
    assert admin("GET", ns_url(gw)) == (200, {**DEFAULTS, "maxDeliveryDelayInMillis": 2000})
    client = client_factory(gw.url)
    consumer = shared(client, topic)
    producer = client.create_producer(topic)
    with pytest.raises(pulsar.ChecksumError):
        producer.send(b"beyond", deliver_after=timedelta(seconds=10))
    producer.send(b"within", deliver_after=timedelta(milliseconds=500))
    assert [parse_blob(f[b"m"]).payload for f in entries(redis_clean, topic)] == [b"within"]
    assert counter(gw, REJECTED, topic) == 1
    [(msg, received_at)] = receive_with_times(consumer, 1)
    assert msg.data() == b"within"
    assert received_at >= msg.publish_timestamp() + 500 - CLOCK_SLACK_MS
    # A namespace policy replaces the flags.
    assert admin("POST", ns_url(gw), policy(max_ms=0)) == (204, None)
    later = client.create_producer(topic)
    later.send(b"now-allowed", deliver_after=timedelta(seconds=10))
    assert len(entries(redis_clean, topic)) == 2


def test_gateway_disabled_flag_is_the_default(gateway_factory, client_factory, topic, redis_clean):
    gw = gateway_factory(delayed_delivery_enabled=False)
    assert admin("GET", ns_url(gw)) == (200, {**DEFAULTS, "active": False})
    client = client_factory(gw.url)
    consumer = shared(client, topic)
    producer = client.create_producer(topic)
    producer.send(b"asked-far", deliver_after=FAR)
    [fields] = entries(redis_clean, topic)
    assert stored_deliver_at(fields) is None
    [(msg, _)] = receive_with_times(consumer, 1)
    assert msg.data() == b"asked-far"
    # A topic policy turns it back on for that topic.
    assert admin("POST", topic_url(gw, topic), policy()) == (204, None)
    later = client.create_producer(topic)
    asked = now_ms() + 60_000
    later.send(b"held", deliver_at=asked)
    assert stored_deliver_at(entries(redis_clean, topic)[1]) == asked
    assert_nothing_more(consumer, quiet_ms=500)
