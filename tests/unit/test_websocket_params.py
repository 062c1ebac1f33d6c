"""The WebSocket API's sans-I/O parts: query parameters, JSON frames, partition routing."""

from __future__ import annotations

import base64
import json
import random

import pytest

from pulsar_gateway.adapters.websocket import frames
from pulsar_gateway.adapters.websocket.params import (
    HashingScheme,
    ParamError,
    RoutingMode,
    parse_consumer_params,
    parse_multi_topic_params,
    parse_producer_params,
    parse_reader_params,
)
from pulsar_gateway.adapters.websocket.routing import PartitionRouter
from pulsar_gateway.core import java_string_hash, murmur3_32_hash
from pulsar_gateway.core.model.message_id import MessageId
from pulsar_gateway.core.model.subscription_type import InitialPosition, SubscriptionType
from pulsar_gateway.entry_codec import ReceivedMessage, encode_message_id
from pulsar_gateway.proto import PulsarApi_pb2 as pb

# -- query parameters ------------------------------------------------------------------------


def test_producer_defaults_are_the_websocket_producer_builder() -> None:
    params = parse_producer_params({})
    assert params.routing_mode is RoutingMode.SINGLE_PARTITION
    assert params.hashing_scheme is HashingScheme.JAVA_STRING_HASH
    assert params.compression == pb.NONE
    assert params.initial_sequence_id == -1
    assert params.producer_name is None
    assert params.batching_enabled is False


def test_producer_parameters() -> None:
    params = parse_producer_params(
        {
            "producerName": "p",
            "initialSequenceId": "41",
            "messageRoutingMode": "RoundRobinPartition",
            "hashingScheme": "Murmur3_32Hash",
            "compressionType": "ZSTD",
            "batchingEnabled": "TRUE",
            "batchingMaxMessages": "10",
            "batchingMaxPublishDelay": "5",
            "maxPendingMessages": "7",
            "sendTimeoutMillis": "+100",
            "unknown": "ignored",
        }
    )
    assert params.producer_name == "p"
    assert params.initial_sequence_id == 41
    assert params.routing_mode is RoutingMode.ROUND_ROBIN_PARTITION
    assert params.hashing_scheme is HashingScheme.MURMUR3_32_HASH
    assert params.compression == pb.ZSTD
    assert params.batching_enabled is True
    assert (params.batching_max_messages, params.max_pending_messages) == (10, 7)
    assert params.send_timeout_ms == 100


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"compressionType": "Lz4"}, "Invalid compressionType Lz4"),
        ({"messageRoutingMode": "x"}, "Invalid messageRoutingMode x"),
        ({"hashingScheme": "murmur"}, "Invalid hashingScheme murmur"),
        ({"sendTimeoutMillis": "1.5"}, 'sendTimeoutMillis: For input string: "1.5"'),
        ({"sendTimeoutMillis": " 1"}, 'sendTimeoutMillis: For input string: " 1"'),
        ({"batchingMaxMessages": "99999999999"}, "batchingMaxMessages: value out of range"),
        ({"initialSequenceId": "-2"}, "initialSequenceId needs to be >= -1"),
        ({"maxPendingMessages": "0"}, "maxPendingMessages needs to be > 0"),
        ({"producerName": " "}, "producerName must not be blank"),
        ({"encryptionKeys": "k"}, "encryptionKeys is not supported"),
    ],
)
def test_bad_producer_parameters(query: dict[str, str], message: str) -> None:
    with pytest.raises(ParamError) as info:
        parse_producer_params(query)
    assert str(info.value).startswith(message)


def test_consumer_defaults() -> None:
    params = parse_consumer_params({})
    assert params.subscription_type is SubscriptionType.EXCLUSIVE
    assert params.initial_position is InitialPosition.LATEST
    assert params.receiver_queue_size == 1000
    assert params.negative_ack_delay_ms == 60_000
    assert params.ack_timeout_ms == 0
    assert params.durable is True
    assert params.pull_mode is False
    assert params.max_redeliver_count is None


