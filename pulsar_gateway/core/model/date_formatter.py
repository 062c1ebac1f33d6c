"""Pulsar's ``DateFormatter``: the one text form of a time in stats, peek headers and
WebSocket messages.

Java's ``ISO_OFFSET_DATE_TIME`` in UTC: seconds always, the fraction only when not zero
and without trailing zeros (``2023-11-14T22:13:20.5Z``). Every 64-bit time prints, as
Java's ``Instant`` does: a year past 9999 with a sign (``+292278994-08-17T07:12:55.807Z``),
one before year 1 as ISO's proleptic years (``0000`` is 1 BC, ``-0001`` 2 BC). Times come from
clients (``publish_time``, ``event_time``), so any value must print.
"""

from __future__ import annotations

import time

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
        text = _format_second(second)
        _last_second = (second, text)
    if millis:
        return f"{text}.{millis:03d}".rstrip("0") + "Z"
    return text + "Z"


def _format_second(second: int) -> str:
    days, in_day = divmod(second, 86_400)
    year, month, day = _civil(days)
    # DateTimeFormatter's SignStyle.EXCEEDS_PAD: a sign only past four digits, or below 0
    year_text = f"{year:04d}" if 0 <= year <= 9999 else f"{year:+05d}"
    hour, rest = divmod(in_day, 3600)
    return f"{year_text}-{month:02d}-{day:02d}T{hour:02d}:{rest // 60:02d}:{rest % 60:02d}"


def _civil(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day number (0 = 1970-01-01) in the proleptic Gregorian
    calendar, for any integer: H. Hinnant's ``civil_from_days``, eras of 400 years."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def now() -> str:
    """The current time as Pulsar prints it (``DateFormatter.now``)."""
    return format_time(int(time.time() * 1000))
