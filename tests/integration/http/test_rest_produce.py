"""REST produce (PIP-64): Pulsar's paths and ProducerMessages/ProducerAcks JSON, read back
by the official client unchanged."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pulsar
import pytest

from pulsar_gateway.entry_codec import decode_message_id
from tests.adminhttp import admin
from tests.conftest import GatewayThread, wait_for
from tests.wsclient import connect, reader_url, unb64

# The cluster pass of ./dev test runs this file on a Redis Cluster too: REST produce
# (PIP-64)
pytestmark = pytest.mark.cluster


def url(gw: GatewayThread, topic: str, domain: str = "persistent") -> str:
    return f"{gw.http_url}/topics/{domain}/public/default/{topic}"


def post(gw: GatewayThread, topic: str, body: Any, suffix: str = "") -> tuple[int, Any]:
    return admin("POST", url(gw, topic) + suffix, body)


def test_messages_reach_the_official_client_unchanged(
    gateway: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    consumer = client_factory(gateway.url).subscribe(topic, "s")
    status, body = post(
        gateway,
        topic,
        {
            "producerName": "rest-1",
            "messages": [
                {"payload": "hello", "key": "k1", "properties": {"a": "1"}, "eventTime": "1234"},
                {"payload": "wörld", "sequenceId": 7},
            ],
        },
    )
    assert status == 200, body
    results = body["messagePublishResults"]
    assert [r["errorCode"] for r in results] == [0, 0]
    first = consumer.receive(5000)
    second = consumer.receive(5000)
    assert first.data() == b"hello" and second.data() == "wörld".encode()
    assert first.partition_key() == "k1" and first.properties() == {"a": "1"}
    assert first.event_timestamp() == 1234 and second.event_timestamp() == 0
    assert second.producer_name() == "rest-1"
    for result, message in zip(results, (first, second), strict=True):
        mid = message.message_id()
        assert result["messageId"] == f"{mid.ledger_id()}:{mid.entry_id()}:-1"
    assert body["schemaVersion"] == 0


def test_default_producer_name(gateway: GatewayThread, client_factory: Any, topic: str) -> None:
    consumer = client_factory(gateway.url).subscribe(topic, "s")
    assert post(gateway, topic, {"messages": [{"payload": "x"}]})[0] == 200
    assert consumer.receive(5000).producer_name() == "RestProducer"


def test_partitioned_topic_round_robin_and_one_partition(
    gateway: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    base = f"{gateway.http_url}/admin/v2/persistent/public/default/{topic}"
    assert admin("PUT", f"{base}/partitions", 3)[0] == 204
    consumer = client_factory(gateway.url).subscribe(topic, "s")
    status, body = post(gateway, topic, {"messages": [{"payload": str(i)} for i in range(6)]})
    assert status == 200
    partitions = [int(r["messageId"].split(":")[2]) for r in body["messagePublishResults"]]
    assert partitions == [0, 1, 2, 0, 1, 2]
    status, body = post(gateway, topic, {"messages": [{"payload": "p1"}] * 2}, "/partitions/1")
    assert status == 200
    assert [r["messageId"].endswith(":1") for r in body["messagePublishResults"]] == [True] * 2
    got = sorted(consumer.receive(5000).data() for _ in range(8))
    assert got == sorted([b"0", b"1", b"2", b"3", b"4", b"5", b"p1", b"p1"])
    status, body = post(gateway, topic, {"messages": [{"payload": "x"}]}, "/partitions/3")
    assert status == 404 and body["reason"]
    status, body = post(gateway, f"{topic}-partition-0", {"messages": []}, "/partitions/0")
    assert status == 400 and "-partition-" in body["reason"]


def test_value_schema_encodes_the_payload(
    gateway: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    consumer = client_factory(gateway.url).subscribe(topic, "s")
    schema = '{"type": "INT32", "schema": "", "properties": {}}'
    status, body = post(gateway, topic, {"valueSchema": schema, "messages": [{"payload": "42"}]})
    assert status == 200 and body["schemaVersion"] == 0
    assert consumer.receive(5000).data() == (42).to_bytes(4, "big")
    status, body = post(
        gateway, topic, {"valueSchema": '{"type": "AVRO"}', "messages": [{"payload": "{}"}]}
    )
    assert status == 400 and "AVRO" in body["reason"]
    status, body = post(
        gateway, topic, {"valueSchema": schema, "messages": [{"payload": "not a number"}]}
    )
    assert status == 400 and "INT32" in body["reason"]


def test_deliver_after_on_a_shared_subscription(
    gateway: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    consumer = client_factory(gateway.url).subscribe(
        topic, "s", consumer_type=pulsar.ConsumerType.Shared
    )
    sent = time.time()
    status, _ = post(gateway, topic, {"messages": [{"payload": "later", "deliverAfterMs": 1000}]})
    assert status == 200
    message = consumer.receive(5000)
    assert message.data() == b"later"
    assert time.time() - sent >= 0.9


def test_deduplication_by_producer_name_and_sequence_id(
    gateway: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    policy = f"{gateway.http_url}/admin/v2/persistent/public/default/{topic}/deduplicationEnabled"
    assert admin("POST", policy, True)[0] == 204
    consumer = client_factory(gateway.url).subscribe(topic, "s")
    batch = {
        "producerName": "dedup",
        "messages": [{"payload": "a", "sequenceId": 1}, {"payload": "b", "sequenceId": 2}],
    }

    def resent_is_dropped() -> bool:
        status, body = post(gateway, topic, batch)
        return status == 200 and [r["messageId"][:5] for r in body["messagePublishResults"]] == [
            "-1:-1",
            "-1:-1",
        ]

    wait_for(resent_is_dropped)  # the policy reaches the REST publisher
    received = [consumer.receive(5000).data() for _ in range(2)]
    assert received == [b"a", b"b"]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(300)


def test_an_oversized_message_fails_alone(
    gateway_factory: Callable[..., GatewayThread], client_factory: Callable[..., Any], topic: str
) -> None:
    gw = gateway_factory(max_message_size=1024)
    consumer = client_factory(gw.url).subscribe(topic, "s")
    status, body = post(gw, topic, {"messages": [{"payload": "x" * 2000}, {"payload": "ok"}]})
    assert status == 200
    big, small = body["messagePublishResults"]
    assert big["errorCode"] == 2 and "maxMessageSize" in big["errorMsg"]
    assert small["errorCode"] == 0
    assert consumer.receive(5000).data() == b"ok"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("{not json", "Invalid JSON"),
        ("[]", "ProducerMessages"),
        ('{"messages": {}}', "messages must be a list"),
        ('{"messages": [{"payload": 1}]}', "payload must be a string"),
        ('{"messages": [{"payload": "x", "properties": {"a": 1}}]}', "properties"),
        ('{"messages": [{"payload": "x", "eventTime": "soon"}]}', "eventTime"),
        ('{"messages": [{"payload": "x", "key": 5}]}', "key"),
        ('{"producerName": 3, "messages": []}', "producerName"),
    ],
)
def test_bad_bodies_are_400_and_store_nothing(
    gateway: GatewayThread, topic: str, raw: str, reason: str
) -> None:
    status, body = admin("POST", url(gateway, topic), raw=raw)
    assert status == 400 and reason in body["reason"]
    stats = admin("GET", f"{gateway.http_url}/admin/v2/persistent/public/default/{topic}/stats")
    assert stats[0] == 404  # nothing was stored, the topic does not exist


def test_invalid_topic_is_412(gateway: GatewayThread) -> None:
    status, body = admin(
        "POST", f"{gateway.http_url}/topics/persistent/public/bad%20ns/t", {"messages": []}
    )
    assert status == 412 and body["reason"]


def test_non_persistent_topic(
    gateway: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    consumer = client_factory(gateway.url).subscribe(
        f"non-persistent://public/default/{topic}", "s"
    )
    status, body = admin(
        "POST", url(gateway, topic, "non-persistent"), {"messages": [{"payload": "live"}]}
    )
    assert status == 200 and body["messagePublishResults"][0]["errorCode"] == 0
    assert consumer.receive(5000).data() == b"live"


def test_rest_produce_to_websocket_reader(gateway: GatewayThread, topic: str) -> None:
    """Cross-surface: what REST produce stores, a WebSocket reader reads unchanged, with the
    message ids REST produce answered."""
    status, body = post(
        gateway,
        topic,
        {
            "producerName": "rest-ws",
            "messages": [
                {
                    "payload": "one",
                    "key": "k",
                    "properties": {"p": "1"},
                    "eventTime": "1700000000000",
                },
                {"payload": "two"},
            ],
        },
    )
    assert status == 200
    published = [r["messageId"] for r in body["messagePublishResults"]]

    async def read() -> list[Any]:
        async with connect(reader_url(gateway, topic, messageId="earliest")) as ws:
            return await ws.receive_many(2)

    first, second = asyncio.run(read())
    assert unb64(first["payload"]) == b"one" and unb64(second["payload"]) == b"two"
    assert first["key"] == "k" and first["properties"] == {"p": "1"}
    assert first["eventTime"].startswith("2023-11-14T22:13:20")
    assert "key" not in second and "eventTime" not in second
    for message, text in zip((first, second), published, strict=True):
        mid = decode_message_id(message["messageId"])
        assert f"{mid.ledger_id}:{mid.entry_id}:{mid.partition}" == text
