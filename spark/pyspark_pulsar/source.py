"""The ``pulsar`` data source: batch and streaming reads planned on the driver, read on the
executors.

Flow of a micro-batch (docs/spark.md, docs/architecture.md "Spark"): the driver's stream
reader discovers the topic partitions (topics, partitioned topics' partitions, pattern
matches: again on every trigger), reads each one's last entry id, applies the per-trigger
budgets, and returns the new offset; Spark checkpoints it, then ``partitions(start, end)``
makes one input partition per topic partition with new entries and the executors read those
id ranges from Redis (:mod:`.storage`), a page of entries per round trip, and decode them
into Arrow record batches (:mod:`.entries`, and the gateway's ``unpack_entry`` for the
entries that path leaves, :mod:`.columns`), which PySpark hands to the JVM as they are
(its ``plan_data_source_read.py``: a reader yielding ``pyarrow.RecordBatch`` skips the
row-by-row conversion). Because a range is
fixed before it is read and a stream only grows at its end, a query restarted from its
checkpoint re-reads exactly the batches it had not committed: every message once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from pulsar_gateway.core import MessageId, StoredEntry, parse_topic_name
from pulsar_gateway.entry_codec import (
    CodecError,
    MessageFormatError,
    make_blob,
    parse_blob,
    proto_text,
    unpack_entry,
)
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from pyspark_pulsar.columns import RowBatcher, ValueFormat
from pyspark_pulsar.entries import add_entries
from pyspark_pulsar.offsets import (
    BEGINNING,
    Offsets,
    Position,
    position_before,
)
from pyspark_pulsar.options import (
    AtTime,
    Bound,
    Edge,
    OptionError,
    SourceOptions,
    parse_sink_options,
    parse_source_options,
)
from pyspark_pulsar.storage import (
    FAIL_ON_DATA_LOSS_FALSE,
    FAIL_ON_DATA_LOSS_TRUE,
    DataLossError,
    TopicStore,
    locate_storage,
)

__all__ = ["PulsarDataSource", "RangePartition"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RangePartition(InputPartition):
    """One topic partition's entries after ``start`` through ``end`` (positions as text)."""

    topic: str
    start: str
    end: str

    def __init__(self, topic: str, start: str, end: str) -> None:
        object.__setattr__(self, "topic", topic)
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "end", end)
        object.__setattr__(self, "value", None)


