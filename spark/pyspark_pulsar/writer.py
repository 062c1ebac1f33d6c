"""Writes: DataFrame rows published through a gateway, as a producer would publish them.

Rows go through a gateway's binary protocol (:mod:`.producer`), so the gateway's own
publish path applies to them: ids, schema checks, deduplication, access modes, consumers
woken at once (docs/architecture.md "Design decisions": writes go through the same publish
script as a producer). Rows of
one task are packed as batch entries (``pulsar.producer.batchingMaxMessages``, 1000 by
default), which is what makes writing fast.

Columns, as the reference connector reads them: ``__topic`` (unless the ``topic`` option is
set, which wins), ``__key`` (string or binary), ``__eventTime`` (timestamp or ms),
``__messageProperties`` (map<string,string>); ``__messageId`` and ``__publishTime`` are
ignored. The rest is the value: one column of a primitive type is written with that Pulsar
schema (binary without a schema, string as STRING, numbers big-endian, DATE and TIMESTAMP as
ms); several columns, or one struct column, as an AVRO record ``topLevelRecord``.

Exactly once on retries (the reference connector is at-least-once): every task publishes as
a producer whose name is derived from the write (``spark-<write id>-<partition>``; for a
stream, ``spark-<query id>-<partition>`` across micro-batches) with sequence ids that a
re-run of the same task reproduces (row number; for a stream, ``batch id << 32 | row``). A
retried task, or a micro-batch replayed after a restart, thus sends what the gateway has
already stored under the same producer name and sequence id, and the gateway's
deduplication drops it. That needs the ``deduplication`` policy on the target namespace or
topic, as in Pulsar; without it writes are at-least-once.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import logging
import struct
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

import fastavro
from pyspark import TaskContext
from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pulsar_gateway.core import PARTITION_SUFFIX, java_string_hash, parse_topic_name
from pulsar_gateway.entry_codec import CodecError
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from pyspark_pulsar.options import OptionError, SinkOptions
from pyspark_pulsar.producer import (
    BatchProducer,
    OutgoingRow,
    PulsarClientError,
    PulsarConnection,
)

__all__ = ["PulsarBatchWriter", "PulsarStreamWriter", "WriteReport"]

log = logging.getLogger(__name__)

META_COLUMNS: Final = frozenset({"__topic", "__key", "__eventTime", "__messageProperties"})
IGNORED_COLUMNS: Final = frozenset({"__messageId", "__publishTime"})
#: Spark's local properties naming a micro-batch (``MicroBatchExecution``).
BATCH_ID_PROPERTY: Final = "streaming.sql.batchId"
QUERY_ID_PROPERTY: Final = "sql.streaming.queryId"
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_DATE: Final = dt.date(1970, 1, 1)


@dataclass
class WriteReport(WriterCommitMessage):
    """What one task published: messages stored, and duplicates the gateway dropped."""

    published: int
    duplicates: int


def _millis(value: Any) -> int:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.astimezone()  # Spark hands local naive datetimes
        return int((value - _EPOCH) // dt.timedelta(milliseconds=1))
    return int(value)


def _pack(fmt: str) -> Callable[[Any], bytes]:
    codec = struct.Struct(fmt)
    return codec.pack


#: Spark type of a single value column -> (Pulsar schema type, encoder).
_PRIMITIVES: Final[dict[type[DataType], tuple[int, Callable[[Any], bytes]]]] = {
    StringType: (pb.Schema.String, lambda v: str(v).encode()),
    BooleanType: (pb.Schema.Bool, lambda v: b"\x01" if v else b"\x00"),
    ByteType: (pb.Schema.Int8, _pack(">b")),
    ShortType: (pb.Schema.Int16, _pack(">h")),
    IntegerType: (pb.Schema.Int32, _pack(">i")),
    LongType: (pb.Schema.Int64, _pack(">q")),
    FloatType: (pb.Schema.Float, _pack(">f")),
    DoubleType: (pb.Schema.Double, _pack(">d")),
    DateType: (
        pb.Schema.Date,
        lambda v: struct.pack(">q", (v - _EPOCH_DATE) // dt.timedelta(milliseconds=1)),
    ),
    TimestampType: (pb.Schema.Timestamp, lambda v: struct.pack(">q", _millis(v))),
}


def _avro_type(data_type: DataType, nullable: bool, name: str, namespace: str) -> Any:
    """The Avro type of a Spark type (the reference connector's ``sqlType2ASchema``, after
    spark-avro's ``toAvroType``): a nested record is named after its field, in the
    namespace of the records around it, so two struct fields of the same name in different
    records do not redefine one Avro name."""
    if isinstance(data_type, StructType):
        avro: Any = _avro_record(data_type, name, namespace)
    elif isinstance(data_type, ArrayType):
        avro = {
            "type": "array",
            "items": _avro_type(data_type.elementType, data_type.containsNull, name, namespace),
        }
    elif isinstance(data_type, MapType):
        if not isinstance(data_type.keyType, StringType):
            raise OptionError(f"column {name!r}: Avro maps need string keys")
        avro = {
            "type": "map",
            "values": _avro_type(data_type.valueType, data_type.valueContainsNull, name, namespace),
        }
    elif isinstance(data_type, DateType):
        avro = {"type": "int", "logicalType": "date"}
    elif isinstance(data_type, TimestampType):
        avro = {"type": "long", "logicalType": "timestamp-micros"}
    else:
        simple = {
            StringType: "string",
            BinaryType: "bytes",
            BooleanType: "boolean",
            ByteType: "int",
            ShortType: "int",
            IntegerType: "int",
            LongType: "long",
            FloatType: "float",
            DoubleType: "double",
        }
        if type(data_type) not in simple:
            raise OptionError(f"column {name!r}: {data_type.simpleString()} is not supported yet")
        avro = simple[type(data_type)]
    return [avro, "null"] if nullable else avro


def _avro_record(struct_type: StructType, name: str, namespace: str = "") -> dict[str, Any]:
    inner = f"{namespace}.{name}" if namespace else name
    record: dict[str, Any] = {"type": "record", "name": name}
    if namespace:
        record["namespace"] = namespace
    record["fields"] = [
        {"name": f.name, "type": _avro_type(f.dataType, f.nullable, f.name, inner)}
        for f in struct_type.fields
    ]
    return record


def _nests_structs(data_type: DataType) -> bool:
    if isinstance(data_type, StructType):
        return True
    if isinstance(data_type, ArrayType):
        return _nests_structs(data_type.elementType)
    if isinstance(data_type, MapType):
        return _nests_structs(data_type.valueType)
    return False


def _plain(value: Any) -> Any:
    """Nested structs (Rows, which are tuples) as dicts: fastavro would read a tuple in a
    union as its ``(type name, value)`` notation."""
    if isinstance(value, Row):
        return value.asDict(recursive=True)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


@dataclass(frozen=True)
class _Layout:
    """How a row becomes a message: the value encoder and the schema to present."""

    schema: pb.Schema | None
    encode: Callable[[Row], bytes]
    #: what the value is written as, for error messages ("column 'n' (int) as INT32")
    describe: str
    #: positions of the metadata columns in a row (None: absent)
    topic_at: int | None = None
    key_at: int | None = None
    event_at: int | None = None
    properties_at: int | None = None

    @classmethod
    def of(cls, schema: StructType, options: SinkOptions) -> _Layout:
        """Check the columns (at ``save()``/``start()``, on the driver) and pick the value
        encoding.

        Raises:
            OptionError: a column has the wrong type, or no column holds a value.
        """
        fields = {f.name: f for f in schema.fields}
        topic = fields.get("__topic")
        if options.topic is None and topic is None:
            raise OptionError(
                "topic option required when no '__topic' attribute is present. Use the topic "
                "option for setting a topic."
            )
        if topic is not None and not isinstance(topic.dataType, StringType):
            raise OptionError("Topic type must be a string")
        key = fields.get("__key")
        if key is not None and not isinstance(key.dataType, StringType | BinaryType):
            raise OptionError("__key attribute type must be a string or binary")
        event = fields.get("__eventTime")
        if event is not None and not isinstance(event.dataType, LongType | TimestampType):
            raise OptionError("__eventTime attribute type must be a bigint or timestamp")
        props = fields.get("__messageProperties")
        if props is not None and not (
            isinstance(props.dataType, MapType)
            and isinstance(props.dataType.keyType, StringType)
            and isinstance(props.dataType.valueType, StringType)
        ):
            raise OptionError("__messageProperties attribute type must be a map<string,string>")
        values = [
            f for f in schema.fields if f.name not in META_COLUMNS and f.name not in IGNORED_COLUMNS
        ]
        if not values:
            raise OptionError("Schema should have at least one non-key/non-topic field")
        at = {f.name: i for i, f in enumerate(schema.fields)}
        columns = [at[f.name] for f in values]
        meta = {
            "topic_at": at.get("__topic"),
            "key_at": at.get("__key"),
            "event_at": at.get("__eventTime"),
            "properties_at": at.get("__messageProperties"),
        }
        if len(values) == 1 and not isinstance(values[0].dataType, StructType):
            schema_, encode_ = cls._primitive(values[0], columns[0])
            written = "bytes without a schema" if schema_ is None else _schema_name(schema_)
            describe = (
                f"column {values[0].name!r} ({values[0].dataType.simpleString()}) as {written}"
            )
            return cls(schema_, encode_, describe, **meta)
        names = tuple(f.name for f in values)
        record_type = (
            values[0].dataType
            if len(values) == 1 and isinstance(values[0].dataType, StructType)
            else StructType(values)
        )
        assert isinstance(record_type, StructType)
        definition = _avro_record(record_type, "topLevelRecord")
        parsed = fastavro.parse_schema(definition)
        single_struct = len(values) == 1
        nested = any(_nests_structs(f.dataType) for f in values)

        def encode(row: Row) -> bytes:
            if single_struct:
                value = row[columns[0]]
                if value is None:
                    return b""  # as a null primitive: an empty payload
                record = value.asDict(True)
            else:
                record = {n: row[i] for n, i in zip(names, columns, strict=True)}
                if nested:
                    record = {n: _plain(v) for n, v in record.items()}
            buffer = io.BytesIO()
            fastavro.schemaless_writer(buffer, parsed, record)
            return buffer.getvalue()

        avro_schema = pb.Schema(
            name="Avro", type=pb.Schema.Avro, schema_data=json.dumps(definition).encode()
        )
        describe = f"columns {', '.join(repr(n) for n in names)} as an AVRO record"
        return cls(avro_schema, encode, describe, **meta)

    @staticmethod
    def _primitive(value: StructField, at: int) -> tuple[pb.Schema | None, Callable[[Row], bytes]]:
        name = value.name
        if isinstance(value.dataType, BinaryType):
            return None, lambda row: bytes(row[at] or b"")
        if isinstance(value.dataType, DecimalType) or type(value.dataType) not in _PRIMITIVES:
            raise OptionError(
                f"column {name!r}: {value.dataType.simpleString()} is not supported yet"
            )
        schema_type, encoder = _PRIMITIVES[type(value.dataType)]

        def encode(row: Row) -> bytes:
            item = row[at]
            return b"" if item is None else encoder(item)

        return pb.Schema(
            name=pb.Schema.Type.Name(schema_type),
            type=schema_type,  # type: ignore[arg-type]
            schema_data=b"",
        ), encode


@dataclass
class _Target:
    """One topic partition a task publishes to."""

    producer: BatchProducer
    next_sequence_id: int
    rows: list[OutgoingRow]


class _TaskWriter:
    """Publishes one task's rows (on an executor)."""

    def __init__(
        self, options: SinkOptions, layout: _Layout, producer_name: str, first_sequence_id: int
    ) -> None:
        self.options = options
        self.layout = layout
        self.producer_name = producer_name
        self.first_sequence_id = first_sequence_id
        self._connection: PulsarConnection | None = None
        self.partitions: dict[str, int] = {}
        self.targets: dict[str, _Target] = {}
        self.batches = 0

    def write(self, rows: Iterator[Row]) -> WriteReport:
        try:
            for row in rows:
                self._add(row)
            for name, target in self.targets.items():
                self._send(name, target)
            for target in self.targets.values():
                target.producer.flush()
            return WriteReport(
                sum(t.producer.published for t in self.targets.values()),
                sum(t.producer.duplicates for t in self.targets.values()),
            )
        finally:
            if self._connection is not None:
                self._connection.close()

    @property
    def connection(self) -> PulsarConnection:
        """The task's connection, made at its first row: a task without rows (most of a
        stateful query's 200 shuffle partitions, often) connects to nothing."""
        if self._connection is None:
            auth = self.options.auth
            self._connection = PulsarConnection(
                self.options.service_url,
                auth_method="token" if auth.token else None,
                auth_data=auth.token.encode() if auth.token else None,
                operation_timeout=self.options.operation_timeout_ms / 1000,
            )
        return self._connection

    def _add(self, row: Row) -> None:
        layout = self.layout
        topic = self.options.topic
        if topic is None and layout.topic_at is not None:
            topic = row[layout.topic_at]
        if topic is None:
            raise ValueError(
                "null topic present in the data. Use the topic option for setting a topic."
            )
        key = row[layout.key_at] if layout.key_at is not None else None
        if isinstance(key, bytes | bytearray):
            key = bytes(key).decode("utf-8", "replace")
        event = row[layout.event_at] if layout.event_at is not None else None
        properties = row[layout.properties_at] if layout.properties_at is not None else None
        message = OutgoingRow(
            payload=layout.encode(row),
            key=key,
            properties=dict(properties or {}),
            event_time=_millis(event) if event is not None else 0,
        )
        name = self._route(str(topic), key)
        target = self.targets.get(name) or self._open(name)
        target.rows.append(message)
        if len(target.rows) >= self.options.batching_max_messages:
            self._send(name, target)

    def _route(self, topic: str, key: str | None) -> str:
        full = str(parse_topic_name(topic))
        count = self.partitions.get(full)
        if count is None:
            count = self.partitions[full] = self.connection.partitions(full)
        if count == 0:
            return full
        # the Java client's routing: keyed messages by JavaStringHash, the others round
        # robin per batch (RoundRobinPartitionMessageRouterImpl with batching)
        index = java_string_hash(key) % count if key is not None else self.batches % count
        return f"{full}{PARTITION_SUFFIX}{index}"

    def _open(self, name: str) -> _Target:
        try:
            producer = self.connection.create_producer(
                name,
                self.producer_name,
                schema=self.layout.schema,
                compression=pb.CompressionType.Value(self.options.compression),
            )
        except PulsarClientError as exc:
            if exc.server_error != "IncompatibleSchema":
                raise
            # The gateway's reason names schema types by number: say it in the user's terms.
            existing = self.connection.schema(name)
            has = "no schema" if existing is None else f"schema {_schema_name(existing)}"
            raise ValueError(
                f"cannot write to {name}: the topic has {has}, and this DataFrame writes "
                f"{self.layout.describe} ({exc}). Cast the value column to the topic's type, "
                "or write to another topic."
            ) from None
        target = _Target(producer, self.first_sequence_id, [])
        self.targets[name] = target
        return target

    def _send(self, name: str, target: _Target) -> None:
        rows, first = target.rows, target.next_sequence_id
        target.next_sequence_id += len(rows)
        target.rows = []
        self.batches += 1
        # A retried task resends what its first attempt stored: the gateway drops a batch
        # whose first sequence id it has seen whole, so the stored prefix is skipped here.
        stored = target.producer.last_sequence_id - first + 1
        if stored >= len(rows):
            target.producer.duplicates += len(rows)
            return
        if stored > 0:
            target.producer.duplicates += stored
            rows, first = rows[stored:], first + stored
        try:
            target.producer.send_batch(rows, first)
        except CodecError as exc:
            raise ValueError(f"cannot publish to {name}: {exc}") from None


def _schema_name(schema: pb.Schema) -> str:
    """Pulsar's name of a schema type: ``INT32``, ``STRING``, ``AVRO``..."""
    try:
        return pb.Schema.Type.Name(schema.type).upper()
    except ValueError:  # a type this proto does not know
        return f"type {schema.type}"


def _task() -> TaskContext:
    context = TaskContext.get()
    if context is None:  # pragma: no cover - write() always runs in a Spark task
        raise RuntimeError("a Pulsar writer runs in a Spark task")
    return context


class PulsarBatchWriter(DataSourceWriter):
    """``df.write.format("pulsar").mode("append").save()``."""

    def __init__(self, options: SinkOptions, schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise OptionError(
                "Save mode overwrite not allowed for Pulsar. Allowed save mode is append."
            )
        self.options = options
        self.schema = schema
        _Layout.of(schema, options)  # refuse bad columns at save(), on the driver
        # one id per write: its tasks' producer names, the same in every retry of a task
        self.write_id = uuid.uuid4().hex[:16]

    def write(self, iterator: Iterator[Row]) -> WriteReport:
        task = _task()
        name = f"spark-{self.write_id}-{task.partitionId()}"
        # the layout holds protobuf and Avro objects: built where it is used, not pickled
        layout = _Layout.of(self.schema, self.options)
        return _TaskWriter(self.options, layout, name, 0).write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_reports("write", messages)


class PulsarStreamWriter(DataSourceStreamWriter):
    """``writeStream.format("pulsar")``: each micro-batch's rows, exactly once across
    retries and restarts (with deduplication on)."""

    def __init__(self, options: SinkOptions, schema: StructType, overwrite: bool) -> None:
        del overwrite  # a stream appends
        self.options = options
        self.schema = schema
        _Layout.of(schema, options)  # refuse bad columns at start(), on the driver

    def write(self, iterator: Iterator[Row]) -> WriteReport:
        task = _task()
        # Both identify what a replay must reproduce; guessing either would make the
        # gateway drop new rows as duplicates of another batch's or another query's.
        batch, query = (task.getLocalProperty(p) for p in (BATCH_ID_PROPERTY, QUERY_ID_PROPERTY))
        if batch is None or query is None:
            raise RuntimeError(
                f"the Spark task has no {BATCH_ID_PROPERTY!r}/{QUERY_ID_PROPERTY!r} local "
                "property: a Pulsar stream writer runs in a micro-batch streaming query"
            )
        name = f"spark-{query}-{task.partitionId()}"
        layout = _Layout.of(self.schema, self.options)
        return _TaskWriter(self.options, layout, name, int(batch) << 32).write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_reports(f"micro-batch {batchId}", messages)


def _log_reports(what: str, messages: list[WriterCommitMessage | None]) -> None:
    reports = [m for m in messages if isinstance(m, WriteReport)]
    log.info(
        "Pulsar %s: %d messages published, %d duplicates dropped",
        what,
        sum(r.published for r in reports),
        sum(r.duplicates for r in reports),
    )
