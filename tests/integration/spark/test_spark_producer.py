"""The Spark writer's producer client (``pyspark_pulsar.producer``) against real gateways.

The other side of every message is the official client (pulsar-client 3.13): what the
writer publishes must look to it exactly like what its own batching producer publishes
(payloads, keys, properties, event times, batch indexes), deduplication must hold across a
re-created producer with the same name (a retried Spark task), and refusals must surface at
once as named errors rather than as timeouts.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable
from typing import Any

import jwt
import pulsar
import pytest
import redis

from pulsar_gateway.proto import PulsarApi_pb2 as pb
from pyspark_pulsar.producer import (
    BatchProducer,
    OutgoingRow,
    PulsarClientError,
    PulsarConnection,
)
from tests.adminhttp import admin
from tests.conftest import TIMEOUT, GatewayThread, free_port, stream_key

RECEIVE_MS = int(TIMEOUT * 1000)
SECRET = b"spark-producer-secret-0123456789abcdef"  # >= 32 bytes for HS256


def consume(client: Any, topic: str, count: int) -> list[Any]:
    """``count`` messages from the start of ``topic``, then check nothing more comes."""
    consumer = client.subscribe(topic, "check", initial_position=pulsar.InitialPosition.Earliest)
    messages = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(count)]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=300)
    return messages


def rows(payloads: list[bytes]) -> list[OutgoingRow]:
    return [OutgoingRow(payload) for payload in payloads]


# -- publishing --------------------------------------------------------------------------


def test_a_batch_arrives_as_the_official_client_sends_it(
    gateway: GatewayThread, client_factory: Callable[..., Any], redis_clean: redis.Redis, topic: str
) -> None:
    batch = [
        OutgoingRow(b"zero", key="k0", properties={"a": "1"}, event_time=1_700_000_000_000),
        OutgoingRow(b"one", key="k1", properties={"b": "2", "c": "3"}, event_time=1234),
        OutgoingRow(b"two"),
    ]
    with PulsarConnection(gateway.url) as conn:
        producer = conn.create_producer(topic, "writer-0")
        assert (producer.producer_name, producer.last_sequence_id) == ("writer-0", -1)
        assert producer.topic == f"persistent://public/default/{topic}"
        producer.send_batch(batch, first_sequence_id=0)
        producer.flush()
        assert (producer.published, producer.duplicates) == (3, 0)

    assert redis_clean.xlen(stream_key(topic)) == 1  # one batch entry
    messages = consume(client_factory(gateway.url), topic, 3)
    assert [m.data() for m in messages] == [b"zero", b"one", b"two"]
    assert [m.partition_key() for m in messages] == ["k0", "k1", ""]
    assert [m.properties() for m in messages] == [{"a": "1"}, {"b": "2", "c": "3"}, {}]
    assert [m.event_timestamp() for m in messages] == [1_700_000_000_000, 1234, 0]
    ids = [m.message_id() for m in messages]
    assert [i.batch_index() for i in ids] == [0, 1, 2]
    assert len({(i.ledger_id(), i.entry_id()) for i in ids}) == 1


@pytest.mark.parametrize("compression", [pb.LZ4, pb.ZLIB, pb.ZSTD, pb.SNAPPY])
def test_compressed_batches_are_read_by_the_official_client(
    gateway: GatewayThread, client_factory: Callable[..., Any], topic: str, compression: int
) -> None:
    payloads = [b"row %d " % i * 20 for i in range(10)]
    with PulsarConnection(gateway.url) as conn:
        producer = conn.create_producer(topic, "compressing", compression=compression)
        producer.send_batch(rows(payloads), 0)
        producer.flush()
    messages = consume(client_factory(gateway.url), topic, 10)
    assert [m.data() for m in messages] == payloads


def test_sends_are_pipelined_up_to_max_pending(
    gateway: GatewayThread, client_factory: Callable[..., Any], redis_clean: redis.Redis, topic: str
) -> None:
    with PulsarConnection(gateway.url) as conn:
        producer = conn.create_producer(topic, "pipelined", max_pending=4)
        for batch in range(50):
            producer.send_batch(rows([b"%d-%d" % (batch, i) for i in range(3)]), batch * 3)
            assert len(producer._in_flight) <= 4
        producer.flush()
        assert (producer.published, producer.duplicates) == (150, 0)
    assert redis_clean.xlen(stream_key(topic)) == 50
    messages = consume(client_factory(gateway.url), topic, 150)
    assert [m.data() for m in messages] == [b"%d-%d" % (b, i) for b in range(50) for i in range(3)]


# -- deduplication -----------------------------------------------------------------------


def test_a_retried_task_is_deduplicated(
    gateway: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    url = f"{gateway.http_url}/admin/v2/namespaces/public/default/deduplication"
    assert admin("POST", url, True) == (204, None)
    payloads = [b"m%d" % i for i in range(10)]
    with PulsarConnection(gateway.url) as conn:
        # The first attempt stored rows 0..4, then its task failed.
        first = conn.create_producer(topic, "task-7")
        first.send_batch(rows(payloads[:5]), 0)
        first.flush()
        first.close()
        # The retry resumes under the same name and replays everything.
        retry = conn.create_producer(topic, "task-7")
        assert retry.last_sequence_id == 4
        retry.send_batch(rows(payloads[:5]), 0)
        retry.send_batch(rows(payloads[5:]), 5)
        retry.flush()
        assert (retry.published, retry.duplicates) == (5, 5)

    messages = consume(client_factory(gateway.url), topic, 10)
    assert [m.data() for m in messages] == payloads


# -- topics --------------------------------------------------------------------------------


def test_partitions(gateway: GatewayThread, topic: str) -> None:
    url = f"{gateway.http_url}/admin/v2/persistent/public/default/{topic}-p/partitions"
    assert admin("PUT", url, 3) == (204, None)
    with PulsarConnection(gateway.url) as conn:
        assert conn.partitions(f"{topic}-p") == 3
        assert conn.partitions(f"persistent://public/default/{topic}-p") == 3
        assert conn.partitions(topic) == 0


def test_an_invalid_topic_name_is_refused_by_name(gateway: GatewayThread) -> None:
    with PulsarConnection(gateway.url) as conn, pytest.raises(PulsarClientError) as err:
        conn.create_producer("a/b", "p")
    assert err.value.server_error == "InvalidTopicName"


# -- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url", ["pulsar+ssl://127.0.0.1:6651", "http://127.0.0.1:8080", "127.0.0.1:6650"]
)
def test_only_pulsar_urls_are_accepted(url: str) -> None:
    with pytest.raises(ValueError, match="pulsar"):
        PulsarConnection(url)


def test_connection_refused_names_the_url() -> None:
    url = f"pulsar://127.0.0.1:{free_port()}"
    with pytest.raises(ConnectionError, match=url):
        PulsarConnection(url, operation_timeout=2)


def test_a_fleet_url_falls_through_to_a_live_gateway(gateway: GatewayThread) -> None:
    url = f"pulsar://127.0.0.1:{free_port()},127.0.0.1:{gateway.gateway.port}"
    with PulsarConnection(url) as conn:
        assert conn.partitions("anything") == 0


def test_token_authentication(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    topic: str,
) -> None:
    gw = gateway_factory(
        authentication_enabled=True,
        token_secret_key="data:;base64," + base64.b64encode(SECRET).decode(),
    )
    forged = jwt.encode({"sub": "spark"}, b"not-the-secret-0123456789abcdef!", algorithm="HS256")
    started = time.monotonic()
    with pytest.raises(PulsarClientError) as err:
        PulsarConnection(gw.url, auth_method="token", auth_data=forged.encode())
    assert err.value.server_error == "AuthenticationError"
    assert "AuthenticationError" in str(err.value)
    assert time.monotonic() - started < TIMEOUT / 2  # refused at once, not timed out
    with pytest.raises(PulsarClientError, match="AuthenticationError"):
        PulsarConnection(gw.url)  # no token at all

    good = jwt.encode({"sub": "spark"}, SECRET, algorithm="HS256")
    with PulsarConnection(gw.url, auth_method="token", auth_data=good.encode()) as conn:
        producer = conn.create_producer(topic, "authenticated")
        producer.send_batch([OutgoingRow(b"hello")], 0)
        producer.flush()
    token = pulsar.AuthenticationToken(good)
    assert [m.data() for m in consume(client_factory(gw.url, authentication=token), topic, 1)] == [
        b"hello"
    ]


def test_a_producer_name_in_use_is_retried_until_freed(gateway: GatewayThread, topic: str) -> None:
    with PulsarConnection(gateway.url) as old, PulsarConnection(gateway.url) as new:
        holder = old.create_producer(topic, "busy-name")
        with pytest.raises(PulsarClientError) as err:
            new.create_producer(topic, "busy-name", retry_busy_for=0)
        assert err.value.server_error == "ProducerBusy"

        result: list[BatchProducer | BaseException] = []

        def create() -> None:
            try:
                result.append(new.create_producer(topic, "busy-name", retry_busy_for=5))
            except BaseException as exc:
                result.append(exc)

        thread = threading.Thread(target=create)
        started = time.monotonic()
        thread.start()
        time.sleep(1.0)
        assert not result  # still retrying
        holder.close()
        thread.join(TIMEOUT)
        assert len(result) == 1
        assert isinstance(result[0], BatchProducer), result[0]
        assert time.monotonic() - started < 5
        result[0].send_batch([OutgoingRow(b"x")], 0)
        result[0].flush()
        assert result[0].published == 1


def test_a_producer_the_gateway_closed_fails_its_next_call(
    gateway: GatewayThread, topic: str
) -> None:
    """A topic deleted under the producer: the gateway sends CLOSE_PRODUCER, and the writer
    gets a ConnectionError (the task is retried) instead of writing into the void."""
    with PulsarConnection(gateway.url) as conn:
        producer = conn.create_producer(topic, "doomed")
        producer.send_batch([OutgoingRow(b"x")], 0)
        producer.flush()
        url = f"{gateway.http_url}/admin/v2/persistent/public/default/{topic}?force=true"
        assert admin("DELETE", url)[0] == 204
        deadline = time.monotonic() + TIMEOUT
        with pytest.raises(ConnectionError, match="closed producer doomed"):
            while time.monotonic() < deadline:
                producer.send_batch([OutgoingRow(b"y")], 1)
                producer.flush()
                time.sleep(0.05)
        # The connection itself is still fine.
        assert conn.partitions(topic) == 0


def test_pings_are_answered_between_sends(
    gateway_factory: Callable[..., GatewayThread], topic: str
) -> None:
    """The gateway closes a connection that leaves a PING unanswered for a keep-alive
    interval; every call reads what arrived and answers PINGs, so a writer that calls in
    more often than that stays connected while sending nothing else."""
    gw = gateway_factory(keepalive_seconds=0.2)
    with PulsarConnection(gw.url) as conn:
        producer = conn.create_producer(topic, "slow-writer")
        for _ in range(15):  # 1.5 s: several PINGs, and several intervals without a SEND
            time.sleep(0.1)
            producer.send_batch([], 0)  # sends nothing, but answers the PINGs
        producer.send_batch([OutgoingRow(b"still here")], 0)
        producer.flush()
        assert producer.published == 1


def test_schema_names_the_topics_schema(
    gateway: GatewayThread, client_factory: Callable[..., Any], topic: str
) -> None:
    """GET_SCHEMA, which the writer uses to explain an IncompatibleSchema refusal."""
    with PulsarConnection(gateway.url) as conn:
        assert conn.schema(topic) is None  # no schema yet
        producer = client_factory(gateway.url).create_producer(
            topic, schema=pulsar.schema.StringSchema()
        )
        producer.close()
        schema = conn.schema(topic)
        assert schema is not None and schema.type == pb.Schema.String
        int32 = pb.Schema(name="INT32", type=pb.Schema.Int32, schema_data=b"")
        with pytest.raises(PulsarClientError, match="IncompatibleSchema"):
            conn.create_producer(topic, "typed", schema=int32)
        assert conn.partitions(topic) == 0  # the refusal left the connection usable
