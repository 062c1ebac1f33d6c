"""Message deduplication (docs/producers.md "Deduplication"): a SEND whose sequence id its producer
already stored is acknowledged and not stored again, across reconnects, gateways and
gateway restarts; PRODUCER_SUCCESS carries the producer's last stored sequence id.

Deduplication is the ``deduplication`` policy (namespace or topic level), written here in
Redis through the broker's policies API or directly, as the admin API would.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from typing import Any

import aiohttp
import pytest

from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.entry_codec import make_blob, parse_blob
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.conftest import TIMEOUT, free_port, stream_key, wait_for
from tests.frames import command
from tests.rawclient import RawConnection

# The cluster pass of ./dev test runs this file on a Redis Cluster too: deduplication (per
# namespace and topic, across a gateway restart)
pytestmark = pytest.mark.cluster

T = pb.BaseCommand.Type
RECEIVE_MS = int(TIMEOUT * 1000)
MINUS_ONE = (1 << 64) - 1
NAMESPACE = "public/default"


def enable(gw: Any, topic: str | None = None) -> None:
    policies = gw.gateway.services.policies
    if topic is None:
        gw.call(policies.set_namespace(NAMESPACE, "deduplication", True))
    else:
        gw.call(policies.set_topic(f"persistent://{NAMESPACE}/{topic}", "deduplication", True))


def full(topic: str) -> str:
    return f"persistent://{NAMESPACE}/{topic}"


def open_producer(
    conn: RawConnection, topic: str, producer_id: int, name: str, **fields: Any
) -> pb.CommandProducerSuccess:
    rid = conn.request_id()
    conn.send(
        command(
            T.PRODUCER,
            topic=full(topic),
            producer_id=producer_id,
            request_id=rid,
            producer_name=name,
            **fields,
        )
    )
    return conn.expect(
        T.PRODUCER_SUCCESS, lambda c: c.producer_success.request_id == rid
    ).producer_success


def send(
    conn: RawConnection,
    producer_id: int,
    name: str,
    sequence_id: int,
    payload: bytes,
    metadata: dict[str, Any] | None = None,
) -> tuple[int, int]:
    """SEND one entry and return the receipt's (ledgerId, entryId)."""
    md = pb.MessageMetadata(
        producer_name=name,
        sequence_id=sequence_id,
        publish_time=int(time.time() * 1000),
        **(metadata or {}),
    )
    conn.send_payload(
        command(T.SEND, producer_id=producer_id, sequence_id=sequence_id),
        make_blob(md, payload),
    )
    r = conn.expect(
        T.SEND_RECEIPT,
        lambda c: (
            (c.send_receipt.producer_id, c.send_receipt.sequence_id) == (producer_id, sequence_id)
        ),
    ).send_receipt
    return r.message_id.ledgerId, r.message_id.entryId


def test_a_resent_sequence_id_is_acknowledged_and_stored_once(gateway, redis_clean, topic):
    enable(gateway)
    with RawConnection(gateway) as conn:
        conn.handshake()
        assert open_producer(conn, topic, 1, "p").last_sequence_id == -1
        first = send(conn, 1, "p", 0, b"zero")
        second = send(conn, 1, "p", 1, b"one")
        assert first[0] > 0 and second[0] > 0
        # Duplicates: a receipt with message id (-1, -1), as Pulsar sends, and nothing stored.
        assert send(conn, 1, "p", 1, b"one again") == (MINUS_ONE, MINUS_ONE)
        assert send(conn, 1, "p", 0, b"zero again") == (MINUS_ONE, MINUS_ONE)
        assert send(conn, 1, "p", 2, b"two")[0] > 0
        conn.assert_open()
    entries = redis_clean.xrange(stream_key(topic))
    payloads = [parse_blob(fields[b"m"]).payload for _, fields in entries]
    assert payloads == [b"zero", b"one", b"two"]


