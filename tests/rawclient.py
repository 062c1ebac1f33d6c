"""A minimal Pulsar client on a plain blocking socket, for tests that must send what the
official client never would (bad frames, raw requests) or stop answering on purpose.

:class:`RawConnection`: handshake, send a command, and read frames (with the codec's
``FrameDecoder``) until one of a given type arrives or the gateway closes the connection.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

from pulsar_gateway import frame_codec
from pulsar_gateway.entry_codec import make_blob
from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.conftest import TIMEOUT, GatewayThread
from tests.frames import command

T = pb.BaseCommand.Type

#: How long "nothing more should arrive" waits.
QUIET = 0.3


def type_name(type_: int) -> str:
    return pb.BaseCommand.Type.Name(type_)


class ConnectionClosed(AssertionError):
    """The gateway closed the connection while a frame was expected."""


class RawConnection:
    """One Pulsar connection on a plain blocking socket."""

    def __init__(self, gateway: GatewayThread, timeout: float = TIMEOUT) -> None:
        self.timeout = timeout
        self.sock = socket.create_connection(("127.0.0.1", gateway.gateway.port), timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.decoder = frame_codec.FrameDecoder(1 << 30)
        #: Every frame received, in order.
        self.received: list[frame_codec.Frame] = []
        self._unread: list[frame_codec.Frame] = []
        self.eof = False
        self._request_ids = iter(range(1000, 1 << 62))

    # -- plumbing ------------------------------------------------------------------------

    def request_id(self) -> int:
        return next(self._request_ids)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, cmd: pb.BaseCommand) -> None:
        self.send_bytes(frame_codec.encode_command(cmd))

    def send_payload(self, cmd: pb.BaseCommand, blob: bytes) -> None:
        self.send_bytes(frame_codec.encode_payload_command(cmd, blob))

    def _read_some(self, deadline: float) -> bool:
        """Receive once; False on timeout. Sets ``eof`` when the peer closed."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(1 << 16)
        except TimeoutError:
            return False
        except (ConnectionResetError, BrokenPipeError):
            data = b""
        if not data:
            self.eof = True
            return True
        self.decoder.feed(data)
        while (f := self.decoder.next_frame()) is not None:
            self.received.append(f)
            self._unread.append(f)
        return True

    # -- reading -------------------------------------------------------------------------

    def expect(
        self,
        type_: int,
        predicate: Callable[[pb.BaseCommand], bool] = lambda c: True,
        timeout: float | None = None,
    ) -> pb.BaseCommand:
        """The next frame of ``type_`` matching ``predicate``; other frames are skipped."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            while self._unread:
                f = self._unread.pop(0)
                if f.command.type == type_ and predicate(f.command):
                    assert f.command.IsInitialized()
                    return f.command
            if self.eof:
                raise ConnectionClosed(
                    f"connection closed while waiting for {type_name(type_)}; received "
                    f"{[type_name(f.command.type) for f in self.received]}"
                )
            if not self._read_some(deadline):
                raise AssertionError(
                    f"no {type_name(type_)} within the timeout; received "
                    f"{[type_name(f.command.type) for f in self.received]}"
                )

    def drain(self, quiet: float = QUIET) -> list[pb.BaseCommand]:
        """Frames arriving until the connection is quiet for ``quiet`` seconds."""
        while not self.eof and self._read_some(time.monotonic() + quiet):
            pass
        frames = [f.command for f in self._unread]
        self._unread.clear()
        return frames

    def assert_closed(self, timeout: float | None = None) -> list[pb.BaseCommand]:
        """Wait until the gateway closes the connection; return the frames before that."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not self.eof:
            try:
                more = self._read_some(deadline)
            except frame_codec.CodecError:
                raise AssertionError("the gateway sent a malformed frame") from None
            if not more:
                raise AssertionError(
                    "the gateway did not close the connection; received "
                    f"{[type_name(f.command.type) for f in self.received]}"
                )
        frames = [f.command for f in self._unread]
        self._unread.clear()
        return frames

    # -- protocol steps ------------------------------------------------------------------

    def handshake(self, protocol_version: int = 20) -> pb.CommandConnected:
        self.send(
            command(
                T.CONNECT,
                client_version="raw-test",
                protocol_version=protocol_version,
                auth_method_name="none",
            )
        )
        return self.expect(T.CONNECTED).connected

    def assert_open(self) -> None:
        """The connection still works: a PING gets its PONG."""
        self.send(command(T.PING))
        self.expect(T.PONG)

    def create_producer(self, topic: str, producer_id: int = 1) -> str:
        rid = self.request_id()
        self.send(command(T.PRODUCER, topic=topic, producer_id=producer_id, request_id=rid))
        return self.expect(
            T.PRODUCER_SUCCESS,
            lambda c: c.producer_success.request_id == rid,
        ).producer_success.producer_name

    def send_message(
        self,
        producer_id: int,
        sequence_id: int,
        producer_name: str,
        payload: bytes,
        corrupt: str | None = None,
        publish_time: int | None = None,
    ) -> None:
        metadata = pb.MessageMetadata(
            producer_name=producer_name,
            sequence_id=sequence_id,
            publish_time=int(time.time() * 1000) if publish_time is None else publish_time,
        )
        blob = bytearray(make_blob(metadata, payload))
        if corrupt == "crc":
            blob[2] ^= 0xFF
        elif corrupt == "payload":
            blob[-1] ^= 0xFF
        self.send_payload(
            command(T.SEND, producer_id=producer_id, sequence_id=sequence_id), bytes(blob)
        )

    def request(self, type_: int, response_type: int, **fields: Any) -> pb.BaseCommand:
        """Send a command with a fresh request_id; return the response carrying that id."""
        rid = self.request_id()
        self.send(command(type_, request_id=rid, **fields))

        def matches(c: pb.BaseCommand) -> bool:
            sub = getattr(c, c.DESCRIPTOR.fields_by_number[c.type].name)
            return bool(sub.request_id == rid)

        return self.expect(response_type, matches)


def raw(gateway: GatewayThread) -> RawConnection:
    return RawConnection(gateway)
