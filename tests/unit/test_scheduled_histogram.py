"""A scheduled-message histogram's window (:func:`histogram_window`): defaults, bucket
width, and the parameters refused."""

from __future__ import annotations

import pytest

from pulsar_gateway.core.admin.scheduled_messages import (
    DEFAULT_BUCKETS,
    DEFAULT_SPAN_MS,
    MAX_SPAN_MS,
    MAX_TIME_MS,
    histogram_window,
)

NOW = 1_700_000_000_000


def test_defaults_are_the_next_hour_in_minutes() -> None:
    window = histogram_window(None, None, None, NOW)
    assert (window.start, window.end) == (NOW, NOW + DEFAULT_SPAN_MS)
    assert (window.buckets, window.bucket_ms) == (DEFAULT_BUCKETS, 60_000)
    assert window.bounds[:2] == [NOW, NOW + 60_000] and len(window.bounds) == 61
    # `to` defaults an hour after `from`, `from` to now
    assert histogram_window(5000, None, 1, NOW).end == 5000 + DEFAULT_SPAN_MS
    assert histogram_window(None, NOW + 10, 10, NOW).bucket_ms == 1


def test_bucket_width_rounds_up_and_the_end_follows() -> None:
    window = histogram_window(0, 10_000, 3, NOW)
    assert window.bucket_ms == 3334 and window.end == 10_002
    assert window.bounds == [0, 3334, 6668, 10_002]
    # fewer ms than buckets: 1 ms each
    window = histogram_window(0, 5, 500, NOW)
    assert (window.bucket_ms, window.end) == (1, 500)
    assert histogram_window(0, MAX_SPAN_MS, 500, NOW).end >= MAX_SPAN_MS


@pytest.mark.parametrize(
    ("start", "end", "buckets"),
    [
        (100, 100, 10),  # empty
        (200, 100, 10),  # backwards
        (0, MAX_SPAN_MS + 1, 10),  # over ten years
        (0, 100, 0),
        (0, 100, 501),
        (0, 100, -1),
        (-1, 100, 10),
        (0, MAX_TIME_MS + 1, 10),
        (MAX_TIME_MS, None, 10),  # the default end past the last time
    ],
)
def test_refused(start: int | None, end: int | None, buckets: int | None) -> None:
    with pytest.raises(ValueError, match=r"\S"):
        histogram_window(start, end, buckets, NOW)
