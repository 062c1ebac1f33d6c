"""The rows a read yields: columns typed from the topic's schema, built as Arrow batches.

The columns are the reference connector's (its ``SchemaUtils.metaDataFields``): the value
column(s), then ``__key`` (binary), ``__topic``, ``__messageId`` (the official clients'
``MessageId.serialize()`` bytes), ``__publishTime``, ``__eventTime`` (null when the producer
set none) and ``__messageProperties``. The value follows the registered schema (the
gateway's schema registry, latest version): binary without one; STRING and the primitives
as their Spark types, decoded as Pulsar's schemas encode them (big-endian numbers, DATE and
TIMESTAMP as ms); JSON and AVRO records flattened into one column per field.

Rows come two ways into a :class:`RowBatcher`, which keeps them column by column and hands
the columns to Arrow whole: most entries are read straight into its columns
(:mod:`.entries`); the others (compressed, encrypted, chunked, only partly in the range read,
and every entry of a topic with a JSON or AVRO schema) are unbatched and decompressed by the
gateway's own code (``pulsar_gateway.entry_codec.unpack_entry``) and added message by message.
Either way a batch's messages get ids with their batch index and batch size, as the official
client's ids carry them.
"""

from __future__ import annotations

import base64
import datetime as dt
import io
import json
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import fastavro
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
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

from pulsar_gateway.core import SchemaData, decode_version
from pulsar_gateway.entry_codec import ReceivedMessage, serialize_message_id
from pulsar_gateway.proto import PulsarApi_pb2 as pb

__all__ = ["META_FIELDS", "RowBatcher", "UnsupportedSchema", "ValueFormat"]

META_FIELDS: Final = (
    StructField("__key", BinaryType(), True),
    StructField("__topic", StringType(), True),
    StructField("__messageId", BinaryType(), True),
    StructField("__publishTime", TimestampType(), True),
    StructField("__eventTime", TimestampType(), True),
    StructField("__messageProperties", MapType(StringType(), StringType(), True), True),
)

_UTC: Final = dt.UTC
_EPOCH_DATE: Final = dt.date(1970, 1, 1)


class UnsupportedSchema(ValueError):
    """A topic schema this source cannot turn into columns."""


def _unpack(fmt: str) -> Callable[[bytes], Any]:
    codec = struct.Struct(fmt)
    return lambda payload: codec.unpack(payload)[0]


def _date(payload: bytes) -> dt.date:
    # Pulsar's DATE schema: java.util.Date as int64 ms since the epoch
    return _EPOCH_DATE + dt.timedelta(milliseconds=struct.unpack(">q", payload)[0])


def _timestamp(payload: bytes) -> int:
    return int(struct.unpack(">q", payload)[0]) * 1000  # ms -> Spark's microseconds


#: Pulsar schema type -> (Spark type of ``value``, decoder of a payload).
_PRIMITIVES: Final[dict[int, tuple[DataType, Callable[[bytes], Any]]]] = {
    pb.Schema.String: (StringType(), lambda payload: payload.decode("utf-8", "replace")),
    pb.Schema.Bool: (BooleanType(), lambda payload: payload != b"\x00"),
    pb.Schema.Int8: (ByteType(), _unpack(">b")),
    pb.Schema.Int16: (ShortType(), _unpack(">h")),
    pb.Schema.Int32: (IntegerType(), _unpack(">i")),
    pb.Schema.Int64: (LongType(), _unpack(">q")),
    pb.Schema.Float: (FloatType(), _unpack(">f")),
    pb.Schema.Double: (DoubleType(), _unpack(">d")),
    pb.Schema.Date: (DateType(), _date),
    pb.Schema.Timestamp: (TimestampType(), _timestamp),
}
_RECORDS: Final = (pb.Schema.Json, pb.Schema.Avro)


def _avro_type(schema: Any, where: str) -> tuple[DataType, bool]:
    """Spark type and nullability of an Avro (sub)schema (the reference connector's
    ``SchemaConverters``: nullable unions, logical dates and timestamps, enums as strings)."""
    if isinstance(schema, list):
        members = [m for m in schema if m != "null"]
        if len(members) == 1:
            return _avro_type(members[0], where)[0], True
        raise UnsupportedSchema(f"{where}: unions other than [null, T] are not supported")
    if isinstance(schema, dict):
        kind = schema.get("type")
        logical = schema.get("logicalType")
        if kind == "record":
            return _record_struct(schema, where), False
        if kind == "array":
            item, nullable = _avro_type(schema["items"], where)
            return ArrayType(item, nullable), False
        if kind == "map":
            value, nullable = _avro_type(schema["values"], where)
            return MapType(StringType(), value, nullable), False
        if kind == "enum":
            return StringType(), False
        if kind == "fixed":
            return BinaryType(), False
        if logical == "date" and kind == "int":
            return DateType(), False
        if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
            return TimestampType(), False
        return _avro_type(kind, where)
    simple = {
        "string": StringType(),
        "bytes": BinaryType(),
        "int": IntegerType(),
        "long": LongType(),
        "float": FloatType(),
        "double": DoubleType(),
        "boolean": BooleanType(),
    }
    if schema in simple:
        return simple[schema], False
    raise UnsupportedSchema(f"{where}: Avro type {schema!r} is not supported")