class PulsarDataSource(DataSource):
    """``format("pulsar")``: reads topics straight from the gateways' Redis, writes through
    a gateway's binary protocol (:mod:`.writer`)."""

    @classmethod
    def name(cls) -> str:
        return "pulsar"

    def _source_options(self, streaming: bool | None) -> SourceOptions:
        return parse_source_options(self.options, streaming=streaming)

    def _store(self, options: SourceOptions) -> TopicStore:
        timeout = options.poll_timeout_ms
        location = locate_storage(
            options.admin_url, options.auth, options.redis_url, options.key_prefix, timeout / 1000
        )
        return TopicStore(location, timeout)

    def _format(self, options: SourceOptions, store: TopicStore) -> ValueFormat:
        selection = options.selection
        if selection.pattern is None:
            # unknown topics fail at load
            partitions = store.topic_partitions(selection, must_exist=True)
            bases = [str(topic) for topic in selection.topics]
        else:
            partitions = store.topic_partitions(selection, must_exist=False)
            bases = sorted({_base(p) for p in partitions})
        _check_offset_topics(options, {*partitions, *bases})
        return ValueFormat.of_topics(
            [store.schemas(base) for base in bases], options.allow_different_schemas
        )

    def schema(self) -> StructType:
        options = self._source_options(None)
        return self._format(options, self._store(options)).spark_schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        options = self._source_options(streaming=False)
        store = self._store(options)
        return PulsarBatchReader(options, store, self._format(options, store), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = self._source_options(streaming=True)
        store = self._store(options)
        return PulsarStreamReader(options, store, self._format(options, store), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from pyspark_pulsar.writer import PulsarBatchWriter

        return PulsarBatchWriter(parse_sink_options(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from pyspark_pulsar.writer import PulsarStreamWriter

        return PulsarStreamWriter(parse_sink_options(self.options), schema, overwrite)


def _check_offset_topics(options: SourceOptions, names: set[str]) -> None:
    """Refuse offsets or times for a topic the query does not read (a misspelt name would
    otherwise silently get the default), as the reference connector does.

    Raises:
        OptionError: naming the option and the topic.
    """
    pattern = options.selection.pattern
    for bound in (options.start, options.end):
        for topic in bound.per_topic:
            if topic in names or (pattern is not None and pattern.fullmatch(_base(topic))):
                continue
            raise OptionError(
                f"option {bound.option!r} names {topic}, which is not among the topics read "
                f"({options.selection.describe()})"
            )


def _base(partition: str) -> str:
    """The partitioned topic a partition belongs to (Pulsar's partition naming rule)."""
    return str(parse_topic_name(partition).partitioned_topic_name)


class _RangeReading:
    """What batch and stream readers share: resolving bounds and reading a range."""

    def __init__(
        self, options: SourceOptions, store: TopicStore, fmt: ValueFormat, schema: StructType
    ) -> None:
        self.options = options
        self.store = store
        self.fmt = fmt
        self.schema = schema

    def _spec(self, bound: Bound, partition: str) -> Any:
        per_topic = bound.per_topic
        return per_topic.get(partition, per_topic.get(_base(partition), bound.default))

    def _at_times(self, partitions: Sequence[str], bound: Bound) -> dict[str, Position]:
        """The positions of the partitions whose bound is a time, found in Redis."""
        times = {}
        for partition in partitions:
            spec = self._spec(bound, partition)
            if isinstance(spec, AtTime):
                times[partition] = spec.ms
        return self.store.positions_at_time(times) if times else {}

    def _starts(self, partitions: Sequence[str], bound: Bound) -> dict[str, Position]:
        latest: dict[str, Position] = {}
        if any(self._spec(bound, p) is Edge.LATEST for p in partitions):
            latest = self.store.last_positions(partitions)
        at_times = self._at_times(partitions, bound)
        out = {}
        for partition in partitions:
            spec = self._spec(bound, partition)
            if spec is Edge.EARLIEST:
                out[partition] = BEGINNING
            elif spec is Edge.LATEST:
                out[partition] = latest[partition]
            elif isinstance(spec, AtTime):
                out[partition] = at_times[partition]
            else:
                assert isinstance(spec, MessageId)
                # a starting message id is inclusive (the reference connector's rule)
                out[partition] = position_before(spec)
        return out

    def _ends(self, partitions: Sequence[str], bound: Bound) -> dict[str, Position]:
        latest = self.store.last_positions(partitions)
        at_times = self._at_times(partitions, bound)
        out = {}
        for partition in partitions:
            spec, last = self._spec(bound, partition), latest[partition]
            if isinstance(spec, AtTime):
                end = at_times[partition]
            elif isinstance(spec, MessageId):
                # an ending message id includes its whole entry (the reference connector's)
                end = Position(spec.ledger_id, spec.entry_id)
            else:
                end = last
            # never past what exists now, so a replay reads the same entries
            out[partition] = end if end.precedes(last) else last
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, RangePartition):
            # PySpark plans a batch read with no partitions as one InputPartition(None)
            return
        topic = partition.topic
        start, end = Position.parse(partition.start), Position.parse(partition.end)
        lost = self.store.lost_after(topic, start)
        if lost is not None:
            self._report_loss(lost)
        batcher = RowBatcher(self.fmt, self.schema, topic)
        index = parse_topic_name(topic).partition_index
        # entries only partly in the range: read the gateway's way, message by message
        partial = tuple(p.stream_id.encode() for p in (start, end) if not p.whole)
        entries = 0
        for page in self.store.pages(topic, start, end):
            entries += len(page)
            i = 0
            while i < len(page):
                if batcher.raw_values:
                    i = add_entries(batcher, page, i, len(page), index, partial)
                if i < len(page):
                    stream_id, fields = page[i]
                    self._add_entry(
                        batcher, topic, StoredEntry.parse(stream_id, fields, index), start, end
                    )
                    i += 1
                if len(batcher) >= batcher.size:
                    # PySpark hands RecordBatches to the JVM as they are (its
                    # datasource worker, plan_data_source_read.py)
                    yield batcher.take()
        if len(batcher):
            yield batcher.take()
        if lost is None and start.whole and end.whole and 0 <= start.added <= end.added:
            # retention trimming the head while this read was under way
            expected = end.added - start.added
            if entries < expected:
                self._report_loss(
                    f"{expected - entries} entries of {topic} between "
                    f"{start.stream_id} and {end.stream_id} were removed while being read"
                )

    def _add_entry(
        self, batcher: RowBatcher, topic: str, entry: StoredEntry, start: Position, end: Position
    ) -> None:
        """Add the rows of one entry decoded by the gateway's own ``unpack_entry``: an entry
        :func:`.entries.add_entries` does not take (compressed, encrypted, a chunk, one
        only partly in the range, a value schema of records, or one that cannot be read)."""
        message_id = entry.message_id
        key = (message_id.ledger_id, message_id.entry_id)
        blob, id_bytes = entry.blob, None
        if entry.chunk is not None:
            whole = self._whole_chunked_message(topic, entry)
            if whole is None:
                return  # read with its message's last chunk
            blob, id_bytes = whole
        try:
            messages = unpack_entry(message_id.stream_id, blob, partition=message_id.partition)
        except MessageFormatError as exc:
            raise DataLossError(f"entry {message_id} of {topic} cannot be read: {exc}") from None
        for message in messages:
            batch_index = message.message_id.batch_index
            if key == start.entry_key() and not start.whole and batch_index <= start.batch_index:
                continue
            if key == end.entry_key() and not end.whole and batch_index > end.batch_index:
                continue
            batcher.add(message, id_bytes)

    def _whole_chunked_message(
        self, topic: str, entry: StoredEntry
    ) -> tuple[bytes, bytes | None] | None:
        """A chunked message (a payload the producer split, one entry per chunk), read with
        its last chunk: its entry as if it had been sent whole, and its id as the official
        clients give it (the last chunk's, with ``first_chunk_message_id``). None for any
        other chunk, so that the message is read once, by the range holding its last chunk.
        """
        try:
            last = parse_blob(entry.blob)
        except CodecError as exc:
            raise DataLossError(
                f"entry {entry.message_id} of {topic} cannot be read: {exc}"
            ) from None
        metadata = last.metadata
        total, index = metadata.num_chunks_from_msg, metadata.chunk_id
        if total <= 1:
            return entry.blob, None
        if index + 1 < total:
            return None
        # the text the gateway stored the chunks under (its producer side: proto_text of
        # the uuid, which upb hands over as bytes when it is not UTF-8)
        uuid = proto_text(metadata.uuid)
        chunks = self.store.earlier_chunks(topic, entry, uuid, index)
        if len(chunks) < index:
            self._report_loss(
                f"chunks of the chunked message {uuid!r} ending at entry "
                f"{entry.message_id.stream_id.decode()} of {topic} were removed"
            )
            return None
        payload = b"".join(parse_blob(chunk.blob).payload for chunk in chunks) + last.payload
        whole = pb.MessageMetadata()
        whole.CopyFrom(metadata)
        for name in ("uuid", "chunk_id", "num_chunks_from_msg", "total_chunk_msg_size"):
            whole.ClearField(name)
        first = chunks[0].message_id if chunks else entry.message_id
        return make_blob(whole, payload), _chunked_id(first, entry.message_id)

    def _report_loss(self, message: str) -> None:
        if self.options.fail_on_data_loss:
            raise DataLossError(f"{message}. {FAIL_ON_DATA_LOSS_TRUE}")
        log.warning("%s. %s", message, FAIL_ON_DATA_LOSS_FALSE)

    def _ranges(
        self, start: Mapping[str, Position], end: Mapping[str, Position]
    ) -> list[InputPartition]:
        ranges: list[InputPartition] = []
        for topic in sorted(end):
            begin = start.get(topic, BEGINNING)
            if begin.precedes(end[topic]):
                ranges.append(RangePartition(topic, str(begin), str(end[topic])))
        return ranges


def _chunked_id(first: MessageId, last: MessageId) -> bytes:
    """The serialized id of a chunked message: its last chunk's id with the first chunk's
    as ``first_chunk_message_id`` (what Java's ``ChunkMessageIdImpl.toByteArray()`` and the
    Python client's ``serialize()`` give)."""
    data = pb.MessageIdData(ledgerId=last.ledger_id, entryId=last.entry_id)
    data.first_chunk_message_id.ledgerId = first.ledger_id
    data.first_chunk_message_id.entryId = first.entry_id
    if last.partition >= 0:
        data.partition = last.partition
        data.first_chunk_message_id.partition = first.partition
    return data.SerializeToString()


class PulsarBatchReader(_RangeReading, DataSourceReader):
    """``spark.read.format("pulsar")``: from ``startingOffsets`` to ``endingOffsets``, both
    fixed when the query is planned."""

    def partitions(self) -> Sequence[InputPartition]:
        topics = self.store.topic_partitions(self.options.selection, must_exist=True)
        return self._ranges(
            self._starts(topics, self.options.start), self._ends(topics, self.options.end)
        )


class PulsarStreamReader(_RangeReading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("pulsar")``: micro-batches of new entries.

    Admission control: ``maxEntriesPerTrigger`` (entries, a client batch being one) and
    ``maxBytesPerTrigger`` (stored bytes) bound each micro-batch, shared equally by the topic
    partitions that have new entries, at least one entry each.
    """

    def __init__(
        self, options: SourceOptions, store: TopicStore, fmt: ValueFormat, schema: StructType
    ) -> None:
        super().__init__(options, store, fmt, schema)
        self._target: dict[str, Position] | None = None

    def __getstate__(self) -> dict[str, Any]:
        # executors need only what read() uses
        return {
            "options": self.options,
            "store": self.store,
            "fmt": self.fmt,
            "schema": self.schema,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._target = None

    def initialOffset(self) -> dict[str, str]:
        topics = self.store.topic_partitions(self.options.selection, must_exist=True)
        return Offsets(self._starts(topics, self.options.start)).to_json()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_entries_per_trigger is not None:
            return ReadMaxRows(self.options.max_entries_per_trigger)
        if self.options.max_bytes_per_trigger is not None:
            return ReadMaxBytes(self.options.max_bytes_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        # everything that exists now, and nothing appended or created later
        topics = self.store.topic_partitions(self.options.selection, must_exist=False)
        self._target = self.store.last_positions(topics)

    def latestOffset(self, start: dict[str, str], limit: ReadLimit) -> dict[str, str]:
        current = Offsets.from_json(start)
        if self._target is not None:
            bounds = dict(self._target)
        else:
            topics = self.store.topic_partitions(self.options.selection, must_exist=False)
            bounds = self.store.last_positions(topics)
        self._drop_deleted(current, bounds)
        current = self._forget_recreated(current, bounds)
        # where nothing moves the offset stays, but for a deleted stream (failOnDataLoss
        # false): back to the beginning
        end = {t: b if b.precedes(current.get(t)) else current.get(t) for t, b in bounds.items()}
        moving = [t for t, b in bounds.items() if current.get(t).precedes(b)]
        max_entries, max_bytes = self._budgets(limit)
        for topic in moving:
            end[topic] = self.store.advance(
                topic,
                current.get(topic),
                bounds[topic],
                max_entries and max(1, max_entries // len(moving)),
                max_bytes and max(1, max_bytes // len(moving)),
            )
        return Offsets(end).to_json()

    def _budgets(self, limit: ReadLimit) -> tuple[int | None, int | None]:
        if isinstance(limit, ReadAllAvailable):
            return None, None  # Trigger.AvailableNow and friends read everything
        entries = self.options.max_entries_per_trigger
        size = self.options.max_bytes_per_trigger
        if isinstance(limit, ReadMaxRows):
            entries = limit.max_rows
        elif isinstance(limit, ReadMaxBytes):
            size = limit.max_bytes
        return entries, size

    def _drop_deleted(self, current: Offsets, bounds: dict[str, Position]) -> None:
        """Report the topic partitions that are gone, and forget them: those no longer
        listed and not stored leave the offset, those still named but without a stream
        start again from ``BEGINNING`` (``bounds`` has it), so that a topic created again
        under the name is read from its start and the loss is reported once."""
        known = [topic for topic in current.positions if topic not in bounds]
        gone = set(self.store.missing(known)) if known else set()
        # a stream that ends before what was read from it: deleted (stream ids only grow,
        # and an emptied stream keeps its last id)
        gone.update(t for t, bound in bounds.items() if bound.precedes(current.get(t)))
        if gone:
            names = sorted(gone)
            self._report_loss(
                f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} gone. "
                "Some data may have been missed"
            )
        for topic in known:
            if topic not in gone:
                bounds[topic] = current.get(topic)  # not matched any more: stays where it is

    def _forget_recreated(self, current: Offsets, bounds: Mapping[str, Position]) -> Offsets:
        """A stream with fewer entries ever added than where the query stands was deleted
        and created again between two micro-batches: its new entries (ids only grow) are
        read, but the old count means nothing for it any more."""
        positions = dict(current.positions)
        for topic, position in current.positions.items():
            bound = bounds.get(topic)
            if bound is not None and 0 <= bound.added < position.added:
                log.warning(
                    "%s was deleted and created again since the last micro-batch; entries "
                    "it had then and this query had not read are not known",
                    topic,
                )
                positions[topic] = Position(position.ms, position.seq, position.batch_index)
        return Offsets(positions)

    def partitions(self, start: dict[str, str], end: dict[str, str]) -> Sequence[InputPartition]:
        return self._ranges(Offsets.from_json(start).positions, Offsets.from_json(end).positions)

    def commit(self, end: dict[str, str]) -> None:
        # Nothing to do: the reader holds no subscription, Spark's checkpoint is the cursor.
        pass
