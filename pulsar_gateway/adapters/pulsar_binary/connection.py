"""The server side of one Pulsar binary connection, without I/O (our ``ServerCnx``).

Theory of operation. The asyncio layer feeds received bytes to
:meth:`ServerConnection.receive_data`, then takes the decoded commands from
:meth:`events_received` and the bytes to write from :meth:`data_to_send`, and closes the
socket once :meth:`close_expected` says so. Everything about the protocol that needs no
broker lives here and is testable as data: the handshake, PING/PONG, the keep-alive
verdict, which commands each state accepts, and the encoding of every outbound frame
(methods named after the broker's ``PulsarCommandSender``).

Rules of this file:

* ``ACCEPTS`` is the whole state machine: a command outside its state's set is refused
  with an ERROR (when it carries a request id) and the connection is closed, state
  unchanged until then. A command before CONNECT is such a command.
* Malformed input (codec errors, oversized frames) closes the connection: a Pulsar stream
  cannot be resynchronised after a bad frame.
* Every frame received counts as liveness: the keep-alive sends PING when the peer has been
  quiet for a whole interval, and gives up if the next interval brings nothing either.
* With authentication on, CONNECT is answered only after its credentials are accepted by
  the ``authenticate`` hook; a refusal is ERROR(AuthenticationError, request id -1) and
  close, as Pulsar's ``ServerCnx.authenticationFailed``.
* Credentials that expire are refreshed as Pulsar's
  ``ServerCnx.refreshAuthenticationCredentials`` does, checked every
  ``authenticationRefreshCheckSeconds`` (:meth:`auth_refresh_tick`): when a token will
  have expired within two checks and the client said ``supports_auth_refresh``,
  AUTH_CHALLENGE asks for its current credentials (at least an interval before the expiry,
  however late a check runs, so a client with a refreshing token supplier never lapses);
  its AUTH_RESPONSE is authenticated like a CONNECT and must name the same role. A refused
  response, another role, or no response before the expiry closes the connection, as does
  an expired token of a client that cannot refresh (it reconnects with its current token).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Iterable, Sequence

from pulsar_gateway import frame_codec
from pulsar_gateway.adapters.pulsar_binary.commands import (
    AuthResponse,
    Command,
    Connect,
    InvalidCommand,
    Ping,
    Pong,
    Unsupported,
    from_frame,
)
from pulsar_gateway.core import AuthenticatedRole, AuthenticationError
from pulsar_gateway.proto import PulsarApi_pb2 as pb

__all__ = ["ACCEPTS", "NO_REQUEST", "PROTOCOL_VERSION", "ConnectionState", "ServerConnection"]

#: Highest protocol version this gateway speaks (``ProtocolVersion.v20``).
PROTOCOL_VERSION = 20

T = pb.BaseCommand.Type
#: A ``ServerError`` code as protobuf types it.
ServerError = pb.ServerError

#: The request id of an error that answers no request (Java's -1 as a uint64).
NO_REQUEST = (1 << 64) - 1

#: What AUTH_CHALLENGE carries when it asks for refreshed credentials (Pulsar's
#: ``AuthData.REFRESH_AUTH_DATA``).
REFRESH_AUTH_DATA = b"PulsarAuthRefresh"

#: Verifies credentials (auth method name, auth data) and returns the role, or raises
#: ``AuthenticationError``.
Authenticate = Callable[[str, bytes], AuthenticatedRole]


class ConnectionState(enum.Enum):
    """Pulsar's ``ServerCnx.State`` Start and Connected, plus Closed.

    ``ServerCnx.State`` also has Failed (``authenticationFailed`` sets it, then closes the
    channel) and Connecting (an authentication in progress). Here a refused CONNECT, like
    every other failure, goes straight to CLOSED, which accepts nothing, and a CONNECT is
    authenticated within the call that receives it, so neither has a member of its own.
    """

    START = "start"
    CONNECTED = "connected"
    CLOSED = "closed"

    # Members are singletons compared by identity: hash them by identity too, in C
    # (Enum's own __hash__ is Python code, and ACCEPTS is looked up once per command).
    __hash__ = object.__hash__


_ALL_TYPES = frozenset(pb.BaseCommand.Type.values())
#: Which command types each state accepts.
ACCEPTS: dict[ConnectionState, frozenset[int]] = {
    ConnectionState.START: frozenset({T.CONNECT}),
    ConnectionState.CONNECTED: _ALL_TYPES - {T.CONNECT},
    ConnectionState.CLOSED: frozenset(),
}


class ServerConnection:
    """Sans-I/O Pulsar server connection."""

    def __init__(
        self,
        *,
        server_version: str = "pulsar-redis-gateway",
        max_message_size: int = frame_codec.DEFAULT_MAX_MESSAGE_SIZE,
        on_error: Callable[[int], None] | None = None,
        authenticate: Authenticate | None = None,
        clock: Callable[[], float] = time.time,
        auth_refresh_seconds: float = 60.0,
    ) -> None:
        """``on_error`` is told the ``ServerError`` of every error frame sent (metrics).
        ``authenticate`` (None = authentication off) validates a CONNECT's or an
        AUTH_RESPONSE's credentials and returns the role, or raises `AuthenticationError`;
        ``clock`` (seconds since the epoch) tells when a token has expired;
        ``auth_refresh_seconds`` is the interval :meth:`auth_refresh_tick` is called at."""
        self.state = ConnectionState.START
        self.server_version = server_version
        self.max_message_size = max_message_size
        self.protocol_version = 0
        self.client_version = ""
        self._decoder = frame_codec.FrameDecoder(max_message_size + frame_codec.FRAME_PADDING)
        self._events: list[Command] = []
        self._out: list[bytes] = []
        self._close_expected = False
        self.close_reason = ""
        #: the gateway closed the connection (malformed input, keep-alive, shutdown...)
        self.closed_by_gateway = False
        self._heard_from_peer = False
        self._ping_outstanding = False
        self._on_error = on_error
        self._authenticate = authenticate
        self._clock = clock
        #: The role CONNECT authenticated as (None while authentication is off).
        self.authenticated: AuthenticatedRole | None = None
        self._auth_method = ""
        self._supports_auth_refresh = False
        self._auth_refresh_seconds = auth_refresh_seconds
        #: an AUTH_CHALLENGE is waiting for its AUTH_RESPONSE
        self.auth_challenge_pending = False

    # -- input -------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """Feed bytes received from the client."""
        if self.state is ConnectionState.CLOSED:
            return
        self._decoder.feed(data)
        while not self._close_expected:
            try:
                frame = self._decoder.next_frame()
            except frame_codec.CodecError as exc:
                self._fail(f"malformed input: {exc}")
                return
            if frame is None:
                return
            self._heard_from_peer = True
            self._ping_outstanding = False
            try:
                command = from_frame(frame)
            except InvalidCommand as invalid:
                self._fail(f"malformed command: {invalid}")
                return
            self._handle(frame.type, command)

    def receive_eof(self) -> None:
        """The client closed its side."""
        self.state = ConnectionState.CLOSED
        self._close_expected = True
        self.close_reason = self.close_reason or "closed by client"

    def _handle(self, type_: int, command: Command) -> None:
        if type_ not in ACCEPTS[self.state]:
            request_id = getattr(command, "request_id", None)
            name = pb.BaseCommand.Type.Name(type_)
            if request_id is not None:
                self.send_error(
                    request_id,
                    pb.NotAllowedError,
                    f"{name} not allowed in state {self.state.value}",
                )
            self._fail(f"{name} received in state {self.state.value}")
            return
        if isinstance(command, Connect):
            if self._authenticate is not None:
                try:
                    self.authenticated = self._authenticate(
                        command.auth_method_name, command.auth_data
                    )
                except AuthenticationError as exc:
                    # ServerCnx.authenticationFailed's words since Pulsar 3.0 (2.x's
                    # handleConnect said "Unable to authenticate"); clients go by the code
                    self.send_error(NO_REQUEST, pb.AuthenticationError, "Failed to authenticate")
                    self._fail(f"authentication failed: {exc}")
                    return
                self._auth_method = command.auth_method_name
                self._supports_auth_refresh = command.supports_auth_refresh
            self.client_version = command.client_version
            # Java answers min(client, server) (``ServerCnx.handleConnect``).
            self.protocol_version = min(command.protocol_version, PROTOCOL_VERSION)
            self.state = ConnectionState.CONNECTED
            self.send_connected()
        elif isinstance(command, Ping):
            self.send_pong()
            return
        elif isinstance(command, Pong):
            return
        elif isinstance(command, AuthResponse):
            self._auth_response(command)
            return
        self._events.append(command)

    def _auth_response(self, command: AuthResponse) -> None:
        """Refreshed credentials (``ServerCnx.handleAuthResponse`` once connected)."""
        if self._authenticate is None or self.authenticated is None:
            return  # authentication is off: nothing was asked
        try:
            refreshed = self._authenticate(command.auth_method_name, command.auth_data)
        except AuthenticationError as exc:
            self.send_error(NO_REQUEST, pb.AuthenticationError, "Failed to authenticate")
            self._fail(f"refreshed credentials refused: {exc}")
            return
        if refreshed.role != self.authenticated.role:
            self.send_error(NO_REQUEST, pb.AuthenticationError, "Failed to authenticate")
            self._fail(
                f"refreshed credentials name role {refreshed.role!r}, "
                f"not {self.authenticated.role!r}"
            )
            return
        self.authenticated = refreshed
        self.auth_challenge_pending = False

    def _fail(self, reason: str) -> None:
        # logged by the I/O layer when the socket closes (rate-limited there: a client that
        # sends garbage in a loop must not cost a log line per connection)
        self.closed_by_gateway = True
        self.state = ConnectionState.CLOSED
        self._close_expected = True
        self.close_reason = reason

    # -- output ------------------------------------------------------------------------

    def events_received(self) -> list[Command]:
        """Commands decoded since the last call, for the broker side to handle."""
        events, self._events = self._events, []
        return events

    def data_to_send(self) -> bytes:
        """Bytes to write to the socket since the last call."""
        if not self._out:
            return b""
        out = b"".join(self._out)
        self._out.clear()
        return out

    def close_expected(self) -> bool:
        """Whether the socket should be closed once pending data is written."""
        return self._close_expected

    def close(self, reason: str) -> None:
        """Close on the gateway's initiative (shutdown, keep-alive failure)."""
        if self.state is not ConnectionState.CLOSED:
            self._fail(reason)

    # -- keep-alive --------------------------------------------------------------------

    def keepalive_tick(self, reading: bool = True) -> None:
        """Called every keep-alive interval (Pulsar ``keepAliveIntervalSeconds``, 30 s).

        A PING left unanswered for a whole interval means the client is gone: the
        connection closes and the broker side releases its consumers. While the gateway
        does not read the connection (``reading`` False: throttled), an unanswered PING
        proves nothing and the connection stays (Pulsar's ``PulsarHandler`` checks
        ``autoRead`` likewise). A connection that has not completed CONNECT within an
        interval is closed whatever happens (``isHandshakeCompleted``).
        """
        if self.state is not ConnectionState.CONNECTED:
            if self.state is ConnectionState.START:
                self._fail("no CONNECT within the keep-alive interval")
            return
        if self._ping_outstanding and reading:
            self._fail("keep-alive: no answer to PING")
            return
        if not self._heard_from_peer:
            self._ping_outstanding = True
            self.send_ping()
        self._heard_from_peer = False

    def auth_refresh_tick(self) -> None:
        """Called every ``auth_refresh_seconds`` (Pulsar ``authenticationRefreshCheckSeconds``,
        60 s) while authentication is on: ask for fresh credentials before they expire,
        close a connection whose credentials expired."""
        authenticated = self.authenticated
        if (
            self.state is not ConnectionState.CONNECTED
            or authenticated is None
            or authenticated.expires_at is None
        ):
            return
        now = self._clock()
        if authenticated.expired(now):
            if self.auth_challenge_pending:
                self._fail(f"no refreshed credentials of role {authenticated.role!r} in time")
            else:
                self._fail(f"the token of role {authenticated.role!r} expired")
            return
        if self.auth_challenge_pending or not self._supports_auth_refresh:
            return
        # Two intervals: a check that runs late still leaves the client one to answer in.
        if authenticated.expires_at - now <= 2 * self._auth_refresh_seconds:
            self.send_auth_challenge()
            self.auth_challenge_pending = True

    # -- outbound frames (names after PulsarCommandSender) ------------------------------

    def send_auth_challenge(self) -> None:
        cmd = pb.BaseCommand(type=T.AUTH_CHALLENGE)
        r = cmd.authChallenge
        r.server_version = self.server_version
        r.protocol_version = self.protocol_version
        r.challenge.auth_method_name = self._auth_method
        r.challenge.auth_data = REFRESH_AUTH_DATA
        self._command(cmd)

    def _command(self, cmd: pb.BaseCommand) -> None:
        self._out.append(frame_codec.encode_command(cmd))

    def _error_sent(self, error: ServerError) -> None:
        if self._on_error is not None:
            self._on_error(error)

    def send_connected(self) -> None:
        cmd = pb.BaseCommand(type=T.CONNECTED)
        cmd.connected.server_version = self.server_version
        cmd.connected.protocol_version = self.protocol_version
        cmd.connected.max_message_size = self.max_message_size
        self._command(cmd)

    def send_ping(self) -> None:
        cmd = pb.BaseCommand(type=T.PING)
        cmd.ping.SetInParent()
        self._command(cmd)

    def send_pong(self) -> None:
        cmd = pb.BaseCommand(type=T.PONG)
        cmd.pong.SetInParent()
        self._command(cmd)

    def send_success(self, request_id: int) -> None:
        cmd = pb.BaseCommand(type=T.SUCCESS)
        cmd.success.request_id = request_id
        self._command(cmd)

    def send_error(self, request_id: int, error: ServerError, message: str) -> None:
        cmd = pb.BaseCommand(type=T.ERROR)
        cmd.error.request_id = request_id
        cmd.error.error = error
        self._error_sent(error)
        cmd.error.message = message
        self._command(cmd)

    def send_partition_metadata_response(self, request_id: int, partitions: int) -> None:
        cmd = pb.BaseCommand(type=T.PARTITIONED_METADATA_RESPONSE)
        r = cmd.partitionMetadataResponse
        r.request_id = request_id
        r.partitions = partitions
        # `response` must be present even though Success is 0 (docs/binary_protocol.md
        # "Requests and responses").
        r.response = pb.CommandPartitionedTopicMetadataResponse.Success
        self._command(cmd)

    def send_partition_metadata_error(
        self, request_id: int, error: ServerError, message: str
    ) -> None:
        cmd = pb.BaseCommand(type=T.PARTITIONED_METADATA_RESPONSE)
        r = cmd.partitionMetadataResponse
        r.request_id = request_id
        r.response = pb.CommandPartitionedTopicMetadataResponse.Failed
        r.error = error
        self._error_sent(error)
        r.message = message
        self._command(cmd)

    def send_lookup_response(
        self, request_id: int, service_url: str, service_url_tls: str | None = None
    ) -> None:
        """Answer LOOKUP with Connect to this gateway (the client stays on one socket when
        the URL it uses equals its own service URL: ``lib/ConnectionPool.cc``). A ``pulsar+ssl://``
        client connects to ``brokerServiceUrlTls``: the TLS listener's URL when there is
        one, else the plain one (a TLS-terminating load balancer in front)."""
        cmd = pb.BaseCommand(type=T.LOOKUP_RESPONSE)
        r = cmd.lookupTopicResponse
        r.request_id = request_id
        r.response = pb.CommandLookupTopicResponse.Connect
        r.brokerServiceUrl = service_url
        r.brokerServiceUrlTls = service_url_tls or service_url
        r.authoritative = True
        r.proxy_through_service_url = False
        self._command(cmd)

    def send_lookup_error(self, request_id: int, error: ServerError, message: str) -> None:
        cmd = pb.BaseCommand(type=T.LOOKUP_RESPONSE)
        r = cmd.lookupTopicResponse
        r.request_id = request_id
        r.response = pb.CommandLookupTopicResponse.Failed
        r.error = error
        self._error_sent(error)
        r.message = message
        self._command(cmd)

    def send_producer_success(
        self,
        request_id: int,
        producer_name: str,
        last_sequence_id: int = -1,
        *,
        schema_version: bytes | None = None,
        topic_epoch: int | None = None,
        producer_ready: bool = True,
    ) -> None:
        """``producer_ready=False`` tells a WaitForExclusive producer it is queued; a second
        PRODUCER_SUCCESS with the same request id and ``producer_ready=True`` follows when it
        gets the topic (PIP-68; docs/binary_protocol.md "Sending")."""
        cmd = pb.BaseCommand(type=T.PRODUCER_SUCCESS)
        r = cmd.producer_success
        r.request_id = request_id
        r.producer_name = producer_name
        r.last_sequence_id = last_sequence_id
        if schema_version is not None:
            r.schema_version = schema_version
        if topic_epoch is not None:
            r.topic_epoch = topic_epoch
        r.producer_ready = producer_ready
        self._command(cmd)

    def send_send_receipt(
        self, producer_id: int, sequence_id: int, ledger_id: int, entry_id: int
    ) -> None:
        self._out += frame_codec.send_receipt_pieces(producer_id, sequence_id, ledger_id, entry_id)

    def send_send_error(
        self, producer_id: int, sequence_id: int, error: ServerError, message: str
    ) -> None:
        cmd = pb.BaseCommand(type=T.SEND_ERROR)
        r = cmd.send_error
        r.producer_id = producer_id
        r.sequence_id = sequence_id
        r.error = error
        self._error_sent(error)
        r.message = message
        self._command(cmd)

    def send_messages(
        self, consumer_id: int, partition: int, entries: Iterable[frame_codec.DeliveredEntry]
    ) -> None:
        """A MESSAGE frame per stored entry of one consumer (:func:`frame_codec.encode_messages`;
        its pieces are joined with everything else :meth:`data_to_send` returns)."""
        self._out += frame_codec.encode_messages(consumer_id, partition, entries)

    def send_ack_response(
        self, consumer_id: int, request_id: int, error: ServerError | None = None, message: str = ""
    ) -> None:
        cmd = pb.BaseCommand(type=T.ACK_RESPONSE)
        r = cmd.ackResponse
        r.consumer_id = consumer_id
        r.request_id = request_id
        if error is not None:
            r.error = error
            self._error_sent(error)
            r.message = message
        self._command(cmd)

    def send_close_producer(self, producer_id: int) -> None:
        cmd = pb.BaseCommand(type=T.CLOSE_PRODUCER)
        cmd.close_producer.producer_id = producer_id
        cmd.close_producer.request_id = 0  # required on the wire, ignored by the client
        self._command(cmd)

    def send_active_consumer_change(self, consumer_id: int, is_active: bool) -> None:
        cmd = pb.BaseCommand(type=T.ACTIVE_CONSUMER_CHANGE)
        cmd.active_consumer_change.consumer_id = consumer_id
        cmd.active_consumer_change.is_active = is_active
        self._command(cmd)

    def send_close_consumer(self, consumer_id: int) -> None:
        cmd = pb.BaseCommand(type=T.CLOSE_CONSUMER)
        cmd.close_consumer.consumer_id = consumer_id
        cmd.close_consumer.request_id = 0
        self._command(cmd)

    @property
    def takes_end_of_topic(self) -> bool:
        """Whether the client handles REACHED_END_OF_TOPIC. The C++ client, and the Python,
        Node.js and C# clients built on it (``Pulsar-CPP-v...``), close the connection on
        it (``ClientConnection::handleIncomingCommand`` has no case for it), so they are not
        sent it: Pulsar's broker sends it to every client of protocol v9 or later, and such
        a client reconnects each time it reaches the end."""
        return not self.client_version.startswith("Pulsar-CPP")

    def send_reached_end_of_topic(self, consumer_id: int) -> None:
        cmd = pb.BaseCommand(type=T.REACHED_END_OF_TOPIC)
        cmd.reachedEndOfTopic.consumer_id = consumer_id
        self._command(cmd)

    def send_last_message_id_response(
        self,
        request_id: int,
        last: tuple[int, int, int, int],
        mark_delete: tuple[int, int] | None,
    ) -> None:
        """``last`` is (ledgerId, entryId, partition, batchIndex); -1 is sent as 2**64-1
        for ledger/entry, as the client expects for an empty topic (the C++ client's
        ``ConsumerImpl::hasMoreMessages``)."""
        cmd = pb.BaseCommand(type=T.GET_LAST_MESSAGE_ID_RESPONSE)
        r = cmd.getLastMessageIdResponse
        r.request_id = request_id
        ledger, entry, partition, batch_index = last
        r.last_message_id.ledgerId = ledger % (1 << 64)
        r.last_message_id.entryId = entry % (1 << 64)
        if partition >= 0:
            r.last_message_id.partition = partition
        if batch_index >= 0:
            r.last_message_id.batch_index = batch_index
        if mark_delete is not None:
            r.consumer_mark_delete_position.ledgerId = mark_delete[0] % (1 << 64)
            r.consumer_mark_delete_position.entryId = mark_delete[1] % (1 << 64)
        self._command(cmd)

    def send_get_topics_of_namespace_response(
        self, request_id: int, topics: Sequence[str], topics_hash: str | None = None
    ) -> None:
        cmd = pb.BaseCommand(type=T.GET_TOPICS_OF_NAMESPACE_RESPONSE)
        r = cmd.getTopicsOfNamespaceResponse
        r.request_id = request_id
        r.topics.extend(topics)
        if topics_hash is not None:
            r.topics_hash = topics_hash
        self._command(cmd)

    def send_get_schema_error(self, request_id: int, error: ServerError, message: str) -> None:
        """GET_SCHEMA failures go in its own response, never an ERROR frame: the client does not
        match ERROR to GET_SCHEMA (``ClientConnection::handleError``)."""
        cmd = pb.BaseCommand(type=T.GET_SCHEMA_RESPONSE)
        r = cmd.getSchemaResponse
        r.request_id = request_id
        r.error_code = error
        self._error_sent(error)
        r.error_message = message
        self._command(cmd)

    def send_get_schema_response(
        self,
        request_id: int,
        schema_type: int,
        name: str,
        data: bytes,
        properties: Sequence[tuple[str, str]],
        schema_version: bytes,
    ) -> None:
        cmd = pb.BaseCommand(type=T.GET_SCHEMA_RESPONSE)
        r = cmd.getSchemaResponse
        r.request_id = request_id
        r.schema.name = name
        r.schema.schema_data = data
        r.schema.type = schema_type  # type: ignore[assignment]  # an int from SchemaData
        for key, value in properties:
            r.schema.properties.add(key=key, value=value)
        r.schema_version = schema_version
        self._command(cmd)

    def send_get_or_create_schema_response(self, request_id: int, schema_version: bytes) -> None:
        cmd = pb.BaseCommand(type=T.GET_OR_CREATE_SCHEMA_RESPONSE)
        r = cmd.getOrCreateSchemaResponse
        r.request_id = request_id
        r.schema_version = schema_version
        self._command(cmd)

    def send_get_or_create_schema_error(
        self, request_id: int, error: ServerError, message: str
    ) -> None:
        """Failures go in the response itself, like GET_SCHEMA's."""
        cmd = pb.BaseCommand(type=T.GET_OR_CREATE_SCHEMA_RESPONSE)
        r = cmd.getOrCreateSchemaResponse
        r.request_id = request_id
        r.error_code = error
        self._error_sent(error)
        r.error_message = message
        self._command(cmd)

    def refuse_unsupported(self, command: Unsupported) -> None:
        """Answer a command this gateway does not serve, keeping the connection."""
        if command.request_id is not None:
            self.send_error(
                command.request_id,
                pb.NotAllowedError,
                f"{command.type_name} is not supported by this gateway",
            )
