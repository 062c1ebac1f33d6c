"""The Spark source's options and offsets as data (``pyspark_pulsar.options``,
``pyspark_pulsar.offsets``): no Spark session, no Redis.

The reference is the streamnative connector: its option names (case-insensitive), its
offsets JSON (topic -> the signed bytes of ``MessageId.toByteArray()``, with its encodings
of ``MessageId.earliest``/``latest``), its defaults (batch from earliest, streams from
latest) and its refusals, each naming the option.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pulsar_gateway.core import MessageId
from pulsar_gateway.entry_codec import serialize_message_id
from pyspark_pulsar.offsets import (
    BEGINNING,
    Offsets,
    Position,
    decode_id_array,
    position_before,
)
from pyspark_pulsar.options import (
    AtTime,
    Edge,
    OptionError,
    SourceOptions,
    parse_sink_options,
    parse_source_options,
)

#: The reference connector's README encodings of MessageId.earliest and MessageId.latest.
EARLIEST_BYTES = [
    8,
    -1,
    -1,
    -1,
    -1,
    -1,
    -1,
    -1,
    -1,
    -1,
    1,
    16,
    -1,
    -1,
    -1,
    -1,
    -1,
    -1,
    -1,
    -1,
    -1,
    1,
]
LATEST_BYTES = [8, -1, -1, -1, -1, -1, -1, -1, -1, 127, 16, -1, -1, -1, -1, -1, -1, -1, -1, 127]
T = "persistent://public/default/t"
BASE = {"service.url": "pulsar://gw:6650", "topic": "t"}


def signed(raw: bytes) -> list[int]:
    return [b - 256 if b > 127 else b for b in raw]


def source(streaming: bool | None = False, /, **extra: str) -> SourceOptions:
    return parse_source_options({**BASE, **extra}, streaming=streaming)


def refused(streaming: bool | None = False, /, **options: str) -> str:
    with pytest.raises(OptionError) as excinfo:
        parse_source_options(options, streaming=streaming)
    return str(excinfo.value)


# -- options ------------------------------------------------------------------------------


def test_defaults_follow_the_reference_connector() -> None:
    batch = parse_source_options(BASE, streaming=False)
    assert batch.start.default is Edge.EARLIEST and batch.end.default is Edge.LATEST
    assert parse_source_options(BASE, streaming=True).start.default is Edge.LATEST
    assert batch.fail_on_data_loss is True
    assert batch.poll_timeout_ms == 120_000
    assert batch.max_entries_per_trigger is None and batch.max_bytes_per_trigger is None
    assert batch.allow_different_schemas is False
    assert batch.admin_url == "http://gw:8080"  # the gateway's HTTP port beside it
    assert batch.redis_url is None and batch.key_prefix is None
    assert [str(t) for t in batch.selection.topics] == [T]


def test_keys_are_case_insensitive() -> None:
    options = parse_source_options(
        {
            "SERVICE.URL": "pulsar://gw:6650",
            "Topic": "t",
            "STARTINGOFFSETS": "Earliest",
            "failOnDataLoss": "FALSE",
            "MaxEntriesPerTrigger": "5",
            "allowdifferenttopicschemas": "true",
            "Admin.Url": "http://admin:8081/",
        },
        streaming=True,
    )
    assert options.start.default is Edge.EARLIEST
    assert options.fail_on_data_loss is False
    assert options.max_entries_per_trigger == 5
    assert options.allow_different_schemas is True
    assert options.admin_url == "http://admin:8081"


def test_service_url_is_required_and_checked() -> None:
    assert "option 'service.url' is required" in refused(topic="t")
    assert "expected pulsar://host:port" in refused(**{**BASE, "service.url": "http://gw:6650"})
    assert "TLS is not supported" in refused(**{**BASE, "service.url": "pulsar+ssl://gw:6651"})
    assert "bad port" in refused(**{**BASE, "service.url": "pulsar://gw:port"})
    assert "option 'admin.url'" in refused(**BASE, **{"admin.url": "gw:8080"})


def test_exactly_one_topic_option() -> None:
    message = refused(**{"service.url": "pulsar://gw:6650"})
    assert "exactly one of the options 'topic', 'topics' or 'topicsPattern'" in message
    assert "(got topic, topicspattern)" in refused(**BASE, topicsPattern="t.*")
    assert "exactly one" in refused(**{**BASE, "topic": "  "})  # blank is not given


def test_topic_lists_are_normalised_and_deduplicated() -> None:
    options = parse_source_options(
        {"service.url": "pulsar://gw:6650", "topics": f"a, {T}, ,t, other/ns/b"},
        streaming=True,
    )
    assert [str(t) for t in options.selection.topics] == [
        "persistent://public/default/a",
        T,
        "persistent://other/ns/b",
    ]
    assert "option 'topic'" in refused(**{**BASE, "topic": "a/b/c/d/e"})


@pytest.mark.parametrize(
    ("pattern", "namespace", "matches", "misses"),
    [
        ("orders-.*", "public/default", "persistent://public/default/orders-1", "orders-1"),
        ("acme/sales/o.*", "acme/sales", "persistent://acme/sales/orders", T),
        (
            "persistent://acme/sales/o[0-9]+",
            "acme/sales",
            "persistent://acme/sales/o42",
            "persistent://acme/sales/o42x",
        ),
    ],
)
def test_topics_pattern_names_a_namespace_and_a_full_match(
    pattern: str, namespace: str, matches: str, misses: str
) -> None:
    options = parse_source_options(
        {"service.url": "pulsar://gw:6650", "topicsPattern": pattern}, streaming=True
    )
    selection = options.selection
    assert selection.namespace == namespace and selection.pattern is not None
    assert selection.pattern.fullmatch(matches)
    assert not selection.pattern.fullmatch(misses)


def test_bad_topics_patterns() -> None:
    url = {"service.url": "pulsar://gw:6650"}
    assert "only persistent topics" in refused(**url, topicsPattern="non-persistent://a/b/c.*")
    assert "option 'topicsPattern'" in refused(**url, topicsPattern="public/default/(")


def test_unknown_options_are_refused_by_name() -> None:
    message = refused(**BASE, colour="red")
    assert "unknown option 'colour' for a Pulsar source" in message
    assert "startingoffsets" in message  # the list of what is known
    assert "'pulsar.client.foo': foo not supported by pulsar" in refused(
        **BASE, **{"pulsar.client.foo": "1"}
    )
    assert "'pulsar.reader.bar': bar not supported" in refused(**BASE, **{"pulsar.reader.bar": "1"})
    # the Java client's real configuration keys pass, whatever their case
    source(**{"pulsar.client.operationTimeoutMs": "1000", "pulsar.reader.receiverQueueSize": "5"})


def test_token_authentication() -> None:
    plugin = "org.apache.pulsar.client.impl.auth.AuthenticationToken"

    def token(params: str) -> str | None:
        options = source(
            **{"pulsar.client.authPluginClassName": plugin, "pulsar.client.authParams": params}
        )
        return options.auth.token

    assert token("token:abc.def") == "abc.def"
    assert token('{"token": "xyz"}') == "xyz"
    assert source(authPluginClassName=plugin, authParams="token:t").auth.token == "t"
    bad = refused(**BASE, **{"pulsar.client.authPluginClassName": "kerberos"})
    assert "'pulsar.client.authPluginClassName'" in bad
    empty = refused(
        **BASE,
        **{"pulsar.client.authPluginClassName": plugin, "pulsar.client.authParams": "token:"},
    )
    assert "the token is empty" in empty


def test_token_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("from-file\n")
    options = source(authPluginClassName="token", authParams=f"file://{path}")
    assert options.auth.token == "from-file"


def test_numbers_and_booleans() -> None:
    for value in ("0", "-3", "many", ""):
        message = refused(**BASE, maxEntriesPerTrigger=value)
        assert f"option 'maxEntriesPerTrigger': expected a positive integer, got {value!r}" in (
            message
        )
    assert "option 'maxBytesPerTrigger'" in refused(**BASE, maxBytesPerTrigger="1.5")
    assert "option 'pollTimeoutMs'" in refused(**BASE, pollTimeoutMs="0")
    # the reference's "no limit" (Long.MAX_VALUE) is no limit
    assert source(maxEntriesPerTrigger=str(2**63 - 1)).max_entries_per_trigger is None
    assert "option 'failOnDataLoss': expected true or false" in refused(
        **BASE, failOnDataLoss="yes"
    )


def test_redis_location_options() -> None:
    options = source(**{"redis.url": "redis://r:6380/2", "redis.keyPrefix": "p1"})
    assert (options.redis_url, options.key_prefix) == ("redis://r:6380/2", "p1")
    assert source(**{"redis.url": "unix:///run/redis.sock"}).redis_url
    assert "option 'redis.url'" in refused(**BASE, **{"redis.url": "http://r:6379"})


# -- starting and ending offsets and times ---------------------------------------------------


def test_offsets_json_in_the_reference_form() -> None:
    message_id = MessageId(1_700_000_000_123, 7)
    raw = serialize_message_id(message_id)
    assert any(b > 127 for b in raw)  # so the signed form is exercised
    options = source(
        startingOffsets=json.dumps({T: signed(raw), "other": EARLIEST_BYTES}),
        endingOffsets=json.dumps({"t": LATEST_BYTES}),
        topics="t,other",
        topic="",
    )
    start, end = options.start, options.end
    assert start.option == "startingOffsets" and end.option == "endingOffsets"
    assert start.for_topic(T) == message_id
    assert start.for_topic("persistent://public/default/other") is Edge.EARLIEST
    assert start.for_topic("persistent://public/default/x") is Edge.EARLIEST  # the default
    assert end.for_topic(T) is Edge.LATEST
    # "earliest"/"latest" as per-topic strings too; unsigned bytes are read the same
    strings = source(startingOffsets=json.dumps({"t": "earliest"}))
    assert strings.start.for_topic(T) is Edge.EARLIEST
    unsigned = source(startingOffsets=json.dumps({"t": list(raw)}))
    assert unsigned.start.for_topic(T) == message_id
    # ids inside a batch and of partitions keep their batch index and partition
    batched = MessageId(5, 6, 2, 3)
    inside = source(startingOffsets=json.dumps({"t": signed(serialize_message_id(batched, 4))}))
    assert inside.start.for_topic(T) == batched


def test_bad_offsets_are_refused_naming_the_option() -> None:
    bad_json = refused(**BASE, startingOffsets="{not json")
    assert "option 'startingOffsets'" in bad_json and "'{not json'" in bad_json
    assert "option 'endingOffsets'" in refused(**BASE, endingOffsets="[1, 2]")
    assert "option 'startingOffsets'" in refused(**BASE, startingOffsets="{}")
    bytes_message = refused(**BASE, startingOffsets=json.dumps({"t": [8, "x"]}))
    assert f"option 'startingOffsets', topic '{T}'" in bytes_message
    assert "array of bytes" in bytes_message
    assert "not a serialized message id" in refused(
        **BASE, startingOffsets=json.dumps({"t": [8, 1]})
    )
    assert "out of" not in refused(**BASE, startingOffsets=json.dumps({"t": [300]}))
    assert "option 'startingOffsets'" in refused(
        **BASE, startingOffsets=json.dumps({"a/b/c/d/e": EARLIEST_BYTES})
    )


def test_latest_and_earliest_where_they_make_no_sense() -> None:
    assert "'startingOffsets': 'latest' is not allowed for a batch query" in refused(
        **BASE, startingOffsets="latest"
    )
    assert "'latest' is not allowed" in refused(
        **BASE, startingOffsets=json.dumps({"t": LATEST_BYTES})
    )
    assert "'endingOffsets': 'earliest' is not allowed" in refused(
        **BASE, endingOffsets=" EARLIEST "
    )
    assert "for batch queries only" in refused(True, **BASE, endingOffsets="latest")
    assert "for batch queries only" in refused(True, **BASE, endingTime="5")
    # at load() the direction is not known yet: only the rules of both apply
    assert parse_source_options({**BASE, "startingOffsets": "latest"}, streaming=None)
    assert source(True, startingOffsets="latest").start.default is Edge.LATEST


def test_starting_and_ending_times() -> None:
    options = source(startingTime="1700000000000", endingTime=json.dumps({"t": 1700000001000}))
    assert options.start.default == AtTime(1_700_000_000_000)
    assert options.end.for_topic(T) == AtTime(1_700_000_001_000)
    specials = source(True, startingTime=json.dumps({"t": -1, "u": -2}))
    assert specials.start.for_topic(T) is Edge.EARLIEST
    assert specials.start.for_topic("persistent://public/default/u") is Edge.LATEST
    assert "set only one of the options 'startingOffsets' and 'startingTime'" in refused(
        **BASE, startingOffsets="earliest", startingTime="5"
    )
    for bad in ("0", "-3", "soon", json.dumps({"t": "5"}), json.dumps({"t": True})):
        assert "option 'startingTime'" in refused(**BASE, startingTime=bad)


def test_sink_options() -> None:
    sink = parse_sink_options(
        {
            "service.url": "pulsar://gw:6650",
            "topic": "out",
            "pulsar.producer.compressionType": "lz4",
            "pulsar.producer.batchingMaxMessages": "50",
        }
    )
    assert str(sink.topic) == "persistent://public/default/out"
    assert (sink.compression, sink.batching_max_messages) == ("LZ4", 50)
    assert parse_sink_options({"service.url": "pulsar://gw:6650"}).topic is None
    with pytest.raises(OptionError, match="'topics' and 'topicsPattern' are for reading"):
        parse_sink_options({"service.url": "pulsar://gw:6650", "topics": "a,b"})
    with pytest.raises(OptionError, match="unknown option 'startingoffsets' for a Pulsar sink"):
        parse_sink_options({"service.url": "pulsar://gw:6650", "startingOffsets": "earliest"})


# -- positions and offsets ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("0-0", BEGINNING),
        ("1700000000000-3", Position(1_700_000_000_000, 3)),
        ("5-6:2", Position(5, 6, 2)),
        ("5-6@42", Position(5, 6, added=42)),
        ("5-6:0@7", Position(5, 6, 0, 7)),
        (f"5-{2**64 - 1}", Position(5, 2**64 - 1)),
    ],
)
def test_position_text_round_trip(text: str, position: Position) -> None:
    parsed = Position.parse(text)
    assert parsed == position and str(parsed) == text
    assert parsed.added == position.added


@pytest.mark.parametrize(
    "text", ["", "5", "a-b", "-1-0", "5-6:-2", f"5-{2**64}", "5-6@-2", "5-6@x"]
)
def test_bad_positions(text: str) -> None:
    with pytest.raises(ValueError):
        Position.parse(text)


def test_position_order() -> None:
    ordered = [
        BEGINNING,
        Position(5, 6, 0),
        Position(5, 6, 1),
        Position(5, 6),  # the whole entry is further than any of its messages
        Position(5, 7),
        Position(6, 0),
    ]
    for i, earlier in enumerate(ordered):
        for later in ordered[i + 1 :]:
            assert earlier.precedes(later) and not later.precedes(earlier)
        assert not earlier.precedes(earlier)
    # the entry count is a fact about the entry, not a place in the stream
    assert Position(5, 6, added=3) == Position(5, 6)
    assert not Position(5, 6, added=3).precedes(Position(5, 6, added=9))


def test_range_starts() -> None:
    assert Position(5, 6).range_start() == "(5-6"  # the whole entry was read
    assert Position(5, 6, 2).range_start() == "5-6"  # the rest of the batch is to read
    assert Position(5, 6, 2).entry_key() == (5, 6) and not Position(5, 6, 2).whole


def test_position_before_is_an_inclusive_start() -> None:
    assert position_before(MessageId(5, 6)) == Position(5, 5)
    assert position_before(MessageId(5, 6, batch_index=3)) == Position(5, 6, 2)
    assert position_before(MessageId(5, 6, batch_index=0)) == Position(5, 5)
    assert position_before(MessageId(5, 0)) == Position(4, 2**64 - 1)
    assert position_before(MessageId(0, 0)) == BEGINNING
    assert position_before(MessageId(-1, -1)) == BEGINNING
    for message_id in (MessageId(5, 6), MessageId(5, 6, batch_index=3), MessageId(5, 0)):
        start = position_before(message_id)
        through = Position(message_id.ledger_id, message_id.entry_id, message_id.batch_index)
        assert start.precedes(through)


def test_decode_id_array_of_the_reference_encodings() -> None:
    earliest = decode_id_array(EARLIEST_BYTES, "here")
    assert (earliest.ledger_id, earliest.entry_id) == (-1, -1) and earliest.is_earliest
    latest = decode_id_array(LATEST_BYTES, "here")
    assert (latest.ledger_id, latest.entry_id) == (2**63 - 1, 2**63 - 1) and latest.is_latest
    # the README's example: ledger 11, entry 101, partition 1, batch index 1
    assert decode_id_array([8, 11, 16, 101, 24, 1, 32, 1], "here") == MessageId(11, 101, 1, 1)
    # what the Python client's serialize() gives, as Java's signed bytes
    message_id = MessageId(1_795_436_689_783, 12, -1, 2)
    raw = serialize_message_id(message_id, 3)
    assert decode_id_array(signed(raw), "here") == message_id


@pytest.mark.parametrize("value", ["earliest", None, [8, 1.5], [8, True, 16, 1], [256], {"a": 1}])
def test_decode_id_array_refusals_name_where(value: object) -> None:
    with pytest.raises(ValueError, match=r"^option 'x', topic 't': "):
        decode_id_array(value, "option 'x', topic 't'")


def test_offsets_json() -> None:
    offsets = Offsets.from_json({"b": "5-6@3", "a": "0-0", "c": "7-8:1"})
    assert offsets.get("b") == Position(5, 6) and offsets.get("b").added == 3
    assert offsets.get("new-partition") == BEGINNING  # discovered later: from its start
    assert offsets.to_json() == {"a": "0-0", "b": "5-6@3", "c": "7-8:1"}
    assert list(offsets.to_json()) == ["a", "b", "c"]
    with pytest.raises(ValueError, match="not a stream position"):
        Offsets.from_json({"t": [8, 1, 16, 2]})  # a reference-connector checkpoint
    with pytest.raises(ValueError, match="not a stream position"):
        Offsets.from_json({"t": "latest"})


def test_the_sink_accepts_the_options_spark_passes_to_every_sink() -> None:
    # DataStreamWriter hands checkpointLocation and queryName to every sink
    options = parse_sink_options(
        {
            "service.url": "pulsar://localhost:6650",
            "topic": "t",
            "checkpointLocation": "/tmp/checkpoint",
            "queryName": "q",
        }
    )
    assert str(options.topic) == "persistent://public/default/t"
