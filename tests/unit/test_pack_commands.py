"""The lane's RESP packing, read back by hiredis (what Redis's protocol parser sees)."""

from __future__ import annotations

import hiredis
import pytest

from pulsar_gateway.core.storage import lane
from pulsar_gateway.core.storage.lane import pack_commands


def read_back(data: bytes) -> list[object]:
    reader = hiredis.Reader()
    reader.feed(data)
    commands = []
    while (command := reader.gets()) is not False:
        commands.append(command)
    return commands


def test_every_kind_of_argument_is_a_bulk_string() -> None:
    big = bytes(range(256)) * 40  # above the size packed in one piece
    commands = [
        ("XADD", "pgw:{persistent://public/default/t}:stream", "*", b"m", b"\x00\r\n\xff"),
        ("XADD", "pgw:{persistent://public/default/t}:stream", "*", b"m", big),
        ("EVALSHA", "abc", 2, "k1", "ключ", -7, 1.5, b""),
        ("PING",),
    ]
    assert read_back(pack_commands(commands)) == [
        [b"XADD", b"pgw:{persistent://public/default/t}:stream", b"*", b"m", b"\x00\r\n\xff"],
        [b"XADD", b"pgw:{persistent://public/default/t}:stream", b"*", b"m", big],
        [b"EVALSHA", b"abc", b"2", b"k1", "ключ".encode(), b"-7", b"1.5", b""],
        [b"PING"],
    ]


def test_the_string_cache_stays_bounded_and_correct(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lane, "_ENCODED_MAX", 10)
    monkeypatch.setattr(lane, "_encoded", {})
    keys = [f"key-{i}" for i in range(35)]
    data = pack_commands([("GET", key) for key in keys] * 2)
    assert read_back(data) == [[b"GET", key.encode()] for key in keys] * 2
    assert len(lane._encoded) <= 10


def test_long_strings_are_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client may name a topic with 300,000 characters: such keys are packed, not kept
    (the fuzzer saw a gateway grow by 47 MiB of cached keys)."""
    monkeypatch.setattr(lane, "_encoded", {})
    long_key = "pgw:{persistent://public/default/" + "y" * 300_000 + "}:stream"
    data = pack_commands([("XLEN", long_key), ("XLEN", "short")])
    assert read_back(data) == [[b"XLEN", long_key.encode()], [b"XLEN", b"short"]]
    assert set(lane._encoded) == {"XLEN", "short"}
