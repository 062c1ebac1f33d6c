"""The WebSocket producer (``/ws/v2/producer/...``) against the official client's consumers:
payload, key, properties, event time, message ids, compression, deduplication, delayed
delivery, partition routing, non-persistent topics and the errors before and after the
upgrade."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
from typing import Any

import pulsar
import pytest

from pulsar_gateway.adapters.websocket.params import COMPRESSION_TYPES
from pulsar_gateway.core import java_string_hash, murmur3_32_hash
from pulsar_gateway.entry_codec import decode_message_id, parse_blob
from tests.adminhttp import call
from tests.conftest import TIMEOUT, stream_key
from tests.wsclient import b64, connect, full, producer_url, refused, unb64

# The cluster pass of ./dev test runs this file on a Redis Cluster too: WebSocket: consumer
# (every subscription type), producer, reader (and v3 multi-topic)
pytestmark = pytest.mark.cluster

RECEIVE_MS = int(TIMEOUT * 1000)


def subscribe(client: Any, topic: str, **kwargs: Any) -> Any:
    kwargs.setdefault("initial_position", pulsar.InitialPosition.Earliest)
    return client.subscribe(topic, "s", **kwargs)


async def test_message_reaches_official_consumer_unchanged(
    gateway: Any, client_factory: Any, topic: str
) -> None:
    client = client_factory(gateway.url)
    consumer = subscribe(client, topic)
    async with connect(producer_url(gateway, topic)) as ws:
        ack = await ws.produce(
            b"hello \x00 bytes",
            key="k-1",
            properties={"a": "1", "b": "two"},
            context="ctx-1",
            eventTime="2024-05-01T12:00:00.5Z",
        )
    assert ack["result"] == "ok"
    assert ack["context"] == "ctx-1"
    msg = consumer.receive(timeout_millis=RECEIVE_MS)
    assert msg.data() == b"hello \x00 bytes"
    assert msg.partition_key() == "k-1"
    assert msg.properties() == {"a": "1", "b": "two"}
    expected = dt.datetime(2024, 5, 1, 12, 0, 0, 500_000, tzinfo=dt.UTC)
    assert msg.event_timestamp() == int(expected.timestamp() * 1000)
    # The ack's id is the official client's id of the same message, both ways.
    assert pulsar.MessageId.deserialize(unb64(ack["messageId"])) == msg.message_id()
    assert decode_message_id(b64(msg.message_id().serialize())) == decode_message_id(
        ack["messageId"]
    )


@pytest.mark.parametrize("codec", ["LZ4", "ZLIB", "ZSTD", "SNAPPY"])
async def test_compression_type_compresses_the_stored_entry(
    gateway: Any, client_factory: Any, redis_clean: Any, topic: str, codec: str
) -> None:
    client = client_factory(gateway.url)
    consumer = subscribe(client, topic)
    payload = b"compress me " * 200
    async with connect(producer_url(gateway, topic, compressionType=codec)) as ws:
        assert (await ws.produce(payload))["result"] == "ok"
    assert consumer.receive(timeout_millis=RECEIVE_MS).data() == payload
    # The stored entry is the compressed form a binary producer sends.
    ((_, fields),) = redis_clean.xrange(stream_key(topic))
    assert len(fields[b"m"]) < len(payload) // 2
    assert parse_blob(fields[b"m"]).metadata.compression == COMPRESSION_TYPES[codec]


def stored_metadata(redis: Any, topic: str) -> list[Any]:
    """The MessageMetadata of every stored entry of ``topic``."""
    return [parse_blob(fields[b"m"]).metadata for _, fields in redis.xrange(stream_key(topic))]


async def test_sequence_ids_and_deduplication(
    gateway: Any, client_factory: Any, redis_clean: Any, topic: str
) -> None:
    status, _ = await call(
        "POST", f"{gateway.http_url}/admin/v2/namespaces/public/default/deduplication", True
    )
    assert status == 204
    client = client_factory(gateway.url)
    consumer = subscribe(client, topic)
    url = producer_url(gateway, topic, producerName="ws-dedup", initialSequenceId=9)
    async with connect(url) as ws:
        first = await ws.produce(b"a")  # sequence id 10
        second = await ws.produce(b"b", sequenceId=20)
        duplicate = await ws.produce(b"c", sequenceId=15)
    assert first["result"] == second["result"] == duplicate["result"] == "ok"
    assert decode_message_id(duplicate["messageId"]).ledger_id == -1
    got = [consumer.receive(timeout_millis=RECEIVE_MS).data() for _ in range(2)]
    assert got == [b"a", b"b"]
    # A reconnection continues after the stored last sequence id (PRODUCER_SUCCESS).
    async with connect(producer_url(gateway, topic, producerName="ws-dedup")) as ws:
        assert (await ws.produce(b"d"))["result"] == "ok"
    assert consumer.receive(timeout_millis=RECEIVE_MS).data() == b"d"
    stored = stored_metadata(redis_clean, topic)
    assert [(m.producer_name, m.sequence_id) for m in stored] == [
        ("ws-dedup", 10),
        ("ws-dedup", 20),
        ("ws-dedup", 21),
    ]


async def test_deliver_after_and_refused_delay(
    gateway: Any, client_factory: Any, topic: str
) -> None:
    client = client_factory(gateway.url)
    consumer = subscribe(client, topic, consumer_type=pulsar.ConsumerType.Shared)
    async with connect(producer_url(gateway, topic)) as ws:
        sent = asyncio.get_running_loop().time()
        assert (await ws.produce(b"later", deliverAfterMs=600))["result"] == "ok"
        assert (await ws.produce(b"now"))["result"] == "ok"
    assert consumer.receive(timeout_millis=RECEIVE_MS).data() == b"now"
    msg = consumer.receive(timeout_millis=RECEIVE_MS)
    assert msg.data() == b"later"
    assert asyncio.get_running_loop().time() - sent >= 0.5

    status, _ = await call(
        "POST",
        f"{gateway.http_url}/admin/v2/persistent/public/default/{topic}/delayedDelivery",
        {"active": True, "tickTime": 1000, "maxDeliveryDelayInMillis": 1000},
    )
    assert status == 204
    await asyncio.sleep(0.2)
    async with connect(producer_url(gateway, topic)) as ws:
        for _ in range(50):  # the policy reaches the producer with the policy refresh
            ack = await ws.produce(b"too late", deliverAfterMs=60_000, context="c")
            if ack["result"] != "ok":
                break
            await asyncio.sleep(0.1)
    assert ack == {"result": "send-error:8", "errorMsg": ack["errorMsg"], "context": "c"}
    assert ack["errorMsg"]


async def test_keyed_routing_on_partitioned_topic(
    gateway: Any, client_factory: Any, topic: str
) -> None:
    status, _ = await call(
        "PUT", f"{gateway.http_url}/admin/v2/persistent/public/default/{topic}/partitions", 5
    )
    assert status == 204
    client = client_factory(gateway.url)
    consumer = subscribe(client, topic)
    keys = [f"key-{i}" for i in range(12)]
    for scheme, hash_fn in (
        ("JavaStringHash", java_string_hash),
        ("Murmur3_32Hash", murmur3_32_hash),
    ):
        async with connect(producer_url(gateway, topic, hashingScheme=scheme)) as ws:
            for key in keys:
                ack = await ws.produce(key.encode(), key=key)
                assert decode_message_id(ack["messageId"]).partition == hash_fn(key) % 5
        for _ in keys:
            msg = consumer.receive(timeout_millis=RECEIVE_MS)
            # the official consumer sees it on the partition the gateway chose
            assert msg.topic_name() == f"{full(topic)}-partition-{hash_fn(msg.partition_key()) % 5}"
            consumer.acknowledge(msg)
    # Java's String.hashCode, spelled out for one key: "key-0" -> 101943417 & MAX
    assert java_string_hash("key-0") == _java_hash("key-0")


def _java_hash(text: str) -> int:
    h = 0
    for ch in text:
        h = (h * 31 + ord(ch)) % (1 << 32)
    return h & 0x7FFFFFFF


async def test_keyless_routing_modes(gateway: Any, topic: str) -> None:
    await call(
        "PUT", f"{gateway.http_url}/admin/v2/persistent/public/default/{topic}/partitions", 3
    )
    async with connect(producer_url(gateway, topic)) as ws:  # SinglePartition
        parts = {
            decode_message_id((await ws.produce(b"x"))["messageId"]).partition for _ in range(6)
        }
    assert len(parts) == 1
    url = producer_url(gateway, topic, messageRoutingMode="RoundRobinPartition")
    async with connect(url) as ws:
        parts_seq = [
            decode_message_id((await ws.produce(b"x"))["messageId"]).partition for _ in range(6)
        ]
    assert sorted(parts_seq) == [0, 0, 1, 1, 2, 2]
    assert all((b - a) % 3 == 1 for a, b in itertools.pairwise(parts_seq))


async def test_non_persistent_topic(gateway: Any, client_factory: Any, topic: str) -> None:
    client = client_factory(gateway.url)
    consumer = client.subscribe(full(topic, "non-persistent"), "s")
    async with connect(producer_url(gateway, topic, domain="non-persistent")) as ws:
        ack = await ws.produce(b"live")
    assert ack["result"] == "ok"
    assert consumer.receive(timeout_millis=RECEIVE_MS).data() == b"live"


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ({"compressionType": "lz4"}, "Invalid query params: Invalid compressionType lz4"),
        (
            {"messageRoutingMode": "Random"},
            "Invalid query params: Invalid messageRoutingMode Random",
        ),
        ({"hashingScheme": "Md5"}, "Invalid query params: Invalid hashingScheme Md5"),
        (
            {"batchingEnabled": "yes"},
            "Invalid query params: Invalid batchingEnabled yes: expected true or false",
        ),
        (
            {"sendTimeoutMillis": "soon"},
            'Invalid query params: sendTimeoutMillis: For input string: "soon"',
        ),
        ({"maxPendingMessages": "0"}, "Invalid query params: maxPendingMessages needs to be > 0"),
        (
            {"initialSequenceId": "x"},
            'Invalid query params: initialSequenceId: For input string: "x"',
        ),
    ],
)
async def test_bad_query_parameters_get_400(
    gateway: Any, topic: str, query: Any, reason: str
) -> None:
    status, body = await refused(producer_url(gateway, topic, **query))
    assert (status, body) == (400, {"reason": reason})


async def test_invalid_topic_name_gets_400(gateway: Any) -> None:
    url = gateway.http_url.replace("http", "ws") + "/ws/v2/producer/persistent/bad$tenant/ns/t"
    status, body = await refused(url)
    assert status == 400
    assert body["reason"].startswith("Invalid query params: Invalid tenant name")


async def test_producer_busy_gets_409(gateway: Any, topic: str) -> None:
    async with connect(producer_url(gateway, topic, producerName="only-one")):
        status, body = await refused(producer_url(gateway, topic, producerName="only-one"))
    assert status == 409
    assert body["reason"].startswith("Failed to create producer:")


async def test_bad_frames_get_send_errors_and_the_session_goes_on(
    gateway: Any, client_factory: Any, topic: str
) -> None:
    client = client_factory(gateway.url)
    consumer = subscribe(client, topic)
    async with connect(producer_url(gateway, topic)) as ws:
        await ws.send("{not json")
        assert (await ws.receive())["result"] == "send-error:3"
        await ws.send({"payload": "%%%", "context": "c1"})
        bad = await ws.receive()
        assert bad["result"] == "send-error:7"
        assert bad["context"] == "c1"
        assert bad["errorMsg"].startswith("Invalid Base64 message-payload")
        await ws.send({"context": "c2"})
        assert await ws.receive() == {
            "result": "send-error:7",
            "errorMsg": "Missing payload",
            "context": "c2",
        }
        await ws.send({"payload": b64(b"x"), "eventTime": "yesterday"})
        assert (await ws.receive())["result"] == "send-error:7"
        await ws.ws.send_bytes(b"\x00binary")
        assert (await ws.receive())["result"] == "error:3"
        assert (await ws.produce(b"still works"))["result"] == "ok"
    assert consumer.receive(timeout_millis=RECEIVE_MS).data() == b"still works"


async def test_max_sessions_gets_429(gateway_factory: Any, topic: str) -> None:
    gw = gateway_factory(websocket_max_sessions=1)
    async with connect(producer_url(gw, topic)):
        status, body = await refused(producer_url(gw, topic))
        assert (status, body) == (429, {"reason": "Too many WebSocket sessions"})
    # the place is free again once the session closed
    for _ in range(50):
        try:
            async with connect(producer_url(gw, topic)) as ws:
                assert (await ws.produce(b"x"))["result"] == "ok"
            break
        except Exception:
            await asyncio.sleep(0.05)
    else:
        raise AssertionError("session place never freed")


async def test_metrics_count_websocket_sessions(gateway: Any, topic: str) -> None:
    async with connect(producer_url(gateway, topic)) as ws:
        await ws.produce(b"x")
        _, text = await _metrics(gateway)
        assert 'pulsar_gateway_connections{protocol="websocket"} 1.0' in text
    await refused(producer_url(gateway, topic, compressionType="bad"))
    _, text = await _metrics(gateway)
    assert 'pulsar_gateway_connections_opened_total{protocol="websocket"} 1.0' in text
    assert 'pulsar_gateway_errors_total{error="ParamError",protocol="websocket"}' in text


async def _metrics(gateway: Any) -> tuple[int, str]:
    from tests.adminhttp import call_text

    return await call_text("GET", f"{gateway.http_url}/metrics")
