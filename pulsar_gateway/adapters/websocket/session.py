"""What every WebSocket endpoint shares: admission, the upgrade, errors before it, metrics.

Before the upgrade a request is refused with an HTTP status and Pulsar's JSON
``{"reason": ...}`` (the app's ``json_errors`` middleware writes it), with the statuses of
``AbstractWebSocketHandler.getErrorCode``: 400 for a bad query parameter or topic name
(``Invalid query params: ...``), 404 for what does not exist, 409 for a busy or fenced
producer or consumer, 429 when this gateway already serves ``websocket_max_sessions``
sessions, 500 for a storage failure (``Failed to create producer/consumer: ...``).

After the upgrade a session is a :class:`Session`: it counts itself in
``pulsar_gateway_connections{protocol="websocket"}``, is listed in the app's
:class:`SessionRegistry` (which closes every session with 1001 when the gateway shuts
down) and sends text frames through :meth:`Session.send`, which never raises: a peer that
went away just ends the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Awaitable, Callable
from typing import NoReturn

from aiohttp import WSCloseCode, web
from aiohttp.http import WebSocketWriter

from pulsar_gateway.adapters.resource import fail as http_fail
from pulsar_gateway.adapters.resource import websocket_status
from pulsar_gateway.adapters.websocket.params import ParamError
from pulsar_gateway.core import (
    GatewayError,
    InvalidTopicName,
    Services,
)

__all__ = [
    "PROTOCOL",
    "Session",
    "SessionRegistry",
    "fail",
    "fail_for",
    "serve_frames",
    "text_frame",
]

log = logging.getLogger(__name__)

#: The ``protocol`` label of this adapter's metrics.
PROTOCOL = "websocket"
#: Close reason texts are limited to 123 bytes (RFC 6455 section 5.5).
_MAX_REASON = 123


def fail(status: type[web.HTTPException], reason: str) -> NoReturn:
    """Refuse the upgrade; the ``json_errors`` middleware writes ``{"reason": ...}``."""
    raise http_fail(status, reason)


def fail_for(services: Services, exc: Exception, what: str) -> NoReturn:
    """Refuse the upgrade for ``exc`` (a ParamError or a GatewayError), counting it in
    ``pulsar_gateway_errors{protocol="websocket"}``."""
    services.metrics.errors.labels(PROTOCOL, type(exc).__name__).inc()
    if isinstance(exc, ParamError | InvalidTopicName):
        fail(web.HTTPBadRequest, f"Invalid query params: {exc}")
    status = websocket_status(exc) if isinstance(exc, GatewayError) else web.HTTPInternalServerError
    fail(status, f"Failed to create {what}: {exc}")


class SessionRegistry:
    """The open sessions of one gateway, bounded by ``websocket_max_sessions``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._admitted = 0
        self.sessions: set[Session] = set()

    def admit(self, services: Services) -> None:
        """Reserve a place for a new session (released with :meth:`release`).

        Raises:
            web.HTTPTooManyRequests: the gateway serves ``limit`` sessions already.
        """
        if self._admitted >= self.limit:
            services.metrics.errors.labels(PROTOCOL, "TooManyRequests").inc()
            fail(web.HTTPTooManyRequests, "Too many WebSocket sessions")
        self._admitted += 1

    def release(self) -> None:
        self._admitted -= 1

    async def close_all(self) -> None:
        """Close every session (gateway shutdown): clients see 1001 and reconnect."""
        sessions = list(self.sessions)
        await asyncio.gather(
            *(s.close(WSCloseCode.GOING_AWAY, "Gateway shutting down") for s in sessions),
            return_exceptions=True,
        )


