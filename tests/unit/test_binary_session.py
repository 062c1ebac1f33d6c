"""The binary session's producer and consumer sides without sockets or Redis.

The producer side runs with the core's real :class:`Producer` on a
:class:`~tests.unit.fake_lane.FakeLane` (``append_entries.lua`` answered in the shapes its
header documents), and writes on a real sans-I/O :class:`ServerConnection`, whose output is
read back with the frame decoder: receipts come in send order whatever completes first, a
policy's refusal is mapped to the error each client honours, duplicates and refused appends
are answered as Pulsar answers them. The consumer side's ACK forms are checked as data
(:func:`ack_calls`), and its ACK_RESPONSE against a consumer whose calls the test resolves.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

import pytest

from pulsar_gateway import frame_codec
from pulsar_gateway.adapters.pulsar_binary.acks import AckCalls, ack_calls
from pulsar_gateway.adapters.pulsar_binary.commands import Ack, Send
from pulsar_gateway.adapters.pulsar_binary.connection import ServerConnection
from pulsar_gateway.adapters.pulsar_binary.consumer_side import ConsumerSide
from pulsar_gateway.adapters.pulsar_binary.producer_side import ProducerSide
from pulsar_gateway.adapters.pulsar_binary.session_state import SessionState
from pulsar_gateway.core import PublishBuffer, StorageError, SubscriptionType
from pulsar_gateway.core.fleet.metrics import GatewayMetrics
from pulsar_gateway.core.fleet.rates import Meter
from pulsar_gateway.core.model.ledger import LedgerRollover
from pulsar_gateway.core.policies.delayed_delivery import DelayedDeliveryPolicy
from pulsar_gateway.core.policies.topic_creation import TopicCreationRules
from pulsar_gateway.core.producing.producer import Producer
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.core.topics.topic import Topics
from pulsar_gateway.entry_codec import make_blob, parse_blob
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.unit.fake_lane import FakeLane

TOPIC = "persistent://public/default/orders"
PRODUCER_ID = 3
U64_MINUS_ONE = (1 << 64) - 1


class _Authorization:
    """Authorization off: the sides ask nothing."""

    enabled = False


class _ProducerService:
    """The one call the SEND path makes of the producer service: releasing a producer."""

    def __init__(self) -> None:
        self.closed: list[Any] = []

    async def close(self, producer: Any) -> None:
        self.closed.append(producer)


async def _require_namespace(namespace: str) -> None:
    pass


def _frames(conn: ServerConnection) -> list[pb.BaseCommand]:
    decoder = frame_codec.FrameDecoder()
    decoder.feed(conn.data_to_send())
    out = []
    while (frame := decoder.next_frame()) is not None:
        out.append(frame.command)
    return out


def _answers(conn: ServerConnection) -> list[tuple[str, int, Any]]:
    """(kind, sequence id, detail) of each SEND_RECEIPT, SEND_ERROR or CLOSE_PRODUCER."""
    out: list[tuple[str, int, Any]] = []
    for cmd in _frames(conn):
        if cmd.type == pb.BaseCommand.SEND_RECEIPT:
            r = cmd.send_receipt
            out.append(("receipt", r.sequence_id, (r.message_id.ledgerId, r.message_id.entryId)))
        elif cmd.type == pb.BaseCommand.SEND_ERROR:
            e = cmd.send_error
            out.append(("error", e.sequence_id, (pb.ServerError.Name(e.error), e.message)))
        elif cmd.type == pb.BaseCommand.CLOSE_PRODUCER:
            out.append(("close", -1, cmd.close_producer.producer_id))
    return out


class _Binary:
    """One connection's producer side with one real producer on a FakeLane."""

    def __init__(self, client_version: str = "Pulsar-Java-v3.3.0") -> None:
        self.lane = FakeLane()
        self.conn = ServerConnection()
        self.conn.client_version = client_version
        self.service = _ProducerService()
        self.state = SessionState(self.conn, lambda: None, _Authorization())  # type: ignore[arg-type]
        self.side = ProducerSide(
            self.state,
            authorization=_Authorization(),  # type: ignore[arg-type]
            producers=self.service,  # type: ignore[arg-type]
            publish_buffer=PublishBuffer(0).gate,
        )
        rules = TopicCreationRules(None)
        topics = Topics(self.lane, KeySchema(), _require_namespace, LedgerRollover(), rules)  # type: ignore[arg-type]
        self.producer = Producer(
            topics.get(TOPIC),
            "orders-producer",
            self.lane,  # type: ignore[arg-type]
            GatewayMetrics(),
            topic_meter=Meter(),
        )
        self.side.producers[PRODUCER_ID] = self.producer

    def answer_appends(self, reply: Callable[[bytes], Any]) -> None:
        """Answer each appended entry with ``reply(blob)``."""
        self.lane.on_script(
            "append_entries", lambda keys, args: [reply(blob) for blob in args[1::3]]
        )

    def send(self, sequence_id: int, *, is_chunk: bool = False, **metadata: Any) -> None:
        md = pb.MessageMetadata(
            producer_name="orders-producer", sequence_id=sequence_id, publish_time=1000
        )
        for name, value in metadata.items():
            setattr(md, name, value)
        payload = parse_blob(make_blob(md, b"message-%d" % sequence_id))
        self.side.send(Send(PRODUCER_ID, sequence_id, 1, is_chunk, payload))

    def options_sent(self) -> list[str]:
        """The ``append_entries.lua`` options of every entry appended."""
        return [opt for call in self.lane.named("append_entries") for opt in call.args[2::3]]


