"""Query parameters of the WebSocket endpoints, parsed and validated without I/O.

Names, accepted values and defaults are those of Pulsar's ``pulsar-websocket`` handlers
(``ProducerHandler.getProducerBuilder``, ``ConsumerHandler.getConsumerConfiguration``,
``ReaderHandler``, ``MultiTopicConsumerHandler.extractTopicName``) and of the Java client
builders they feed (``ProducerBuilderImpl``, ``ConsumerBuilderImpl``). Enum values are
case-sensitive, as Java's ``Enum.valueOf`` is. Numbers follow ``Integer.parseInt`` /
``Long.parseLong``: an optional sign and decimal digits, in the type's range.

Every refusal is a :class:`ParamError` whose text the HTTP layer answers with status 400
and Pulsar's prefix ``Invalid query params: `` (``AbstractWebSocketHandler.getErrorMessage``).
Where Pulsar is lenient and a bad value silently becomes something else
(``Boolean.parseBoolean("yes")`` is false, an unknown ``cryptoFailureAction`` is only
logged), this gateway refuses it instead, so a typo is seen at once.

Unknown parameters are ignored, as Pulsar ignores them (an authentication token may travel
as one).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import re2

from pulsar_gateway.core import (
    InitialPosition,
    InvalidTopicName,
    MessageId,
    SubscriptionType,
    TopicName,
    parse_topic_name,
)
from pulsar_gateway.entry_codec import decode_message_id
from pulsar_gateway.proto import PulsarApi_pb2 as pb

__all__ = [
    "COMPRESSION_TYPES",
    "DEFAULT_NEGATIVE_ACK_DELAY_MS",
    "DEFAULT_RECEIVER_QUEUE_SIZE",
    "MIN_ACK_TIMEOUT_MS",
    "ConsumerParams",
    "HashingScheme",
    "MultiTopicParams",
    "ParamError",
    "ProducerParams",
    "ReaderParams",
    "RoutingMode",
    "parse_consumer_params",
    "parse_multi_topic_params",
    "parse_producer_params",
    "parse_reader_params",
]

#: ``ConsumerConfigurationData.receiverQueueSize`` and ``ReaderHandler``'s default.
DEFAULT_RECEIVER_QUEUE_SIZE = 1000
#: ``ConsumerConfigurationData.negativeAckRedeliveryDelayMicros``: one minute.
DEFAULT_NEGATIVE_ACK_DELAY_MS = 60_000
#: ``ConsumerBuilderImpl.MIN_ACK_TIMEOUT_MILLIS``.
MIN_ACK_TIMEOUT_MS = 1000
#: Largest receiverQueueSize honoured; larger ones are capped to it. Pulsar caps it at 1000
#: (``ConsumerHandler``: ``Math.min(.., 1000)``); the gateway allows larger windows, up to
#: the default unacked limit of a consumer (``maxUnackedMessagesPerConsumer``), since the
#: gateway remembers every pushed message until it is acknowledged.
MAX_RECEIVER_QUEUE_SIZE = 50_000

_T = TypeVar("_T")
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_NUMBER = re.compile(r"[+-]?[0-9]+", re.ASCII)

#: ``org.apache.pulsar.client.api.CompressionType`` -> ``MessageMetadata.compression``.
COMPRESSION_TYPES: Mapping[str, int] = {
    "NONE": pb.NONE,
    "LZ4": pb.LZ4,
    "ZLIB": pb.ZLIB,
    "ZSTD": pb.ZSTD,
    "SNAPPY": pb.SNAPPY,
}


class ParamError(ValueError):
    """A query parameter Pulsar would refuse (HTTP 400 before the upgrade)."""


class RoutingMode(enum.Enum):
    """``MessageRoutingMode``; ``CustomPartition`` is accepted and, as in
    ``ProducerHandler``, leaves the WebSocket default ``SinglePartition`` in place."""

    ROUND_ROBIN_PARTITION = "RoundRobinPartition"
    SINGLE_PARTITION = "SinglePartition"
    CUSTOM_PARTITION = "CustomPartition"


class HashingScheme(enum.Enum):
    """``HashingScheme``: how a keyed message picks its partition."""

    JAVA_STRING_HASH = "JavaStringHash"
    MURMUR3_32_HASH = "Murmur3_32Hash"


_SUBSCRIPTION_TYPES = {
    "Exclusive": SubscriptionType.EXCLUSIVE,
    "Shared": SubscriptionType.SHARED,
    "Failover": SubscriptionType.FAILOVER,
    "Key_Shared": SubscriptionType.KEY_SHARED,
}
_INITIAL_POSITIONS = {"Latest": InitialPosition.LATEST, "Earliest": InitialPosition.EARLIEST}
_SUBSCRIPTION_MODES = {"Durable": True, "NonDurable": False}
_CRYPTO_FAILURE_ACTIONS = ("FAIL", "DISCARD", "CONSUME")


# -- single values --------------------------------------------------------------------------


def _number(query: Mapping[str, str], name: str, bounds: tuple[int, int]) -> int | None:
    text = query.get(name)
    if text is None:
        return None
    if not _NUMBER.fullmatch(text):
        raise ParamError(f'{name}: For input string: "{text[:100]}"')
    value = int(text)
    if not bounds[0] <= value <= bounds[1]:
        raise ParamError(f"{name}: value out of range: {text[:100]}")
    return value


def _int(query: Mapping[str, str], name: str, minimum: int, default: int) -> int:
    value = _number(query, name, _INT32)
    if value is None:
        return default
    if value < minimum:
        raise ParamError(f"{name} needs to be >= {minimum}")
    return value


def _long(query: Mapping[str, str], name: str, minimum: int, default: int) -> int:
    value = _number(query, name, _INT64)
    if value is None:
        return default
    if value < minimum:
        raise ParamError(f"{name} needs to be >= {minimum}")
    return value


def _bool(query: Mapping[str, str], name: str, default: bool) -> bool:
    text = query.get(name)
    if text is None:
        return default
    if text.lower() == "true":
        return True
    if text.lower() == "false":
        return False
    raise ParamError(f"Invalid {name} {text[:100]}: expected true or false")


def _choice(query: Mapping[str, str], name: str, choices: Mapping[str, _T], default: _T) -> _T:
    text = query.get(name)
    if text is None:
        return default
    if text not in choices:
        # Pulsar's checkArgument text, e.g. "Invalid subscriptionType Foo".
        raise ParamError(f"Invalid {name} {text[:100]}")
    return choices[text]


def _name(query: Mapping[str, str], name: str) -> str | None:
    text = query.get(name)
    if text is not None and not text.strip():
        raise ParamError(f"{name} must not be blank")
    return text


def _topic(text: str, what: str = "topic name") -> TopicName:
    try:
        return parse_topic_name(text)
    except InvalidTopicName as exc:
        raise ParamError(f"Invalid {what}: {exc}") from None


def _crypto_failure_action(query: Mapping[str, str]) -> None:
    # Accepted for compatibility: the gateway holds no keys, so an encrypted message is
    # pushed with its payload as stored whatever the action (the CONSUME behaviour).
    text = query.get("cryptoFailureAction")
    if text is not None and text not in _CRYPTO_FAILURE_ACTIONS:
        raise ParamError(f"Invalid cryptoFailureAction {text[:100]}")


# -- producer ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProducerParams:
    """``/ws/v2/producer/...`` parameters (``ProducerHandler.getProducerBuilder``).

    ``batching_*`` and ``send_timeout_ms`` are validated and kept for the record: every
    WebSocket message is appended as its own entry at once, so there is no client-side
    batch for them to shape. ``max_pending_messages`` bounds the appends waiting for their
    acks (0: the gateway's ``maxPendingPublishRequestsPerConnection``): past it no frame
    is read until half are answered.
    """

    producer_name: str | None = None
    initial_sequence_id: int = -1
    routing_mode: RoutingMode = RoutingMode.SINGLE_PARTITION
    hashing_scheme: HashingScheme = HashingScheme.JAVA_STRING_HASH
    compression: int = pb.NONE
    batching_enabled: bool = False
    batching_max_messages: int = 1000
    batching_max_publish_delay_ms: int = 1
    max_pending_messages: int = 0
    send_timeout_ms: int = 30_000


def parse_producer_params(query: Mapping[str, str]) -> ProducerParams:
    """Raises:
    ParamError: a value Pulsar's producer builder would refuse."""
    if "encryptionKeys" in query:
        raise ParamError("encryptionKeys is not supported: the gateway holds no keys")
    max_pending = _int(query, "maxPendingMessages", 0, 0)
    if "maxPendingMessages" in query and max_pending == 0:
        raise ParamError("maxPendingMessages needs to be > 0")
    return ProducerParams(
        producer_name=_name(query, "producerName"),
        # ProducerBuilder.initialSequenceId: the id *before* the first message's.
        initial_sequence_id=_long(query, "initialSequenceId", -1, -1),
        routing_mode=_choice(
            query,
            "messageRoutingMode",
            {m.value: m for m in RoutingMode},
            RoutingMode.SINGLE_PARTITION,
        ),
        hashing_scheme=_choice(
            query,
            "hashingScheme",
            {h.value: h for h in HashingScheme},
            HashingScheme.JAVA_STRING_HASH,
        ),
        compression=_choice(query, "compressionType", COMPRESSION_TYPES, pb.NONE),
        batching_enabled=_bool(query, "batchingEnabled", False),
        batching_max_messages=_int(query, "batchingMaxMessages", 0, 1000),
        batching_max_publish_delay_ms=_long(query, "batchingMaxPublishDelay", 0, 1),
        max_pending_messages=max_pending,
        send_timeout_ms=_int(query, "sendTimeoutMillis", 0, 30_000),
    )


# -- consumers ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerParams:
    """``/ws/v2/consumer/...`` and ``/ws/v3/consumer/...`` parameters
    (``ConsumerHandler.getConsumerConfiguration``).

    ``dead_letter_topic`` is None for "the default" (``<topic>-<subscription>-DLQ``) and
    only meaningful with ``max_redeliver_count``; ``ack_timeout_ms`` 0 is off.
    """

    subscription_type: SubscriptionType = SubscriptionType.EXCLUSIVE
    durable: bool = True
    initial_position: InitialPosition = InitialPosition.LATEST
    receiver_queue_size: int = DEFAULT_RECEIVER_QUEUE_SIZE
    consumer_name: str | None = None
    priority_level: int = 0
    ack_timeout_ms: int = 0
    negative_ack_delay_ms: int = DEFAULT_NEGATIVE_ACK_DELAY_MS
    max_redeliver_count: int | None = None
    dead_letter_topic: TopicName | None = None
    pull_mode: bool = False


def parse_consumer_params(query: Mapping[str, str]) -> ConsumerParams:
    """Raises:
    ParamError: a value Pulsar's consumer builder would refuse."""
    ack_timeout = _long(query, "ackTimeoutMillis", 0, 0)
    if 0 < ack_timeout < MIN_ACK_TIMEOUT_MS:
        # ConsumerBuilderImpl.ackTimeout's check
        raise ParamError(f"Ack timeout should be greater than {MIN_ACK_TIMEOUT_MS} ms")
    max_redeliver = _number(query, "maxRedeliverCount", _INT32)
    if max_redeliver is not None and max_redeliver <= 0:
        # ConsumerBuilderImpl.deadLetterPolicy's check
        raise ParamError("MaxRedeliverCount must be > 0.")
    dead_letter = query.get("deadLetterTopic")
    if dead_letter is not None and max_redeliver is None:
        # Pulsar builds a DeadLetterPolicy with maxRedeliverCount 0 here, which the builder
        # refuses: a dead-letter topic needs a redelivery limit.
        raise ParamError("deadLetterTopic needs maxRedeliverCount")
    _crypto_failure_action(query)
    return ConsumerParams(
        subscription_type=_choice(
            query, "subscriptionType", _SUBSCRIPTION_TYPES, SubscriptionType.EXCLUSIVE
        ),
        durable=_choice(query, "subscriptionMode", _SUBSCRIPTION_MODES, True),
        initial_position=_choice(
            query, "subscriptionInitialPosition", _INITIAL_POSITIONS, InitialPosition.LATEST
        ),
        receiver_queue_size=_int(query, "receiverQueueSize", 0, DEFAULT_RECEIVER_QUEUE_SIZE),
        consumer_name=_name(query, "consumerName"),
        priority_level=_int(query, "priorityLevel", 0, 0),
        ack_timeout_ms=ack_timeout,
        negative_ack_delay_ms=_long(
            query, "negativeAckRedeliveryDelay", 0, DEFAULT_NEGATIVE_ACK_DELAY_MS
        ),
        max_redeliver_count=max_redeliver,
        dead_letter_topic=None if dead_letter is None else _topic(dead_letter, "deadLetterTopic"),
        pull_mode=_bool(query, "pullMode", False),
    )


@dataclass(frozen=True, slots=True)
class MultiTopicParams:
    """``/ws/v3/consumer/{subscription}``: exactly one of ``topics`` (full names, in the
    order given, duplicates dropped) and ``pattern`` (a regex over full topic names of the
    pattern's namespace), plus the consumer parameters."""

    consumer: ConsumerParams
    topics: tuple[TopicName, ...] = ()
    pattern: str | None = None
    pattern_namespace: str | None = None
    pattern_domain: str = "persistent"


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # the refusal is the client's answer, not a line on stderr


def topics_regex(pattern: str) -> Any:
    """A ``topicsPattern`` compiled by RE2, whose matching takes time linear in the name:
    the regex is the client's, and a backtracking engine can spend minutes on a pattern
    such as ``(a+)+$``, stopping every session of the gateway (Pulsar matches topic lists
    with RE2/J for the same reason: ``TopicList.filterTopics``). RE2 has no backreferences
    or lookaround; a pattern using them is refused.

    Raises:
        ParamError: not a regex RE2 accepts.
    """
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else ""
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ParamError(f"Invalid topicsPattern {pattern[:100]}: {reason}") from None


def parse_multi_topic_params(query: Mapping[str, str]) -> MultiTopicParams:
    """Raises:
    ParamError: neither or both of topics/topicsPattern, a bad topic name or regex, or a
        bad consumer parameter."""
    topics, pattern = query.get("topics"), query.get("topicsPattern")
    # MultiTopicConsumerHandler.extractTopicName's checks, with its texts.
    if topics is None and pattern is None:
        raise ParamError("Should set topics or topicsPattern")
    if topics is not None and pattern is not None:
        raise ParamError("Topics must be null when use topicsPattern")
    consumer = parse_consumer_params(query)
    if topics is not None:
        names: list[TopicName] = []
        for text in topics.split(","):
            if not text.strip():
                raise ParamError(f"Invalid topics {topics[:100]!r}: empty topic name")
            name = _topic(text.strip())
            if name not in names:
                names.append(name)
        return MultiTopicParams(consumer, topics=tuple(names))
    assert pattern is not None
    if not pattern:
        raise ParamError("topicsPattern must not be empty")
    # A pattern names its namespace like a topic does (TopicName.get(topicsPattern)); the
    # regex is the local part, e.g. persistent://public/default/orders-.*
    if "://" not in pattern:
        pattern = (
            f"persistent://{pattern}"
            if pattern.count("/") == 2
            else f"persistent://public/default/{pattern}"
        )
    name = _topic(pattern, "topicsPattern")
    topics_regex(pattern)
    return MultiTopicParams(
        consumer,
        pattern=pattern,
        pattern_namespace=name.namespace,
        pattern_domain=name.domain,
    )


# -- reader ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReaderParams:
    """``/ws/v2/reader/...`` parameters (``ReaderHandler``). ``start`` is None for
    ``latest`` (the default), ``MessageId(-1, -1)`` for ``earliest``, else the decoded id;
    the reader starts *after* it (the Java reader's default, not inclusive)."""

    start: MessageId | None = None
    receiver_queue_size: int = DEFAULT_RECEIVER_QUEUE_SIZE
    reader_name: str | None = None


def parse_reader_params(query: Mapping[str, str]) -> ReaderParams:
    """Raises:
    ParamError: a bad ``messageId`` or ``receiverQueueSize``."""
    _crypto_failure_action(query)
    text = query.get("messageId", "").strip()
    start: MessageId | None = None
    if text == "earliest":
        start = MessageId(-1, -1)
    elif text and text != "latest":
        try:
            start = decode_message_id(text)
        except ValueError as exc:
            raise ParamError(f"messageId: {exc}") from None
    return ReaderParams(
        start=start,
        receiver_queue_size=_int(query, "receiverQueueSize", 0, DEFAULT_RECEIVER_QUEUE_SIZE),
        reader_name=_name(query, "readerName"),
    )