def _record_struct(schema: dict[str, Any], where: str) -> StructType:
    fields = []
    for field in schema.get("fields", []):
        spark_type, nullable = _avro_type(field["type"], f"{where}.{field['name']}")
        fields.append(StructField(field["name"], spark_type, nullable))
    return StructType(fields)


def _record_schema(schema: SchemaData) -> dict[str, Any]:
    try:
        parsed = json.loads(schema.data)
    except ValueError as exc:
        raise UnsupportedSchema(
            f"schema {schema.name!r} is not an Avro definition: {exc}"
        ) from None
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise UnsupportedSchema(f"schema {schema.name!r} is not an Avro record")
    return parsed


@dataclass(frozen=True, slots=True)
class ValueFormat:
    """How the value column(s) of a set of topics are typed and decoded.

    ``versions`` are a topic's schema versions (index = version), used to read each message
    with the schema it was written with; empty for raw bytes.
    """

    type: int = 0  # Schema.Type None: raw bytes
    versions: tuple[SchemaData, ...] = ()

    @classmethod
    def of_topics(cls, schemas: Sequence[list[SchemaData]], allow_different: bool) -> ValueFormat:
        """The format of topics with these schema histories.

        Raises:
            UnsupportedSchema: the topics' latest schemas differ (unless ``allow_different``,
                which reads raw bytes, as the reference connector does), or a schema has no
                column form (TIME, KEY_VALUE, PROTOBUF...).
        """
        latest = {(h[-1].type, h[-1].data) for h in schemas if h and h[-1].type != 0}
        if not latest:
            return cls()
        if len(latest) > 1:
            if allow_different:
                return cls()
            raise UnsupportedSchema(
                "Topics to read must share identical schema. Consider setting "
                "'allowDifferentTopicSchemas' to 'true' to read them as raw bytes"
            )
        history = next(h for h in schemas if h and h[-1].type != 0)
        fmt = cls(history[-1].type, tuple(history))
        fmt.value_fields()  # refuse what has no column form at load
        return fmt

    @property
    def latest(self) -> SchemaData | None:
        return self.versions[-1] if self.versions else None

    def value_fields(self) -> list[StructField]:
        latest = self.latest
        if latest is None:
            return [StructField("value", BinaryType(), False)]
        if latest.type in _PRIMITIVES:
            return [StructField("value", _PRIMITIVES[latest.type][0], False)]
        if latest.type in _RECORDS:
            return list(_record_struct(_record_schema(latest), latest.name or "record").fields)
        name = pb.Schema.Type.Name(latest.type) if latest.type in pb.Schema.Type.values() else ""
        raise UnsupportedSchema(f"We do not support {name or latest.type} schemas currently")

    def spark_schema(self) -> StructType:
        return StructType([*self.value_fields(), *META_FIELDS])


def _json_converter(data_type: DataType) -> Callable[[Any], Any]:
    """A JSON value as the column of ``data_type`` takes it; None when it does not fit."""

    def typed(*kinds: type) -> Callable[[Any], Any]:
        return lambda v: v if isinstance(v, kinds) and not isinstance(v, bool) else None

    if isinstance(data_type, TimestampType):
        # Pulsar's JSON schema writes timestamp-millis fields as ms numbers
        return lambda v: v * 1000 if isinstance(v, int) and not isinstance(v, bool) else None
    if isinstance(data_type, DateType):
        return lambda v: (
            _EPOCH_DATE + dt.timedelta(days=v)
            if isinstance(v, int) and not isinstance(v, bool)
            else None
        )
    if isinstance(data_type, BooleanType):
        return lambda v: v if isinstance(v, bool) else None
    if isinstance(data_type, ByteType | ShortType | IntegerType | LongType):
        return typed(int)
    if isinstance(data_type, FloatType | DoubleType):
        return lambda v: (
            float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None
        )
    if isinstance(data_type, StringType):
        return typed(str)
    if isinstance(data_type, BinaryType):
        return lambda v: base64.b64decode(v) if isinstance(v, str) else None
    return lambda v: v  # nested values go to Arrow as they are


