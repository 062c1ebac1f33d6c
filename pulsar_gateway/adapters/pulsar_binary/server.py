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
import time
from collections import Counter, deque
from dataclasses import dataclass
from typing import cast

from pulsar_gateway.adapters.peer_certificate import certificate_role
from pulsar_gateway.adapters.pulsar_binary.commands import Command
from pulsar_gateway.adapters.pulsar_binary.connection import NO_REQUEST, ServerConnection
from pulsar_gateway.adapters.pulsar_binary.session import open_session
from pulsar_gateway.adapters.pulsar_binary.throttle import (
    ConcurrencyLimit,
    Throttle,
    ThrottleType,
)
from pulsar_gateway.core import Services
from pulsar_gateway.proto import PulsarApi_pb2 as pb

__all__ = ["BinaryServer", "ConnectionLimits", "PulsarProtocol"]

log = logging.getLogger(__name__)


class CloseLog:
    """Logs connections the gateway closed (malformed input, no CONNECT or PING answer in
    time, a refused credential) at INFO, at most one line per second with the count of the
    others since: a client that opens connections and sends garbage in a loop must cost
    neither a log line per connection nor the disk space."""

    INTERVAL = 1.0

    def __init__(self, logger: logging.Logger) -> None:
        self._log = logger
        self._next = 0.0
        self._suppressed = 0

    def closed(self, peer: str, reason: str) -> None:
        now = time.monotonic()
        if now < self._next:
            self._suppressed += 1
            return
        self._next = now + self.INTERVAL
        if self._suppressed:
            self._log.info(
                "closing connection %s: %s (and %d more closed in the last second)",
                peer,
                reason,
                self._suppressed,
            )
            self._suppressed = 0
        else:
            self._log.info("closing connection %s: %s", peer, reason)


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """How many connections the server accepts and how much it buffers for each.

    Attributes:
        max_connections, max_connections_per_ip: connections at once, in all and from one
            IP address (``brokerMaxConnections``, ``brokerMaxConnectionsPerIp``); 0 = none.
        write_high_water_mark, write_low_water_mark: unsent bytes at which a connection is
            not writable, and writable again (``pulsarChannelWriteBufferHigh/LowWaterMark``).
        pause_receiving_if_unwritable: stop reading a connection while it is not writable.
    """

    max_connections: int = 0
    max_connections_per_ip: int = 0
    write_high_water_mark: int = 64 * 1024
    write_low_water_mark: int = 32 * 1024
    pause_receiving_if_unwritable: bool = True