def test_consumer_parameters() -> None:
    params = parse_consumer_params(
        {
            "subscriptionType": "Key_Shared",
            "subscriptionMode": "NonDurable",
            "subscriptionInitialPosition": "Earliest",
            "receiverQueueSize": "5000",
            "consumerName": "c",
            "priorityLevel": "2",
            "ackTimeoutMillis": "1000",
            "negativeAckRedeliveryDelay": "0",
            "maxRedeliverCount": "3",
            "deadLetterTopic": "persistent://t/ns/dead",
            "pullMode": "true",
            "cryptoFailureAction": "CONSUME",
        }
    )
    assert params.subscription_type is SubscriptionType.KEY_SHARED
    assert params.durable is False
    assert params.initial_position is InitialPosition.EARLIEST
    assert params.receiver_queue_size == 5000  # beyond Pulsar's cap of 1000
    assert (params.consumer_name, params.priority_level) == ("c", 2)
    assert (params.ack_timeout_ms, params.negative_ack_delay_ms) == (1000, 0)
    assert params.max_redeliver_count == 3
    assert str(params.dead_letter_topic) == "persistent://t/ns/dead"
    assert params.pull_mode is True


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"subscriptionType": "Exclusive2"}, "Invalid subscriptionType Exclusive2"),
        ({"ackTimeoutMillis": "999"}, "Ack timeout should be greater than 1000 ms"),
        ({"maxRedeliverCount": "-1"}, "MaxRedeliverCount must be > 0."),
        ({"deadLetterTopic": "x"}, "deadLetterTopic needs maxRedeliverCount"),
        ({"maxRedeliverCount": "1", "deadLetterTopic": "a/b/c/d/e"}, "Invalid deadLetterTopic"),
        ({"cryptoFailureAction": "IGNORE"}, "Invalid cryptoFailureAction IGNORE"),
        ({"receiverQueueSize": "-5"}, "receiverQueueSize needs to be >= 0"),
    ],
)
def test_bad_consumer_parameters(query: dict[str, str], message: str) -> None:
    with pytest.raises(ParamError) as info:
        parse_consumer_params(query)
    assert str(info.value).startswith(message)


def test_multi_topic_parameters() -> None:
    multi = parse_multi_topic_params({"topics": "a, persistent://t/ns/b,a"})
    assert [str(t) for t in multi.topics] == [
        "persistent://public/default/a",
        "persistent://t/ns/b",
    ]
    multi = parse_multi_topic_params({"topicsPattern": "t/ns/orders-.*"})
    assert multi.pattern == "persistent://t/ns/orders-.*"
    assert (multi.pattern_namespace, multi.pattern_domain) == ("t/ns", "persistent")
    multi = parse_multi_topic_params({"topicsPattern": "non-persistent://t/ns/x.*"})
    assert multi.pattern_domain == "non-persistent"
    for query, message in (
        ({}, "Should set topics or topicsPattern"),
        ({"topics": "a", "topicsPattern": "a"}, "Topics must be null when use topicsPattern"),
        ({"topics": "a,,b"}, "Invalid topics"),
        ({"topicsPattern": "x(["}, "Invalid topicsPattern"),
    ):
        with pytest.raises(ParamError, match=message):
            parse_multi_topic_params(query)


def test_reader_parameters() -> None:
    assert parse_reader_params({}).start is None
    assert parse_reader_params({"messageId": "latest"}).start is None
    assert parse_reader_params({"messageId": "earliest"}).start == MessageId(-1, -1)
    text = encode_message_id(MessageId(12, 3, 1, 4), batch_size=5)
    assert parse_reader_params({"messageId": text}).start == MessageId(12, 3, 1, 4)
    reader = parse_reader_params({"receiverQueueSize": "2500", "readerName": "r"})
    assert (reader.receiver_queue_size, reader.reader_name) == (2500, "r")
    with pytest.raises(ParamError, match="messageId: Invalid message id"):
        parse_reader_params({"messageId": "zz"})


# -- frames -----------------------------------------------------------------------------------


