"""PING/PONG in both directions; a dead client is detected and its consumers released."""

from __future__ import annotations

import socket
import time

import pulsar

from adapters.pulsar_binary import codec
from proto import PulsarApi_pb2 as pb
from tests.conftest import TIMEOUT

T = pb.BaseCommand.Type


def _frame(type_: int, **fields: object) -> bytes:
    cmd = pb.BaseCommand(type=type_)
    sub = getattr(cmd, pb.BaseCommand.DESCRIPTOR.fields_by_number[type_].name)
    sub.SetInParent()
    for name, value in fields.items():
        setattr(sub, name, value)
    return codec.encode_command(cmd)


def _read_until(sock: socket.socket, decoder: codec.FrameDecoder, type_: int) -> codec.Frame:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        frame = decoder.next_frame()
        if frame is not None:
            if frame.command.type == type_:
                return frame
            continue
        data = sock.recv(65536)
        if not data:
            raise AssertionError("connection closed")
        decoder.feed(data)
    raise AssertionError(f"no {pb.BaseCommand.Type.Name(type_)} frame")


def _silent_consumer(url_port: int, topic: str) -> tuple[socket.socket, codec.FrameDecoder]:
    """A raw client that subscribes, takes one message, then never speaks again."""
    sock = socket.create_connection(("127.0.0.1", url_port), timeout=TIMEOUT)
    decoder = codec.FrameDecoder()
    sock.sendall(_frame(T.CONNECT, client_version="raw", protocol_version=20))
    _read_until(sock, decoder, T.CONNECTED)
    sock.sendall(
        _frame(T.SUBSCRIBE, topic=topic, subscription="s", subType=1, consumer_id=1, request_id=1)
    )
    _read_until(sock, decoder, T.SUCCESS)
    sock.sendall(_frame(T.FLOW, consumer_id=1, messagePermits=10))
    return sock, decoder


def test_gateway_pings_and_answers_pings(gateway_factory):
    gw = gateway_factory(keepalive_seconds=0.2)
    sock = socket.create_connection(("127.0.0.1", gw.gateway.port), timeout=TIMEOUT)
    decoder = codec.FrameDecoder()
    sock.sendall(_frame(T.CONNECT, client_version="raw", protocol_version=20))
    _read_until(sock, decoder, T.CONNECTED)
    sock.sendall(_frame(T.PING))
    _read_until(sock, decoder, T.PONG)
    _read_until(sock, decoder, T.PING)  # the gateway probes a quiet client
    sock.sendall(_frame(T.PONG))
    time.sleep(0.5)
    sock.sendall(_frame(T.PING))  # still open: it answered
    _read_until(sock, decoder, T.PONG)
    sock.close()


def test_dead_client_is_detected_and_its_messages_redelivered(gateway_factory, client_factory):
    interval = 0.3
    gw = gateway_factory(keepalive_seconds=interval)
    topic = "persistent://public/default/keepalive-dead"
    client = client_factory(gw.url)
    producer = client.create_producer(topic)
    sock, decoder = _silent_consumer(gw.gateway.port, topic)
    producer.send(b"orphan")
    _read_until(sock, decoder, T.MESSAGE)  # held by the silent client, unacked

    started = time.monotonic()
    other = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    msg = other.receive(timeout_millis=int(TIMEOUT * 1000))
    waited = time.monotonic() - started
    assert (msg.data(), msg.redelivery_count()) == (b"orphan", 1)
    # PING after one quiet interval, give up after the next one
    assert waited < 4 * interval + 2
    # and the gateway did close the silent connection
    sock.settimeout(TIMEOUT)
    while True:
        data = sock.recv(65536)
        if not data:
            break
    sock.close()
