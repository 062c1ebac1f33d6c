"""The Spark source's reading of stored entries straight into columns
(``pyspark_pulsar.entries``) gives the rows the gateway's own reading (``unpack_entry``, one
``ReceivedMessage`` per message) gives, byte for byte in every column, and leaves the
entries it does not take to that reading. Against fakeredis: no Spark session, no gateway."""

from __future__ import annotations

import random
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import fakeredis
import pytest

from pulsar_gateway.core import MessageId, StoredEntry
from pulsar_gateway.core.model.entry import BLOB, BROKER_TIME, CHUNK, NUM_MESSAGES, PUBLISH_TIME
from pulsar_gateway.entry_codec import (
    compress,
    encode_batch,
    make_blob,
    serialize_message_id,
)
from pulsar_gateway.proto import PulsarApi_pb2 as pb

pytest.importorskip("pyspark")

import pyarrow as pa

from pulsar_gateway.core import SchemaData
from pyspark_pulsar import source
from pyspark_pulsar.columns import RowBatcher, ValueFormat
from pyspark_pulsar.entries import add_entries
from pyspark_pulsar.offsets import BEGINNING, Position
from pyspark_pulsar.storage import RawEntry, StorageLocation, TopicStore

TOPIC = "persistent://public/default/entries-partition-3"
NOT_UTF8 = b"\xc3\x28\xff"
MARK = b"\x01\x02\x03"


class _FakeStore(TopicStore):
    def __init__(self, client: Any) -> None:
        super().__init__(StorageLocation("redis://unused"), 1000)
        self.client = client

    @property
    def redis(self) -> Any:
        return self.client

    def lost_after(self, partition: str, position: Position) -> str | None:
        return None  # a Lua script, which fakeredis does not run; nothing is removed here


def _metadata(rng: random.Random, **fields: Any) -> pb.MessageMetadata:
    metadata = pb.MessageMetadata(
        producer_name=rng.choice(["p", "spark-writer-0", "prod\u00e9"]),
        sequence_id=rng.randrange(2**40),
        publish_time=rng.choice([1, 1_700_000_000_000, 2**41 + 5]),
        **fields,
    )
    return metadata


def _with_message_fields(metadata: Any, rng: random.Random) -> None:
    """A key (or none, or an empty one), an event time or none, properties or none."""
    choice = rng.randrange(4)
    if choice == 1:
        metadata.partition_key = f"key-{rng.randrange(1000)}"
    elif choice == 2:
        metadata.partition_key = ""
    elif choice == 3:
        metadata.partition_key = "cl\u00e9 \U0001f600"
    if rng.random() < 0.5:
        metadata.event_time = rng.choice([1, 1_700_000_000_123, 2**40])
    for i in range(rng.choice([0, 0, 1, 3])):
        metadata.properties.add(key=f"k{i % 2}", value=f"v{i}\u00e9")


def _payload(rng: random.Random) -> bytes:
    return rng.choice([b"", b"plain text", NOT_UTF8, bytes(rng.randrange(256) for _ in range(300))])


def _single_blob(rng: random.Random) -> bytes:
    metadata = _metadata(rng)
    _with_message_fields(metadata, rng)
    return make_blob(metadata, _payload(rng))


def _batch_blob(rng: random.Random, count: int, compacted: bool = False) -> bytes:
    singles = []
    for i in range(count):
        single = pb.SingleMessageMetadata(sequence_id=i)
        _with_message_fields(single, rng)
        if compacted and rng.random() < 0.3:
            single.compacted_out = True
        singles.append((single, _payload(rng)))
    metadata = _metadata(rng, num_messages_in_batch=count)
    if rng.random() < 0.3:
        metadata.partition_key = "entry-level key"  # read from the messages, not here
    return make_blob(metadata, encode_batch(singles))


def _fields(blob: bytes, count: int | None = None) -> list[bytes]:
    fields = [BLOB, blob, BROKER_TIME, b"1700000000000", PUBLISH_TIME, b"1700000000000"]
    if count is not None:
        fields += [NUM_MESSAGES, str(count).encode()]
    return fields


