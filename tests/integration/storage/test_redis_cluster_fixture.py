"""The Redis Cluster the cluster tests run on: real nodes, real slots, real failover."""

from __future__ import annotations

import pytest
import redis
from redis.cluster import RedisCluster as ClusterClient

from pulsar_gateway.core.storage.keys import KeySchema
from tests.redis_cluster import RedisCluster, cluster, wait_for_promotion

__all__ = ["cluster"]  # the module-scoped fixture, imported for pytest


def test_three_masters_share_the_slots_and_topics_spread_over_them(cluster: RedisCluster) -> None:
    client = ClusterClient.from_url(cluster.url)
    try:
        keys = KeySchema()
        owners = {
            client.get_node_from_key(keys.topic(f"persistent://public/default/t-{i}").stream).name
            for i in range(100)
        }
        assert len(owners) == 3  # 100 topics land on every master
        stream = keys.topic("persistent://public/default/t-0").stream
        client.xadd(stream, {"m": b"x"})
        assert client.xlen(stream) == 1
    finally:
        client.close()


def test_a_killed_master_is_replaced_by_its_replica(cluster: RedisCluster) -> None:
    victim = cluster.masters()[0]
    port = victim.port
    victim.kill()
    wait_for_promotion(cluster)
    assert port not in {node.port for node in cluster.masters()}
    with pytest.raises(redis.ConnectionError):
        victim.client().ping()
