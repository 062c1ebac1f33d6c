"""What many integration tests do with the official client (pulsar-client 3.13): produce
numbered messages, receive a known number, check that nothing more comes; and the Avro
records and schema version decoding of the schema tests."""

from __future__ import annotations

import struct
import time
from typing import Any

import pulsar
import pytest
from pulsar.schema import Integer, Record, String

from tests.conftest import TIMEOUT

#: How long ``receive`` waits for a message that should come.
RECEIVE_MS = int(TIMEOUT * 1000)


def produce(
    client: Any,
    topic: str,
    count: int,
    prefix: str = "m",
    *,
    start: int = 0,
    gap_ms: int = 0,
    **producer_args: Any,
) -> list[Any]:
    """Send ``b"<prefix>-<i>"`` for i in ``start``..``start + count - 1``, one send at a time
    on a new producer (batching off unless ``producer_args`` say otherwise), ``gap_ms`` apart
    (distinct stream times); return their message ids."""
    producer_args.setdefault("batching_enabled", False)
    producer = client.create_producer(topic, **producer_args)
    ids = []
    for i in range(start, start + count):
        ids.append(producer.send(f"{prefix}-{i}".encode()))
        if gap_ms:
            time.sleep(gap_ms / 1000)
    producer.close()
    return ids


def receive_all(consumer: Any, count: int, ack: bool = True) -> list[Any]:
    """``count`` messages, each acknowledged unless ``ack`` is false."""
    msgs = []
    for _ in range(count):
        msg = consumer.receive(timeout_millis=RECEIVE_MS)
        if ack:
            consumer.acknowledge(msg)
        msgs.append(msg)
    return msgs


def receive_payloads(consumer: Any, count: int, ack: bool = True) -> list[bytes]:
    """The payloads of :func:`receive_all`."""
    return [msg.data() for msg in receive_all(consumer, count, ack)]


def assert_nothing_more(consumer: Any, quiet_ms: int = 300) -> None:
    """No message comes within ``quiet_ms``."""
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=quiet_ms)


# -- schemas -------------------------------------------------------------------------------


class Reading(Record):
    sensor = String()
    value = Integer()


class ReadingV2(Record):
    """Reading plus a field with a default: compatible both ways (BACKWARD and FORWARD, so
    FULL)."""

    sensor = String()
    value = Integer()
    unit = String(default="C", required_default=True)


class ReadingBroken(Record):
    """A new field without a default: old data cannot be read with it."""

    sensor = String()
    value = Integer()
    unit = String(required=True)


# Versions of one record: Avro matches records by name, which the client takes from the
# class name.
ReadingV2.__name__ = ReadingBroken.__name__ = "Reading"


def schema_version_number(raw: bytes | str) -> int:
    """A schema version as the wire carries it: 8 bytes, big-endian int64."""
    if isinstance(raw, str):  # Message.schema_version() returns the bytes as a str
        raw = raw.encode("latin-1")
    assert len(raw) == 8  # the C++ client reads exactly 8 bytes (lib/Int64SerDes.h)
    return int(struct.unpack(">q", raw)[0])
