"""Pulsar's ``DateFormatter``: the one text form of a time in stats, peek headers and
WebSocket messages.

Java's ``ISO_OFFSET_DATE_TIME`` in UTC: seconds always, the fraction only when not zero
and without trailing zeros (``2023-11-14T22:13:20.5Z``).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

__all__ = ["format_time", "now"]


def format_time(ms: int) -> str:
    """Milliseconds since the epoch as Pulsar prints them."""
    text = datetime.fromtimestamp(ms // 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    millis = ms % 1000
    if millis:
        text += f".{millis:03d}".rstrip("0")
    return text + "Z"


def now() -> str:
    """The current time as Pulsar prints it (``DateFormatter.now``)."""
    return format_time(int(time.time() * 1000))
