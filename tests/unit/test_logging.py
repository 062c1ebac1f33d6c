"""The gateway's log: one line per record whatever a client named (no forged lines), and a
request aiohttp cannot parse logged as one INFO line, not an ERROR with a traceback."""

from __future__ import annotations

import logging
import sys

from aiohttp.http_exceptions import LineTooLong

from pulsar_gateway.adapters.http.app import SERVER_LOGGER
from pulsar_gateway.server.main import OneLineFormatter


def _record(
    msg: str, *args: object, level: int = logging.WARNING, exc: object = None
) -> logging.LogRecord:
    exc_info = (type(exc), exc, None) if isinstance(exc, BaseException) else None
    return logging.LogRecord("x", level, __file__, 1, msg, args, exc_info)  # type: ignore[arg-type]


def test_a_line_break_in_a_client_name_stays_on_the_line() -> None:
    formatter = OneLineFormatter("%(levelname)s %(name)s: %(message)s")
    text = formatter.format(_record("producer %s lost", "a\nINFO gateway: forged\r"))
    assert text == "WARNING x: producer a\\nINFO gateway: forged\\r lost"


def test_a_traceback_keeps_its_lines() -> None:
    formatter = OneLineFormatter("%(message)s")
    try:
        raise ValueError("boom")
    except ValueError:
        record = _record("failed", level=logging.ERROR)
        record.exc_info = sys.exc_info()
    assert formatter.format(record).splitlines()[:2] == [
        "failed",
        "Traceback (most recent call last):",
    ]


def test_a_request_aiohttp_refused_is_one_info_line() -> None:
    SERVER_LOGGER.setLevel(logging.INFO)
    try:
        record = _record(
            "Error handling request from %s",
            "127.0.0.1",
            level=logging.ERROR,
            exc=LineTooLong("header", "8190", "9000"),
        )
        record.name = SERVER_LOGGER.name
        assert SERVER_LOGGER.filters[0].filter(record)
        assert record.levelno == logging.INFO and record.exc_info is None
        assert record.getMessage().startswith("Error handling request from 127.0.0.1: 400")
        # a failure of the gateway's own stays an ERROR with its traceback
        own = _record("Error handling request from %s", "x", level=logging.ERROR, exc=KeyError("k"))
        assert SERVER_LOGGER.filters[0].filter(own)
        assert own.levelno == logging.ERROR and own.exc_info is not None
    finally:
        SERVER_LOGGER.setLevel(logging.NOTSET)