def _varied_entries(seed: int, n: int) -> list[RawEntry]:
    rng = random.Random(seed)
    ledgers = [0, 5, 127, 128, 16_383, 16_384, 1_700_000_000_000, 2**63 - 1, 2**64 - 1]
    entries: list[RawEntry] = []
    for i in range(n):
        ledger = rng.choice(ledgers)
        entry = rng.choice([0, 1, 127, 128, 300, 16_384, 2**35, 2**64 - 1, i])
        kind = rng.randrange(4)
        if kind == 0:
            fields = _fields(_single_blob(rng))
        elif kind == 1:
            fields = _fields(_batch_blob(rng, 1, compacted=rng.random() < 0.2), 1)
        elif kind == 2:
            count = rng.choice([2, 5, 130])
            fields = _fields(_batch_blob(rng, count, compacted=rng.random() < 0.3), count)
        else:
            fields = _fields(_single_blob(rng))[:4]  # no publish time field
        entries.append((b"%d-%d" % (ledger, entry), fields))
    return entries


def _gateway_rows(fmt: ValueFormat, entries: list[RawEntry], partition: int) -> pa.RecordBatch:
    """The rows of the existing reading: ``unpack_entry`` and ``RowBatcher.add``."""
    rows = RowBatcher(fmt, fmt.spark_schema(), TOPIC, size=10**9)
    reader = source._RangeReading(
        SimpleNamespace(fail_on_data_loss=True),  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        fmt,
        fmt.spark_schema(),
    )
    end = Position(2**64 - 1, 2**64 - 1)
    for stream_id, fields in entries:
        reader._add_entry(
            rows, TOPIC, StoredEntry.parse(stream_id, fields, partition), BEGINNING, end
        )
    return rows.take()


def _direct_rows(fmt: ValueFormat, entries: list[RawEntry], partition: int) -> pa.RecordBatch:
    rows = RowBatcher(fmt, fmt.spark_schema(), TOPIC, size=10**9)
    assert add_entries(rows, entries, 0, len(entries), partition, ()) == len(entries)
    return rows.take()


STRING = ValueFormat(pb.Schema.String, (SchemaData(name="s", type=pb.Schema.String, data=b""),))
INT32 = ValueFormat(pb.Schema.Int32, (SchemaData(name="i", type=pb.Schema.Int32, data=b""),))


@pytest.mark.parametrize("partition", [-1, 0, 3, 200])
@pytest.mark.parametrize("fmt", [ValueFormat(), STRING], ids=["bytes", "string"])
def test_entries_read_straight_into_columns_give_the_gateways_rows(
    fmt: ValueFormat, partition: int
) -> None:
    entries = _varied_entries(seed=partition, n=400)

    direct = _direct_rows(fmt, entries, partition)

    expected = _gateway_rows(fmt, entries, partition)
    assert direct.num_rows > 400
    assert direct.schema.equals(expected.schema)
    for name in direct.schema.names:
        assert direct.column(name).equals(expected.column(name)), name
    assert direct.equals(expected)


def test_a_primitive_schema_decodes_the_payloads_the_same_way() -> None:
    rng = random.Random(7)
    entries = []
    for i in range(50):
        metadata = _metadata(rng)
        _with_message_fields(metadata, rng)
        entries.append(
            (b"1-%d" % i, _fields(make_blob(metadata, (i - 25).to_bytes(4, "big", signed=True))))
        )

    assert _direct_rows(INT32, entries, -1).equals(_gateway_rows(INT32, entries, -1))


def _not_utf8(serialized: bytes) -> bytes:
    """Text fields holding bytes that are not UTF-8 (as a producer may send them; upb then
    hands them over as bytes)."""
    assert serialized.count(MARK) >= 1
    return serialized.replace(MARK, NOT_UTF8)


def test_text_fields_that_are_not_utf8_read_the_same() -> None:
    text = "x" + MARK.decode()
    entries: list[RawEntry] = []
    for i in range(4):
        metadata = pb.MessageMetadata(producer_name=text, sequence_id=i, publish_time=1)
        single = pb.SingleMessageMetadata(payload_size=len(NOT_UTF8))
        for fields in (metadata, single):
            if i % 2:
                fields.partition_key = text
            fields.properties.add(key=text, value=text)
        if i < 2:
            blob = make_blob(_not_utf8(metadata.SerializeToString()), NOT_UTF8)
            entries.append((b"9-%d" % i, _fields(blob)))
        else:
            raw_single = _not_utf8(single.SerializeToString())
            batch = len(raw_single).to_bytes(4, "big") + raw_single + NOT_UTF8
            metadata.num_messages_in_batch = 1
            blob = make_blob(metadata, batch)
            entries.append((b"9-%d" % i, _fields(blob, 1)))

    for fmt in (ValueFormat(), STRING):
        direct = _direct_rows(fmt, entries, -1)
        assert direct.equals(_gateway_rows(fmt, entries, -1))
        assert b"\xef\xbf\xbd" in direct.column("__key")[1].as_py()  # U+FFFD


