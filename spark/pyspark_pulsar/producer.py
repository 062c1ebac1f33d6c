"""A small blocking Pulsar producer for Spark executors.

Why not the official ``pulsar-client``: a Spark task needs very little of it (one connection,
one or a few producers, batches it has already built) but needs two things it does not give.
First, exact control of sequence ids and batch boundaries: the writer numbers rows itself so
that a retried task attempt, producing under the same producer name, is deduplicated by the
gateway (Pulsar's ``MessageDeduplication``: a SEND whose sequence id is not above the producer's
stored high-water mark is answered with a receipt for message id ``(-1, -1)`` and not stored).
Second, a plain error when the gateway refuses something: the C++ client retries a refused
CONNECT until its operation timeout and then reports ``Timeout`` (docs/binary_protocol.md
"Handshake and authentication"), where a task should fail at once with "AuthenticationError". So
this module speaks the binary protocol directly, on one blocking socket, with the gateway's own
sans-I/O codecs (the frame codec, ``pulsar_gateway.frame_codec``, and the stored-entry
format, ``pulsar_gateway.entry_codec``) doing all framing, checksums and batch layout.

What is spoken (the client behaviours it mirrors are in docs/binary_protocol.md, "What the
official client expects of a server"):

* CONNECT / CONNECTED, protocol version 20, token auth in ``auth_method_name`` and
  ``auth_data``. An ERROR before CONNECTED is the gateway's refusal.
* PARTITIONED_METADATA, answered by its own RESPONSE type (failures too); GET_SCHEMA
  likewise, to name the topic's schema when a producer is refused with IncompatibleSchema.
* PRODUCER / PRODUCER_SUCCESS with ``user_provided_producer_name``; ProducerBusy is
  retried with backoff because a dead previous attempt may hold the name until the
  gateway notices. SEND / SEND_RECEIPT / SEND_ERROR, pipelined: receipts come back in send
  order per producer, so the unacknowledged SENDs are a FIFO queue. CLOSE_PRODUCER
  answered by SUCCESS.
* PING is answered with PONG whenever frames are read. There is no keep-alive thread:
  the gateway counts every received frame as liveness, so a producer that sends at least
  once per keep-alive interval (30 s by default) stays connected; one idle for two
  intervals is dropped, and its next call raises ConnectionError.
* every ``send_batch`` is one batch entry (``num_messages_in_batch`` set, even for
  one row, as the official client does with batching on), optionally compressed as a
  whole with the gateway's codecs (``entry_codec.compress``).

Deduplication works per entry: the gateway compares a batch's *first* sequence id with the
stored high-water mark and drops or stores the whole entry. A batch that straddles the mark
(ids 3..7 after 4 was stored) is dropped entirely, so callers resuming after
``last_sequence_id`` must skip the rows at or below it before batching the rest.

Errors: :class:`PulsarClientError` when the gateway refused a request (ERROR, SEND_ERROR,
a failed PARTITIONED_METADATA_RESPONSE); :class:`ConnectionError` when the connection could
not be made or was lost; :class:`TimeoutError` when an answer did not come within
``operation_timeout``. After a lost connection or a timeout the connection is unusable:
every later call raises ConnectionError, and the task should fail and be retried.
"""

from __future__ import annotations

import select
import socket
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Final, NoReturn
from urllib.parse import urlsplit

from pulsar_gateway import frame_codec
from pulsar_gateway.core import InvalidTopicName, parse_topic_name
from pulsar_gateway.entry_codec import compress, encode_batch, make_blob, proto_text
from pulsar_gateway.proto import PulsarApi_pb2 as pb

__all__ = ["BatchProducer", "OutgoingRow", "PulsarClientError", "PulsarConnection"]

T = pb.BaseCommand.Type

