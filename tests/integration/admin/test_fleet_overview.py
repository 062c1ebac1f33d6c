"""The fleet overview (``GET /admin/v2/fleet``, beyond Pulsar): the live gateways with their
own figures (each gateway's summary in ``P:gateways:stats``) and the Redis they share.

Real gateways on a real redis-server, official Pulsar clients; every call through aiohttp.
"""

from __future__ import annotations

import base64
import os
import socket
from collections.abc import Callable
from typing import Any

import jwt
import pytest
import redis

from pulsar_gateway.core.storage.keys import KeySchema
from tests.adminhttp import admin, admin_as
from tests.conftest import ON_CLUSTER, GatewayThread, wait_for

# The cluster pass of ./dev test runs this file on a Redis Cluster too: the redis part then
# lists the cluster's masters with their slots and replicas (CLUSTER NODES)
pytestmark = pytest.mark.cluster

INTERVAL = 0.2  # stats_interval_seconds: a summary every 0.2 s

GATEWAY_FIELDS = {
    "gatewayId",
    "brokerId",
    "serviceUrl",
    "brokerServiceUrl",
    "started",
    "host",
    "pid",
    "reportedAt",
    "connections",
    "producers",
    "consumers",
    "topics",
    "msgRateIn",
    "msgRateOut",
    "msgThroughputIn",
    "msgThroughputOut",
}
NODE_FIELDS = {
    "id",
    "address",
    "role",
    "master",
    "slots",
    "usedMemory",
    "maxMemory",
    "connectedClients",
    "linkState",
}


def broker_id(gw: GatewayThread) -> str:
    return f"127.0.0.1:{gw.gateway.http_port}"


def gateway_id(gw: GatewayThread) -> str:
    assert gw.gateway.core is not None
    return gw.gateway.core.gateway_id


def overview(gw: GatewayThread) -> dict[str, Any]:
    status, body = admin("GET", f"{gw.http_url}/admin/v2/fleet")
    assert status == 200, body
    assert isinstance(body, dict)
    return body


def test_each_gateway_lists_every_gateway_with_its_clients(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    topic: str,
) -> None:
    producing = gateway_factory(stats_interval_seconds=INTERVAL)
    consuming = gateway_factory(stats_interval_seconds=INTERVAL)
    producer = client_factory(producing.url).create_producer(topic)
    consumer = client_factory(consuming.url).subscribe(topic, "s")
    for _ in range(5):
        producer.send(b"x" * 100)
    for _ in range(5):
        consumer.acknowledge(consumer.receive(timeout_millis=5000))

    def settled(gw: GatewayThread) -> dict[str, Any] | None:
        body = overview(gw)
        gateways = {g["brokerId"]: g for g in body["gateways"]}
        a, b = gateways.get(broker_id(producing)), gateways.get(broker_id(consuming))
        if a and b and a["producers"] == 1 and b["consumers"] == 1:
            return body
        return None

    for gw in (producing, consuming):
        body = wait_for(lambda gw=gw: settled(gw))
        assert body["cluster"] == "standalone"
        first, second = body["gateways"]  # oldest first
        assert set(first) == GATEWAY_FIELDS and set(second) == GATEWAY_FIELDS
        assert first["brokerId"] == broker_id(producing)
        assert first["gatewayId"] == gateway_id(producing)
        # the gateways of these tests run in this process, on this machine
        assert (first["host"], first["pid"]) == (socket.gethostname(), os.getpid())
        assert first["serviceUrl"] == f"http://{broker_id(producing)}"
        assert first["brokerServiceUrl"] == producing.url
        assert first["started"] <= second["started"]
        assert (first["producers"], first["consumers"], first["topics"]) == (1, 0, 1)
        assert (second["producers"], second["consumers"], second["topics"]) == (0, 1, 1)
        # one client connection each (the official client's one connection per broker)
        assert first["connections"] == 1 and second["connections"] == 1
        for entry in (first, second):
            assert isinstance(entry["reportedAt"], int) and entry["reportedAt"] > 0
            for figure in ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut"):
                assert isinstance(entry[figure], (int, float)) and entry[figure] >= 0