def test_message_ids_are_the_official_clients_serialization() -> None:
    rng = random.Random(11)
    values = [0, 1, 127, 128, 255, 16_383, 16_384, 2**21, 2**28, 2**35, 2**63 - 1, 2**64 - 1]
    for _ in range(300):
        ledger, entry = rng.choice(values), rng.choice(values)
        partition = rng.choice([-1, 0, 1, 127, 128, 40_000])
        count = rng.choice([0, 1, 2, 127, 128, 200])
        if count:
            singles = [(pb.SingleMessageMetadata(), b"x") for _ in range(count)]
            blob = make_blob(_metadata(rng, num_messages_in_batch=count), encode_batch(singles))
        else:
            blob = make_blob(_metadata(rng), b"x")
        rows = RowBatcher(ValueFormat(), ValueFormat().spark_schema(), TOPIC, size=10**9)
        add_entries(rows, [(b"%d-%d" % (ledger, entry), _fields(blob))], 0, 1, partition, ())

        if count:
            expected = [
                serialize_message_id(MessageId(ledger, entry, partition, i), count)
                for i in range(count)
            ]
        else:
            expected = [serialize_message_id(MessageId(ledger, entry, partition))]
        assert rows.message_ids == expected


def _refused(fields: list[bytes], stream_id: bytes = b"5-1") -> tuple[int, RowBatcher]:
    rows = RowBatcher(ValueFormat(), ValueFormat().spark_schema(), TOPIC)
    ok = (b"5-0", _fields(_batch_blob(random.Random(1), 2), 2))
    stopped = add_entries(rows, [ok, (stream_id, fields), ok], 0, 3, -1, ())
    return stopped, rows


def _compressed() -> list[bytes]:
    batch = encode_batch([(pb.SingleMessageMetadata(), b"hello")] * 3)
    metadata = pb.MessageMetadata(
        producer_name="p",
        sequence_id=1,
        publish_time=1,
        num_messages_in_batch=3,
        compression=pb.ZLIB,
        uncompressed_size=len(batch),
    )
    return _fields(make_blob(metadata, compress(pb.ZLIB, batch)), 3)


def _encrypted() -> list[bytes]:
    metadata = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1)
    metadata.encryption_keys.add(key="k", value=b"secret")
    return _fields(make_blob(metadata, b"ciphertext"))


def _chunk() -> list[bytes]:
    metadata = pb.MessageMetadata(
        producer_name="p",
        sequence_id=1,
        publish_time=1,
        uuid="u",
        chunk_id=0,
        num_chunks_from_msg=2,
        total_chunk_msg_size=10,
    )
    return [BLOB, make_blob(metadata, b"hello"), BROKER_TIME, b"1", CHUNK, b"0:u"]


def _truncated_batch() -> list[bytes]:
    blob = _batch_blob(random.Random(3), 3)
    return _fields(blob[:-1], 3)


def _truncated_lone_message() -> list[bytes]:
    blob = _batch_blob(random.Random(3), 1)
    return _fields(blob[:-1], 1)


def _batch_without_payload_size() -> list[bytes]:
    single = pb.SingleMessageMetadata(sequence_id=1).SerializePartialToString()
    payload = len(single).to_bytes(4, "big") + single
    metadata = pb.MessageMetadata(
        producer_name="p", sequence_id=1, publish_time=1, num_messages_in_batch=1
    )
    return _fields(make_blob(metadata, payload), 1)


def _batch_property_without_value() -> list[bytes]:
    # a KeyValue without its required value: only the serialized bytes can say it
    single = pb.SingleMessageMetadata(payload_size=1).SerializeToString() + b"\x0a\x03\x0a\x01k"
    payload = len(single).to_bytes(4, "big") + single + b"x"
    metadata = pb.MessageMetadata(
        producer_name="p", sequence_id=1, publish_time=1, num_messages_in_batch=1
    )
    return _fields(make_blob(metadata, payload), 1)