def test_producers_are_deduplicated_by_name(gateway, redis_clean, topic):
    enable(gateway, topic)  # topic-level policy
    with RawConnection(gateway) as conn:
        conn.handshake()
        open_producer(conn, topic, 1, "a")
        open_producer(conn, topic, 2, "b")
        send(conn, 1, "a", 5, b"a5")
        assert send(conn, 2, "b", 5, b"b5")[0] > 0  # another producer's sequence
        assert send(conn, 1, "a", 5, b"a5 again")[0] == MINUS_ONE
    assert redis_clean.xlen(stream_key(topic)) == 2


def test_without_the_policy_resends_are_stored(gateway, redis_clean, topic):
    with RawConnection(gateway) as conn:
        conn.handshake()
        open_producer(conn, topic, 1, "p")
        send(conn, 1, "p", 0, b"x")
        assert send(conn, 1, "p", 0, b"x")[0] != MINUS_ONE
        conn.request(T.CLOSE_PRODUCER, T.SUCCESS, producer_id=1)
        assert open_producer(conn, topic, 2, "p").last_sequence_id == -1
    assert redis_clean.xlen(stream_key(topic)) == 2
    assert not redis_clean.exists(KeySchema().topic(full(topic)).last_sequence_ids)


def test_reconnection_on_another_gateway_learns_the_last_sequence_id(
    gateway_factory, redis_clean, topic
):
    """The receipts of seq 1 and 2 were lost with the connection: the producer reconnects
    elsewhere, hears last_sequence_id 2, and its resends are dropped."""
    gw_a, gw_b = gateway_factory(), gateway_factory()
    enable(gw_a)
    with RawConnection(gw_a) as a:
        a.handshake()
        name = open_producer(a, topic, 1, "gen", user_provided_producer_name=False).producer_name
        for seq in range(3):
            send(a, 1, name, seq, b"m%d" % seq)
    with RawConnection(gw_b) as b:
        b.handshake()
        ok = open_producer(b, topic, 1, name, epoch=1, user_provided_producer_name=False)
        assert ok.last_sequence_id == 2
        assert send(b, 1, name, 1, b"m1")[0] == MINUS_ONE
        assert send(b, 1, name, 2, b"m2")[0] == MINUS_ONE
        assert send(b, 1, name, 3, b"m3")[0] != MINUS_ONE
    assert redis_clean.xlen(stream_key(topic)) == 4


def test_batches_record_their_highest_sequence_id(gateway, client_factory, redis_clean, topic):
    enable(gateway)
    client = client_factory(gateway.url)
    producer = client.create_producer(
        topic, producer_name="batcher", batching_enabled=True, batching_max_publish_delay_ms=50
    )
    for i in range(5):
        producer.send_async(b"b%d" % i, None)
    producer.flush()
    producer.close()
    assert redis_clean.xlen(stream_key(topic)) == 1  # one batch entry, sequence ids 0..4
    again = client.create_producer(topic, producer_name="batcher")
    assert again.last_sequence_id() == 4
    dup = again.send(b"old", sequence_id=3)
    assert (dup.ledger_id(), dup.entry_id()) == (-1, -1)
    stored = again.send(b"new")  # the client continues at 5
    assert stored.ledger_id() > 0
    assert again.last_sequence_id() == 5
    assert redis_clean.xlen(stream_key(topic)) == 2