class PulsarProtocol(asyncio.Protocol):
    """One client connection."""

    def __init__(self, server: BinaryServer) -> None:
        self.server = server
        errors = server.services.metrics.errors
        self.throttle = Throttle(self._throttled, server.count_throttle)
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
        self.session = open_session(
            server.services,
            self.conn,
            self.wants_flush,
            service_url=server.service_url,
            service_url_tls=server.service_url_tls,
            throttle=self.throttle,
            max_pending=server.services.limits.max_pending_publishes,
            lookups=server.lookups,
        )
        self.transport: asyncio.Transport | None = None
        #: refused at accept (connection limits): nothing else happens on it
        self.refused = False
        #: the client's IP address (connection limits per address)
        self.host = ""
        #: the common name of the client's verified TLS certificate, None without one
        self.certificate_role: str | None = None
        self._flush_scheduled = False
        #: commands received while the connection is throttled, handled once it is not
        self._held: deque[Command] = deque()
        self._keepalive: asyncio.TimerHandle | None = None
        self._auth_refresh: asyncio.TimerHandle | None = None
        self.closed = asyncio.get_running_loop().create_future()

    # -- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.host = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        refusal = self.server.admit(self)
        if refusal is not None:
            # Pulsar's ServerCnx.channelActive: an ERROR answering no request, then close
            self.refused = True
            self.conn.send_error(NO_REQUEST, pb.NotAllowedError, refusal)
            self.conn.close(refusal)
            self.flush()
            return
        server = self.server
        self.transport.set_write_buffer_limits(
            server.write_high_water_mark, server.write_low_water_mark
        )
        self.certificate_role = certificate_role(transport.get_extra_info("peercert"))
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.session.client_address = f"{peer[0]}:{peer[1]}"
        server.open_connections.inc()
        server.opened_connections.inc()
        if not server.services.storage_backlog.is_open:
            self.throttle.mark(ThrottleType.STORAGE_BACKLOG)
        self._arm_keepalive()
        if server.services.authentication.enabled:
            self._arm_auth_refresh()

    def data_received(self, data: bytes) -> None:
        self.conn.receive_data(data)
        commands = self.conn.events_received()
        if self._held:  # earlier commands wait: these wait behind them
            self._held.extend(commands)
        else:
            reasons = self.throttle.reasons
            for i, command in enumerate(commands):
                if reasons:
                    # throttled by a command of this chunk: the rest wait, as frames past
                    # Pulsar's FlowControlHandler do while autoRead is off
                    self._held.extend(commands[i:])
                    break
                self.session.handle(command)
        self.flush()

    def _handle_held(self) -> None:
        """Handle the commands that waited, in order, until a reason throttles again."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        held, reasons = self._held, self.throttle.reasons
        while held and not reasons:
            self.session.handle(held.popleft())
        self.flush()

    def eof_received(self) -> bool | None:
        self.conn.receive_eof()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn.receive_eof()
        if self.refused:
            self.closed.set_result(None)
            return
        if self.conn.closed_by_gateway:  # malformed input, keep-alive, shutdown...
            self.server.close_log.closed(self.session.client_address, self.conn.close_reason)
        if self._keepalive is not None:
            self._keepalive.cancel()
        if self._auth_refresh is not None:
            self._auth_refresh.cancel()
        self.throttle.clear()
        if self.server.forget(self):
            self.server.open_connections.dec()
        session = self.session
        if not (session.producers or session.consumers or session.busy):
            # nothing to release (a client that never got further than its first bytes)
            session.closed = True
            self.closed.set_result(None)
            return
        task = asyncio.get_running_loop().create_task(session.close())
        task.add_done_callback(self._session_closed)

    # -- flow control ---------------------------------------------------------------------

    def _throttled(self, throttled: bool) -> None:
        """Stop reading the socket while a reason holds (:mod:`.throttle`), read again
        once none does."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if throttled:
            transport.pause_reading()
        else:
            transport.resume_reading()
            if self._held:  # not from inside the handler that released the throttle
                asyncio.get_running_loop().call_soon(self._handle_held)

    def pause_writing(self) -> None:
        # asyncio: the transport's buffer went over the high water mark
        self.session.set_writable(False)
        if self.server.pause_receiving_if_unwritable:
            self.throttle.mark(ThrottleType.OUTBOUND_BUFFER_FULL)

    def resume_writing(self) -> None:
        # ... and back under the low water mark
        self.throttle.unmark(ThrottleType.OUTBOUND_BUFFER_FULL)
        self.session.set_writable(True)

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
        # a connection the gateway does not read cannot be blamed for silence (Pulsar's
        # PulsarHandler checks autoRead before closing on an unanswered PING)
        self.conn.keepalive_tick(reading=not self.throttle.throttled)
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
        limits: ConnectionLimits | None = None,
        reuse_port: bool = False,
    ) -> None:
        """With ``ssl_context``, connections are also accepted with TLS on ``port_tls``
        (Pulsar's ``brokerServicePortTls``; clients' ``pulsar+ssl://``).
        ``auth_refresh_seconds``: how often a connection's credentials are checked for
        expiry (``authenticationRefreshCheckSeconds``). ``limits``: connections accepted at
        once, write buffer water marks. ``reuse_port``: share the ports with the other
        worker processes of this host (``SO_REUSEPORT``: the kernel spreads new
        connections over them)."""
        limits = limits or ConnectionLimits()
        self.max_connections = limits.max_connections
        self.max_connections_per_ip = limits.max_connections_per_ip
        self.write_high_water_mark = limits.write_high_water_mark
        self.write_low_water_mark = limits.write_low_water_mark
        self.pause_receiving_if_unwritable = limits.pause_receiving_if_unwritable
        self.lookups = ConcurrencyLimit(services.limits.max_concurrent_lookups)
        self._per_ip: Counter[str] = Counter()
        metrics = services.metrics
        self.open_connections = metrics.connections.labels("binary")
        self.opened_connections = metrics.connections_opened.labels("binary")
        self.close_log = CloseLog(log)
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
        self.reuse_port = reuse_port
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

    # -- admission and gateway-wide flow control -------------------------------------------

    def admit(self, protocol: PulsarProtocol) -> str | None:
        """Count a new connection from ``protocol.host``, or say why it is refused
        (``brokerMaxConnections``, ``brokerMaxConnectionsPerIp``: Pulsar's
        ``ConnectionController``, whose messages these are)."""
        refused = self.services.metrics.connections_refused
        host = protocol.host
        if self.max_connections and len(self.connections) >= self.max_connections:
            refused.labels("binary", "max_connections").inc()
            return "Reached the maximum number of connections"
        if (
            self.max_connections_per_ip
            and host
            and self._per_ip[host] >= self.max_connections_per_ip
        ):
            refused.labels("binary", "max_connections_per_ip").inc()
            return f"Reached the maximum number of connections on address {host}"
        self.connections.add(protocol)
        self._per_ip[host] += 1
        return None

    def forget(self, protocol: PulsarProtocol) -> bool:
        """A connection admitted by :meth:`admit` is gone; False if it was not counted."""
        if protocol not in self.connections:
            return False
        self.connections.discard(protocol)
        host = protocol.host
        self._per_ip[host] -= 1
        if self._per_ip[host] <= 0:
            del self._per_ip[host]
        return True

    def count_throttle(self, reason: ThrottleType, added: bool) -> None:
        gauge = self.services.metrics.throttled_connections.labels("binary", reason.value)
        if added:
            gauge.inc()
        else:
            gauge.dec()

    def _publish_buffer_changed(self, is_open: bool) -> None:
        """The gateway's publish buffer filled (stop reading every connection with
        producers) or drained to half (read them again)."""
        for protocol in list(self.connections):
            if is_open:
                protocol.throttle.unmark(ThrottleType.PUBLISH_BUFFER)
            elif protocol.session.producers:
                protocol.throttle.mark(ThrottleType.PUBLISH_BUFFER)

    def _storage_backlog_changed(self, is_open: bool) -> None:
        """Redis fell behind (stop reading every connection) or caught up."""
        for protocol in list(self.connections):
            if is_open:
                protocol.throttle.unmark(ThrottleType.STORAGE_BACKLOG)
            else:
                protocol.throttle.mark(ThrottleType.STORAGE_BACKLOG)

    async def _listen(self, port: int, ssl_context: ssl.SSLContext | None) -> int:
        """Accept connections on ``port`` (with TLS when ``ssl_context``); the port bound
        (port 0 asks for a free one). A TLS handshake may take a keep-alive interval, as
        Pulsar gives a connection that long to complete its CONNECT."""
        server = await asyncio.get_running_loop().create_server(
            lambda: PulsarProtocol(self),
            self.host,
            port,
            ssl=ssl_context,
            reuse_address=True,
            reuse_port=self.reuse_port or None,
            ssl_handshake_timeout=self.keepalive_seconds if ssl_context is not None else None,
        )
        self._servers.append(server)
        return int(server.sockets[0].getsockname()[1]) if port == 0 else port

    async def start(self) -> None:
        self.services.publish_buffer.gate.subscribe(self._publish_buffer_changed)
        self.services.storage_backlog.subscribe(self._storage_backlog_changed)
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
        self.services.publish_buffer.gate.unsubscribe(self._publish_buffer_changed)
        self.services.storage_backlog.unsubscribe(self._storage_backlog_changed)
        for server in self._servers:
            server.close()
        connections = list(self.connections)
        for protocol in connections:
            protocol.close("gateway shutting down")
        if connections:
            await asyncio.wait([p.closed for p in connections], timeout=10)
        for server in self._servers:
            await server.wait_closed()
