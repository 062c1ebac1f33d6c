"""Pulsar's ``DateFormatter`` text of times, for every 64-bit value a client may send as a
``publish_time`` or ``event_time`` (the fuzzer's 2**63 - 1 broke a WebSocket consumer)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pulsar_gateway.core.model.date_formatter import format_time


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "1970-01-01T00:00:00Z"),
        (1_700_000_000_500, "2023-11-14T22:13:20.5Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
        (-43_822_847_381_000, "0581-04-23T02:50:19Z"),  # four digits, as Java pads
        (253_402_300_799_999, "9999-12-31T23:59:59.999Z"),
        # past four digits: a sign (DateTimeFormatter SignStyle.EXCEEDS_PAD), as Java's
        # Instant.ofEpochMilli(Long.MAX_VALUE) and MIN_VALUE print
        (253_402_300_800_000, "+10000-01-01T00:00:00Z"),
        (2**63 - 1, "+292278994-08-17T07:12:55.807Z"),
        (-(2**63), "-292275055-05-16T16:47:04.192Z"),
        (-62_135_596_800_001, "0000-12-31T23:59:59.999Z"),  # ISO year 0 is 1 BC
        (-62_167_219_200_001, "-0001-12-31T23:59:59.999Z"),
    ],
)
def test_edges(ms: int, text: str) -> None:
    assert format_time(ms) == text


@given(st.integers(min_value=-62_135_596_800_000, max_value=253_402_300_799_999))
def test_agrees_with_the_calendar_within_four_digit_years(ms: int) -> None:
    second, millis = divmod(ms, 1000)
    expected = datetime.fromtimestamp(second, UTC).replace(tzinfo=None).isoformat()
    fraction = f".{millis:03d}".rstrip("0") if millis else ""
    assert format_time(ms) == f"{expected}{fraction}Z"


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_every_long_prints(ms: int) -> None:
    assert format_time(ms).endswith("Z")
