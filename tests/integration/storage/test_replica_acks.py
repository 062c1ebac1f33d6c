"""Replica-acknowledged writes (``--redis-replica-acks N``) on a Redis master with a replica.

A paused replica (SIGSTOP) shows what the flag changes: with it, a receipt, a REST produce
answer and a WebSocket ack wait until the replica has the write; without it the master
answers alone. A write the replica does not confirm within the timeout fails, and the
official client's resend is recognised by deduplication, so nothing is doubled.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pulsar
import pytest
import redis

from pulsar_gateway.core.storage.keys import KeySchema
from tests.adminhttp import admin, admin_text
from tests.conftest import (
    TIMEOUT,
    GatewayThread,
    make_config,
    redis_server_binary,
    start_redis_server,
    wait_for,
)
from tests.wsclient import connect, producer_url

#: How long a paused replica must hold an answer back for the test to call it held.
HELD = 0.7


class Node:
    def __init__(self, root: str, name: str, *extra: str) -> None:
        workdir = os.path.join(root, name)
        os.makedirs(workdir)
        self.proc, self.port = start_redis_server(redis_server_binary(), workdir, *extra)
        self.client = redis.Redis(port=self.port, socket_timeout=TIMEOUT)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    @contextmanager
    def paused(self) -> Iterator[None]:
        """SIGSTOP: connected, but confirming nothing."""
        self.proc.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGCONT)
        self.client.close()
        self.proc.terminate()
        self.proc.wait(TIMEOUT)


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[Node, Node]]:
    root = tempfile.mkdtemp(prefix="pgw-test-replica-")
    nodes: list[Node] = []
    try:
        master = Node(root, "master")
        nodes.append(master)
        replica = Node(root, "replica", "--replicaof", "127.0.0.1", str(master.port))
        nodes.append(replica)
        wait_for(lambda: replica.client.info("replication").get("master_link_status") == "up")
        yield master, replica
    finally:
        for node in reversed(nodes):
            node.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def start_gateway(pair: tuple[Node, Node]) -> Iterator[Callable[..., GatewayThread]]:
    master, replica = pair
    master.client.flushall()
    wait_for(lambda: replica.client.dbsize() == 0)
    master.client.config_resetstat()
    started: list[GatewayThread] = []

    def start(**overrides: Any) -> GatewayThread:
        gw = GatewayThread(make_config(master.url, **overrides)).start()
        started.append(gw)
        return gw

    yield start
    for gw in started:
        gw.stop()


def stream(topic: str) -> str:
    return KeySchema().topic(f"persistent://public/default/{topic}").stream


def in_background(work: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Run ``work`` in a thread; its result (or exception) lands in the list."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(work())
        except Exception as exc:
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def held_until_resumed(replica: Node, work: Callable[[], Any]) -> Any:
    """Start ``work`` with the replica paused; check it has not finished after HELD
    seconds, resume the replica, and return what ``work`` returned once it has."""
    with replica.paused():
        thread, out = in_background(work)
        time.sleep(HELD)
        assert out == [], "answered before the replica confirmed the write"
    thread.join(TIMEOUT)
    assert len(out) == 1
    assert not isinstance(out[0], Exception), out[0]
    return out[0]


def test_receipts_rest_and_websocket_acks_wait_for_the_replica(
    pair: tuple[Node, Node], start_gateway: Callable[..., GatewayThread], client_factory: Any
) -> None:
    _, replica = pair
    gw = start_gateway(redis_replica_acks=1, redis_replica_ack_timeout_ms=20_000)
    topic = "held"
    producer = client_factory(gw.url).create_producer(
        f"persistent://public/default/{topic}", batching_enabled=False
    )
    producer.send(b"warm-up")

    message_id = held_until_resumed(replica, lambda: producer.send(b"binary"))
    assert message_id.entry_id() >= 0
    # the receipt implies the replica has the message: no waiting for it here
    assert replica.client.xlen(stream(topic)) == 2

    url = f"{gw.http_url}/topics/persistent/public/default/{topic}"
    status, body = held_until_resumed(
        replica, lambda: admin("POST", url, {"messages": [{"payload": "rest"}]})
    )
    assert status == 200 and body["messagePublishResults"][0]["errorCode"] == 0, body
    assert replica.client.xlen(stream(topic)) == 3

    async def websocket_produce() -> Any:
        async with connect(producer_url(gw, topic)) as ws:
            return await ws.produce(b"websocket")

    ack = held_until_resumed(replica, lambda: asyncio.run(websocket_produce()))
    assert ack["result"] == "ok", ack
    assert replica.client.xlen(stream(topic)) == 4


def test_without_replica_acks_the_master_answers_alone(
    pair: tuple[Node, Node], start_gateway: Callable[..., GatewayThread], client_factory: Any
) -> None:
    _, replica = pair
    gw = start_gateway()
    producer = client_factory(gw.url).create_producer(
        "persistent://public/default/alone", batching_enabled=False
    )
    with replica.paused():
        started = time.monotonic()
        producer.send(b"answered by the master")
        assert time.monotonic() - started < HELD


def test_one_wait_per_pipeline_not_per_message(
    pair: tuple[Node, Node], start_gateway: Callable[..., GatewayThread], client_factory: Any
) -> None:
    master, replica = pair
    gw = start_gateway(redis_replica_acks=1)
    producer = client_factory(gw.url).create_producer(
        "persistent://public/default/burst", batching_enabled=False, max_pending_messages=1000
    )
    results: list[Any] = []
    done = threading.Event()

    def sent(result: Any, _: Any) -> None:
        results.append(result)
        if len(results) == 1000:
            done.set()

    for i in range(1000):
        producer.send_async(str(i).encode(), sent)
    assert done.wait(TIMEOUT)
    assert set(results) == {pulsar.Result.Ok}
    assert replica.client.xlen(stream("burst")) == 1000
    waits = int(master.client.info("commandstats")["cmdstat_wait"]["calls"])
    assert 0 < waits < 500, waits  # appends of one tick share a pipeline and its WAIT


def test_an_unconfirmed_write_fails_and_its_resend_is_deduplicated(
    pair: tuple[Node, Node], start_gateway: Callable[..., GatewayThread], client_factory: Any
) -> None:
    master, replica = pair
    gw = start_gateway(redis_replica_acks=1, redis_replica_ack_timeout_ms=200)
    status, _ = admin(
        "POST", f"{gw.http_url}/admin/v2/namespaces/public/default/deduplication", True
    )
    assert status == 204
    topic = "persistent://public/default/unconfirmed"
    client = client_factory(gw.url)
    consumer = client.subscribe(topic, "s")
    producer = client.create_producer(
        topic, producer_name="p", batching_enabled=False, send_timeout_millis=30_000
    )
    producer.send(b"0")
    results: dict[int, Any] = {}

    def sent(i: int) -> Callable[[Any, Any], None]:
        return lambda result, _: results.__setitem__(i, result)

    with replica.paused():
        for i in range(1, 6):
            producer.send_async(str(i).encode(), sent(i))
        time.sleep(1.5)  # several WAIT timeouts: the appends fail, the client resends
        assert results == {}
    wait_for(lambda: len(results) == 5, timeout=3 * TIMEOUT)  # after the client's back-off
    assert set(results.values()) == {pulsar.Result.Ok}
    # The first attempts reached the master before failing; the resends were recognised.
    got = []
    for _ in range(6):
        msg = consumer.receive(int(TIMEOUT * 1000))
        got.append(msg.data())
        consumer.acknowledge(msg)
    assert got == [str(i).encode() for i in range(6)]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(500)
    assert master.client.xlen(KeySchema().topic(topic).stream) == 6
    # the failed writes are counted for the RedisErrors alert (compose/prometheus)
    status, text = admin_text("GET", f"{gw.http_url}/metrics")
    assert status == 200
    counted = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith('pulsar_gateway_storage_errors_total{kind="unconfirmed"}')
    ]
    assert counted and counted[0] >= 1, counted
