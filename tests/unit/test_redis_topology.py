"""The fleet overview's Redis part (:mod:`pulsar_gateway.core.storage.topology`): a
``CLUSTER NODES`` reply read into nodes, a master's ``INFO`` replicas, and the totals."""

from __future__ import annotations

from pulsar_gateway.core.storage.topology import (
    RedisNode,
    RedisTopology,
    _replicas,
    parse_cluster_nodes,
)

# A 3-master cluster as redis-server 7.0 answers CLUSTER NODES (the format of
# https://redis.io/docs/latest/commands/cluster-nodes/), one replica failed, one master
# migrating a slot, a hostname on one address, lines in no particular order.
REPLY = """\
r2 127.0.0.1:7005@17005 slave m3 0 1700000000000 3 connected
m2 127.0.0.1:7002@17002,node-b master - 0 1700000000000 2 connected 5461-10922
m1 127.0.0.1:7001@17001 myself,master - 0 1700000000000 1 connected 0-5460 [5460->-m2]
r1 127.0.0.1:7004@17004 slave,fail m1 1700000000000 1700000000000 1 disconnected
m3 127.0.0.1:7003@17003 master - 0 1700000000000 3 connected 10923-16383
r0 127.0.0.1:7006@17006 slave m2 0 1700000000000 2 connected
"""


def test_cluster_nodes_masters_in_slot_order_each_followed_by_its_replicas() -> None:
    nodes = parse_cluster_nodes(REPLY)
    assert [(n.id, n.role, n.master) for n in nodes] == [
        ("m1", "master", None),
        ("r1", "replica", "m1"),
        ("m2", "master", None),
        ("r0", "replica", "m2"),
        ("m3", "master", None),
        ("r2", "replica", "m3"),
    ]
    by_id = {n.id: n for n in nodes}
    assert by_id["m1"].slots == "0-5460"  # the migrating slot marker left out
    assert by_id["m2"].slots == "5461-10922"
    assert by_id["m2"].address == "127.0.0.1:7002"  # cluster bus port and hostname cut
    assert by_id["r1"].slots is None
    # a failed node is disconnected, whatever its link
    assert by_id["r1"].connected is False
    assert all(n.connected for n in nodes if n.id != "r1")
    assert by_id["r0"].to_json() == {
        "id": "r0",
        "address": "127.0.0.1:7006",
        "role": "replica",
        "master": "m2",
        "slots": None,
        "usedMemory": None,
        "maxMemory": None,
        "connectedClients": None,
        "linkState": "connected",
    }


def test_cluster_nodes_suspected_masters_without_slots_and_orphans() -> None:
    reply = (
        "a 10.0.0.1:6379@16379 master,fail? - 0 0 1 connected 0-16383\n"
        "b 10.0.0.2:6379@16379 master - 0 0 2 connected\n"
        "c 10.0.0.3:6379@16379 slave z 0 0 2 connected\n"
        "garbage\n"
    )
    nodes = parse_cluster_nodes(reply)
    assert [n.id for n in nodes] == ["a", "b", "c"]
    assert nodes[0].connected is False  # fail?: suspected down
    assert nodes[1].slots is None and nodes[1].connected
    assert nodes[2].master == "z"  # its master is not listed: it comes last


def test_replicas_from_info_replication() -> None:
    info = {
        "role": "master",
        "connected_slaves": 2,
        "slave0": {"ip": "10.0.0.5", "port": 6380, "state": "online", "offset": 1, "lag": 0},
        "slave1": {"ip": "10.0.0.6", "port": 6381, "state": "wait_bgsave", "offset": 0},
    }
    assert _replicas(info, "run-1") == [
        RedisNode("10.0.0.5:6380", "10.0.0.5:6380", "replica", "run-1"),
        RedisNode("10.0.0.6:6381", "10.0.0.6:6381", "replica", "run-1", connected=False),
    ]
    assert _replicas({"role": "master", "connected_slaves": 0}, "run-1") == []


def test_memory_totals_over_masters() -> None:
    def master(used: int | None, limit: int | None) -> RedisNode:
        return RedisNode("m", "h:1", "master", used_memory=used, max_memory=limit)

    replica = RedisNode("r", "h:2", "replica", "m", used_memory=999, max_memory=5)
    limited = RedisTopology("cluster", "7.0.15", (master(10, 100), master(20, 200), replica))
    assert (limited.used_memory, limited.max_memory) == (30, 300)
    # one master without a limit (maxmemory 0): the fleet has none
    unlimited = RedisTopology("cluster", "7.0.15", (master(10, 100), master(20, 0)))
    assert (unlimited.used_memory, unlimited.max_memory) == (30, 0)
    # a master not reached counts for nothing
    partial = RedisTopology("cluster", "7.0.15", (master(10, 100), master(None, None)))
    assert (partial.used_memory, partial.max_memory) == (10, 100)
    assert partial.to_json()["mode"] == "cluster"