def _numbered() -> Callable[[bytes], bytes]:
    count = itertools.count()
    return lambda blob: b"2000-%d" % next(count)


async def test_receipts_come_in_send_order_with_a_refusal_between_appends() -> None:
    binary = _Binary()
    binary.answer_appends(_numbered())
    binary.producer.delayed_delivery = DelayedDeliveryPolicy(max_delay_ms=1_000)

    binary.send(1)
    binary.send(2, deliver_at_time=1000 + 60_000)  # refused at once by the policy...
    binary.send(3)
    assert _answers(binary.conn) == []  # ...but answered after the append before it
    await binary.lane.drain()

    assert _answers(binary.conn) == [
        ("receipt", 1, (2000, 0)),
        ("error", 2, ("NotAllowedError", _delay_message())),
        ("receipt", 3, (2000, 1)),
    ]


def _delay_message() -> str:
    policy = DelayedDeliveryPolicy(max_delay_ms=1_000)
    try:
        policy.deliver_at(1000, 1000 + 60_000)
    except Exception as exc:  # the policy's own message, as the client gets it
        return str(exc)
    raise AssertionError("the policy accepted the delay")


async def test_a_cpp_client_gets_a_refusal_as_the_checksum_error_it_honours() -> None:
    binary = _Binary(client_version="Pulsar-CPP-v3.7.0")
    binary.answer_appends(_numbered())
    binary.producer.max_message_size = 10

    binary.send(1)
    await binary.lane.drain()

    ((kind, sequence_id, (error, message)),) = _answers(binary.conn)
    assert (kind, sequence_id, error) == ("error", 1, "ChecksumError")
    assert message == "NotAllowedError: Exceed maximum message size"
    assert binary.side.producers == {PRODUCER_ID: binary.producer}  # the producer stays


async def test_an_encrypting_producers_message_without_keys_is_a_metadata_error() -> None:
    binary = _Binary()
    binary.answer_appends(_numbered())
    binary.producer.encrypted = True

    binary.send(1)
    await binary.lane.drain()

    assert _answers(binary.conn) == [("error", 1, ("MetadataError", "Messages must be encrypted"))]
    assert binary.lane.named("append_entries") == []


async def test_a_duplicate_is_acknowledged_with_minus_one_ids() -> None:
    binary = _Binary()
    binary.answer_appends(lambda blob: None)  # the script's answer for a duplicate

    binary.send(1)
    await binary.lane.drain()

    assert _answers(binary.conn) == [("receipt", 1, (U64_MINUS_ONE, U64_MINUS_ONE))]