def test_a_stopped_gateway_leaves_the_overview_and_its_summary_the_hash(
    gateway_factory: Callable[..., GatewayThread], redis_clean: redis.Redis
) -> None:
    keeper = gateway_factory(stats_interval_seconds=INTERVAL)
    leaving = gateway_factory(stats_interval_seconds=INTERVAL)
    stats_key = KeySchema().gateway_stats
    wait_for(lambda: len(redis_clean.hgetall(stats_key)) == 2)
    wait_for(lambda: len(overview(keeper)["gateways"]) == 2)
    gone = gateway_id(leaving)
    leaving.stop()
    body = overview(keeper)
    assert [g["gatewayId"] for g in body["gateways"]] == [gateway_id(keeper)]
    assert gone.encode() not in redis_clean.hgetall(stats_key)


def test_a_dead_gateway_summary_is_dropped_by_the_reader(
    gateway: GatewayThread, redis_clean: redis.Redis
) -> None:
    # a gateway that crashed never withdrew its summary: the next reader drops it
    stats_key = KeySchema().gateway_stats
    redis_clean.hset(stats_key, "crashed", '{"connections": 3, "t": 1}')
    body = overview(gateway)
    assert [g["gatewayId"] for g in body["gateways"]] == [gateway_id(gateway)]
    assert b"crashed" not in redis_clean.hgetall(stats_key)


def test_redis_part_describes_the_nodes(gateway: GatewayThread) -> None:
    redis_part = overview(gateway)["redis"]
    assert set(redis_part) == {"mode", "version", "usedMemory", "maxMemory", "nodes"}
    assert redis_part["version"].count(".") == 2
    masters = [n for n in redis_part["nodes"] if n["role"] == "master"]
    replicas = [n for n in redis_part["nodes"] if n["role"] == "replica"]
    for node in redis_part["nodes"]:
        assert set(node) == NODE_FIELDS
        assert node["linkState"] == "connected"
        host, _, port = node["address"].rpartition(":")
        assert host and port.isdigit()
    for node in masters:
        assert node["master"] is None
        assert node["usedMemory"] > 0 and node["connectedClients"] >= 1
        assert node["maxMemory"] >= 0
    assert redis_part["usedMemory"] == sum(n["usedMemory"] for n in masters)
    assert redis_part["maxMemory"] >= 0
    if not ON_CLUSTER:
        assert redis_part["mode"] == "standalone"
        assert len(masters) == 1 and masters[0]["slots"] is None
        assert replicas == []
        return
    assert redis_part["mode"] == "cluster"
    assert len(masters) == 3 and len(replicas) == 3
    ids = {n["id"] for n in masters}
    assert {n["master"] for n in replicas} == ids
    for node in replicas:
        assert node["slots"] is None and node["usedMemory"] is None
    # every slot served, masters in slot order, each followed by its replica
    covered = 0
    for node in masters:
        for part in node["slots"].split():
            low, _, high = part.partition("-")
            covered += int(high or low) - int(low) + 1
    assert covered == 16384
    nodes = redis_part["nodes"]
    for i, node in enumerate(nodes):
        if node["role"] == "replica":
            owner = next(n for n in reversed(nodes[:i]) if n["role"] == "master")
            assert node["master"] == owner["id"]


def test_the_overview_is_superuser_only(
    gateway_factory: Callable[..., GatewayThread],
) -> None:
    secret = b"fleet-overview-secret-0123456789abcdef"  # >= 32 bytes for HS256
    gw = gateway_factory(
        authentication_enabled=True,
        authorization_enabled=True,
        superuser_roles=("admin",),
        token_secret_key="data:;base64," + base64.b64encode(secret).decode(),
    )
    url = f"{gw.http_url}/admin/v2/fleet"

    def token(role: str) -> str:
        return jwt.encode({"sub": role}, secret, algorithm="HS256")

    assert admin_as(None, "GET", url) == (401, {"reason": "Authentication required"})
    assert admin_as(token("app"), "GET", url) == (
        403,
        {"reason": "This operation requires super-user access"},
    )
    status, body = admin_as(token("admin"), "GET", url)
    assert status == 200 and [g["gatewayId"] for g in body["gateways"]] == [gateway_id(gw)]
