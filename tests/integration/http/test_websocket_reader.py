"""The WebSocket reader (``/ws/v2/reader/...``), the multi-topic consumer
(``/ws/v3/consumer/...``) and the ping-pong endpoint."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pulsar
import pytest

from pulsar_gateway.entry_codec import decode_message_id
from tests.adminhttp import call
from tests.conftest import TIMEOUT, stream_key
from tests.wsclient import (
    b64,
    connect,
    consumer_url,
    full,
    producer_url,
    reader_url,
    refused,
    unb64,
    ws_url,
)

# The cluster pass of ./dev test runs this file on a Redis Cluster too: WebSocket: consumer
# (every subscription type), producer, reader (and v3 multi-topic)
pytestmark = pytest.mark.cluster


async def produce(gateway: Any, topic: str, count: int, prefix: str = "m") -> list[str]:
    """Send ``count`` messages with the WebSocket producer; return their ids."""
    async with connect(producer_url(gateway, topic)) as ws:
        return [(await ws.produce(f"{prefix}{i}".encode()))["messageId"] for i in range(count)]


def payloads(messages: list[dict[str, Any]]) -> list[bytes]:
    return [unb64(m["payload"]) for m in messages]


# -- reader ---------------------------------------------------------------------------------


async def test_reader_earliest_latest_and_end_of_topic(gateway: Any, topic: str) -> None:
    await produce(gateway, topic, 3)
    async with connect(reader_url(gateway, topic, messageId="earliest")) as ws:
        assert payloads(await ws.receive_many(3)) == [b"m0", b"m1", b"m2"]
        await ws.send({"type": "isEndOfTopic"})
        assert await ws.receive() == {"endOfTopic": False}
    async with connect(reader_url(gateway, topic)) as ws:  # latest is the default
        assert await ws.nothing_within(0.3)
        await produce(gateway, topic, 1, prefix="new")
        assert payloads([await ws.receive()]) == [b"new0"]


async def test_reader_starts_after_the_given_id(gateway: Any, topic: str) -> None:
    ids = await produce(gateway, topic, 4)
    async with connect(reader_url(gateway, topic, messageId=ids[1])) as ws:
        got = await ws.receive_many(2)
        assert payloads(got) == [b"m2", b"m3"]
        assert [m["messageId"] for m in got] == ids[2:]
        assert await ws.nothing_within(0.3)


async def test_reader_from_a_batch_index(gateway: Any, client_factory: Any, topic: str) -> None:
    client = client_factory(gateway.url)
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_publish_delay_ms=50
    )
    ids: list[Any] = []
    for i in range(3):
        producer.send_async(f"b{i}".encode(), lambda res, mid: ids.append(mid))
    producer.flush()
    assert len({(i.ledger_id(), i.entry_id()) for i in ids}) == 1  # one batch
    start = b64(ids[0].serialize())
    async with connect(reader_url(gateway, topic, messageId=start)) as ws:
        got = await ws.receive_many(2)
        assert payloads(got) == [b"b1", b"b2"]
        assert [decode_message_id(m["messageId"]).batch_index for m in got] == [1, 2]


async def test_reader_acks_are_flow_control(gateway: Any, redis_clean: Any, topic: str) -> None:
    await produce(gateway, topic, 4)
    async with connect(reader_url(gateway, topic, messageId="earliest", receiverQueueSize=2)) as ws:
        got = await ws.receive_many(2)
        assert await ws.nothing_within(0.3)
        await ws.ack(got[0])
        assert payloads([await ws.receive()]) == [b"m2"]
        assert await ws.nothing_within(0.2)
        # the reader's subscription is non-durable and holds nothing unacked
        (group,) = redis_clean.xinfo_groups(stream_key(topic))
        assert group["name"].startswith(b"reader-")
        assert group["pending"] == 0
    # ... and is gone with the reader
    for _ in range(100):
        if not redis_clean.xinfo_groups(stream_key(topic)):
            break
        await asyncio.sleep(0.02)
    assert redis_clean.xinfo_groups(stream_key(topic)) == []


async def test_reader_on_a_partitioned_topic(gateway: Any, topic: str) -> None:
    url = f"{gateway.http_url}/admin/v2/persistent/public/default/{topic}/partitions"
    assert (await call("PUT", url, 2))[0] == 204
    async with connect(producer_url(gateway, topic, messageRoutingMode="RoundRobinPartition")) as p:
        for i in range(4):
            await p.produce(f"m{i}".encode())
    async with connect(reader_url(gateway, topic, messageId="earliest")) as ws:
        got = await ws.receive_many(4)
        assert sorted(payloads(got)) == [b"m0", b"m1", b"m2", b"m3"]
        assert {decode_message_id(m["messageId"]).partition for m in got} == {0, 1}


async def test_reader_bad_parameters_get_400(gateway: Any, topic: str) -> None:
    status, body = await refused(reader_url(gateway, topic, messageId="not-an-id"))
    assert status == 400
    assert body["reason"].startswith("Invalid query params: messageId: Invalid message id")
    status, body = await refused(reader_url(gateway, topic, receiverQueueSize="many"))
    assert status == 400


# -- multi-topic consumer (v3) -------------------------------------------------------------


async def test_v3_consumer_with_a_topic_list(
    gateway: Any, client_factory: Any, redis_clean: Any, topic: str
) -> None:
    a, b = f"{topic}-a", f"{topic}-b"
    url = ws_url(
        gateway, "/ws/v3/consumer/multi", topics=f"{full(a)},{full(b)}", subscriptionType="Shared"
    )
    async with connect(url) as ws:
        await produce(gateway, a, 2, prefix="a")
        await produce(gateway, b, 2, prefix="b")
        got = await ws.receive_many(4)
        assert sorted(payloads(got)) == [b"a0", b"a1", b"b0", b"b1"]
        for msg in got:
            await ws.ack(msg)
        for name in (a, b):
            for _ in range(100):
                if int(redis_clean.xpending(stream_key(name), "multi")["pending"]) == 0:
                    break
                await asyncio.sleep(0.02)
            assert int(redis_clean.xpending(stream_key(name), "multi")["pending"]) == 0


async def test_v3_consumer_pattern_picks_up_new_topics(
    gateway: Any, client_factory: Any, topic: str
) -> None:
    await produce(gateway, f"{topic}-first", 0)
    client = client_factory(gateway.url)
    client.create_producer(f"{topic}-first").close()  # the topic exists
    pattern = f"persistent://public/default/{topic}-.*"
    url = ws_url(gateway, "/ws/v3/consumer/pat", topicsPattern=pattern)
    async with connect(url) as ws:
        await produce(gateway, f"{topic}-first", 1, prefix="first")
        assert payloads([await ws.receive()]) == [b"first0"]
        # a topic created after the subscription is found by the next discovery round
        later = client.create_producer(f"{topic}-later")
        await asyncio.sleep(1.5)
        later.send(b"later0")
        msg = await ws.receive()
        assert unb64(msg["payload"]) == b"later0"
        await ws.ack(msg)
        # topics outside the pattern are not subscribed
        await produce(gateway, f"other-{topic}", 1)
        assert await ws.nothing_within(0.3)


async def test_v3_consumer_needs_topics_or_a_pattern(gateway: Any, topic: str) -> None:
    status, body = await refused(ws_url(gateway, "/ws/v3/consumer/sub"))
    assert (status, body) == (
        400,
        {"reason": "Invalid query params: Should set topics or topicsPattern"},
    )
    url = ws_url(gateway, "/ws/v3/consumer/sub", topics=full(topic), topicsPattern="x.*")
    status, body = await refused(url)
    assert (status, body) == (
        400,
        {"reason": "Invalid query params: Topics must be null when use topicsPattern"},
    )
    status, _ = await refused(ws_url(gateway, "/ws/v3/consumer/sub", topicsPattern="bad(re"))
    assert status == 400


async def test_v3_pattern_that_backtracks_does_not_stall_the_gateway(
    gateway: Any, client_factory: Any, topic: str
) -> None:
    """``(a+)+`` against a name of forty a's and a b: a backtracking engine tries 2^40 ways
    (the fuzzer's first finding stopped every session of a gateway). Matched by RE2, the
    consumer opens at once and finds nothing while an official client keeps working."""
    client = client_factory(gateway.url)
    client.create_producer(f"{topic}-{'a' * 40}b").close()
    pattern = f"persistent://public/default/{topic}-(a+)+"
    url = ws_url(gateway, "/ws/v3/consumer/redos", topicsPattern=pattern)
    async with connect(url) as ws:
        consumer = client.subscribe(f"{topic}-live", "s")
        client.create_producer(f"{topic}-live").send(b"still served")
        assert consumer.receive(timeout_millis=int(TIMEOUT * 1000)).data() == b"still served"
        assert await ws.nothing_within(0.3)
    # RE2 has no backreferences or lookaround: such a pattern is refused with the reason
    status, body = await refused(
        ws_url(gateway, "/ws/v3/consumer/s", topicsPattern=f"{topic}-(a)\\1")
    )
    assert status == 400 and "Invalid topicsPattern" in body["reason"]


async def test_v3_ack_of_an_unknown_id_gets_an_error(gateway: Any, topic: str) -> None:
    url = ws_url(gateway, "/ws/v3/consumer/sub", topics=f"{full(topic)}-a,{full(topic)}-b")
    ids = await produce(gateway, f"{topic}-c", 1)
    async with connect(url) as ws:
        await ws.send({"messageId": ids[0]})
        reply = await ws.receive()
        assert reply["result"] == "error:3"
        assert "not from this consumer's topics" in reply["errorMsg"]


async def test_non_websocket_request_gets_400(gateway: Any, topic: str) -> None:
    status, body = await call("GET", consumer_url(gateway, topic, "s").replace("ws://", "http://"))
    assert status == 400
    assert body == {"reason": "Expected a WebSocket upgrade request"}


# -- ping-pong ------------------------------------------------------------------------------


async def test_pingpong_answers_pings(gateway: Any) -> None:
    for path in ("/ws/pingpong", "/ws/v2/pingpong"):
        async with connect(ws_url(gateway, path), autoping=False) as ws:
            await ws.ws.ping(b"are you there")
            msg = await ws.ws.receive(timeout=TIMEOUT)
            assert msg.type == aiohttp.WSMsgType.PONG
            assert msg.data == b"are you there"


async def test_consumer_sessions_answer_pings_too(gateway: Any, topic: str) -> None:
    async with connect(consumer_url(gateway, topic, "s"), autoping=False) as ws:
        await ws.ws.ping(b"p")
        msg = await ws.ws.receive(timeout=TIMEOUT)
        assert (msg.type, msg.data) == (aiohttp.WSMsgType.PONG, b"p")


async def test_official_client_sees_what_a_v2_reader_sees(
    gateway: Any, client_factory: Any, topic: str
) -> None:
    client = client_factory(gateway.url)
    producer = client.create_producer(topic)
    sent = [producer.send(f"x{i}".encode(), event_timestamp=1_700_000_000_000) for i in range(2)]
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    async with connect(reader_url(gateway, topic, messageId="earliest")) as ws:
        got = await ws.receive_many(2)
    for msg, official_id in zip(got, sent, strict=True):
        official = reader.read_next(timeout_millis=int(TIMEOUT * 1000))
        assert official.message_id() == official_id
        assert decode_message_id(msg["messageId"]) == decode_message_id(
            b64(official_id.serialize())
        )
        assert unb64(msg["payload"]) == official.data()
        assert msg["eventTime"] == "2023-11-14T22:13:20Z"


async def test_gateway_shutdown_closes_sessions_with_1001(gateway_factory: Any, topic: str) -> None:
    gw = gateway_factory()
    async with connect(consumer_url(gw, topic, "s")) as ws:
        stopping = asyncio.get_running_loop().run_in_executor(None, gw.stop)
        msg = await ws.ws.receive(timeout=TIMEOUT)
        assert (msg.type, msg.data) == (aiohttp.WSMsgType.CLOSE, 1001)
        await stopping


async def test_unknown_websocket_path_gets_404(gateway: Any) -> None:
    status, body = await refused(ws_url(gateway, "/ws/v2/nothing/persistent/public/default/t"))
    assert status == 404
    assert "reason" in body
