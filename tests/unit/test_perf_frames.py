"""bench/perf.py writes its hot frames by hand; the gateway's own decoder is the judge."""

from __future__ import annotations

import importlib.util
import struct
import sys
from types import ModuleType

import pytest

from pulsar_gateway.entry_codec import parse_batch
from pulsar_gateway.frame_codec import FrameDecoder
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def perf() -> ModuleType:
    spec = importlib.util.spec_from_file_location("perf_under_test", ROOT / "bench" / "perf.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def decode_one(data: bytes) -> object:
    decoder = FrameDecoder()
    decoder.feed(data)
    frame = decoder.next_frame()
    assert frame is not None
    assert decoder.next_frame() is None and decoder.buffered == 0
    return frame


@pytest.mark.parametrize("sequence_id", [1, 127, 128, 300, 2**40])
def test_send_frame_is_a_valid_checksummed_send(perf: ModuleType, sequence_id: int) -> None:
    encoder = perf.SendEncoder(7, "perf-producer", size=100, batch=1)
    frame = decode_one(encoder.frame(sequence_id, now_ns=123456789, publish_ms=1_700_000_000_000))
    command, payload = frame.command, frame.payload  # type: ignore[attr-defined]
    assert command.type == pb.BaseCommand.SEND
    assert (command.send.producer_id, command.send.sequence_id) == (7, sequence_id)
    assert payload.checksum_ok
    assert payload.metadata.producer_name == "perf-producer"
    assert payload.metadata.sequence_id == sequence_id
    assert payload.metadata.publish_time == 1_700_000_000_000
    assert len(payload.payload) == 100
    assert payload.payload[:4] == b"PERF"
    assert struct.unpack(">Q", payload.payload[4:12]) == (123456789,)


def test_batched_send_frame_carries_its_messages(perf: ModuleType) -> None:
    encoder = perf.SendEncoder(1, "p", size=40, batch=5)
    frame = decode_one(encoder.frame(9, now_ns=42, publish_ms=1))
    command, payload = frame.command, frame.payload  # type: ignore[attr-defined]
    assert command.send.num_messages == 5
    assert payload.checksum_ok and payload.metadata.num_messages_in_batch == 5
    messages = parse_batch(payload.payload, 5)
    assert [len(body) for _, body in messages] == [40] * 5
    assert all(body[:4] == b"PERF" for _, body in messages)


def test_ack_and_flow_frames(perf: ModuleType) -> None:
    ids = [pb.MessageIdData(ledgerId=1700, entryId=i).SerializeToString() for i in range(3)]
    ack = decode_one(perf.ack_frame(1001, ids)).command  # type: ignore[attr-defined]
    assert ack.type == pb.BaseCommand.ACK
    assert ack.ack.consumer_id == 1001
    assert ack.ack.ack_type == pb.CommandAck.Individual
    assert [(m.ledgerId, m.entryId) for m in ack.ack.message_id] == [
        (1700, 0),
        (1700, 1),
        (1700, 2),
    ]
    flow = decode_one(perf.flow_frame(1001, 500)).command  # type: ignore[attr-defined]
    assert flow.type == pb.BaseCommand.FLOW
    assert (flow.flow.consumer_id, flow.flow.messagePermits) == (1001, 500)