REFUSED: dict[str, Callable[[], list[bytes]]] = {
    "compressed": _compressed,
    "encrypted": _encrypted,
    "chunk": _chunk,
    "not a blob": lambda: _fields(b"\x0e\x02" + bytes(20)),
    "too short": lambda: _fields(b"\x0e\x01\x00"),
    "metadata past the end": lambda: _fields(b"\x0e\x01" + bytes(4) + b"\x00\x00\x01\x00" + b"x"),
    "metadata not protobuf": lambda: _fields(make_blob(b"\xff\xff\xff", b"x")),
    "truncated batch": _truncated_batch,
    "truncated batch of one": _truncated_lone_message,
    "batch of one with bytes left": lambda: _fields(_batch_blob(random.Random(4), 1) + b"x", 1),
    "batch without payload_size": _batch_without_payload_size,
    "batch property without value": _batch_property_without_value,
    "no blob field": lambda: [BROKER_TIME, b"1"],
    "a field that is not a number": lambda: [*_fields(_single_blob(random.Random(2))), b"h", b"x"],
    "an unknown field": lambda: [*_fields(_single_blob(random.Random(2))), b"zz", b"1"],
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_entries_the_direct_reading_does_not_take_are_left_whole(case: str) -> None:
    stopped, rows = _refused(REFUSED[case]())

    assert stopped == 1
    assert len(rows) == 2  # the first entry's two messages, none of the refused one's
    assert len(rows.values[0]) == len(rows.keys) == len(rows.event_times) == 2
    assert rows.property_offsets[-1] == len(rows.property_keys) == len(rows.property_values)
    assert len(rows.property_offsets) == 3


def test_partly_read_entries_are_left_to_the_gateways_reading() -> None:
    entries = _varied_entries(seed=5, n=5)
    rows = RowBatcher(ValueFormat(), ValueFormat().spark_schema(), TOPIC)

    assert add_entries(rows, entries, 0, 5, -1, (entries[2][0],)) == 2


def test_a_full_batcher_stops_after_the_entry_that_filled_it() -> None:
    entries = [(b"1-%d" % i, _fields(_batch_blob(random.Random(i), 5), 5)) for i in range(10)]
    rows = RowBatcher(ValueFormat(), ValueFormat().spark_schema(), TOPIC, size=12)

    assert add_entries(rows, entries, 0, 10, -1, ()) == 3
    assert len(rows) == 15


def _stored(client: Any, entries: list[tuple[int, list[bytes]]]) -> TopicStore:
    store = _FakeStore(client)
    stream = store.keys.topic(TOPIC).stream
    for i, fields in entries:
        client.xadd(stream, dict(zip(fields[::2], fields[1::2], strict=True)), id=f"7-{i}")
    return store


def _read(store: TopicStore, start: Position, end: Position) -> pa.Table:
    reader = source.PulsarBatchReader(
        SimpleNamespace(fail_on_data_loss=True),  # type: ignore[arg-type]
        store,
        ValueFormat(),
        ValueFormat().spark_schema(),
    )
    batches = list(reader.read(source.RangePartition(TOPIC, str(start), str(end))))
    return pa.Table.from_batches(batches, schema=batches[0].schema)


@pytest.mark.parametrize("raw_replies", [False, True], ids=["redis-py replies", "as sent"])
def test_a_read_gives_the_rows_of_the_gateways_reading(
    monkeypatch: pytest.MonkeyPatch, raw_replies: bool
) -> None:
    rng = random.Random(3)
    makers: list[Callable[[], list[bytes]]] = [
        lambda: _fields(_single_blob(rng)),
        lambda: _fields(_batch_blob(rng, 4), 4),
        _compressed,
        _encrypted,
    ]
    entries = [(i, rng.choice(makers)()) for i in range(1, 3000)]
    client = fakeredis.FakeRedis()
    if raw_replies:
        client.set_response_callback("XRANGE", lambda response, **options: response)
    store = _stored(client, entries)
    ranges = [
        (BEGINNING, Position(7, 2999)),
        (Position(7, 10, 1), Position(7, 2000, 2)),  # partly read first and last entries
        (Position(7, 1499), Position(7, 1500, 0)),
    ]
    for start, end in ranges:
        direct = _read(store, start, end)
        with monkeypatch.context() as patch:
            patch.setattr(source, "add_entries", _refuse_all)
            expected = _read(store, start, end)
        assert direct.num_rows == expected.num_rows > 0
        assert direct.equals(expected)


def _refuse_all(rows: RowBatcher, page: Any, lo: int, *args: Any) -> int:
    return lo


def test_a_corrupt_entry_fails_the_read_as_before() -> None:
    store = _stored(
        fakeredis.FakeRedis(),
        [(1, _fields(_single_blob(random.Random(1)))), (2, REFUSED["truncated batch"]())],
    )
    with pytest.raises(source.DataLossError, match=r"entry .* cannot be read"):
        _read(store, BEGINNING, Position(7, 2))
