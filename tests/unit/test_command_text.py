"""String fields of the commands a client sends, when they are not UTF-8.

upb hands such a ``string`` field over as ``bytes`` although the stubs say ``str``
(``pulsar_gateway/entry_codec/metadata.py``, ``proto_text``); every one the binary adapter
reads (``pulsar_gateway/adapters/pulsar_binary/commands.py``) must come out of
``from_frame`` as text, with U+FFFD for the bytes (as Pulsar's LightProto decodes them),
never as bytes that fail later where text is expected. The frames are built with a marker
in each string field, then the marker's bytes replaced by as many bytes that are not UTF-8,
so the protobuf framing stays valid.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pulsar_gateway import frame_codec
from pulsar_gateway.adapters.pulsar_binary.commands import Command, Connect, from_frame
from pulsar_gateway.adapters.pulsar_binary.connection import ConnectionState, ServerConnection
from pulsar_gateway.core import SchemaData
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.frames import command

T = pb.BaseCommand.Type

MARK = "\x01\x02\x03"
#: what replaces MARK's bytes: not UTF-8 (a lead byte without its continuation, then
#: bytes no UTF-8 text holds)
NOT_UTF8 = b"\xc3\x28\xff"
#: how Pulsar (and the gateway) reads NOT_UTF8
READ = "\ufffd(\ufffd"


def _with_schema(schema: pb.Schema) -> None:
    schema.name = "schema" + MARK
    schema.type = pb.Schema.Json
    schema.schema_data = b"{}"
    schema.properties.add(key="k" + MARK, value="v" + MARK)


def _producer(cmd: pb.BaseCommand) -> None:
    _with_schema(cmd.producer.schema)


def _subscribe(cmd: pb.BaseCommand) -> None:
    _with_schema(cmd.subscribe.schema)


def _get_or_create_schema(cmd: pb.BaseCommand) -> None:
    _with_schema(cmd.getOrCreateSchema.schema)


def _auth_response(cmd: pb.BaseCommand) -> None:
    cmd.authResponse.response.auth_method_name = "token" + MARK
    cmd.authResponse.response.auth_data = b"secret"


def _nothing(cmd: pb.BaseCommand) -> None:
    pass


TEXT_SCHEMA = SchemaData(pb.Schema.Json, "schema" + READ, b"{}", (("k" + READ, "v" + READ),))

#: (type, fields, more of the command, marked fields, the fields as read)
CASES: list[tuple[int, dict[str, Any], Callable[[pb.BaseCommand], None], int, dict[str, Any]]] = [
    (
        T.CONNECT,
        {"client_version": "client" + MARK, "auth_method_name": "none" + MARK},
        _nothing,
        2,
        {"client_version": "client" + READ, "auth_method_name": "none" + READ},
    ),
    (T.AUTH_RESPONSE, {}, _auth_response, 1, {"auth_method_name": "token" + READ}),
    (
        T.PARTITIONED_METADATA,
        {"topic": "t" + MARK, "request_id": 1},
        _nothing,
        1,
        {"topic": "t" + READ},
    ),
    (
        T.LOOKUP,
        {"topic": "t" + MARK, "request_id": 1, "advertised_listener_name": "l" + MARK},
        _nothing,
        2,
        {"topic": "t" + READ, "listener_name": "l" + READ},
    ),
    (
        T.PRODUCER,
        {"topic": "t" + MARK, "producer_id": 1, "request_id": 2, "producer_name": "p" + MARK},
        _producer,
        5,
        {"topic": "t" + READ, "producer_name": "p" + READ, "schema": TEXT_SCHEMA},
    ),
    (
        T.SUBSCRIBE,
        {
            "topic": "t" + MARK,
            "subscription": "s" + MARK,
            "subType": pb.CommandSubscribe.Shared,
            "consumer_id": 1,
            "request_id": 2,
            "consumer_name": "c" + MARK,
        },
        _subscribe,
        6,
        {
            "topic": "t" + READ,
            "subscription": "s" + READ,
            "consumer_name": "c" + READ,
            "schema": TEXT_SCHEMA,
        },
    ),
    (
        T.GET_TOPICS_OF_NAMESPACE,
        {"namespace": "public/" + MARK, "request_id": 1},
        _nothing,
        1,
        {"namespace": "public/" + READ},
    ),
    (T.GET_SCHEMA, {"topic": "t" + MARK, "request_id": 1}, _nothing, 1, {"topic": "t" + READ}),
    (
        T.GET_OR_CREATE_SCHEMA,
        {"topic": "t" + MARK, "request_id": 1},
        _get_or_create_schema,
        4,
        {"topic": "t" + READ, "schema": TEXT_SCHEMA},
    ),
]


def _not_utf8_frame(
    type_: int, fields: dict[str, Any], more: Callable[[pb.BaseCommand], None], marked: int
) -> bytes:
    cmd = command(type_, **fields)
    more(cmd)
    data = frame_codec.encode_command(cmd)
    assert data.count(MARK.encode()) == marked  # the marker is in the string fields only
    return data.replace(MARK.encode(), NOT_UTF8)


def _decoded(data: bytes) -> Command:
    decoder = frame_codec.FrameDecoder()
    decoder.feed(data)
    frame = decoder.next_frame()
    assert frame is not None
    return from_frame(frame)


@functools.cache
def _annotations(cls: type) -> dict[str, str]:
    """A record class's field annotations as written in its module's source.

    Not ``dataclasses.fields(cls)[i].type``: a module compiled with mypyc (setup.py) gives
    its dataclasses type objects there, ``type`` for ``str | None``, so the source is read
    (the ``.py`` stays beside a compiled module's extension)."""
    module = sys.modules[cls.__module__]
    assert module.__file__ is not None
    source = Path(module.__file__).with_name(cls.__module__.rpartition(".")[2] + ".py")
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            return {
                item.target.id: ast.unparse(item.annotation)
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            }
    raise AssertionError(f"{cls.__qualname__} not found in {source}")


def _text_fields(value: object) -> list[tuple[str, object]]:
    """Every field of a command (and of its schema) the record declares as text."""
    found = []
    declared = _annotations(type(value))
    for field in dataclasses.fields(value):  # type: ignore[arg-type]
        got = getattr(value, field.name)
        if declared[field.name] in ("str", "str | None"):
            found.append((field.name, got))
        if isinstance(got, SchemaData):
            found += [(f"schema.{name}", text) for name, text in _text_fields(got)]
            found += [("schema.properties", text) for pair in got.properties for text in pair]
    return found


@pytest.mark.parametrize(
    ("type_", "fields", "more", "marked", "expected"),
    CASES,
    ids=[pb.BaseCommand.Type.Name(case[0]) for case in CASES],
)
def test_string_fields_that_are_not_utf8_are_read_as_text(
    type_: int,
    fields: dict[str, Any],
    more: Callable[[pb.BaseCommand], None],
    marked: int,
    expected: dict[str, Any],
) -> None:
    data = _not_utf8_frame(type_, fields, more, marked)
    # the premise: upb hands these fields over as bytes
    raw = frame_codec.FrameDecoder()
    raw.feed(data)
    parsed = raw.next_frame()
    assert parsed is not None
    assert any(isinstance(value, bytes) for _, value in _raw_strings(parsed.command))

    got = _decoded(data)
    assert {name: getattr(got, name) for name in expected} == expected
    texts = _text_fields(got)
    assert texts  # the check sees the record's text fields
    assert all(value is None or isinstance(value, str) for _, value in texts), texts


def _raw_strings(message: Any) -> list[tuple[str, object]]:
    """Every string field set in a parsed message, as upb hands it over."""
    found: list[tuple[str, object]] = []
    for field, value in message.ListFields():
        if field.type == field.TYPE_STRING:
            found.append((field.name, value))
        elif field.type == field.TYPE_MESSAGE:
            for item in value if field.is_repeated else [value]:
                found += _raw_strings(item)
    return found


def test_a_connect_whose_client_version_is_not_utf8_is_answered() -> None:
    conn = ServerConnection(server_version="gw-x")
    cmd = command(T.CONNECT, client_version="Pulsar-" + MARK, protocol_version=20)
    cmd.connect.auth_method_name = "none"
    conn.receive_data(frame_codec.encode_command(cmd).replace(MARK.encode(), NOT_UTF8))
    assert conn.state is ConnectionState.CONNECTED
    assert conn.client_version == "Pulsar-" + READ
    (event,) = conn.events_received()
    assert isinstance(event, Connect)
    assert event.client_version == "Pulsar-" + READ
    assert not conn.close_expected()