#: CONNECT.client_version: names this client in the gateway's logs and stats.
CLIENT_VERSION: Final = "pyspark-pulsar"
#: What the official client 3.13 sends; the gateway answers min(ours, its own), as Pulsar's
#: ``ServerCnx.handleConnect`` does.
PROTOCOL_VERSION: Final = 20
DEFAULT_PORT: Final = 6650
#: ledgerId and entryId of a duplicate's receipt: -1 as uint64 (``PersistentTopic.publishMessage``).
_MINUS_ONE: Final = (1 << 64) - 1
#: ProducerBusy retry delays: the C++ client's reconnect backoff (``lib/Backoff.cc``), capped lower
#: because the whole wait is bounded by ``retry_busy_for`` anyway.
_BUSY_FIRST_DELAY: Final = 0.1
_BUSY_MAX_DELAY: Final = 2.0
_RECV_SIZE: Final = 64 * 1024


class PulsarClientError(Exception):
    """The gateway refused a request.

    Attributes:
        server_error: the ``pb.ServerError`` name, e.g. "ProducerBusy", "TopicNotFound",
            "AuthenticationError", "IncompatibleSchema".
        message: the gateway's explanation.
    """

    def __init__(self, server_error: str, message: str) -> None:
        super().__init__(f"{server_error}: {message}")
        self.server_error = server_error
        self.message = message

    @classmethod
    def _from_code(cls, code: int, message: str) -> PulsarClientError:
        try:
            name = pb.ServerError.Name(code)
        except ValueError:  # a newer broker's code this proto does not know
            name = f"ServerError({code})"
        return cls(name, message)


@dataclass(frozen=True)
class OutgoingRow:
    """One message to publish.

    Attributes:
        payload: the message bytes.
        key: the partition key (Key_Shared routing, compaction), or None.
        properties: message properties.
        event_time: event time in ms since the epoch; 0 means none.
    """

    payload: bytes
    key: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    event_time: int = 0


def _full_topic(topic: str) -> str:
    """Expand a short name as the official client does (``lib/TopicName.cc``), so the wire and
    ``BatchProducer.topic`` carry the canonical name and a bad name fails before any
    request."""
    try:
        return str(parse_topic_name(topic))
    except InvalidTopicName as exc:
        raise PulsarClientError("InvalidTopicName", str(exc)) from None


def _addresses(service_url: str) -> list[tuple[str, int]]:
    """``pulsar://host[:port][,host[:port]...]`` → [(host, port)]; the official client's
    multi-host form is accepted so one URL can name a gateway fleet."""
    parts = urlsplit(service_url)
    if parts.scheme == "pulsar+ssl":
        raise ValueError(f"{service_url}: TLS (pulsar+ssl://) is not supported yet; use pulsar://")
    if parts.scheme != "pulsar" or not parts.netloc:
        raise ValueError(f"{service_url}: expected a pulsar://host:port service URL")
    addresses = []
    for host_port in parts.netloc.split(","):
        one = urlsplit(f"//{host_port}")
        try:
            host, port = one.hostname, one.port
        except ValueError:  # a port that is not a number in range
            host = None
        if not host:
            raise ValueError(f"{service_url}: bad host:port {host_port!r}")
        addresses.append((host, port or DEFAULT_PORT))
    return addresses