def test_chunks_share_a_sequence_id_and_are_all_stored(
    gateway_factory, client_factory, redis_clean, topic
):
    gw = gateway_factory(max_message_size=2000)
    enable(gw)
    client = client_factory(gw.url)
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(topic, chunking_enabled=True, batching_enabled=False)
    big = bytes(range(256)) * 40  # 10240 bytes: several chunks of < 2000
    producer.send(big)
    producer.send(b"small")
    entries = redis_clean.xlen(stream_key(topic))
    assert entries > 3
    assert consumer.receive(timeout_millis=RECEIVE_MS).data() == big
    assert consumer.receive(timeout_millis=RECEIVE_MS).data() == b"small"
    assert producer.last_sequence_id() == 1
    # A resend of the whole chunked message (sequence id 0) is dropped chunk by chunk.
    with RawConnection(gw) as conn:
        conn.handshake()
        name = producer.producer_name()
        producer.close()
        assert open_producer(conn, topic, 9, name).last_sequence_id == 1
        uuid = f"{name}-0"
        for chunk_id in range(3):
            md = {
                "uuid": uuid,
                "chunk_id": chunk_id,
                "num_chunks_from_msg": 3,
                "total_chunk_msg_size": 30,
            }
            assert send(conn, 9, name, 0, b"c" * 10, md)[0] == MINUS_ONE
    assert redis_clean.xlen(stream_key(topic)) == entries


def test_last_sequence_id_survives_a_gateway_restart(
    gateway_process, client_factory, redis_url, redis_clean, topic
):
    redis_clean.hset(KeySchema().namespace_policies(NAMESPACE), "deduplication", json.dumps(True))
    port = free_port()
    args = ("--redis-url", redis_url, "--port", str(port))
    first = gateway_process(*args).wait_ready()
    url = f"pulsar://127.0.0.1:{port}"
    client = client_factory(url)
    producer = client.create_producer(topic, send_timeout_millis=int(TIMEOUT * 3000))
    name = producer.producer_name()
    # One receipt before the kill: a C++ 4.2.0 producer that reconnects before any receipt
    # restarts its sequence ids at PRODUCER_SUCCESS.last_sequence_id + 1 even while later
    # ids are still pending, so its next new message would reuse a stored sequence id and
    # be dropped (any deduplicating broker does the same; see docs/producers.md).
    producer.send(b"m0")
    for i in range(1, 20):
        producer.send_async(b"m%d" % i, None)
    first.stop(sig=9)  # some receipts are lost with it; the client resends those
    gateway_process(*args).wait_ready()
    producer.flush()
    assert producer.send(b"last").ledger_id() > 0
    assert producer.last_sequence_id() == 20
    entries = redis_clean.xrange(stream_key(topic))
    payloads = [parse_blob(fields[b"m"]).payload for _, fields in entries]
    assert payloads == [b"m%d" % i for i in range(20)] + [b"last"]  # each exactly once
    producer.close()
    # A new producer with that name hears where it left off.
    again = client.create_producer(topic, producer_name=name)
    assert again.last_sequence_id() == 20
    assert again.send(b"dup", sequence_id=7).ledger_id() == -1


def test_policy_set_over_the_admin_api_applies_to_a_connected_producer(
    gateway_factory, client_factory, redis_clean, topic
):
    """The admin REST call on one gateway reaches a producer connected to another."""
    gw_a, gw_b = gateway_factory(), gateway_factory()
    producer = client_factory(gw_b.url).create_producer(topic, producer_name="p")
    producer.send(b"x", sequence_id=1)
    producer.send(b"x", sequence_id=1)  # no dedup yet: stored twice
    assert redis_clean.xlen(stream_key(topic)) == 2

    async def enable_over_http() -> None:
        url = f"{gw_a.http_url}/admin/v2/persistent/public/default/{topic}/deduplicationEnabled"
        async with aiohttp.ClientSession() as http, http.post(url, json=True) as r:
            assert r.status == 204

    asyncio.run(enable_over_http())

    probes = itertools.count(1000)

    def deduplicated() -> bool:
        # A fresh id per probe: a pair sent while the policy arrives (first half stored
        # unrecorded, second half recorded) must not make every later pair a duplicate.
        sequence_id = next(probes)
        before = redis_clean.xlen(stream_key(topic))
        producer.send(b"probe", sequence_id=sequence_id)
        producer.send(b"probe", sequence_id=sequence_id)
        return bool(redis_clean.xlen(stream_key(topic)) == before + 1)

    wait_for(deduplicated)
