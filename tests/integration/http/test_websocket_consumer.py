"""The WebSocket consumer (``/ws/v2/consumer/...``): messages from the official client's
producers (batched, compressed), acks of every kind, negative acks, ack timeout, dead
letters, flow control (receiverQueueSize, pull mode), partitioned and non-persistent
topics, and errors before and after the upgrade."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pulsar
import pytest

from pulsar_gateway.entry_codec import decode_message_id
from tests.adminhttp import call
from tests.conftest import ON_CLUSTER, TIMEOUT, stream_key
from tests.wsclient import b64, connect, consumer_url, full, producer_url, refused, unb64

# The cluster pass of ./dev test runs this file on a Redis Cluster too: WebSocket: consumer
# (every subscription type), producer, reader (and v3 multi-topic)
pytestmark = pytest.mark.cluster

RECEIVE_MS = int(TIMEOUT * 1000)
SHARED = {"subscriptionType": "Shared"}


def pending(redis: Any, topic: str, sub: str = "sub") -> int:
    return int(redis.xpending(stream_key(topic), sub)["pending"])


async def wait_until(predicate: Any, timeout: float = TIMEOUT) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def official_send(client: Any, topic: str, payloads: list[bytes], **kwargs: Any) -> list[Any]:
    """Send with the official client (batched when asked), returning the message ids."""
    producer = client.create_producer(topic, block_if_queue_full=True, **kwargs)
    ids: list[Any] = []
    for i, payload in enumerate(payloads):
        producer.send_async(
            payload,
            lambda res, mid: ids.append(mid),
            partition_key=f"key-{i}",
            properties={"i": str(i)},
            event_timestamp=1_700_000_000_000 + i,
        )
    producer.flush()
    producer.close()
    return ids


async def test_batched_lz4_messages_from_official_producer(
    gateway: Any, client_factory: Any, redis_clean: Any, topic: str
) -> None:
    client = client_factory(gateway.url)
    async with connect(consumer_url(gateway, topic, "sub")) as ws:
        payloads = [f"message-{i}".encode() * 10 for i in range(5)]
        ids = official_send(
            client,
            topic,
            payloads,
            batching_enabled=True,
            batching_max_publish_delay_ms=50,
            compression_type=pulsar.CompressionType.LZ4,
        )
        received = await ws.receive_many(5)
        for i, msg in enumerate(received):
            assert unb64(msg["payload"]) == payloads[i]
            assert msg["key"] == f"key-{i}"
            assert msg["properties"] == {"i": str(i)}
            assert msg["eventTime"] == f"2023-11-14T22:13:20.{i:03d}".rstrip("0").rstrip(".") + "Z"
            assert msg["redeliveryCount"] == 0
            assert msg["publishTime"].endswith("Z")
            # the WebSocket id is the official id, batch index and all
            official = pulsar.MessageId.deserialize(unb64(msg["messageId"]))
            assert official == ids[i]
            assert decode_message_id(msg["messageId"]).batch_index == i
        # the five messages are one stored entry: acks are batch-index acks
        assert pending(redis_clean, topic) == 1
        for msg in received:
            await ws.ack(msg)
        await wait_until(lambda: pending(redis_clean, topic) == 0)


async def test_batch_index_ack_keeps_the_rest_of_the_batch(
    gateway: Any, client_factory: Any, redis_clean: Any, topic: str
) -> None:
    client = client_factory(gateway.url)
    url = consumer_url(gateway, topic, "sub", subscriptionInitialPosition="Earliest")
    official_send(client, topic, [b"a", b"b", b"c"], batching_enabled=True)
    async with connect(url) as ws:
        received = await ws.receive_many(3)
        await ws.ack(received[1])
        await asyncio.sleep(0.2)
    async with connect(url) as ws:  # the unacked two come back, "b" does not
        again = await ws.receive_many(2)
        assert [unb64(m["payload"]) for m in again] == [b"a", b"c"]
        assert [m["messageId"] for m in again] == [
            received[0]["messageId"],
            received[2]["messageId"],
        ]
        assert await ws.nothing_within(0.3)


async def test_websocket_ids_work_with_the_official_client(
    gateway: Any, client_factory: Any, topic: str
) -> None:
    client = client_factory(gateway.url)
    async with connect(producer_url(gateway, topic)) as ws:
        acks = [await ws.produce(f"m{i}".encode()) for i in range(4)]
    official = client.subscribe(topic, "seeker", initial_position=pulsar.InitialPosition.Earliest)
    ids = [official.receive(timeout_millis=RECEIVE_MS).message_id() for _ in range(4)]
    assert [pulsar.MessageId.deserialize(unb64(a["messageId"])) for a in acks] == ids
    # seeking the official consumer to the WebSocket id is seeking to its own id
    official.seek(ids[2])
    expected = official.receive(timeout_millis=RECEIVE_MS).data()
    official.seek(pulsar.MessageId.deserialize(unb64(acks[2]["messageId"])))
    assert official.receive(timeout_millis=RECEIVE_MS).data() == expected


async def test_initial_position_and_subscription_types(
    gateway: Any, client_factory: Any, topic: str
) -> None:
    client = client_factory(gateway.url)
    official_send(client, topic, [b"old"])
    async with connect(consumer_url(gateway, topic, "latest")) as ws:
        assert await ws.nothing_within(0.3)
    for sub_type in ("Exclusive", "Shared", "Failover", "Key_Shared"):
        url = consumer_url(
            gateway,
            topic,
            f"sub-{sub_type}",
            subscriptionType=sub_type,
            subscriptionInitialPosition="Earliest",
            consumerName="ws",
            priorityLevel=1,
        )
        async with connect(url) as ws:
            msg = await ws.receive()
            assert unb64(msg["payload"]) == b"old"
            await ws.ack(msg)


async def test_exclusive_subscription_taken_gets_409(gateway: Any, topic: str) -> None:
    async with connect(consumer_url(gateway, topic, "sub")):
        status, body = await refused(consumer_url(gateway, topic, "sub"))
    assert status == 409
    assert body["reason"].startswith("Failed to create consumer:")


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ({"subscriptionType": "shared"}, "Invalid subscriptionType shared"),
        ({"subscriptionInitialPosition": "First"}, "Invalid subscriptionInitialPosition First"),
        ({"subscriptionMode": "Forever"}, "Invalid subscriptionMode Forever"),
        ({"receiverQueueSize": "-1"}, "receiverQueueSize needs to be >= 0"),
        ({"receiverQueueSize": "lots"}, 'receiverQueueSize: For input string: "lots"'),
        ({"ackTimeoutMillis": "500"}, "Ack timeout should be greater than 1000 ms"),
        ({"maxRedeliverCount": "0"}, "MaxRedeliverCount must be > 0."),
        ({"deadLetterTopic": "dlq"}, "deadLetterTopic needs maxRedeliverCount"),
        ({"priorityLevel": "-2"}, "priorityLevel needs to be >= 0"),
        ({"pullMode": "1"}, "Invalid pullMode 1: expected true or false"),
        ({"negativeAckRedeliveryDelay": "x"}, 'negativeAckRedeliveryDelay: For input string: "x"'),
        # a line break in the value: still a JSON 400 (aiohttp refuses \r in a reason: a 500
        # the fuzzer found)
        ({"subscriptionType": "a\rb\nc"}, "Invalid subscriptionType a b c"),
    ],
)
async def test_bad_query_parameters_get_400(
    gateway: Any, topic: str, query: dict[str, str], reason: str
) -> None:
    status, body = await refused(consumer_url(gateway, topic, "sub", **query))
    assert (status, body) == (400, {"reason": f"Invalid query params: {reason}"})


async def test_negative_ack_redelivers_after_the_delay(gateway: Any, topic: str) -> None:
    url = consumer_url(gateway, topic, "sub", negativeAckRedeliveryDelay=300, **SHARED)
    async with connect(url) as ws, connect(producer_url(gateway, topic)) as producer:
        await producer.produce(b"retry me")
        first = await ws.receive()
        start = asyncio.get_running_loop().time()
        await ws.send({"type": "negativeAcknowledge", "messageId": first["messageId"]})
        again = await ws.receive()
        assert asyncio.get_running_loop().time() - start >= 0.25
        assert again["messageId"] == first["messageId"]
        assert again["redeliveryCount"] == 1
        await ws.ack(again)


async def test_failover_negative_ack_redelivers_every_unacked_message_in_order(
    gateway: Any, topic: str
) -> None:
    """On Exclusive and Failover a redelivery gives back everything the consumer holds,
    whatever ids it names (ServerCnx.handleRedeliverUnacknowledged), as the binary
    protocol does: nack the middle one of three, all three come again, in order."""
    url = consumer_url(
        gateway, topic, "sub", subscriptionType="Failover", negativeAckRedeliveryDelay=0
    )
    async with connect(url) as ws, connect(producer_url(gateway, topic)) as producer:
        for i in range(3):
            await producer.produce(f"f{i}".encode())
        first = await ws.receive_many(3)
        assert [unb64(m["payload"]) for m in first] == [b"f0", b"f1", b"f2"]
        await ws.send({"type": "negativeAcknowledge", "messageId": first[1]["messageId"]})
        again = await ws.receive_many(3)
        assert [m["messageId"] for m in again] == [m["messageId"] for m in first]
        # Failover counts no redeliveries (Pulsar's RedeliveryTrackerDisabled)
        assert [m["redeliveryCount"] for m in again] == [0, 0, 0]
        for msg in again:
            await ws.ack(msg)
        assert await ws.nothing_within(0.3)


async def test_shared_negative_ack_redelivers_only_that_message(gateway: Any, topic: str) -> None:
    url = consumer_url(gateway, topic, "sub", negativeAckRedeliveryDelay=0, **SHARED)
    async with connect(url) as ws, connect(producer_url(gateway, topic)) as producer:
        for i in range(3):
            await producer.produce(f"s{i}".encode())
        first = await ws.receive_many(3)
        await ws.send({"type": "negativeAcknowledge", "messageId": first[1]["messageId"]})
        again = await ws.receive()
        assert (again["messageId"], again["redeliveryCount"]) == (first[1]["messageId"], 1)
        for msg in (first[0], again, first[2]):
            await ws.ack(msg)
        assert await ws.nothing_within(0.3)


async def test_dead_letter_topic_after_max_redeliveries(
    gateway: Any, client_factory: Any, redis_clean: Any, topic: str
) -> None:
    client = client_factory(gateway.url)
    dlq = full(f"{topic}-sub-DLQ")
    watcher = client.subscribe(dlq, "watch", initial_position=pulsar.InitialPosition.Earliest)
    url = consumer_url(
        gateway, topic, "sub", maxRedeliverCount=2, negativeAckRedeliveryDelay=50, **SHARED
    )
    async with connect(url) as ws, connect(producer_url(gateway, topic)) as producer:
        ack = await producer.produce(
            b"poison", key="pk", properties={"p": "1"}, eventTime=1_700_000_000_123
        )
        counts = []
        for _ in range(3):
            msg = await ws.receive()
            counts.append(msg["redeliveryCount"])
            await ws.send({"type": "negativeAcknowledge", "messageId": msg["messageId"]})
        assert counts == [0, 1, 2]
        # the gateway moved it to the DLQ instead of pushing it a fourth time
        dead = watcher.receive(timeout_millis=RECEIVE_MS)
        assert await ws.nothing_within(0.3)
    assert dead.data() == b"poison"
    assert dead.partition_key() == "pk"
    assert dead.event_timestamp() == 1_700_000_000_123
    original = decode_message_id(ack["messageId"])
    assert dead.properties() == {
        "p": "1",
        "REAL_TOPIC": full(topic),
        "ORIGIN_MESSAGE_ID": f"{original.ledger_id}:{original.entry_id}:-1",
    }
    await wait_until(lambda: pending(redis_clean, topic) == 0)


async def test_dead_letter_counts_a_consumer_that_died(
    gateway: Any, client_factory: Any, topic: str
) -> None:
    """Redelivery counts live in Redis: sessions that drop a message count too."""
    client = client_factory(gateway.url)
    dlq = full(f"{topic}-custom-dlq")
    watcher = client.subscribe(dlq, "watch", initial_position=pulsar.InitialPosition.Earliest)
    url = consumer_url(
        gateway,
        topic,
        "sub",
        maxRedeliverCount=1,
        deadLetterTopic=dlq,
        subscriptionInitialPosition="Earliest",
        **SHARED,
    )
    async with connect(producer_url(gateway, topic)) as producer:
        await producer.produce(b"dropped twice")
    for count in (0, 1):
        async with connect(url) as ws:  # receives, then goes away without acking
            assert (await ws.receive())["redeliveryCount"] == count
    async with connect(url) as ws:
        dead = watcher.receive(timeout_millis=RECEIVE_MS)
        assert dead.data() == b"dropped twice"
        assert await ws.nothing_within(0.3)


async def test_ack_timeout_redelivers_without_stalling(gateway: Any, topic: str) -> None:
    url = consumer_url(gateway, topic, "sub", ackTimeoutMillis=1000, receiverQueueSize=1, **SHARED)
    async with connect(url) as ws, connect(producer_url(gateway, topic)) as producer:
        await producer.produce(b"one")
        await producer.produce(b"two")
        first = await ws.receive()
        assert unb64(first["payload"]) == b"one"
        # never acked: after the timeout it comes back, and the window moves on
        seen = [await ws.receive(), await ws.receive()]
        payloads = sorted(unb64(m["payload"]) for m in seen)
        assert payloads == [b"one", b"two"]
        redelivered = next(m for m in seen if unb64(m["payload"]) == b"one")
        assert redelivered["redeliveryCount"] == 1
        for msg in seen:
            await ws.ack(msg)


async def test_receiver_queue_size_is_the_window(gateway: Any, topic: str) -> None:
    url = consumer_url(gateway, topic, "sub", receiverQueueSize=3)
    async with connect(url) as ws, connect(producer_url(gateway, topic)) as producer:
        for i in range(5):
            await producer.produce(str(i).encode())
        got = await ws.receive_many(3)
        assert await ws.nothing_within(0.3)
        await ws.ack(got[0])
        fourth = await ws.receive()
        assert unb64(fourth["payload"]) == b"3"
        assert await ws.nothing_within(0.2)


async def test_receiver_queue_size_above_1000(
    gateway: Any, client_factory: Any, topic: str
) -> None:
    client = client_factory(gateway.url)
    official_send(client, topic, [b"x"] * 1500, batching_enabled=True)
    url = consumer_url(
        gateway, topic, "sub", receiverQueueSize=2000, subscriptionInitialPosition="Earliest"
    )
    async with connect(url) as ws:
        # Pulsar caps the window at 1000; here all 1500 arrive without a single ack
        got = await ws.receive_many(1500)
        assert len({m["messageId"] for m in got}) == 1500


async def test_pull_mode_permits(gateway: Any, topic: str) -> None:
    url = consumer_url(gateway, topic, "sub", pullMode="true")
    async with connect(url) as ws, connect(producer_url(gateway, topic)) as producer:
        for i in range(5):
            await producer.produce(str(i).encode())
        assert await ws.nothing_within(0.3)
        await ws.send({"type": "permit", "permitMessages": 2})
        got = await ws.receive_many(2)
        for msg in got:  # acks give no permits in pull mode
            await ws.ack(msg)
        assert await ws.nothing_within(0.3)
        await ws.send({"type": "permit", "permitMessages": 1})
        assert unb64((await ws.receive())["payload"]) == b"2"
        assert await ws.nothing_within(0.2)


async def test_cumulative_ack(gateway: Any, redis_clean: Any, topic: str) -> None:
    async with connect(producer_url(gateway, topic)) as producer:
        async with connect(consumer_url(gateway, topic, "sub")) as ws:
            for i in range(4):
                await producer.produce(str(i).encode())
            got = await ws.receive_many(4)
            await ws.send({"type": "cumulativeAcknowledge", "messageId": got[2]["messageId"]})
            await wait_until(lambda: pending(redis_clean, topic) == 1)
        url = consumer_url(gateway, topic, "shared", **SHARED)
        async with connect(url) as ws:
            await producer.produce(b"x")
            msg = await ws.receive()
            await ws.send({"type": "cumulativeAcknowledge", "messageId": msg["messageId"]})
            reply = await ws.receive()
            assert reply == {
                "result": "error:8",
                "errorMsg": "Cumulative ack is not supported for Shared subscription",
                "messageId": msg["messageId"],
            }


async def test_partitioned_topic_by_base_name(
    gateway: Any, client_factory: Any, redis_clean: Any, topic: str
) -> None:
    status, _ = await call(
        "PUT", f"{gateway.http_url}/admin/v2/persistent/public/default/{topic}/partitions", 3
    )
    assert status == 204
    client = client_factory(gateway.url)
    async with connect(consumer_url(gateway, topic, "sub")) as ws:
        ids = official_send(client, topic, [f"p{i}".encode() for i in range(9)])
        got = await ws.receive_many(9)
        assert {decode_message_id(m["messageId"]) for m in got} == {
            decode_message_id(b64(i.serialize())) for i in ids
        }
        assert {decode_message_id(m["messageId"]).partition for m in got} == {0, 1, 2}
        for msg in got:
            await ws.ack(msg)
        for i in range(3):
            await wait_until(lambda i=i: pending(redis_clean, f"{topic}-partition-{i}") == 0)


async def test_non_persistent_topic(gateway: Any, client_factory: Any, topic: str) -> None:
    client = client_factory(gateway.url)
    url = consumer_url(gateway, topic, "sub", domain="non-persistent")
    async with connect(url) as ws:
        producer = client.create_producer(full(topic, "non-persistent"))
        producer.send(b"live", properties={"a": "b"})
        msg = await ws.receive()
        assert unb64(msg["payload"]) == b"live"
        assert msg["properties"] == {"a": "b"}
        await ws.ack(msg)


async def test_bad_commands_get_error_replies_and_the_session_goes_on(
    gateway: Any, topic: str
) -> None:
    async with (
        connect(consumer_url(gateway, topic, "sub")) as ws,
        connect(producer_url(gateway, topic)) as producer,
    ):
        for frame, error in (
            ("{oops", "Invalid JSON"),
            ("[1, 2]", "A command must be a JSON object"),
            ({"type": "rewind"}, "Unknown command type 'rewind'"),
            ({"messageId": "***"}, "Invalid message id"),
            ({"messageId": b64(b"\x01\x02\x03")}, "Invalid message id"),
            ({}, "Missing required messageId field"),
            ({"type": "permit"}, "Missing required permitMessages field for 'permit' command"),
        ):
            await ws.send(frame)
            reply = await ws.receive()
            assert reply["result"] == "error:3"
            assert reply["errorMsg"].startswith(error), reply
        await ws.send({"type": "isEndOfTopic"})
        assert await ws.receive() == {"endOfTopic": False}
        await producer.produce(b"still served")
        msg = await ws.receive()
        assert unb64(msg["payload"]) == b"still served"
        await ws.ack(msg)


async def test_unsubscribe_deletes_the_subscription(
    gateway: Any, redis_clean: Any, topic: str
) -> None:
    async with connect(consumer_url(gateway, topic, "sub")) as ws:
        await ws.send({"type": "unsubscribe"})
        msg = await ws.ws.receive(timeout=TIMEOUT)
        assert msg.type == aiohttp.WSMsgType.CLOSE
        assert msg.data == 1000
    groups = redis_clean.xinfo_groups(stream_key(topic))
    assert [g["name"] for g in groups] == []


async def test_consumer_closed_by_the_gateway_closes_the_socket(gateway: Any, topic: str) -> None:
    async with connect(consumer_url(gateway, topic, "sub")) as ws:

        async def storage_failure() -> None:
            # what the core does when a Redis call for the consumer failed: close it
            # and hand its messages back
            for consumer in list(gateway.gateway.services.subscriptions.consumers()):
                consumer.abandon()

        gateway.call(storage_failure())
        msg = await ws.ws.receive(timeout=TIMEOUT)
        assert msg.type == aiohttp.WSMsgType.CLOSE
        assert msg.data == 1011
        assert "reconnect" in msg.extra
    # the client reconnects (once the hand-back reached Redis) and is served again
    for _ in range(50):
        try:
            async with connect(consumer_url(gateway, topic, "sub")) as ws:
                await ws.send({"type": "isEndOfTopic"})
                assert await ws.receive() == {"endOfTopic": False}
            return
        except aiohttp.WSServerHandshakeError as exc:
            assert exc.status == 409
            await asyncio.sleep(0.05)
    raise AssertionError("never served again")


@pytest.mark.parametrize("compress", [0, 15], ids=["plain", "permessage-deflate"])
async def test_frames_of_every_length_class_arrive_whole(
    gateway: Any, redis_clean: Any, topic: str, compress: int
) -> None:
    """Frames are written in one socket write per round past aiohttp's writer when the
    connection is not compressed: each length form of RFC 6455 5.2 (7-bit, 16-bit, 64-bit)
    must arrive whole and in order; with permessage-deflate aiohttp writes each frame."""
    sizes = [0, 50, 1_000, 60_000, 100_000] * 3
    payloads = [bytes([i % 251]) * size for i, size in enumerate(sizes)]
    async with (
        connect(producer_url(gateway, topic), compress=compress) as producer,
        connect(consumer_url(gateway, topic, "sub", **SHARED), compress=compress) as consumer,
    ):
        for i, payload in enumerate(payloads):
            await producer.send({"payload": b64(payload), "context": str(i)})
        acks = await producer.receive_many(len(payloads))
        assert [a["context"] for a in acks] == [str(i) for i in range(len(payloads))]
        assert all(a["result"] == "ok" for a in acks)
        received = await consumer.receive_many(len(payloads))
        assert [unb64(m["payload"]) for m in received] == payloads
        for message in received:
            await consumer.ack(message)
        await wait_until(lambda: pending(redis_clean, topic) == 0)


async def test_acks_sent_just_before_closing_are_kept(
    gateway: Any, redis_clean: Any, topic: str
) -> None:
    """A tick's acks go to Redis together at its end; a session closed right after its
    acks still acknowledges them (nothing comes back to the next consumer)."""
    xacks_before = xack_calls(redis_clean)  # Redis's counts run over the whole suite
    async with (
        connect(consumer_url(gateway, topic, "sub", **SHARED)) as consumer,
        connect(producer_url(gateway, topic)) as producer,
    ):
        for i in range(20):
            await producer.send({"payload": b64(b"m%d" % i)})
        await producer.receive_many(20)
        received = await consumer.receive_many(20)
        for message in received:
            await consumer.send({"messageId": message["messageId"]})
    await wait_until(lambda: pending(redis_clean, topic) == 0)
    async with connect(consumer_url(gateway, topic, "sub", **SHARED)) as consumer:
        assert await consumer.nothing_within(0.5)
    calls = xack_calls(redis_clean) - xacks_before
    assert 0 < calls < 20, f"{calls} XACKs for 20 acks sent together"


def xack_calls(redis: Any) -> int:
    """XACKs Redis has run (on a cluster: its masters')."""
    if ON_CLUSTER:
        per_node = redis.info("commandstats", target_nodes=redis.PRIMARIES).values()
    else:
        per_node = [redis.info("commandstats")]
    return sum(int(stats.get("cmdstat_xack", {}).get("calls", 0)) for stats in per_node)
