"""Inbound Pulsar commands as small typed records.

The generated protobuf classes stay at the boundary: :func:`from_frame` turns a decoded
frame into one of the immutable records below (frozen dataclasses; NamedTuples for the
per-message ones), converting what the wire encodes oddly
(``-1`` sent as ``2**64-1``, optional fields with Pulsar defaults) once, so handlers work
with plain values. Names follow ``BaseCommand.Type``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from pulsar_gateway.core import MessageId, SchemaData, signed64
from pulsar_gateway.entry_codec import Payload, proto_field
from pulsar_gateway.frame_codec import Frame
from pulsar_gateway.proto import PulsarApi_pb2 as pb

__all__ = [
    "Ack",
    "AuthResponse",
    "CloseConsumer",
    "CloseProducer",
    "Command",
    "Connect",
    "Flow",
    "GetLastMessageId",
    "GetOrCreateSchema",
    "GetSchema",
    "GetTopicsOfNamespace",
    "InvalidCommand",
    "Lookup",
    "PartitionedMetadata",
    "Ping",
    "Pong",
    "Producer",
    "Redeliver",
    "Seek",
    "Send",
    "Subscribe",
    "Unsubscribe",
    "Unsupported",
    "from_frame",
]

T = pb.BaseCommand.Type
_I63 = (1 << 63) - 1
_U64 = 1 << 64


@dataclass(frozen=True, slots=True)
class Connect:
    client_version: str
    protocol_version: int
    auth_method_name: str
    auth_data: bytes
    #: ``FeatureFlags.supports_auth_refresh``: the client answers AUTH_CHALLENGE
    supports_auth_refresh: bool = False


@dataclass(frozen=True, slots=True)
class AuthResponse:
    """The client's answer to AUTH_CHALLENGE: its current credentials."""

    auth_method_name: str
    auth_data: bytes


@dataclass(frozen=True, slots=True)
class Ping:
    pass


@dataclass(frozen=True, slots=True)
class Pong:
    pass


@dataclass(frozen=True, slots=True)
class PartitionedMetadata:
    request_id: int
    topic: str


@dataclass(frozen=True, slots=True)
class Lookup:
    request_id: int
    topic: str
    authoritative: bool
    #: ``advertised_listener_name``: "" for the default URLs
    listener_name: str = ""


@dataclass(frozen=True, slots=True)
class Producer:
    request_id: int
    producer_id: int
    topic: str
    producer_name: str | None
    access_mode: int
    epoch: int
    #: False when the name was assigned by the broker (the client's reconnects send it back)
    user_provided_name: bool = True
    #: the topic epoch of an earlier PRODUCER_SUCCESS, echoed on reconnect
    topic_epoch: int | None = None
    schema: SchemaData | None = None
    #: the client encrypts its messages (``CommandProducer.encrypted``)
    encrypted: bool = False


# A NamedTuple's own constructor is a Python function (``collections.namedtuple``
# compiles ``__new__`` from source), twice the cost of ``tuple.__new__`` on its class,
# which builds the same object; the constructions below run once per SEND or ACK.
_new = tuple.__new__


class Send(NamedTuple):
    """One per produced entry: a NamedTuple, built in a third of a frozen dataclass's time
    (as ``Flow`` and ``Ack``, the other per-message commands)."""

    producer_id: int
    sequence_id: int
    num_messages: int
    is_chunk: bool
    payload: Payload


@dataclass(frozen=True, slots=True)
class Subscribe:
    request_id: int
    consumer_id: int
    topic: str
    subscription: str
    sub_type: int
    consumer_name: str
    priority_level: int
    durable: bool
    start_message_id: MessageId | None
    initial_position: int
    read_compacted: bool
    #: ``keySharedMeta`` (Key_Shared only): mode and STICKY hash ranges, inclusive
    key_shared_mode: int = 0
    hash_ranges: tuple[tuple[int, int], ...] = ()
    allow_out_of_order: bool = False
    schema: SchemaData | None = None


class Flow(NamedTuple):
    consumer_id: int
    permits: int


class Ack(NamedTuple):
    consumer_id: int
    cumulative: bool
    #: (ledgerId, entryId) of each acked entry (plain tuples: this is per acked message)
    message_ids: tuple[tuple[int, int], ...]
    #: batch-index ack state by position in ``message_ids``, only where the client sent one
    #: (bit set = index still unacked, Pulsar's ``MessageIdData.ack_set``)
    ack_sets: dict[int, tuple[int, ...]]
    validation_error: int | None
    request_id: int | None


@dataclass(frozen=True, slots=True)
class Redeliver:
    consumer_id: int
    #: (ledgerId, entryId) pairs; empty = everything unacked of the consumer
    message_ids: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class CloseProducer:
    request_id: int
    producer_id: int


@dataclass(frozen=True, slots=True)
class CloseConsumer:
    request_id: int
    consumer_id: int


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    request_id: int
    consumer_id: int


