"""Pulsar's ``DateFormatter``: the one text form of a time in stats, peek headers and
WebSocket messages.

Java's ``ISO_OFFSET_DATE_TIME`` in UTC: seconds always, the fraction only when not zero
and without trailing zeros (``2023-11-14T22:13:20.5Z``).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

__all__ = ["format_time", "now"]


#: the last second formatted: messages pushed together mostly share their second, and
#: formatting one costs more than the rest of a WebSocket message's JSON
_last_second: tuple[int, str] = (-1, "")


def format_time(ms: int) -> str:
    """Milliseconds since the epoch as Pulsar prints them."""
    global _last_second
    second, millis = divmod(ms, 1000)
    cached, text = _last_second
    if cached != second:
        text = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        _last_second = (second, text)
    if millis:
        return f"{text}.{millis:03d}".rstrip("0") + "Z"
    return text + "Z"


def now() -> str:
    """The current time as Pulsar prints it (``DateFormatter.now``)."""
    return format_time(int(time.time() * 1000))