class PulsarConnection:
    """One connection to a gateway, made at construction.

    Usable as a context manager; :meth:`close` closes its producers and the socket.
    Not thread-safe: one task (thread) uses one connection.

    Args:
        service_url: ``pulsar://host:port`` (several ``host:port`` separated by commas are
            tried in order).
        auth_method: ``"token"`` for token authentication, or None.
        auth_data: the credentials (the raw token for ``"token"``).
        operation_timeout: seconds to wait for the TCP connection and for each answer.

    Raises:
        ValueError: the URL is not ``pulsar://``, or auth_data without auth_method.
        ConnectionError: no gateway could be reached (the message names the URL).
        PulsarClientError: the gateway refused the CONNECT (e.g. AuthenticationError).
        TimeoutError: the gateway did not answer CONNECT in time.
    """

    def __init__(
        self,
        service_url: str,
        *,
        auth_method: str | None = None,
        auth_data: bytes | None = None,
        operation_timeout: float = 30.0,
    ) -> None:
        if auth_data is not None and auth_method is None:
            raise ValueError("auth_data needs an auth_method (e.g. 'token')")
        addresses = _addresses(service_url)
        self.service_url = service_url
        self.operation_timeout = operation_timeout
        self._decoder = frame_codec.FrameDecoder()
        self._producers: dict[int, BatchProducer] = {}
        self._responses: dict[int, pb.BaseCommand] = {}
        self._next_request_id = 0
        self._next_producer_id = 0
        #: Why the connection is unusable, once it is.
        self._broken: BaseException | None = None
        self._sock = self._open_socket(addresses)
        try:
            connected = self._handshake(auth_method, auth_data)
        except BaseException:
            self._sock.close()
            raise
        #: The gateway's limit on metadata + payload of one entry (docs/binary_protocol.md
        #: "Framing").
        self.max_message_size: int = (
            connected.max_message_size
            if connected.HasField("max_message_size")
            else frame_codec.DEFAULT_MAX_MESSAGE_SIZE
        )

    # -- connection setup ------------------------------------------------------------------

    def _open_socket(self, addresses: list[tuple[str, int]]) -> socket.socket:
        errors = []
        for host, port in addresses:
            try:
                sock = socket.create_connection((host, port), timeout=self.operation_timeout)
            except OSError as exc:
                errors.append(f"{host}:{port}: {exc}")
                continue
            # Small command frames must not wait for Nagle (the official client does this too).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        raise ConnectionError(f"cannot connect to {self.service_url}: {'; '.join(errors)}")

    def _handshake(self, auth_method: str | None, auth_data: bytes | None) -> pb.CommandConnected:
        cmd = pb.BaseCommand(type=T.CONNECT)
        cmd.connect.client_version = CLIENT_VERSION
        cmd.connect.protocol_version = PROTOCOL_VERSION
        cmd.connect.auth_method_name = auth_method or "none"
        if auth_data is not None:
            cmd.connect.auth_data = auth_data
        self._write(frame_codec.encode_command(cmd))
        deadline = time.monotonic() + self.operation_timeout
        while True:
            reply = self._read_frame(deadline, "CONNECTED").command
            if reply.type == T.CONNECTED:
                return reply.connected
            if reply.type == T.ERROR:
                # The gateway refuses a CONNECT with ERROR (request id -1) and closes.
                raise PulsarClientError._from_code(
                    reply.error.error, f"{proto_text(reply.error.message)} ({self.service_url})"
                )
            # Nothing else is expected before CONNECTED: ignore it, the deadline still holds.

    # -- requests --------------------------------------------------------------------------

    def partitions(self, topic: str) -> int:
        """The partition count of ``topic``; 0 when it is not partitioned (or is new).

        Raises:
            PulsarClientError: the gateway failed the lookup (e.g. AuthorizationError).
        """
        request_id = self._request_id()
        cmd = pb.BaseCommand(type=T.PARTITIONED_METADATA)
        cmd.partitionMetadata.topic = _full_topic(topic)
        cmd.partitionMetadata.request_id = request_id
        response = self._request(cmd, request_id, "PARTITIONED_METADATA_RESPONSE")
        answer = response.partitionMetadataResponse
        # Failures come in the response itself, not as ERROR (docs/binary_protocol.md
        # "Requests and responses").
        if answer.response != pb.CommandPartitionedTopicMetadataResponse.Success:
            raise PulsarClientError._from_code(answer.error, proto_text(answer.message))
        return int(answer.partitions)

    def schema(self, topic: str) -> pb.Schema | None:
        """The topic's latest schema (GET_SCHEMA); None when it has none.

        Used to explain a refused producer (IncompatibleSchema) in the caller's terms.

        Raises:
            PulsarClientError: the gateway failed the lookup for another reason.
        """
        request_id = self._request_id()
        cmd = pb.BaseCommand(type=T.GET_SCHEMA)
        cmd.getSchema.topic = _full_topic(topic)
        cmd.getSchema.request_id = request_id
        answer = self._request(cmd, request_id, "GET_SCHEMA_RESPONSE").getSchemaResponse
        # Failures come in the response itself; "no schema" is TopicNotFound
        # (docs/binary_protocol.md "Requests and responses").
        if answer.HasField("error_code"):
            if answer.error_code == pb.TopicNotFound:
                return None
            raise PulsarClientError._from_code(answer.error_code, answer.error_message)
        return answer.schema if answer.HasField("schema") else None

    def create_producer(
        self,
        topic: str,
        producer_name: str,
        *,
        schema: pb.Schema | None = None,
        compression: int = pb.NONE,
        retry_busy_for: float = 30.0,
        max_pending: int = 64,
    ) -> BatchProducer:
        """Open a Shared producer with a caller-chosen name.

        Args:
            topic: the topic (a partition's own name for one partition of a partitioned
                topic).
            producer_name: the deduplication identity; a retried task must reuse it.
            schema: announced in PRODUCER; None for bytes.
            compression: ``pb.CompressionType`` applied to each batch.
            retry_busy_for: seconds to keep retrying while the name is in use (ProducerBusy):
                a previous attempt's connection may hold it until the gateway closes it.
            max_pending: unacknowledged SENDs allowed before send_batch waits for receipts.

        Raises:
            PulsarClientError: refused (ProducerBusy after retry_busy_for, TopicNotFound,
                IncompatibleSchema, AuthorizationError, ...).
        """
        full_topic = _full_topic(topic)
        producer_id = self._next_producer_id
        self._next_producer_id += 1
        deadline = time.monotonic() + retry_busy_for
        delay = _BUSY_FIRST_DELAY
        while True:
            request_id = self._request_id()
            cmd = pb.BaseCommand(type=T.PRODUCER)
            cmd.producer.topic = full_topic
            cmd.producer.producer_id = producer_id
            cmd.producer.request_id = request_id
            cmd.producer.producer_name = producer_name
            cmd.producer.user_provided_producer_name = True
            if schema is not None:
                cmd.producer.schema.CopyFrom(schema)
            try:
                success = self._request(cmd, request_id, "PRODUCER_SUCCESS").producer_success
            except PulsarClientError as exc:
                remaining = deadline - time.monotonic()
                if exc.server_error != "ProducerBusy" or remaining <= 0:
                    raise
                time.sleep(min(delay, remaining))
                delay = min(delay * 2, _BUSY_MAX_DELAY)
                continue
            producer = BatchProducer(
                self,
                producer_id,
                full_topic,
                proto_text(success.producer_name),
                last_sequence_id=success.last_sequence_id,
                schema_version=(
                    success.schema_version if success.HasField("schema_version") else None
                ),
                compression=compression,
                max_pending=max_pending,
            )
            self._producers[producer_id] = producer
            return producer

    def close(self) -> None:
        """Close every open producer (CLOSE_PRODUCER), then the socket.

        Does not wait for receipts of SENDs still in flight (call ``flush()`` first to
        learn their fate). Closing the producers explicitly, rather than only dropping the
        socket, frees their names on the gateway before this returns, so the next attempt
        of a task does not meet ProducerBusy. Errors while closing are not raised: the
        socket is closed regardless, and the gateway releases what it held.
        """
        for producer in list(self._producers.values()):
            if self._broken is not None:
                break
            try:
                producer._close_on_gateway()
            except (OSError, PulsarClientError):
                pass  # a lost connection ends the loop above; a refusal changes nothing
        self._producers.clear()
        if self._broken is None:
            self._broken = ConnectionError(f"connection to {self.service_url} is closed")
        self._sock.close()

    def __enter__(self) -> PulsarConnection:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- plumbing shared with BatchProducer --------------------------------------------------

    def _request_id(self) -> int:
        # One counter for every request type: ids are echoed per response type anyway
        # (docs/binary_protocol.md "Requests and responses"), and unique ids keep the response
        # table unambiguous.
        self._next_request_id += 1
        return self._next_request_id

    def _request(self, cmd: pb.BaseCommand, request_id: int, what: str) -> pb.BaseCommand:
        """Send a request and return its answer; an ERROR answer raises."""
        self._write(frame_codec.encode_command(cmd))
        self._wait(lambda: request_id in self._responses, what)
        response = self._responses.pop(request_id)
        if response.type == T.ERROR:
            # proto_text, as for every string field read here: upb hands one that is not
            # UTF-8 over as bytes, and the error's message is text
            raise PulsarClientError._from_code(
                response.error.error, proto_text(response.error.message)
            )
        return response

    def _wait(self, done: Callable[[], bool], what: str) -> None:
        """Read and dispatch frames until ``done()``; ``what`` names the awaited answer."""
        deadline = time.monotonic() + self.operation_timeout
        while not done():
            self._dispatch(self._read_frame(deadline, what))

    def _poll(self) -> None:
        """Dispatch whatever has already arrived, without blocking: answers PINGs and
        retires receipts between sends."""
        self._check_usable()
        while (frame := self._next_frame()) is not None or self._readable():
            if frame is None:
                self._receive()
            else:
                self._dispatch(frame)

    def _readable(self) -> bool:
        try:
            return bool(select.select([self._sock], [], [], 0)[0])
        except OSError as exc:
            self._fail(ConnectionError(f"connection to {self.service_url} failed: {exc}"))

    def _dispatch(self, frame: frame_codec.Frame) -> None:
        cmd = frame.command
        kind = cmd.type
        if kind == T.SEND_RECEIPT:
            receipt = cmd.send_receipt
            if (producer := self._producers.get(receipt.producer_id)) is not None:
                producer._on_receipt(receipt)
        elif kind == T.SEND_ERROR:
            error = cmd.send_error
            if (producer := self._producers.get(error.producer_id)) is not None:
                producer._on_send_error(error)
        elif kind == T.PING:
            self._write(frame_codec.encode_command(pb.BaseCommand(type=T.PONG, pong={})))
        elif kind == T.PRODUCER_SUCCESS:
            self._responses[cmd.producer_success.request_id] = cmd
        elif kind == T.SUCCESS:
            self._responses[cmd.success.request_id] = cmd
        elif kind == T.ERROR:
            self._responses[cmd.error.request_id] = cmd
        elif kind == T.PARTITIONED_METADATA_RESPONSE:
            self._responses[cmd.partitionMetadataResponse.request_id] = cmd
        elif kind == T.GET_SCHEMA_RESPONSE:
            self._responses[cmd.getSchemaResponse.request_id] = cmd
        elif kind == T.CLOSE_PRODUCER:
            # The gateway dropped the producer (fencing, topic deleted or unloaded). The
            # official client would re-create it and resend; here the task fails and Spark
            # retries it, and deduplication absorbs whatever had been stored.
            producer = self._producers.pop(cmd.close_producer.producer_id, None)
            if producer is not None:
                producer._closed_by_gateway()
        # Anything else (PONG, consumer traffic) concerns no producer and is ignored.

    def _read_frame(self, deadline: float, what: str) -> frame_codec.Frame:
        self._check_usable()
        while (frame := self._next_frame()) is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._fail(
                    TimeoutError(
                        f"no {what} from {self.service_url} within {self.operation_timeout:g} s"
                    )
                )
            self._sock.settimeout(remaining)
            self._receive()
        return frame

    def _next_frame(self) -> frame_codec.Frame | None:
        try:
            return self._decoder.next_frame()
        except frame_codec.CodecError as exc:
            self._fail(ConnectionError(f"bad frame from {self.service_url}: {exc}"))

    def _receive(self) -> None:
        """One recv into the decoder; a timeout just returns (the caller's deadline
        decides), a closed or failed socket breaks the connection."""
        try:
            data = self._sock.recv(_RECV_SIZE)
        except TimeoutError:
            return
        except OSError as exc:
            self._fail(ConnectionError(f"connection to {self.service_url} failed: {exc}"))
        if not data:
            self._fail(ConnectionError(f"{self.service_url} closed the connection"))
        self._decoder.feed(data)

    def _write(self, data: bytes) -> None:
        self._check_usable()
        # Reads leave whatever was left of their deadline on the socket; a write gets a
        # whole operation_timeout to drain into a slow gateway.
        self._sock.settimeout(self.operation_timeout)
        try:
            self._sock.sendall(data)
        except OSError as exc:
            self._fail(ConnectionError(f"connection to {self.service_url} failed: {exc}"))

    def _check_usable(self) -> None:
        if self._broken is not None:
            raise ConnectionError(
                f"connection to {self.service_url} is unusable: {self._broken}"
            ) from self._broken

    def _fail(self, error: BaseException) -> NoReturn:
        """Mark the connection unusable and raise ``error``: after a lost socket, a codec
        error or a missed answer the byte stream can no longer be trusted."""
        self._broken = error
        self._sock.close()
        raise error


