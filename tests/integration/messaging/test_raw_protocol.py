"""Protocol paths the Python client never takes, driven with raw frames: ACK_RESPONSE for
acks that carry a request id (Java and Go clients with ack receipts), REDELIVER with ids
on a live consumer, and cumulative ack of "the entry before" (L, -1)."""

from __future__ import annotations

import redis

from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.conftest import stream_key
from tests.frames import command
from tests.rawclient import RawConnection

T = pb.BaseCommand.Type
TOPIC = "persistent://public/default/raw-protocol"
STREAM = stream_key(TOPIC)


def _consumer(conn: RawConnection, sub_type: int, permits: int = 100) -> None:
    conn.handshake()
    conn.request(
        T.SUBSCRIBE,
        T.SUCCESS,
        topic=TOPIC,
        subscription="s",
        subType=sub_type,
        consumer_id=1,
        initialPosition=1,
    )
    conn.send(command(T.FLOW, consumer_id=1, messagePermits=permits))


def _publish(client, count: int) -> None:
    producer = client.create_producer(TOPIC)
    for i in range(count):
        producer.send(f"r-{i}".encode())


def _ack(
    conn: RawConnection,
    ids: list[tuple[int, int]],
    cumulative: bool = False,
    request_id: int | None = None,
) -> None:
    cmd = command(T.ACK, consumer_id=1, ack_type=1 if cumulative else 0)
    for ledger, entry in ids:
        m = cmd.ack.message_id.add()
        m.ledgerId, m.entryId = ledger % (1 << 64), entry % (1 << 64)
    if request_id is not None:
        cmd.ack.request_id = request_id
    conn.send(cmd)


def test_ack_with_request_id_gets_ack_response(gateway, client, redis_clean: redis.Redis):
    _publish(client, 3)
    with RawConnection(gateway) as conn:
        _consumer(conn, sub_type=1)
        ids = [
            (m.message.message_id.ledgerId, m.message.message_id.entryId)
            for m in (conn.expect(T.MESSAGE) for _ in range(3))
        ]
        _ack(conn, ids, request_id=77)
        response = conn.expect(T.ACK_RESPONSE).ackResponse
        assert (response.request_id, response.consumer_id) == (77, 1)
        assert not response.HasField("error")
        assert redis_clean.xpending(STREAM, "s")["pending"] == 0


def test_redeliver_named_ids_counts_a_redelivery(gateway, client):
    _publish(client, 2)
    with RawConnection(gateway) as conn:
        _consumer(conn, sub_type=1)
        first = [conn.expect(T.MESSAGE).message for _ in range(2)]
        assert [m.redelivery_count for m in first] == [0, 0]
        redeliver = command(T.REDELIVER_UNACKNOWLEDGED_MESSAGES, consumer_id=1)
        redeliver.redeliverUnacknowledgedMessages.message_ids.add().CopyFrom(first[1].message_id)
        conn.send(redeliver)
        again = conn.expect(T.MESSAGE).message
        assert again.message_id.entryId == first[1].message_id.entryId
        assert again.message_id.ledgerId == first[1].message_id.ledgerId
        assert again.redelivery_count == 1


def test_cumulative_ack_of_entry_before(gateway, client, redis_clean: redis.Redis):
    """(L, -1) means "everything before (L, 0)" (docs/binary_protocol.md "Message ids")."""
    _publish(client, 3)
    with RawConnection(gateway) as conn:
        _consumer(conn, sub_type=0)
        msgs = [conn.expect(T.MESSAGE).message.message_id for _ in range(3)]
        last = msgs[-1]
        _ack(conn, [(last.ledgerId, -1)], cumulative=True, request_id=5)
        conn.expect(T.ACK_RESPONSE)
        pending = [p["message_id"] for p in redis_clean.xpending_range(STREAM, "s", "-", "+", 10)]
        # the last entry (and anything else in its millisecond at entry >= 0) stays pending
        assert f"{last.ledgerId}-{last.entryId}".encode() in pending
        assert all(int(p.split(b"-")[0]) >= last.ledgerId for p in pending)


def test_lookup_answers_the_advertised_address(gateway_factory):
    """LOOKUP says Connect to this gateway's advertised address (--advertised-address), so
    a client that uses that address as its service URL keeps one socket."""
    gw = gateway_factory(advertised_address="gateway.example")
    with RawConnection(gw) as conn:
        conn.handshake()
        r = conn.request(T.LOOKUP, T.LOOKUP_RESPONSE, topic=TOPIC).lookupTopicResponse
        assert r.response == pb.CommandLookupTopicResponse.Connect
        assert r.brokerServiceUrl == f"pulsar://gateway.example:{gw.gateway.port}"
        assert r.authoritative and not r.proxy_through_service_url
        pm = conn.request(
            T.PARTITIONED_METADATA, T.PARTITIONED_METADATA_RESPONSE, topic=TOPIC
        ).partitionMetadataResponse
        assert (pm.response, pm.partitions) == (
            pb.CommandPartitionedTopicMetadataResponse.Success,
            0,
        )