def test_time_format_is_java_iso_offset_date_time() -> None:
    assert frames.format_time(0) == "1970-01-01T00:00:00Z"
    assert frames.format_time(1_700_000_000_500) == "2023-11-14T22:13:20.5Z"
    assert frames.format_time(1_700_000_000_123) == "2023-11-14T22:13:20.123Z"
    for ms in (0, 1, 999, 1_700_000_000_010, 4_102_444_800_000):
        assert frames.parse_time(frames.format_time(ms)) == ms
    assert frames.parse_time("2023-11-14T23:13:20.5+01:00") == 1_700_000_000_500
    assert frames.parse_time(1234) == 1234
    for bad in ("2023-11-14T22:13:20", "yesterday", 1.5, None, -1):
        with pytest.raises(ValueError):
            frames.parse_time(bad)


def test_producer_message() -> None:
    text = json.dumps(
        {
            "payload": base64.b64encode(b"data").decode(),
            "properties": {"a": "b"},
            "context": "c",
            "key": "k",
            "replicationClusters": ["r1"],
            "eventTime": "1970-01-01T00:00:01Z",
            "sequenceId": 7,
            "deliverAt": 5000,
            "schemaVersion": 3,  # ignored, as unknown fields are
        }
    )
    request = frames.parse_producer_message(text, now_ms=100)
    message = request.message
    assert message.payload == b"data"
    assert (message.key, request.context, message.properties) == ("k", "c", {"a": "b"})
    assert (message.event_time, request.sequence_id, message.deliver_at) == (1000, 7, 5000)
    assert (message.replication_clusters, message.ordering_key) == (("r1",), None)
    after = frames.parse_producer_message('{"payload": "", "deliverAfterMs": 50}', now_ms=100)
    assert (after.message.payload, after.message.deliver_at, after.sequence_id) == (b"", 150, None)
    both = frames.parse_producer_message('{"payload": "", "deliverAt": 9, "deliverAfterMs": 0}', 1)
    assert both.message.deliver_at == 9


@pytest.mark.parametrize(
    ("text", "code", "context"),
    [
        ("{", 3, None),
        ("[]", 3, None),
        ('{"context": "c"}', 7, "c"),
        ('{"payload": "***", "context": "c"}', 7, "c"),
        ('{"payload": "YQ", "context": "c"}', 7, "c"),  # padding missing
        ('{"payload": "YQ==YQ==", "context": "c"}', 7, "c"),  # data after the padding
        ('{"payload": "", "properties": [1]}', 3, None),
        ('{"payload": "", "replicationClusters": "r1"}', 3, None),
        ('{"payload": 5}', 7, None),
        ('{"payload": "", "properties": {"a": 1}}', 3, None),
        ('{"payload": "", "key": 5}', 3, None),
        ('{"payload": "", "eventTime": "noon"}', 7, None),
        ('{"payload": "", "sequenceId": -1}', 3, None),
        ('{"payload": "", "deliverAt": "soon"}', 3, None),
    ],
)
def test_bad_producer_messages(text: str, code: int, context: str | None) -> None:
    with pytest.raises(frames.FrameError) as info:
        frames.parse_producer_message(text, now_ms=0)
    assert (info.value.code, info.value.context) == (code, context)


def test_producer_acks_leave_nulls_out() -> None:
    assert json.loads(frames.producer_ok("aWQ=", None)) == {"result": "ok", "messageId": "aWQ="}
    assert json.loads(frames.producer_error(7, "bad", "c")) == {
        "result": "send-error:7",
        "errorMsg": "bad",
        "context": "c",
    }


def _message(**kwargs: object) -> ReceivedMessage:
    base: dict[str, object] = {
        "message_id": MessageId(1, 2),
        "payload": b"p",
        "key": None,
        "properties": {},
        "publish_time": 1_700_000_000_000,
        "event_time": 0,
        "producer_name": "x",
        "sequence_id": 0,
    }
    return ReceivedMessage(**{**base, **kwargs})  # type: ignore[arg-type]


def test_consumer_message_shape() -> None:
    plain = json.loads(frames.consumer_message(_message(), "aWQ="))
    assert plain == {
        "messageId": "aWQ=",
        "payload": "cA==",
        "properties": {},
        "publishTime": "2023-11-14T22:13:20Z",
        "redeliveryCount": 0,
    }
    full = json.loads(
        frames.consumer_message(
            _message(key="k", event_time=1000, redelivery_count=2, properties={"a": "b"}), "x"
        )
    )
    assert (full["key"], full["eventTime"], full["redeliveryCount"]) == (
        "k",
        "1970-01-01T00:00:01Z",
        2,
    )


