"""Flow control with a real Redis and raw clients: what the gateway stops reading, and when
it reads again, so nothing a client sends makes it hold more than its limits.

Redis is made slow on purpose with ``CLIENT PAUSE`` (every command waits until the pause
ends), so publishes stay pending as long as the test needs. What the gateway did is read
from its own metrics (``pulsar_gateway_throttled_connections`` by reason, the commands it
handled) and from what each client gets back: every receipt, in order, once Redis answers.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import pulsar
import pytest
import redis

from pulsar_gateway.core.storage import lane as lane_module
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.adminhttp import admin
from tests.conftest import ON_CLUSTER, TIMEOUT, GatewayThread, wait_for
from tests.frames import command
from tests.rawclient import RawConnection
from tests.wsclient import b64, connect, producer_url

pytestmark = pytest.mark.skipif(ON_CLUSTER, reason="pauses the test's single Redis")

T = pb.BaseCommand.Type


def throttled(gw: GatewayThread, reason: str, protocol: str = "binary") -> float:
    """Connections not read now for ``reason`` (the gateway's gauge)."""
    registry = gw.gateway.services.metrics.registry
    value = registry.get_sample_value(
        "pulsar_gateway_throttled_connections", {"protocol": protocol, "reason": reason}
    )
    return value or 0.0


def handled(gw: GatewayThread, name: str, protocol: str = "binary") -> int:
    """Commands of ``name`` the gateway has handled so far."""
    return gw.gateway.services.metrics.commands[protocol, name]


def pause_redis(client: redis.Redis, seconds: float) -> float:
    """Pause every Redis client for ``seconds``; returns when the pause ends."""
    client.execute_command("CLIENT", "PAUSE", int(seconds * 1000), "ALL")
    return time.monotonic() + seconds


def receipts(conn: RawConnection, count: int) -> list[int]:
    """The sequence ids of the next ``count`` SEND_RECEIPTs, in arrival order."""
    return [conn.expect(T.SEND_RECEIPT).send_receipt.sequence_id for _ in range(count)]


def test_a_connection_is_not_read_while_max_pending_publishes_wait(gateway_factory, redis_clean):
    """maxPendingPublishRequestsPerConnection 20, 16 KiB messages: while Redis is paused the
    gateway takes about 20 SENDs (and what one socket read holds) and then stops reading;
    once Redis answers, every receipt comes, in order, and reading resumes."""
    gw = gateway_factory(max_pending_publish_requests_per_connection=20)
    with RawConnection(gw) as conn:
        conn.handshake()
        name = conn.create_producer("persistent://public/default/pending")
        pause_ends = pause_redis(redis_clean, 1.5)
        sender = asyncio.new_event_loop()
        total = 200
        payload = b"x" * 16384
        # the socket write blocks once the gateway stops reading: write from a thread
        writing = sender.run_in_executor(
            None,
            lambda: [conn.send_message(1, i, name, payload) for i in range(total)],
        )
        wait_for(lambda: throttled(gw, "pending_publishes") == 1)
        taken = handled(gw, "Send")
        # 20 pending, plus at most one socket read (256 KiB: 16 messages)
        assert 20 <= taken <= 20 + 17
        assert time.monotonic() < pause_ends, "the pause ended before the check"
        assert receipts(conn, total) == list(range(total))
        sender.run_until_complete(writing)
        sender.close()
        assert throttled(gw, "pending_publishes") == 0


def test_a_connection_the_gateway_does_not_read_is_not_closed_by_the_keep_alive(
    gateway_factory, redis_clean
):
    """While a connection is throttled its PONGs may wait unread: the keep-alive (here every
    0.2 s) does not close it for silence, and its receipts come once Redis answers."""
    gw = gateway_factory(keepalive_seconds=0.2, max_pending_publish_requests_per_connection=5)
    with RawConnection(gw) as conn:
        conn.handshake()
        name = conn.create_producer("persistent://public/default/quiet")
        pause_redis(redis_clean, 1.5)
        for i in range(20):
            conn.send_message(1, i, name, b"x" * 1024)
        wait_for(lambda: throttled(gw, "pending_publishes") == 1)
        time.sleep(1.0)  # five keep-alive intervals without reading our answers
        assert receipts(conn, 20) == list(range(20))
        conn.assert_open()


def test_the_publish_buffer_stops_reading_every_producing_connection(gateway_factory, redis_clean):
    """maxMessagePublishBufferSizeInMB 1: two producers' SENDs fill the buffer while Redis is
    paused, and both connections stop being read; a connection without producers is still
    answered."""
    gw = gateway_factory(max_message_publish_buffer_size_in_mb=1)
    payload = b"y" * 32768
    with RawConnection(gw) as a, RawConnection(gw) as b, RawConnection(gw) as idle:
        for conn in (a, b, idle):
            conn.handshake()
        names = [
            conn.create_producer(f"persistent://public/default/buf-{i}")
            for i, conn in enumerate((a, b))
        ]
        pause_redis(redis_clean, 1.5)
        loop = asyncio.new_event_loop()
        writers = [
            loop.run_in_executor(
                None,
                lambda c=conn, n=name: [c.send_message(1, i, n, payload) for i in range(60)],
            )
            for conn, name in zip((a, b), names, strict=True)
        ]
        wait_for(lambda: throttled(gw, "publish_buffer") == 2)
        buffered = gw.gateway.services.publish_buffer.size
        assert 1024 * 1024 <= buffered <= 1024 * 1024 + 2 * 256 * 1024 + 2 * 40000
        # a connection without producers is still read and answered
        idle.assert_open()
        assert receipts(a, 60) == list(range(60))
        assert receipts(b, 60) == list(range(60))
        loop.run_until_complete(asyncio.gather(*writers))
        loop.close()
        wait_for(lambda: throttled(gw, "publish_buffer") == 0)


def test_a_consumer_that_does_not_read_gets_nothing_more_and_loses_nothing(
    gateway_factory, client_factory, topic
):
    """FLOW 1,000,000 and then no reading: once its socket is over the high water mark the
    consumer is sent nothing more (its connection not read either), while the messages stay
    in the subscription; reading again, it gets every message exactly once, in order."""
    gw = gateway_factory()
    count, size = 3000, 4096
    with RawConnection(gw) as conn:
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        conn.handshake()
        conn.request(
            T.SUBSCRIBE,
            T.SUCCESS,
            topic=f"persistent://public/default/{topic}",
            subscription="slow",
            subType=pb.CommandSubscribe.Exclusive,
            consumer_id=1,
        )
        conn.send(command(T.FLOW, consumer_id=1, messagePermits=1_000_000))
        producer = client_factory(gw.url).create_producer(
            topic, batching_enabled=False, block_if_queue_full=True
        )
        failures: list[Any] = []
        for i in range(count):
            producer.send_async(
                i.to_bytes(4, "big") + b"z" * (size - 4),
                lambda result, _: failures.append(result) if result != pulsar.Result.Ok else None,
            )
        producer.flush()
        assert failures == []
        wait_for(lambda: throttled(gw, "outbound_buffer_full") == 1)
        time.sleep(0.5)
        status, stats = admin(
            "GET", f"{gw.http_url}/admin/v2/persistent/public/default/{topic}/stats"
        )
        assert status == 200
        sent = stats["subscriptions"]["slow"]["msgOutCounter"]
        # what the socket buffers hold, and one dispatch chunk: far from all 3000
        assert sent < count / 2, sent
        got = []
        deadline = time.monotonic() + TIMEOUT
        while len(got) < count and time.monotonic() < deadline:
            frame = conn.expect(T.MESSAGE)
            got.append(frame.message.message_id.entryId)
        assert len(got) == count
        assert got == sorted(got) and len(set(got)) == count
    wait_for(lambda: throttled(gw, "outbound_buffer_full") == 0)


def test_connections_past_the_limits_are_refused_at_accept(gateway_factory):
    """brokerMaxConnections 3: a fourth connection gets Pulsar's ERROR (NotAllowedError,
    no request) and is closed; once one closes, a new one is accepted. Counted in
    pulsar_gateway_connections_refused."""
    gw = gateway_factory(broker_max_connections=3)
    open_ = [RawConnection(gw) for _ in range(3)]
    for conn in open_:
        conn.handshake()
    with RawConnection(gw) as extra:
        frames = extra.assert_closed()
    assert [f.type for f in frames] == [T.ERROR]
    assert frames[0].error.error == pb.NotAllowedError
    assert frames[0].error.message == "Reached the maximum number of connections"
    registry = gw.gateway.services.metrics.registry
    refused = registry.get_sample_value(
        "pulsar_gateway_connections_refused_total",
        {"protocol": "binary", "reason": "max_connections"},
    )
    assert refused == 1
    open_[0].close()
    wait_for(
        lambda: registry.get_sample_value("pulsar_gateway_connections", {"protocol": "binary"}) == 2
    )
    with RawConnection(gw) as again:
        again.handshake()
    for conn in open_[1:]:
        conn.close()


def test_connections_past_the_per_address_limit_are_refused(gateway_factory):
    gw = gateway_factory(broker_max_connections_per_ip=2)
    with RawConnection(gw) as a, RawConnection(gw) as b, RawConnection(gw) as c:
        a.handshake()
        b.handshake()
        (frame,) = c.assert_closed()
        assert (
            frame.error.message == "Reached the maximum number of connections on address 127.0.0.1"
        )


def test_lookups_past_the_limit_get_too_many_requests(gateway_factory, redis_clean):
    """maxConcurrentLookupRequest 2: while two lookups wait for Redis, a third is answered
    TooManyRequests at once, with Pulsar's message; the two complete once Redis answers."""
    gw = gateway_factory(max_concurrent_lookup_request=2)
    with RawConnection(gw) as conn:
        conn.handshake()
        pause_redis(redis_clean, 1.0)
        for rid in (1, 2, 3):
            conn.send(
                command(T.LOOKUP, topic=f"persistent://public/default/l-{rid}", request_id=rid)
            )
        third = conn.expect(T.LOOKUP_RESPONSE, lambda c: c.lookupTopicResponse.request_id == 3)
        assert third.lookupTopicResponse.error == pb.TooManyRequests
        assert third.lookupTopicResponse.message == "Failed due to too many pending lookup requests"
        for rid in (1, 2):
            answer = conn.expect(
                T.LOOKUP_RESPONSE, lambda c, r=rid: c.lookupTopicResponse.request_id == r
            )
            assert answer.lookupTopicResponse.response == pb.CommandLookupTopicResponse.Connect


def test_every_connection_waits_while_redis_is_behind(gateway_factory, redis_clean, monkeypatch):
    """The storage lane's queue reaches its limit while it cannot write (here 50 commands:
    ACKs of a consumer while Redis is paused, once 16 pipelines wait for their replies):
    every connection stops being read until the queue is down to half."""
    monkeypatch.setattr(lane_module, "MAX_QUEUED_COMMANDS", 50)
    gw = gateway_factory()
    with RawConnection(gw) as consumer, RawConnection(gw) as other:
        consumer.handshake()
        other.handshake()
        consumer.request(
            T.SUBSCRIBE,
            T.SUCCESS,
            topic="persistent://public/default/backlog",
            subscription="s",
            subType=pb.CommandSubscribe.Shared,
            consumer_id=1,
        )
        pause_redis(redis_clean, 1.5)
        for i in range(200):
            ack = command(T.ACK, consumer_id=1, ack_type=pb.CommandAck.Individual)
            ack.ack.message_id.add(ledgerId=1, entryId=i)
            consumer.send(ack)
            if i < 20:
                time.sleep(0.01)  # one pipeline each, until 16 are in flight
        wait_for(lambda: throttled(gw, "storage_backlog") == 2)
        wait_for(lambda: throttled(gw, "storage_backlog") == 0, timeout=TIMEOUT)
        other.assert_open()
        consumer.assert_open()


async def test_a_websocket_producer_is_not_read_past_max_pending_messages(
    gateway_factory, redis_clean, topic
):
    """maxPendingMessages 10: while Redis is paused the gateway handles 10 frames (and then
    waits); every ack comes once Redis answers, in order."""
    gw = gateway_factory()
    async with connect(producer_url(gw, topic, maxPendingMessages=10)) as ws:
        await asyncio.to_thread(pause_redis, redis_clean, 1.5)
        for i in range(100):
            await ws.send({"payload": b64(b"m"), "context": str(i)})
        await asyncio.sleep(0.5)
        assert handled(gw, "send", "websocket") <= 11
        acks = [await ws.receive() for _ in range(100)]
        assert [a["context"] for a in acks] == [str(i) for i in range(100)]
        assert all(a["result"] == "ok" for a in acks)


def test_a_rest_produce_body_over_the_limit_is_refused_with_413(gateway_factory, topic):
    gw = gateway_factory(http_max_request_size=4096)
    url = f"{gw.http_url}/topics/persistent/public/default/{topic}"
    body: dict[str, Any] = {"messages": [{"payload": "x" * 8192}]}
    status, answer = admin("POST", url, body)
    assert status == 413
    assert "reason" in answer
    status, answer = admin("POST", url, {"messages": [{"payload": "small"}] * 10})
    assert status == 200
    assert [r["errorCode"] for r in answer["messagePublishResults"]] == [0] * 10


def test_a_rest_produce_of_many_messages_keeps_its_order_through_the_window(gateway_factory, topic):
    """5,000 messages in one request: appended at most maxPendingPublishRequestsPerConnection
    (here 100) at a time, every result in the request's order."""
    gw = gateway_factory(max_pending_publish_requests_per_connection=100)
    url = f"{gw.http_url}/topics/persistent/public/default/{topic}"
    status, answer = admin("POST", url, {"messages": [{"payload": str(i)} for i in range(5000)]})
    assert status == 200
    ids = [r["messageId"] for r in answer["messagePublishResults"]]
    entries = [int(i.split(":")[1]) for i in ids]
    assert entries == sorted(entries) and len(set(entries)) == 5000
