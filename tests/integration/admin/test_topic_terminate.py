"""Terminating a topic (``PersistentTopics.terminate``): it takes no more messages on any
gateway (producers are closed and refused with TopicTerminatedError), its consumers get
every message and then REACHED_END_OF_TOPIC, and the admin call answers the last message
id."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulsar
import pytest

from pulsar_gateway.proto import PulsarApi_pb2 as pb
from tests.adminhttp import admin
from tests.conftest import TIMEOUT, GatewayThread
from tests.frames import command
from tests.rawclient import raw

# The cluster pass of ./dev test runs this file on a Redis Cluster too: admin: unload and
# terminate announced to every gateway (a stream and channel outside any topic's slot), the
# terminated mark beside the ledger
pytestmark = pytest.mark.cluster

T = pb.BaseCommand.Type
TOPICS = "/admin/v2/persistent/public/default"


def _subscribe_raw(gateway: GatewayThread, topic: str, sub: str) -> Any:
    conn = raw(gateway)
    conn.handshake()
    conn.request(
        T.SUBSCRIBE,
        T.SUCCESS,
        topic=topic,
        subscription=sub,
        subType=pb.CommandSubscribe.Exclusive,
        consumer_id=1,
        initialPosition=pb.CommandSubscribe.Earliest,
    )
    conn.send(command(T.FLOW, consumer_id=1, messagePermits=100))
    return conn


def test_terminate_stops_producers_on_every_gateway_and_answers_the_last_id(
    gateway_factory: Callable[..., GatewayThread], client_factory: Callable[..., Any]
) -> None:
    topic = "persistent://public/default/terminated"
    first, second = gateway_factory(), gateway_factory()
    producer = client_factory(first.url).create_producer(
        topic, batching_enabled=False, send_timeout_millis=5000
    )
    consumer = client_factory(second.url).subscribe(topic, "s")
    ids = [producer.send(f"m{i}".encode()) for i in range(3)]
    status, last = admin("POST", f"{second.http_url}{TOPICS}/terminated/terminate")
    assert status == 200, last
    assert (last["ledgerId"], last["entryId"]) == (ids[-1].ledger_id(), ids[-1].entry_id())
    with pytest.raises(pulsar.TopicTerminated):
        producer.send(b"too late")
    with pytest.raises(pulsar.TopicTerminated):
        client_factory(second.url).create_producer(topic)
    got = [consumer.receive(int(TIMEOUT * 1000)).data() for _ in range(3)]
    assert got == [b"m0", b"m1", b"m2"]
    # terminating again answers the same last id
    assert admin("POST", f"{first.http_url}{TOPICS}/terminated/terminate") == (200, last)


def test_consumers_are_told_when_they_have_read_it_all(gateway: GatewayThread, client: Any) -> None:
    topic = "persistent://public/default/end-of-topic"
    producer = client.create_producer(topic, batching_enabled=False)
    with _subscribe_raw(gateway, topic, "before") as before:
        for i in range(2):
            producer.send(f"e{i}".encode())
        for _ in range(2):
            before.expect(T.MESSAGE)
        assert admin("POST", f"{gateway.http_url}{TOPICS}/end-of-topic/terminate")[0] == 200
        before.expect(T.REACHED_END_OF_TOPIC, lambda c: c.reachedEndOfTopic.consumer_id == 1)
    # a consumer that subscribes afterwards gets everything first, then the end
    with _subscribe_raw(gateway, topic, "after") as after:
        after.expect(T.REACHED_END_OF_TOPIC)
        kinds = [f.command.type for f in after.received]
        delivered = [k for k in kinds if k in (T.MESSAGE, T.REACHED_END_OF_TOPIC)]
        assert delivered == [T.MESSAGE, T.MESSAGE, T.REACHED_END_OF_TOPIC]


def test_terminate_answers(gateway: GatewayThread) -> None:
    base = gateway.http_url + TOPICS
    assert admin("PUT", f"{base}/empty")[0] == 204
    status, last = admin("POST", f"{base}/empty/terminate")
    assert status == 200 and (last["ledgerId"], last["entryId"]) == (-1, -1)
    assert admin("POST", f"{base}/nothing/terminate")[0] == 404
    assert admin("PUT", f"{base}/parted/partitions", 2)[0] == 204
    assert admin("POST", f"{base}/parted/terminate")[0] == 405
    status, lasts = admin("POST", f"{base}/parted/terminate/partitions")
    assert status == 200 and sorted(lasts) == ["0", "1"]
    assert lasts["1"]["partitionIndex"] == 1
    assert admin("POST", f"{base}/empty/terminate/partitions")[0] == 404
    np = f"{gateway.http_url}/admin/v2/non-persistent/public/default/np/terminate"
    assert admin("POST", np)[0] == 405
    # REST produce to a terminated topic is refused with the reason
    status, body = admin(
        "POST",
        f"{gateway.http_url}/topics/persistent/public/default/empty",
        {"messages": [{"payload": "aGk="}]},
    )
    assert status == 412 and "terminated" in body["reason"]


def test_internal_stats_and_info_show_the_termination(gateway: GatewayThread, client: Any) -> None:
    """Pulsar's ManagedLedgerImpl state ``Terminated`` in internalStats, and the
    ``terminatedPosition`` of ManagedLedgerInfo (internal-info): the last entry."""
    base = f"{gateway.http_url}{TOPICS}/stats-terminated"
    producer = client.create_producer(
        "persistent://public/default/stats-terminated", batching_enabled=False
    )
    ids = [producer.send(f"s{i}".encode()) for i in range(3)]
    status, stats = admin("GET", f"{base}/internalStats")
    assert (status, stats["state"]) == (200, "LedgerOpened")
    assert admin("GET", f"{base}/internal-info")[1]["terminatedPosition"] is None
    assert admin("POST", f"{base}/terminate")[0] == 200
    status, stats = admin("GET", f"{base}/internalStats")
    assert (status, stats["state"]) == (200, "Terminated")
    last = ids[-1]
    assert stats["lastConfirmedEntry"] == f"{last.ledger_id()}:{last.entry_id()}"
    status, info = admin("GET", f"{base}/internal-info")
    assert status == 200
    assert info["terminatedPosition"] == {"ledgerId": last.ledger_id(), "entryId": last.entry_id()}
    # a topic terminated before anything was written: no position, (-1, -1) as terminate says
    assert admin("PUT", f"{base}-empty")[0] == 204
    assert admin("POST", f"{base}-empty/terminate")[0] == 200
    assert admin("GET", f"{base}-empty/internalStats")[1]["state"] == "Terminated"
    info = admin("GET", f"{base}-empty/internal-info")[1]
    assert info["terminatedPosition"] == {"ledgerId": -1, "entryId": -1}