def test_consumer_commands() -> None:
    text = encode_message_id(MessageId(5, 6, 2, 1), batch_size=3)
    ack = frames.parse_consumer_command(json.dumps({"messageId": text}))
    assert ack.type == "ack"
    assert ack.target == frames.AckTarget(text, MessageId(5, 6, 2, 1), 3)
    nack = frames.parse_consumer_command(
        json.dumps({"type": "negativeAcknowledge", "messageId": text})
    )
    assert nack.type == "negativeAcknowledge"
    permit = frames.parse_consumer_command('{"type": "permit", "permitMessages": 4}')
    assert (permit.type, permit.permits, permit.target) == ("permit", 4, None)
    for kind in ("unsubscribe", "isEndOfTopic"):
        assert frames.parse_consumer_command(json.dumps({"type": kind})).type == kind


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nope", "Invalid JSON"),
        ('"ack"', "A command must be a JSON object"),
        ('{"type": "seek"}', "Unknown command type 'seek'"),
        ("{}", "Missing required messageId field"),
        ('{"messageId": "!!"}', "Invalid message id"),
        ('{"type": "permit"}', "Missing required permitMessages field for 'permit' command"),
        ('{"type": "permit", "permitMessages": 0}', "permitMessages must be a positive integer"),
    ],
)
def test_bad_consumer_commands(text: str, message: str) -> None:
    with pytest.raises(frames.FrameError) as info:
        frames.parse_consumer_command(text)
    assert info.value.code == frames.FAILED_TO_DESERIALIZE
    assert str(info.value).startswith(message)


# -- routing ----------------------------------------------------------------------------------


def test_hashes_match_java() -> None:
    # "hello".hashCode() == 99162322; Murmur3_32("hello", seed 0) == 0x248bfa47
    assert java_string_hash("hello") == 99162322
    assert murmur3_32_hash("hello") == 0x248BFA47
    # negative Java hashes are masked, not negated: "polygenelubricants".hashCode() is
    # Integer.MIN_VALUE, masked to 0
    assert java_string_hash("polygenelubricants") == 0
    # UTF-16 code units, as Java counts them (a surrogate pair is two units)
    assert java_string_hash("é") == 0xE9
    assert java_string_hash("\U0001f600") == (0xD83D * 31 + 0xDE00)


def test_router_keys_single_and_round_robin() -> None:
    single = PartitionRouter(
        4, RoutingMode.SINGLE_PARTITION, HashingScheme.JAVA_STRING_HASH, random.Random(1)
    )
    assert len({single.choose(None) for _ in range(10)}) == 1
    assert single.choose("hello") == 99162322 % 4
    robin = PartitionRouter(
        3, RoutingMode.ROUND_ROBIN_PARTITION, HashingScheme.MURMUR3_32_HASH, random.Random(2)
    )
    picks = [robin.choose(None) for _ in range(6)]
    assert sorted(picks) == [0, 0, 1, 1, 2, 2]
    assert robin.choose("hello") == 0x248BFA47 % 3
    with pytest.raises(ValueError):
        PartitionRouter(0, RoutingMode.SINGLE_PARTITION, HashingScheme.JAVA_STRING_HASH)


def test_encode_message_id_matches_official_serialize() -> None:
    """Found while building the WebSocket API (pulsar_gateway/entry_codec/message_id_data.py,
    outside this branch's remit): the Java client's ``MessageIdImpl.toByteArray`` and the
    official Python client's ``MessageId.serialize()`` leave ``partition`` and ``batch_index``
    out when they are -1, so Pulsar's WebSocket ids of non-partitioned, non-batched messages
    are ``CAEQAg==``; ``encode_message_id`` writes both fields as -1, which every client still
    decodes to the same id, but the bytes (and the base64 text) differ from Pulsar's."""
    assert encode_message_id(MessageId(1, 2)) == "CAEQAg=="
