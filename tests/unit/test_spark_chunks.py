"""The Spark source reassembles a chunked message whose ``MessageMetadata.uuid`` is not
UTF-8: it looks its earlier chunks up by the text the gateway stored them under
(``"<chunk id>:<uuid>"`` with ``proto_text`` of the uuid, as the binary adapter's producer
side writes it), not by the ``bytes`` upb hands over for such a field. Against fakeredis:
no Spark session, no gateway."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import fakeredis
import pytest

from pulsar_gateway.core import StoredEntry
from pulsar_gateway.core.model.entry import BLOB, CHUNK
from pulsar_gateway.entry_codec import make_blob, parse_blob, proto_text
from pulsar_gateway.proto import PulsarApi_pb2 as pb

pytest.importorskip("pyspark")

from pyspark_pulsar.source import _RangeReading
from pyspark_pulsar.storage import StorageLocation, TopicStore

TOPIC = "persistent://public/default/chunked"
MARK = b"\x01\x02\x03"
NOT_UTF8 = b"\xc3\x28\xff"


class _FakeStore(TopicStore):
    def __init__(self) -> None:
        super().__init__(StorageLocation("redis://unused"), 1000)
        self.client = fakeredis.FakeRedis()

    @property
    def redis(self) -> Any:
        return self.client


def _chunk_metadata(chunk_id: int) -> bytes:
    metadata = pb.MessageMetadata(
        producer_name="p",
        sequence_id=7,
        publish_time=1,
        uuid="p-7-" + MARK.decode(),
        chunk_id=chunk_id,
        num_chunks_from_msg=2,
        total_chunk_msg_size=11,
    )
    raw = metadata.SerializeToString()
    assert raw.count(MARK) == 1
    return raw.replace(MARK, NOT_UTF8)


def test_the_chunks_of_a_message_whose_uuid_is_not_utf8_are_found() -> None:
    store = _FakeStore()
    stream = store.keys.topic(TOPIC).stream
    first, last = _chunk_metadata(0), _chunk_metadata(1)
    uuid = pb.MessageMetadata.FromString(last).uuid
    assert isinstance(uuid, bytes)  # the premise: upb hands the field over as bytes
    for chunk_id, metadata, payload in ((0, first, b"hello "), (1, last, b"world")):
        # the chunk field as the gateway's producer side stores it
        chunk = f"{chunk_id}:{proto_text(uuid)}".encode()
        store.client.xadd(stream, {BLOB: make_blob(metadata, payload), CHUNK: chunk})
    [(stream_id, fields)] = store.client.xrevrange(stream, count=1)
    entry = StoredEntry.parse(stream_id, [v for pair in fields.items() for v in pair])

    reader = _RangeReading(
        SimpleNamespace(fail_on_data_loss=True),  # type: ignore[arg-type]
        store,
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
    )
    whole = reader._whole_chunked_message(TOPIC, entry)

    assert whole is not None
    blob, id_bytes = whole
    parsed = parse_blob(blob)
    assert parsed.payload == b"hello world"
    assert not parsed.metadata.HasField("uuid")
    assert id_bytes is not None