@dataclass(frozen=True, slots=True)
class GetLastMessageId:
    request_id: int
    consumer_id: int


@dataclass(frozen=True, slots=True)
class Seek:
    request_id: int
    consumer_id: int
    message_id: MessageId | None
    publish_time: int | None


@dataclass(frozen=True, slots=True)
class GetTopicsOfNamespace:
    request_id: int
    namespace: str
    mode: int


@dataclass(frozen=True, slots=True)
class GetSchema:
    request_id: int
    topic: str
    #: 8-byte big-endian version; None = latest
    schema_version: bytes | None = None


@dataclass(frozen=True, slots=True)
class GetOrCreateSchema:
    request_id: int
    topic: str
    schema: SchemaData


@dataclass(frozen=True, slots=True)
class Unsupported:
    """A command this gateway does not serve; answered with an error if it has a request id."""

    type: int
    type_name: str
    request_id: int | None


Command = (
    Connect
    | AuthResponse
    | Ping
    | Pong
    | PartitionedMetadata
    | Lookup
    | Producer
    | Send
    | Subscribe
    | Flow
    | Ack
    | Redeliver
    | CloseProducer
    | CloseConsumer
    | Unsubscribe
    | GetLastMessageId
    | Seek
    | GetTopicsOfNamespace
    | GetSchema
    | GetOrCreateSchema
    | Unsupported
)


def _message_id(m: pb.MessageIdData) -> MessageId:
    return MessageId(
        signed64(m.ledgerId),
        signed64(m.entryId),
        m.partition if m.HasField("partition") else -1,
        m.batch_index if m.HasField("batch_index") else -1,
    )


def _connect(c: pb.BaseCommand, _: Frame) -> Command:
    x = c.connect
    return Connect(
        proto_field(x, "client_version"),
        x.protocol_version,
        proto_field(x, "auth_method_name"),
        x.auth_data,
        x.feature_flags.supports_auth_refresh,
    )


def _auth_response(c: pb.BaseCommand, _: Frame) -> Command:
    x = c.authResponse.response
    return AuthResponse(proto_field(x, "auth_method_name"), x.auth_data)


def _schema(s: pb.Schema) -> SchemaData:
    # Typed as Any: in the generated stubs, Schema.Type.KeyValue shadows the KeyValue message.
    properties: Any = s.properties
    return SchemaData(
        int(s.type),
        proto_field(s, "name"),
        bytes(s.schema_data),
        tuple(sorted((proto_field(p, "key"), proto_field(p, "value")) for p in properties)),
    )


def _producer(c: pb.BaseCommand, _: Frame) -> Command:
    x = c.producer
    return Producer(
        x.request_id,
        x.producer_id,
        proto_field(x, "topic"),
        proto_field(x, "producer_name") or None,
        x.producer_access_mode,
        x.epoch,
        x.user_provided_producer_name,
        x.topic_epoch if x.HasField("topic_epoch") else None,
        _schema(x.schema) if x.HasField("schema") else None,
        x.encrypted,
    )


def _get_schema(c: pb.BaseCommand, _: Frame) -> Command:
    x = c.getSchema
    version = x.schema_version if x.HasField("schema_version") and x.schema_version else None
    return GetSchema(x.request_id, proto_field(x, "topic"), version)


def _send(c: pb.BaseCommand, frame: Frame) -> Command:
    x = c.send
    assert frame.payload is not None  # the codec only attaches payloads to SEND/MESSAGE
    return _new(Send, (x.producer_id, x.sequence_id, x.num_messages, x.is_chunk, frame.payload))


def _subscribe(c: pb.BaseCommand, _: Frame) -> Command:
    x = c.subscribe
    return Subscribe(
        x.request_id,
        x.consumer_id,
        proto_field(x, "topic"),
        proto_field(x, "subscription"),
        x.subType,
        proto_field(x, "consumer_name"),
        x.priority_level,
        x.durable,
        _message_id(x.start_message_id) if x.HasField("start_message_id") else None,
        x.initialPosition,
        x.read_compacted,
        x.keySharedMeta.keySharedMode,
        tuple((r.start, r.end) for r in x.keySharedMeta.hashRanges),
        x.keySharedMeta.allowOutOfOrderDelivery,
        _schema(x.schema) if x.HasField("schema") else None,
    )


def _ack(c: pb.BaseCommand, _: Frame) -> Command:
    x = c.ack
    ids: list[tuple[int, int]] = []
    ack_sets: dict[int, tuple[int, ...]] = {}
    for m in x.message_id:
        ledger, entry = m.ledgerId, m.entryId
        if ledger > _I63:  # signed64, inlined: this loop runs per acked message
            ledger -= _U64
        if entry > _I63:
            entry -= _U64
        if m.ack_set:
            ack_sets[len(ids)] = tuple(m.ack_set)
        ids.append((ledger, entry))
    return _new(
        Ack,
        (
            x.consumer_id,
            x.ack_type == pb.CommandAck.Cumulative,
            tuple(ids),
            ack_sets,
            x.validation_error if x.HasField("validation_error") else None,
            x.request_id if x.HasField("request_id") else None,
        ),
    )