class RowBatcher:
    """Builds Arrow record batches of the source's schema from the messages of one topic
    partition (on an executor).

    The rows are kept column by column, in plain lists that :meth:`take` hands to Arrow whole
    (``pa.array`` of a list of bytes or ints is one C loop); the properties column is kept
    as Arrow's map layout (offsets, keys, items), so that a message without properties costs
    one offset. Two writers fill the lists: :meth:`add`, with a message the gateway's
    ``unpack_entry`` decoded, and :func:`pyspark_pulsar.entries.add_entries`, straight from
    stored entries; without a JSON or AVRO schema (:attr:`raw_values`) the value column holds
    the payloads, decoded to the schema's type in :meth:`take`.
    """

    def __init__(self, fmt: ValueFormat, schema: StructType, topic: str, size: int = 8192) -> None:
        self.fmt = fmt
        self.topic = topic
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self.value_names = [f.name for f in fmt.value_fields()]
        self.size = size
        self._avro_readers: dict[int, Any] = {}
        latest = fmt.latest
        self._record = latest is not None and latest.type in _RECORDS
        #: whether the value column holds the payloads as stored (no JSON or AVRO schema)
        self.raw_values = not self._record
        self._primitive = (
            _PRIMITIVES[latest.type][1] if latest and latest.type in _PRIMITIVES else None
        )
        self._reader_schema = (
            fastavro.parse_schema(_record_schema(latest)) if self._record and latest else None
        )
        # JSON values arrive as JSON types: each field is converted to its column's type,
        # and a value of the wrong type is null (the reference connector's PERMISSIVE mode)
        self._json_fields = [
            (f.name, _json_converter(f.dataType))
            for f in (fmt.value_fields() if fmt.type == pb.Schema.Json else [])
        ]
        self._start()

    def _start(self) -> None:
        self.values: list[list[Any]] = [[] for _ in self.value_names]
        self.keys: list[bytes | None] = []
        self.message_ids: list[bytes] = []
        #: microseconds, as Spark's timestamps
        self.publish_times: list[int] = []
        self.event_times: list[int | None] = []
        #: the properties column in Arrow's map layout: row i's pairs are
        #: ``property_keys[property_offsets[i]:property_offsets[i + 1]]`` (and the values)
        self.property_offsets: list[int] = [0]
        self.property_keys: list[str] = []
        self.property_values: list[str] = []

    def __len__(self) -> int:
        return len(self.message_ids)

    def add(self, message: ReceivedMessage, message_id: bytes | None = None) -> None:
        """Add one message's row; ``message_id`` overrides its serialized id (a chunked
        message's)."""
        if self._record:
            for column, value in zip(self.values, self._record_values(message), strict=True):
                column.append(value)
        else:
            self.values[0].append(message.payload)
        self.keys.append(message.key.encode() if message.key is not None else None)
        self.message_ids.append(
            message_id
            if message_id is not None
            else serialize_message_id(message.message_id, message.batch_size)
        )
        self.publish_times.append(message.publish_time * 1000)
        self.event_times.append(message.event_time * 1000 if message.event_time > 0 else None)
        if message.properties:
            self.property_keys += message.properties.keys()
            self.property_values += message.properties.values()
        self.property_offsets.append(len(self.property_keys))

    def _record_values(self, message: ReceivedMessage) -> list[Any]:
        record = self._decode_record(message)
        if not isinstance(record, dict):
            return [None] * len(self.value_names)
        if self._json_fields:
            return [convert(record.get(name)) for name, convert in self._json_fields]
        return [record.get(name) for name in self.value_names]

    def _decode_record(self, message: ReceivedMessage) -> Any:
        if self.fmt.type == pb.Schema.Json:
            try:
                return json.loads(message.payload)
            except ValueError:
                return None  # PERMISSIVE, as the reference connector parses JSON: nulls
        version = decode_version(message.schema_version) if message.schema_version else None
        writer = self._writer_schema(version)
        try:
            return fastavro.schemaless_reader(
                io.BytesIO(message.payload), writer, self._reader_schema
            )
        except Exception:  # fastavro raises assorted errors on corrupt input
            return None

    def _writer_schema(self, version: int | None) -> Any:
        index = version if version is not None and 0 <= version < len(self.fmt.versions) else -1
        index = index % len(self.fmt.versions)
        reader = self._avro_readers.get(index)
        if reader is None:
            reader = fastavro.parse_schema(_record_schema(self.fmt.versions[index]))
            self._avro_readers[index] = reader
        return reader

    def take(self) -> pa.RecordBatch:
        """The rows added so far as one batch (and start a new one)."""
        fields = list(self.arrow_schema)
        values = self.values
        if self._primitive is not None:
            decode = self._primitive
            values = [[decode(payload) for payload in values[0]]]
        arrays = [
            pa.array(column, type=field.type) for column, field in zip(values, fields, strict=False)
        ]
        base = len(values)
        timestamp = fields[base + 3].type
        arrays += [
            pa.array(self.keys, type=fields[base].type),
            pa.repeat(pa.scalar(self.topic, type=fields[base + 1].type), len(self)),
            pa.array(self.message_ids, type=fields[base + 2].type),
            pa.array(self.publish_times, type=timestamp),
            pa.array(self.event_times, type=timestamp),
            pa.MapArray.from_arrays(
                pa.array(self.property_offsets, type=pa.int32()),
                pa.array(self.property_keys, type=pa.string()),
                pa.array(self.property_values, type=pa.string()),
                type=fields[base + 5].type,
            ),
        ]
        self._start()
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)
