"""PING/PONG in both directions; a dead client is detected and its consumers released."""

from __future__ import annotations

import time

import pulsar

from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.conftest import TIMEOUT
from tests.frames import command
from tests.rawclient import RawConnection

T = pb.BaseCommand.Type


def test_gateway_pings_and_answers_pings(gateway_factory):
    gw = gateway_factory(keepalive_seconds=0.2)
    with RawConnection(gw) as conn:
        conn.handshake()
        conn.assert_open()  # our PING gets a PONG
        conn.expect(T.PING)  # the gateway probes a quiet client
        conn.send(command(T.PONG))
        time.sleep(0.5)
        conn.assert_open()  # still open: it answered


def test_dead_client_is_detected_and_its_messages_redelivered(gateway_factory, client_factory):
    interval = 0.3
    gw = gateway_factory(keepalive_seconds=interval)
    topic = "persistent://public/default/keepalive-dead"
    client = client_factory(gw.url)
    producer = client.create_producer(topic)
    # A raw client that subscribes, takes one message, then never speaks again.
    silent = RawConnection(gw)
    silent.handshake()
    silent.request(T.SUBSCRIBE, T.SUCCESS, topic=topic, subscription="s", subType=1, consumer_id=1)
    silent.send(command(T.FLOW, consumer_id=1, messagePermits=10))
    producer.send(b"orphan")
    silent.expect(T.MESSAGE)  # held by the silent client, unacked

    started = time.monotonic()
    other = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    msg = other.receive(timeout_millis=int(TIMEOUT * 1000))
    waited = time.monotonic() - started
    assert (msg.data(), msg.redelivery_count()) == (b"orphan", 1)
    # PING after one quiet interval, give up after the next one
    assert waited < 4 * interval + 2
    silent.assert_closed()  # and the gateway did close the silent connection
    silent.close()


def test_a_connection_that_never_sends_connect_is_closed_after_an_interval(gateway_factory):
    """Pulsar closes a connection whose handshake is not complete at the first keep-alive
    tick (PulsarHandler.handleKeepAliveTimeout): a client that connects and says nothing
    holds nothing for long."""
    gw = gateway_factory(keepalive_seconds=0.3)
    with RawConnection(gw) as conn:
        started = time.monotonic()
        assert conn.assert_closed(timeout=TIMEOUT) == []
        assert time.monotonic() - started < 0.3 * 3
