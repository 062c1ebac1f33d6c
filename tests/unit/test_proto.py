"""The .proto and its generated modules: freshness and Pulsar's field numbers.

The numbers below are what pulsar-client 3.13.0 (pulsar-client-cpp v4.2.0)
was compiled with; a mismatch would make the real client misread our frames.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from pulsar_gateway.proto import PulsarApi_pb2 as pb

REPO = Path(__file__).resolve().parents[2]


def field(message: Any, name: str) -> FieldDescriptor:
    """The descriptor of field ``name`` of a generated message class."""
    descriptor: Descriptor = message.DESCRIPTOR
    return descriptor.fields_by_name[name]


def test_generated_files_are_fresh() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pulsar_gateway.proto.regen", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_import_path() -> None:
    # The generated module must load from its package (no sys.path tricks).
    assert pb.__name__ == "pulsar_gateway.proto.PulsarApi_pb2"
    assert pb.DESCRIPTOR.package == "pulsar.proto"


@pytest.mark.parametrize(
    ("message", "name", "number"),
    [
        (pb.BaseCommand, "type", 1),
        (pb.BaseCommand, "redeliverUnacknowledgedMessages", 20),
        (pb.BaseCommand, "partitionMetadata", 21),
        (pb.BaseCommand, "lookupTopic", 23),
        (pb.BaseCommand, "getLastMessageId", 29),
        (pb.BaseCommand, "active_consumer_change", 31),
        (pb.BaseCommand, "ackResponse", 38),
        (pb.BaseCommand, "getOrCreateSchemaResponse", 40),
        (pb.MessageMetadata, "num_messages_in_batch", 11),
        (pb.MessageMetadata, "deliver_at_time", 19),
        (pb.MessageMetadata, "txnid_least_bits", 22),
        (pb.MessageMetadata, "null_partition_key", 30),
        (pb.SingleMessageMetadata, "payload_size", 3),
        (pb.SingleMessageMetadata, "sequence_id", 8),
        (pb.MessageIdData, "batch_index", 4),
        (pb.MessageIdData, "first_chunk_message_id", 7),
        (pb.CommandMessage, "ack_set", 4),
        (pb.CommandConnect, "auth_method_name", 5),
        (pb.CommandConnect, "feature_flags", 10),
        (pb.CommandSubscribe, "initialPosition", 13),
        (pb.CommandSubscribe, "keySharedMeta", 17),
        (pb.CommandLookupTopicResponse, "request_id", 4),
        (pb.CommandConsumerStats, "consumer_id", 4),
        (pb.KeySharedMeta, "hashRanges", 3),
        (pb.BrokerEntryMetadata, "index", 2),
    ],
)
def test_field_numbers(message: Any, name: str, number: int) -> None:
    assert field(message, name).number == number


def test_required_fields_and_defaults() -> None:
    # proto2 presence matters on the wire (docs/binary_protocol.md "Framing"): required stays
    # required.
    assert field(pb.MessageIdData, "ledgerId").is_required
    assert field(pb.MessageIdData, "entryId").is_required
    assert field(pb.MessageMetadata, "publish_time").is_required
    assert field(pb.SingleMessageMetadata, "payload_size").is_required
    assert field(pb.CommandFlow, "messagePermits").is_required
    assert not field(pb.CommandAck, "request_id").is_required
    assert field(pb.MessageIdData, "partition").default_value == -1
    assert field(pb.MessageIdData, "batch_index").default_value == -1
    assert field(pb.MessageMetadata, "num_messages_in_batch").default_value == 1
    assert field(pb.CommandProducerSuccess, "last_sequence_id").default_value == -1
    assert field(pb.CommandProducerSuccess, "producer_ready").default_value is True
    assert field(pb.CommandSubscribe, "durable").default_value is True
    assert field(pb.MessageIdData, "ack_set").type == FieldDescriptor.TYPE_INT64
    assert not field(pb.MessageIdData, "ack_set").is_packed  # proto2: unpacked
    assert field(pb.MessageMetadata, "deliver_at_time").type == FieldDescriptor.TYPE_INT64


def test_base_command_type_enum_is_complete() -> None:
    values = set(pb.BaseCommand.Type.values())
    assert values == set(range(2, 41)) | set(range(50, 69))
    assert pb.BaseCommand.TOPIC_MIGRATED == 68
    assert pb.BaseCommand.TC_CLIENT_CONNECT_RESPONSE == 63


def test_sub_message_field_number_equals_type_value() -> None:
    # For every command the field number equals the Type value (Pulsar's PulsarApi.proto).
    names = {
        "CONNECT": "connect",
        "PARTITIONED_METADATA": "partitionMetadata",
        "LOOKUP_RESPONSE": "lookupTopicResponse",
        "REDELIVER_UNACKNOWLEDGED_MESSAGES": "redeliverUnacknowledgedMessages",
        "GET_TOPICS_OF_NAMESPACE_RESPONSE": "getTopicsOfNamespaceResponse",
    }
    for type_name, field_name in names.items():
        assert field(pb.BaseCommand, field_name).number == pb.BaseCommand.Type.Value(type_name)
    for descriptor in pb.BaseCommand.DESCRIPTOR.fields:
        if descriptor.name != "type":
            assert descriptor.number in pb.BaseCommand.Type.values()
            assert descriptor.message_type is not None
    # Transactions, watchers and topic migration have types but no sub-messages.
    numbers = {d.number for d in pb.BaseCommand.DESCRIPTOR.fields}
    assert numbers == {1} | set(range(2, 41))


def test_message_metadata_has_all_fields_up_to_30() -> None:
    numbers = {d.number for d in pb.MessageMetadata.DESCRIPTOR.fields}
    # 10 (an old checksum) and 21 are unused upstream.
    assert numbers == set(range(1, 31)) - {10, 21}


def test_schema_type_none_value() -> None:
    # "None" is dropped from the .pyi (a keyword) but exists at runtime.
    assert pb.Schema.Type.Value("None") == 0
    assert pb.Schema.Type.Name(20) == "ProtobufNative"