@dataclass
class _InFlight:
    """One SEND awaiting its receipt."""

    sequence_id: int
    num_messages: int


class BatchProducer:
    """A producer on a :class:`PulsarConnection`; made by ``create_producer``.

    Attributes:
        topic: the full topic name.
        producer_name: the name the gateway confirmed (the one asked for).
        last_sequence_id: the highest sequence id the gateway had stored for this name when
            the producer was created (-1 when none): resume after it.
        published: messages the gateway stored.
        duplicates: messages the gateway reported as duplicates (already stored).
    """

    def __init__(
        self,
        connection: PulsarConnection,
        producer_id: int,
        topic: str,
        producer_name: str,
        *,
        last_sequence_id: int,
        schema_version: bytes | None,
        compression: int,
        max_pending: int = 64,
    ) -> None:
        if max_pending < 1:
            raise ValueError(f"max_pending must be at least 1, got {max_pending}")
        self.topic = topic
        self.producer_name = producer_name
        self.last_sequence_id = last_sequence_id
        self.published = 0
        self.duplicates = 0
        self._connection = connection
        self._producer_id = producer_id
        self._schema_version = schema_version
        self._compression = compression
        self._max_pending = max_pending
        self._in_flight: deque[_InFlight] = deque()
        self._error: PulsarClientError | ConnectionError | None = None
        self._closed = False

    def send_batch(self, rows: Sequence[OutgoingRow], first_sequence_id: int) -> None:
        """Publish ``rows`` as one batch entry with sequence ids ``first_sequence_id + i``.

        Returns once the SEND is written; its receipt is collected later (here, when
        ``max_pending`` SENDs are unacknowledged, or by :meth:`flush`). An empty ``rows``
        sends nothing.

        Raises:
            ValueError: the entry exceeds the gateway's max_message_size.
            PulsarClientError: an earlier SEND of this producer was refused.
            ConnectionError: the connection or the producer is gone.
        """
        self._check_open()
        connection = self._connection
        # Retire receipts and answer PINGs that arrived meanwhile, so a slow producer
        # still looks alive to the gateway and errors surface early.
        connection._poll()
        self._check_open()
        if not rows:
            return
        while len(self._in_flight) >= self._max_pending and self._error is None:
            self._wait_for_receipt()
        self._check_open()
        count = len(rows)
        highest = first_sequence_id + count - 1
        batch = encode_batch(
            (_single_metadata(row, first_sequence_id + index), row.payload)
            for index, row in enumerate(rows)
        )
        metadata = pb.MessageMetadata(
            producer_name=self.producer_name,
            sequence_id=first_sequence_id,
            publish_time=int(time.time() * 1000),
            num_messages_in_batch=count,
            highest_sequence_id=highest,
        )
        # As the official client: the batch carries its first message's key at entry level
        # (docs/binary_protocol.md "Batches, compression and chunks"), which is what Key_Shared
        # dispatch and compaction read.
        if rows[0].key is not None:
            metadata.partition_key = rows[0].key
        if self._schema_version is not None:
            metadata.schema_version = self._schema_version
        if self._compression != pb.NONE:
            metadata.compression = self._compression  # type: ignore[assignment]
            metadata.uncompressed_size = len(batch)
            batch = compress(self._compression, batch)
        blob = make_blob(metadata, batch)
        # The blob's first 10 bytes are magic, CRC and metadataSize; the limit is on the rest.
        if len(blob) - 10 > connection.max_message_size:
            raise ValueError(
                f"a batch of {count} rows is {len(blob) - 10} bytes, over the gateway's "
                f"max_message_size of {connection.max_message_size}; send smaller batches"
            )
        cmd = pb.BaseCommand(type=T.SEND)
        cmd.send.producer_id = self._producer_id
        cmd.send.sequence_id = first_sequence_id
        cmd.send.num_messages = count
        cmd.send.highest_sequence_id = highest
        connection._write(frame_codec.encode_payload_command(cmd, blob))
        self._in_flight.append(_InFlight(first_sequence_id, count))

    def flush(self) -> None:
        """Wait until every SEND is acknowledged.

        Raises:
            PulsarClientError: the gateway refused a SEND (SEND_ERROR).
            ConnectionError: the connection or the producer was lost first.
            TimeoutError: a receipt did not come within operation_timeout.
        """
        self._check_open()
        # The timeout applies per receipt, not to the whole backlog: a gateway that keeps
        # acknowledging is making progress however long the queue.
        while self._in_flight and self._error is None:
            self._wait_for_receipt()
        self._check_open()

    def close(self) -> None:
        """Close the producer on the gateway (CLOSE_PRODUCER), freeing its name.

        Unacknowledged SENDs are not waited for; call :meth:`flush` first. Idempotent.
        """
        if self._closed:
            return
        try:
            self._close_on_gateway()
        finally:
            # Only now: receipts that arrive while waiting for SUCCESS still count.
            self._connection._producers.pop(self._producer_id, None)

    def _wait_for_receipt(self) -> None:
        """Wait until the oldest pending SEND is answered (or the producer fails)."""
        pending = len(self._in_flight)
        self._connection._wait(
            lambda: len(self._in_flight) < pending or self._error is not None, "SEND_RECEIPT"
        )

    # -- called by the connection --------------------------------------------------------

    def _close_on_gateway(self) -> None:
        self._closed = True
        connection = self._connection
        request_id = connection._request_id()
        cmd = pb.BaseCommand(type=T.CLOSE_PRODUCER)
        cmd.close_producer.producer_id = self._producer_id
        cmd.close_producer.request_id = request_id
        connection._request(cmd, request_id, "SUCCESS to CLOSE_PRODUCER")

    def _on_receipt(self, receipt: pb.CommandSendReceipt) -> None:
        if not self._in_flight or self._in_flight[0].sequence_id != receipt.sequence_id:
            # Receipts come in send order (``ProducerImpl::ackReceived``); anything else means
            # the two sides disagree on what was sent, and nothing after it can be trusted.
            self._connection._fail(
                ConnectionError(
                    f"producer {self.producer_name}: receipt for sequence id "
                    f"{receipt.sequence_id} does not match the oldest pending SEND"
                )
            )
        sent = self._in_flight.popleft()
        message_id = receipt.message_id
        if message_id.ledgerId == _MINUS_ONE and message_id.entryId == _MINUS_ONE:
            self.duplicates += sent.num_messages
        else:
            self.published += sent.num_messages

    def _on_send_error(self, error: pb.CommandSendError) -> None:
        # A refused SEND: the first error is kept and raised by the next call. The SEND is
        # retired so flush() does not wait for a receipt that will never come.
        if self._in_flight and self._in_flight[0].sequence_id == error.sequence_id:
            self._in_flight.popleft()
        if self._error is None:
            self._error = PulsarClientError._from_code(
                error.error,
                f"{proto_text(error.message)} (producer {self.producer_name}, sequence id "
                f"{error.sequence_id}, topic {self.topic})",
            )

    def _closed_by_gateway(self) -> None:
        self._closed = True
        if self._error is None:
            self._error = ConnectionError(
                f"the gateway closed producer {self.producer_name} on {self.topic}"
                f" with {len(self._in_flight)} SENDs unacknowledged"
            )

    def _check_open(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise ConnectionError(f"producer {self.producer_name} on {self.topic} is closed")


def _single_metadata(row: OutgoingRow, sequence_id: int) -> pb.SingleMessageMetadata:
    """A row's metadata inside the batch (``SingleMessageMetadata``); payload_size is set by
    encode_batch."""
    metadata = pb.SingleMessageMetadata(sequence_id=sequence_id)
    if row.key is not None:
        metadata.partition_key = row.key
    for name, value in row.properties.items():
        metadata.properties.add(key=name, value=value)
    if row.event_time:
        metadata.event_time = row.event_time
    return metadata
