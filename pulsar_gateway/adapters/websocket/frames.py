"""The JSON text frames of the WebSocket API, parsed and built without I/O.

Field names and shapes are Pulsar's ``org.apache.pulsar.websocket.data`` classes:

* ``ProducerMessage`` (client -> producer): ``payload`` (base64), ``properties``,
  ``context``, ``key``, ``replicationClusters``, ``eventTime``, ``sequenceId``,
  ``disableReplication``, ``deliverAt``, ``deliverAfterMs`` (and schema fields this
  gateway ignores). Unknown fields are ignored, as Pulsar's object mapper does.
* ``ProducerAck`` (producer -> client): ``{"result": "ok", "messageId", "context"}`` or
  ``{"result": "send-error:<code>", "errorMsg", "context"}``, nulls left out; the codes
  are ``WebSocketError``'s (3 FailedToDeserializeFromJSON, 7 PayloadEncodingError,
  8 UnknownError).
* ``ConsumerMessage`` (consumer/reader -> client): ``messageId``, ``payload``,
  ``properties``, ``publishTime``, ``redeliveryCount``, ``eventTime`` (left out when the
  message has none), ``key`` (left out when none). Times are ``DateFormatter.format``:
  ISO-8601 with an offset (``2024-05-01T12:00:00.5Z``); this gateway prints UTC.
* ``ConsumerCommand`` (client -> consumer/reader): ``type``, ``messageId``,
  ``permitMessages``; ``EndOfTopicResponse``: ``{"endOfTopic": false}``.

A consumer command Pulsar cannot parse makes it close the session
(``close(FailedToDeserializeFromJSON)``); this gateway answers
``{"result": "error:<code>", "errorMsg": ...}`` instead and keeps the session, so one bad
frame does not cost a client its unacknowledged messages.
"""

from __future__ import annotations

import binascii
import datetime as dt
import json
from binascii import a2b_base64, b2a_base64
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from pulsar_gateway.core import MessageId, format_time
from pulsar_gateway.entry_codec import OutgoingMessage, ReceivedMessage, decode_message_id_data

__all__ = [
    "FAILED_TO_DESERIALIZE",
    "PAYLOAD_ENCODING_ERROR",
    "UNKNOWN_ERROR",
    "AckTarget",
    "ConsumerCommand",
    "FrameError",
    "ProducerRequest",
    "command_error",
    "consumer_command",
    "consumer_message",
    "end_of_topic",
    "format_time",
    "parse_consumer_command",
    "parse_producer_message",
    "parse_time",
    "producer_error",
    "producer_ok",
    "read_command",
]

#: ``WebSocketError`` codes.
FAILED_TO_DESERIALIZE = 3
PAYLOAD_ENCODING_ERROR = 7
UNKNOWN_ERROR = 8

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_INT64_MAX = 2**63 - 1