class Session:
    """One upgraded WebSocket connection."""

    def __init__(self, services: Services, registry: SessionRegistry, ws: web.WebSocketResponse):
        self.services = services
        self.registry = registry
        self.ws = ws
        self.closed = False

    async def __aenter__(self) -> Session:
        metrics = self.services.metrics
        metrics.connections.labels(PROTOCOL).inc()
        metrics.connections_opened.labels(PROTOCOL).inc()
        self.registry.sessions.add(self)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.closed = True
        self.registry.sessions.discard(self)
        self.services.metrics.connections.labels(PROTOCOL).dec()
        await self.close(WSCloseCode.OK, "")

    async def send(self, text: str) -> bool:
        """Send one text frame; False when the peer is gone."""
        if self.ws.closed:
            return False
        try:
            await self.ws.send_str(text)
        except (ConnectionError, RuntimeError) as exc:
            log.debug("WebSocket send failed: %s", exc)
            return False
        return True

    async def send_many(self, texts: list[str]) -> bool:
        """Send text frames in order, in one socket write when the connection has no
        compression (aiohttp writes each frame on its own: a system call each, most of a
        small message's cost); waits while the peer is slow to read. False when the peer
        is gone."""
        writer = self._direct_writer()
        if writer is None:
            for text in texts:
                if not await self.send(text):
                    return False
            return True
        transport = writer.transport
        # a close frame sent or received: no data frame may follow (RFC 6455 section 5.5.1)
        if self.ws.closed or writer._closing or transport is None or transport.is_closing():
            return False
        transport.write(b"".join([text_frame(text.encode()) for text in texts]))
        protocol = writer.protocol
        if protocol.writing_paused:
            try:
                await protocol._drain_helper()
            except ConnectionError as exc:
                log.debug("WebSocket send failed: %s", exc)
                return False
        return True

    def _direct_writer(self) -> WebSocketWriter | None:
        """aiohttp's frame writer when frames can be written past it (no compression to
        keep in step), else None. Its transport, protocol and closing flag are read as
        aiohttp's own ``send_frame`` reads them; a version without them gets None."""
        writer = getattr(self.ws, "_writer", None)
        if (
            not isinstance(writer, WebSocketWriter)
            or self.ws.compress
            or writer.compress
            or not hasattr(writer, "_closing")
        ):
            return None
        return writer

    def count_command(self, name: str) -> None:
        self.services.metrics.count_command(PROTOCOL, name)

    def count_error(self, name: str) -> None:
        self.services.metrics.errors.labels(PROTOCOL, name).inc()

    async def close(self, code: int, reason: str) -> None:
        """Close the socket with ``code`` and a reason a client can show."""
        if self.ws.closed:
            return
        with contextlib.suppress(ConnectionError, RuntimeError, asyncio.CancelledError):
            await self.ws.close(code=code, message=reason.encode()[:_MAX_REASON])

    def close_soon(self, code: int, reason: str) -> None:
        """Close from a synchronous callback (the core's sinks)."""
        task = asyncio.get_running_loop().create_task(self.close(code, reason))
        _background.add(task)
        task.add_done_callback(_background.discard)


def text_frame(payload: bytes) -> bytes:
    """One unmasked, final text frame (a server's frames are never masked: RFC 6455
    section 5.1), header as section 5.2 lays it out."""
    size = len(payload)
    if size < 126:
        return _LEN1(0x81, size) + payload
    if size < 65536:
        return _LEN2(0x81, 126, size) + payload
    return _LEN3(0x81, 127, size) + payload


_LEN1 = struct.Struct("!BB").pack
_LEN2 = struct.Struct("!BBH").pack
_LEN3 = struct.Struct("!BBQ").pack

#: Close tasks started from callbacks (a task needs a reference until it ends).
_background: set[asyncio.Task[None]] = set()


async def serve_frames(
    session: Session, on_text: Callable[[str], Awaitable[None]], on_binary: Callable[[], str]
) -> None:
    """Read frames until the peer closes: text frames go to ``on_text``, one at a time (a
    handler that waits holds back the reading of the next frame); a binary frame gets the
    error text ``on_binary()`` returns. While Redis is behind (the services'
    ``storage_backlog`` gate is closed) no frame is handled. A peer that vanished
    (aiohttp's answer to its PING, or a reply, finds the socket closing) ends the session
    like a close does."""
    storage = session.services.storage_backlog
    try:
        async for msg in session.ws:
            if not storage.is_open:
                # Redis is behind: hold this client back rather than queue its requests
                await storage.wait_open()
            if msg.type == web.WSMsgType.TEXT:
                await on_text(msg.data)
            elif msg.type == web.WSMsgType.BINARY:
                await session.send(on_binary())
            elif msg.type == web.WSMsgType.ERROR:
                log.debug("WebSocket error: %s", session.ws.exception())
                return
    except ConnectionResetError as exc:
        log.debug("WebSocket peer gone: %s", exc)