def _redeliver(c: pb.BaseCommand, _: Frame) -> Command:
    x = c.redeliverUnacknowledgedMessages
    return Redeliver(
        x.consumer_id, tuple((signed64(m.ledgerId), signed64(m.entryId)) for m in x.message_ids)
    )


def _seek(c: pb.BaseCommand, _: Frame) -> Command:
    x = c.seek
    return Seek(
        x.request_id,
        x.consumer_id,
        _message_id(x.message_id) if x.HasField("message_id") else None,
        x.message_publish_time if x.HasField("message_publish_time") else None,
    )


_DECODERS: dict[int, Callable[[pb.BaseCommand, Frame], Command]] = {
    T.CONNECT: _connect,
    T.AUTH_RESPONSE: _auth_response,
    T.PING: lambda c, f: Ping(),
    T.PONG: lambda c, f: Pong(),
    T.PARTITIONED_METADATA: lambda c, f: PartitionedMetadata(
        c.partitionMetadata.request_id, proto_field(c.partitionMetadata, "topic")
    ),
    T.LOOKUP: lambda c, f: Lookup(
        c.lookupTopic.request_id,
        proto_field(c.lookupTopic, "topic"),
        c.lookupTopic.authoritative,
        proto_field(c.lookupTopic, "advertised_listener_name"),
    ),
    T.PRODUCER: _producer,
    T.SEND: _send,
    T.SUBSCRIBE: _subscribe,
    T.FLOW: lambda c, f: Flow(c.flow.consumer_id, c.flow.messagePermits),
    T.ACK: _ack,
    T.REDELIVER_UNACKNOWLEDGED_MESSAGES: _redeliver,
    T.CLOSE_PRODUCER: lambda c, f: CloseProducer(
        c.close_producer.request_id, c.close_producer.producer_id
    ),
    T.CLOSE_CONSUMER: lambda c, f: CloseConsumer(
        c.close_consumer.request_id, c.close_consumer.consumer_id
    ),
    T.UNSUBSCRIBE: lambda c, f: Unsubscribe(c.unsubscribe.request_id, c.unsubscribe.consumer_id),
    T.GET_LAST_MESSAGE_ID: lambda c, f: GetLastMessageId(
        c.getLastMessageId.request_id, c.getLastMessageId.consumer_id
    ),
    T.SEEK: _seek,
    T.GET_TOPICS_OF_NAMESPACE: lambda c, f: GetTopicsOfNamespace(
        c.getTopicsOfNamespace.request_id,
        proto_field(c.getTopicsOfNamespace, "namespace"),
        c.getTopicsOfNamespace.mode,
    ),
    T.GET_SCHEMA: _get_schema,
    T.GET_OR_CREATE_SCHEMA: lambda c, f: GetOrCreateSchema(
        c.getOrCreateSchema.request_id,
        proto_field(c.getOrCreateSchema, "topic"),
        _schema(c.getOrCreateSchema.schema),
    ),
}


#: BaseCommand's sub-message field number equals its Type value (``PulsarApi.proto``): the
#: field each type must carry, looked up once here rather than per command.
_SUB_MESSAGE: dict[int, str] = {
    f.number: f.name for f in pb.BaseCommand.DESCRIPTOR.fields if f.name != "type"
}


def _request_id_of(c: pb.BaseCommand) -> int | None:
    """The request_id of an unsupported command, if its sub-message has one."""
    for field, value in c.ListFields():
        if field.name != "type" and hasattr(value, "request_id"):
            return int(value.request_id)
    return None


class InvalidCommand(ValueError):
    """The frame's type names a sub-message the frame does not carry."""


def from_frame(frame: Frame) -> Command:
    """The typed command of a decoded frame.

    Raises:
        InvalidCommand: ``BaseCommand.type`` says X but the X sub-message is missing.
    """
    send = frame.send
    if send is not None:  # the decoder's fast path: a SEND read without protobuf objects
        assert frame.payload is not None
        return _new(
            Send,
            (send.producer_id, send.sequence_id, send.num_messages, send.is_chunk, frame.payload),
        )
    c = frame.command
    name = _SUB_MESSAGE.get(c.type)
    if name is not None and not c.HasField(name):
        raise InvalidCommand(f"{name} command without its {name} field")
    decoder = _DECODERS.get(c.type)
    if decoder is not None:
        return decoder(c, frame)
    try:
        type_name = pb.BaseCommand.Type.Name(c.type)
    except ValueError:
        type_name = f"type {c.type}"
    return Unsupported(c.type, type_name, _request_id_of(c))