class FrameError(ValueError):
    """A frame that cannot be acted on; ``code`` is the ``WebSocketError`` code and
    ``context`` the producer request's context when it could be read."""

    def __init__(self, code: int, message: str, context: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.context = context


def _dumps(obj: dict[str, Any]) -> str:
    # orjson: compact, UTF-8 as is, a tenth of json.dumps's cost per pushed message
    return orjson.dumps(obj).decode()


# -- times ---------------------------------------------------------------------------------------


def parse_time(value: Any) -> int:
    """An ``eventTime``: an ISO-8601 date-time with an offset, as Pulsar's
    ``DateFormatter.parse`` reads it, or (beyond Pulsar) integer milliseconds.

    Raises:
        ValueError: neither.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value <= _INT64_MAX:
            raise ValueError(f"Event time {value} is out of range")
        return value
    if not isinstance(value, str):
        raise ValueError(f"Text {value!r} could not be parsed: not a date-time")
    text = value.strip()
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"Text '{text[:100]}' could not be parsed as a date-time") from None
    if moment.tzinfo is None:
        raise ValueError(f"Text '{text[:100]}' could not be parsed: it has no offset")
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


# -- producer ------------------------------------------------------------------------------------


class ProducerRequest(NamedTuple):
    """One ``ProducerMessage``, checked: the message to append (its ``deliver_at``
    absolute, ms since epoch, already combining ``deliverAt`` and ``deliverAfterMs``), the
    request's ``context``, and its ``sequenceId`` (None when the client gave none)."""

    message: OutgoingMessage
    context: str | None
    sequence_id: int | None


def _optional_long(obj: dict[str, Any], name: str, context: str | None) -> int:
    value = obj.get(name)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _INT64_MAX:
        raise FrameError(
            FAILED_TO_DESERIALIZE, f"{name} must be a non-negative integer, got {value!r}", context
        )
    return value


def parse_producer_message(text: str | bytes, now_ms: int) -> ProducerRequest:
    """Read one producer frame (``ProducerHandler.onWebSocketText``).

    Raises:
        FrameError: code 3 for JSON that is not a ``ProducerMessage``, code 7 for a
            missing or non-base64 payload or an unreadable ``eventTime``.
    """
    try:
        obj = orjson.loads(text)
    except ValueError as exc:  # orjson.JSONDecodeError, also for invalid UTF-8
        raise FrameError(FAILED_TO_DESERIALIZE, f"Invalid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise FrameError(FAILED_TO_DESERIALIZE, "A producer message must be a JSON object")
    get = obj.get
    context = get("context")
    if context is not None and not isinstance(context, str):
        context = json.dumps(context)  # Jackson coerces scalars to the String field
    payload = get("payload")
    if payload is None:
        raise FrameError(PAYLOAD_ENCODING_ERROR, "Missing payload", context)
    if not isinstance(payload, str):
        raise FrameError(PAYLOAD_ENCODING_ERROR, "payload must be a base64 string", context)
    try:
        # strict: only the alphabet and proper padding (Java's Base64 decoder refuses
        # the rest too); binascii directly, without b64decode's checking regex
        raw = a2b_base64(payload, strict_mode=True)
    except (binascii.Error, ValueError) as bad:
        raise FrameError(
            PAYLOAD_ENCODING_ERROR, f"Invalid Base64 message-payload error={bad}", context
        ) from None
    properties = get("properties") or {}
    if properties and (
        not isinstance(properties, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in properties.items())
    ):
        raise FrameError(FAILED_TO_DESERIALIZE, "properties must be an object of strings", context)
    key = get("key")
    if key is not None and not isinstance(key, str):
        raise FrameError(FAILED_TO_DESERIALIZE, "key must be a string", context)
    clusters = get("replicationClusters") or ()
    if clusters and (
        not isinstance(clusters, list) or not all(isinstance(c, str) for c in clusters)
    ):
        raise FrameError(
            FAILED_TO_DESERIALIZE, "replicationClusters must be a list of strings", context
        )
    event_time = 0
    if get("eventTime") is not None:
        try:
            event_time = parse_time(obj["eventTime"])
        except ValueError as exc:
            raise FrameError(PAYLOAD_ENCODING_ERROR, str(exc), context) from None
    sequence_id: int | None = None
    if get("sequenceId") is not None:
        sequence_id = _optional_long(obj, "sequenceId", context)
    deliver_at: int | None = None
    if get("deliverAt") is not None or get("deliverAfterMs") is not None:
        at = _optional_long(obj, "deliverAt", context)
        after = _optional_long(obj, "deliverAfterMs", context)
        # TypedMessageBuilder: deliverAt, then deliverAfter (which wins) when each is > 0.
        if at > 0:
            deliver_at = at
        if after > 0:
            deliver_at = now_ms + after
    message = OutgoingMessage(
        raw,
        key,
        properties,
        event_time,
        None,  # ordering key: not in Pulsar's ProducerMessage
        deliver_at,
        tuple(clusters),
    )
    return ProducerRequest(message, context, sequence_id)


def producer_ok(message_id: str, context: str | None) -> str:
    """``ProducerAck(messageId, context)``."""
    out: dict[str, Any] = {"result": "ok", "messageId": message_id}
    if context is not None:
        out["context"] = context
    return _dumps(out)


def producer_error(code: int, message: str, context: str | None) -> str:
    """``ProducerAck(error, errorMsg, null, context)``: ``result`` is
    ``send-error:<code>``."""
    out: dict[str, Any] = {"result": f"send-error:{code}", "errorMsg": message}
    if context is not None:
        out["context"] = context
    return _dumps(out)


# -- consumer ------------------------------------------------------------------------------------


def consumer_message(message: ReceivedMessage, message_id: str) -> str:
    """The ``ConsumerMessage`` pushed for one message."""
    out: dict[str, Any] = {
        "messageId": message_id,
        "payload": b2a_base64(message.payload, newline=False).decode(),
        "properties": message.properties,
        "publishTime": format_time(message.publish_time),
        "redeliveryCount": message.redelivery_count,
    }
    if message.event_time:
        out["eventTime"] = format_time(message.event_time)
    if message.key is not None:
        out["key"] = message.key
    return _dumps(out)


def end_of_topic(reached: bool) -> str:
    """``EndOfTopicResponse``."""
    return _dumps({"endOfTopic": reached})


def command_error(code: int, message: str, message_id: str | None = None) -> str:
    """The reply to a consumer or reader command that could not be carried out."""
    out: dict[str, Any] = {"result": f"error:{code}", "errorMsg": message}
    if message_id is not None:
        out["messageId"] = message_id
    return _dumps(out)


@dataclass(frozen=True, slots=True)
class AckTarget:
    """A ``messageId`` of a command: the id, and the batch size the id carries
    (``MessageIdData.batch_size``; 0 when absent)."""

    text: str
    message_id: MessageId
    batch_size: int = 0


@dataclass(frozen=True, slots=True)
class ConsumerCommand:
    """A ``ConsumerCommand``. ``type`` is ``"ack"`` for the plain ack (no type);
    ``target`` is set for the types that name a message; ``permits`` for ``permit``."""

    type: str
    target: AckTarget | None = None
    permits: int = 0


#: Command types and whether they need a ``messageId``. No type is an individual ack.
_COMMANDS = {
    "ack": True,
    "negativeAcknowledge": True,
    "cumulativeAcknowledge": True,
    "permit": False,
    "unsubscribe": False,
    "isEndOfTopic": False,
}


def _ack_target(text: Any) -> AckTarget:
    if not isinstance(text, str) or not text:
        raise FrameError(FAILED_TO_DESERIALIZE, "Missing required messageId field")
    try:
        message_id, batch_size = decode_message_id_data(text)
    except ValueError as exc:
        raise FrameError(FAILED_TO_DESERIALIZE, str(exc)) from None
    return AckTarget(text, message_id, batch_size)


def parse_consumer_command(text: str | bytes) -> ConsumerCommand:
    """Read one consumer/reader frame (``ConsumerHandler.onWebSocketText``):
    :func:`consumer_command` of :func:`read_command`.

    Raises:
        FrameError: (code 3) not JSON, not an object, an unknown ``type``, a missing or
            unreadable ``messageId``, or a ``permit`` without a positive
            ``permitMessages``.
    """
    return consumer_command(read_command(text))


def read_command(text: str | bytes) -> dict[str, Any]:
    """The JSON object of a consumer/reader frame, not checked further.

    Raises:
        FrameError: (code 3) not JSON, or not an object.
    """
    try:
        obj = orjson.loads(text)
    except ValueError as exc:  # orjson.JSONDecodeError, also for invalid UTF-8
        raise FrameError(FAILED_TO_DESERIALIZE, f"Invalid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise FrameError(FAILED_TO_DESERIALIZE, "A command must be a JSON object")
    return obj


def consumer_command(obj: dict[str, Any]) -> ConsumerCommand:
    """The command of a frame's JSON object (:func:`read_command`).

    Raises:
        FrameError: as :func:`parse_consumer_command`.
    """
    kind = obj.get("type") or "ack"
    if not isinstance(kind, str) or kind not in _COMMANDS:
        raise FrameError(FAILED_TO_DESERIALIZE, f"Unknown command type {str(kind)[:100]!r}")
    target = _ack_target(obj.get("messageId")) if _COMMANDS[kind] else None
    permits = 0
    if kind == "permit":
        value = obj.get("permitMessages")
        if value is None:
            # ConsumerHandler.handlePermit's text
            raise FrameError(
                FAILED_TO_DESERIALIZE, "Missing required permitMessages field for 'permit' command"
            )
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**31:
            raise FrameError(
                FAILED_TO_DESERIALIZE, f"permitMessages must be a positive integer, got {value!r}"
            )
        permits = value
    return ConsumerCommand(kind, target, permits)
