"""The asyncio layer of the binary protocol: sockets, timers and nothing else.

Each TCP connection gets a :class:`PulsarProtocol` which pumps bytes into a sans-I/O
:class:`~pulsar_gateway.adapters.pulsar_binary.connection.ServerConnection`, hands decoded commands
to its :class:`~pulsar_gateway.adapters.pulsar_binary.session.Session`, and writes what the
connection produced once per loop tick (many receipts and messages become one ``write``). A
keep-alive timer drives the connection's PING/PONG verdict.

Shutdown follows websockets' ``Server.close`` order: stop accepting, close every
connection (releasing its consumers' unacked messages for the rest of the fleet), wait for
the sockets and their handler tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from typing import cast

from pulsar_gateway.adapters.peer_certificate import certificate_role
from pulsar_gateway.adapters.pulsar_binary.connection import ServerConnection
from pulsar_gateway.adapters.pulsar_binary.session import Session
from pulsar_gateway.core import Services
from pulsar_gateway.proto import PulsarApi_pb2 as pb

__all__ = ["BinaryServer", "PulsarProtocol"]

log = logging.getLogger(__name__)


class PulsarProtocol(asyncio.Protocol):
    """One client connection."""

    def __init__(self, server: BinaryServer) -> None:
        self.server = server
        errors = server.services.metrics.errors
        auth = server.services.authentication
        self.conn = ServerConnection(
            server_version=server.server_version,
            max_message_size=server.max_message_size,
            on_error=lambda code: errors.labels("binary", pb.ServerError.Name(code)).inc(),
            authenticate=(
                (
                    lambda method, data: auth.authenticate_command(
                        method, data, self.certificate_role
                    )
                )
                if auth.enabled
                else None
            ),
            auth_refresh_seconds=server.auth_refresh_seconds,
        )
        self.session = Session(
            server.services,
            self.conn,
            server.service_url,
            self.wants_flush,
            server.service_url_tls,
        )
        self.transport: asyncio.Transport | None = None
        #: the common name of the client's verified TLS certificate, None without one
        self.certificate_role: str | None = None
        self._flush_scheduled = False
        self._keepalive: asyncio.TimerHandle | None = None
        self._auth_refresh: asyncio.TimerHandle | None = None
        self.closed = asyncio.get_running_loop().create_future()

    # -- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.certificate_role = certificate_role(transport.get_extra_info("peercert"))
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.connections.add(self)
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.session.client_address = f"{peer[0]}:{peer[1]}"
        metrics = self.server.services.metrics
        metrics.connections.labels("binary").inc()
        metrics.connections_opened.labels("binary").inc()
        self._arm_keepalive()
        if self.server.services.authentication.enabled:
            self._arm_auth_refresh()

    def data_received(self, data: bytes) -> None:
        self.conn.receive_data(data)
        for command in self.conn.events_received():
            self.session.handle(command)
        self.flush()

    def eof_received(self) -> bool | None:
        self.conn.receive_eof()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn.receive_eof()
        if self._keepalive is not None:
            self._keepalive.cancel()
        if self._auth_refresh is not None:
            self._auth_refresh.cancel()
        if self in self.server.connections:
            self.server.connections.discard(self)
            self.server.services.metrics.connections.labels("binary").dec()
        task = asyncio.get_running_loop().create_task(self.session.close())
        task.add_done_callback(self._session_closed)

    def _session_closed(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("closing session failed", exc_info=task.exception())
        if not self.closed.done():
            self.closed.set_result(None)

    # -- output ---------------------------------------------------------------------------

    def wants_flush(self) -> None:
        """Write what the connection produced, at the end of this loop tick."""
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self._flush_scheduled = False
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        data = self.conn.data_to_send()
        if data:
            transport.write(data)
        if self.conn.close_expected():
            transport.close()

    # -- keep-alive -----------------------------------------------------------------------

    def _arm_keepalive(self) -> None:
        loop = asyncio.get_running_loop()
        self._keepalive = loop.call_later(self.server.keepalive_seconds, self._on_keepalive)

    def _on_keepalive(self) -> None:
        self.conn.keepalive_tick()
        self.flush()
        if not self.conn.close_expected():
            self._arm_keepalive()

    def _arm_auth_refresh(self) -> None:
        loop = asyncio.get_running_loop()
        self._auth_refresh = loop.call_later(
            self.server.auth_refresh_seconds, self._on_auth_refresh
        )

    def _on_auth_refresh(self) -> None:
        self.conn.auth_refresh_tick()
        self.flush()
        if not self.conn.close_expected():
            self._arm_auth_refresh()

    def close(self, reason: str) -> None:
        self.conn.close(reason)
        self.flush()


class BinaryServer:
    """Listens for Pulsar binary clients on one port."""

    def __init__(
        self,
        services: Services,
        *,
        host: str,
        port: int,
        advertised_host: str,
        max_message_size: int,
        keepalive_seconds: float = 30.0,
        server_version: str = "pulsar-redis-gateway",
        ssl_context: ssl.SSLContext | None = None,
        port_tls: int = 0,
        auth_refresh_seconds: float = 60.0,
    ) -> None:
        """With ``ssl_context``, connections are also accepted with TLS on ``port_tls``
        (Pulsar's ``brokerServicePortTls``; clients' ``pulsar+ssl://``).
        ``auth_refresh_seconds``: how often a connection's credentials are checked for
        expiry (``authenticationRefreshCheckSeconds``)."""
        self.auth_refresh_seconds = auth_refresh_seconds
        self.services = services
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self.port_tls: int | None = port_tls if ssl_context is not None else None
        self.advertised_host = advertised_host
        self.max_message_size = max_message_size
        self.keepalive_seconds = keepalive_seconds
        self.server_version = server_version
        self.connections: set[PulsarProtocol] = set()
        self._servers: list[asyncio.Server] = []

    @property
    def service_url(self) -> str:
        """The URL LOOKUP answers with (``pulsar://advertised-host:port``)."""
        return f"pulsar://{self.advertised_host}:{self.port}"

    @property
    def service_url_tls(self) -> str | None:
        """The TLS listener's URL (``pulsar+ssl://advertised-host:port``), None without."""
        if self.port_tls is None:
            return None
        return f"pulsar+ssl://{self.advertised_host}:{self.port_tls}"

    async def _listen(self, port: int, ssl_context: ssl.SSLContext | None) -> int:
        """Accept connections on ``port`` (with TLS when ``ssl_context``); the port bound
        (port 0 asks for a free one)."""
        server = await asyncio.get_running_loop().create_server(
            lambda: PulsarProtocol(self), self.host, port, ssl=ssl_context, reuse_address=True
        )
        self._servers.append(server)
        return int(server.sockets[0].getsockname()[1]) if port == 0 else port

    async def start(self) -> None:
        self.port = await self._listen(self.port, None)
        log.info(
            "Pulsar binary protocol on %s:%d (advertised %s)",
            self.host,
            self.port,
            self.service_url,
        )
        if self.ssl_context is not None and self.port_tls is not None:
            self.port_tls = await self._listen(self.port_tls, self.ssl_context)
            log.info(
                "Pulsar binary protocol with TLS on %s:%d (advertised %s)",
                self.host,
                self.port_tls,
                self.service_url_tls,
            )

    async def close(self) -> None:
        """Stop accepting, close every connection, wait for their sessions to finish."""
        for server in self._servers:
            server.close()
        connections = list(self.connections)
        for protocol in connections:
            protocol.close("gateway shutting down")
        if connections:
            await asyncio.wait([p.closed for p in connections], timeout=10)
        for server in self._servers:
            await server.wait_closed()