@pytest.mark.parametrize("failure", ["refused", "storage"])
async def test_a_refused_or_failed_append_closes_the_producer_not_the_message(
    failure: str,
) -> None:
    binary = _Binary()
    if failure == "refused":  # fenced, or the topic terminated: the script answers 0
        binary.answer_appends(lambda blob: 0)
    else:
        binary.answer_appends(_numbered())
        binary.lane.fail_next("append_entries", StorageError("Redis connection lost"))

    binary.send(1)
    await binary.lane.drain()

    # CLOSE_PRODUCER, never a SEND_ERROR the client would retry forever
    assert _answers(binary.conn) == [("close", -1, PRODUCER_ID)]
    assert binary.side.producers == {}
    await binary.state.finish()  # the release runs as a request task
    assert binary.service.closed == [binary.producer]
    # SENDs it had in flight before it read CLOSE_PRODUCER are ignored, not refused
    binary.send(2)
    assert _answers(binary.conn) == []


async def test_deduplication_records_a_batchs_highest_id_and_only_a_last_chunk() -> None:
    binary = _Binary()
    binary.answer_appends(_numbered())
    binary.producer.deduplication = True

    binary.send(10, num_messages_in_batch=3)  # ids 10..12
    binary.send(13, is_chunk=True, chunk_id=0, num_chunks_from_msg=2, uuid="u-1")
    binary.send(13, is_chunk=True, chunk_id=1, num_chunks_from_msg=2, uuid="u-1")
    await binary.lane.drain()

    name = "orders-producer"
    assert binary.options_sent() == [
        f"3,,10,12,,,0,{name}",  # the batch records its highest id
        f",,13,,,,5,0:u-1{name}",  # the first chunk records nothing...
        f",,13,13,,,5,1:u-1{name}",  # ...the last records the message's id
    ]
    assert [kind for kind, _, _ in _answers(binary.conn)] == ["receipt"] * 3


async def test_a_send_for_an_unknown_producer_is_refused() -> None:
    binary = _Binary()
    binary.side.producers.clear()

    binary.send(1)

    ((kind, sequence_id, (error, _)),) = _answers(binary.conn)
    assert (kind, sequence_id, error) == ("error", 1, "NotAllowedError")


# -- ACK forms -------------------------------------------------------------------------------


def _ack(
    ids: tuple[tuple[int, int], ...],
    *,
    cumulative: bool = False,
    ack_sets: dict[int, tuple[int, ...]] | None = None,
) -> Ack:
    return Ack(7, cumulative, ids, ack_sets or {}, None, None)


@pytest.mark.parametrize(
    ("ack", "calls"),
    [
        pytest.param(_ack(((3, 4), (3, 5))), AckCalls([b"3-4", b"3-5"], []), id="individual"),
        pytest.param(
            _ack(((3, 4), (3, 5)), ack_sets={1: (0b1100,)}),
            AckCalls([b"3-4"], [(b"3-5", (0b1100,))]),
            id="individual-with-a-batch-index-ack",
        ),
        pytest.param(
            _ack(((-1, -1), (3, -1), (3, 6))), AckCalls([b"3-6"], []), id="negative-ids-skipped"
        ),
        pytest.param(_ack(((3, 5),), cumulative=True), AckCalls([], [], b"3-5"), id="cumulative"),
        pytest.param(
            _ack(((3, 5),), cumulative=True, ack_sets={0: (0b1100,)}),
            AckCalls([], [(b"3-5", (0b1100,))], b"3-4"),
            id="cumulative-with-a-batch-index-ack",
        ),
        pytest.param(
            _ack(((3, -1),), cumulative=True),
            AckCalls([], [], b"2-%d" % U64_MINUS_ONE),
            id="cumulative-before-the-first-entry-of-a-ledger",
        ),
        pytest.param(
            _ack(((0, -1),), cumulative=True), AckCalls([], []), id="cumulative-before-anything"
        ),
        pytest.param(
            _ack(((3, 0),), cumulative=True, ack_sets={0: (0b1,)}),
            AckCalls([], [(b"3-0", (0b1,))], b"2-%d" % U64_MINUS_ONE),
            id="cumulative-into-the-first-entry",
        ),
        pytest.param(_ack(((-1, -1),), cumulative=True), AckCalls([], []), id="cumulative-none"),
        pytest.param(_ack((), cumulative=True), AckCalls([], []), id="cumulative-without-id"),
    ],
)
def test_each_ack_form_asks_for_its_core_calls(ack: Ack, calls: AckCalls) -> None:
    assert ack_calls(ack) == calls


class _Consumer:
    """Records the core calls an ACK makes; each returns a future the test resolves."""

    subscription_type = SubscriptionType.EXCLUSIVE
    uid = "c-1"

    def __init__(self) -> None:
        self.calls: dict[str, asyncio.Future[int]] = {}

    def _call(self, name: str) -> asyncio.Future[int]:
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.calls[name] = fut
        return fut

    def ack(self, ids: Any) -> asyncio.Future[int]:
        return self._call("ack")

    def ack_batch_indexes(self, acks: Any) -> asyncio.Future[int]:
        return self._call("batch")

    def ack_cumulative(self, upto: bytes) -> asyncio.Future[int]:
        return self._call("cumulative")


def _consumer_side() -> tuple[ConsumerSide, ServerConnection, _Consumer]:
    conn = ServerConnection()
    state = SessionState(conn, lambda: None, _Authorization())  # type: ignore[arg-type]
    side = ConsumerSide(
        state,
        authorization=_Authorization(),  # type: ignore[arg-type]
        schemas=None,  # type: ignore[arg-type]
        subscriptions=None,  # type: ignore[arg-type]
    )
    consumer = _Consumer()
    side.consumers[7] = consumer  # type: ignore[assignment]
    return side, conn, consumer


def _ack_responses(conn: ServerConnection) -> list[pb.CommandAckResponse]:
    return [c.ackResponse for c in _frames(conn) if c.type == pb.BaseCommand.ACK_RESPONSE]


def _mixed_ack(cumulative: bool = False) -> Ack:
    if cumulative:
        return Ack(7, True, ((3, 5),), {0: (0b1100,)}, None, 42)
    return Ack(7, False, ((3, 4), (3, 5)), {1: (0b1100,)}, None, 42)


@pytest.mark.parametrize(
    ("first", "second", "fail", "cumulative"),
    [
        ("ack", "batch", "ack", False),
        ("ack", "batch", "batch", False),
        ("cumulative", "batch", "cumulative", True),
    ],
    ids=["whole-part-fails", "batch-part-fails", "cumulative-part-fails"],
)
async def test_an_ack_needing_two_calls_reports_either_failing(
    first: str, second: str, fail: str, cumulative: bool
) -> None:
    side, conn, consumer = _consumer_side()
    side.ack(_mixed_ack(cumulative))
    assert set(consumer.calls) == {first, second}
    for name in (first, second):
        fut = consumer.calls[name]
        if name == fail:
            fut.set_exception(StorageError("XACK failed"))
        else:
            fut.set_result(1)
        await asyncio.sleep(0)
        if name == first:
            assert _ack_responses(conn) == [], "answered before both calls finished"
    await asyncio.sleep(0)
    (response,) = _ack_responses(conn)
    assert response.request_id == 42
    assert response.HasField("error")


async def test_an_ack_needing_two_calls_succeeds_once_both_do() -> None:
    side, conn, consumer = _consumer_side()
    side.ack(_mixed_ack())
    consumer.calls["batch"].set_result(1)
    await asyncio.sleep(0)
    assert _ack_responses(conn) == []
    consumer.calls["ack"].set_result(1)
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    (response,) = _ack_responses(conn)
    assert not response.HasField("error")


async def test_an_ack_for_an_unknown_consumer_is_answered_consumer_not_found() -> None:
    side, conn, _ = _consumer_side()
    side.ack(Ack(99, False, ((3, 4),), {}, None, 5))
    (response,) = _ack_responses(conn)
    assert (response.request_id, response.error) == (5, pb.ConsumerNotFound)
