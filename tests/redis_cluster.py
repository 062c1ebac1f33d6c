"""A real Redis Cluster on loopback for the tests: 3 masters and 3 replicas (or 6).

Started from the installed ``redis-server`` (``--cluster-enabled yes``) on free ports, each
node in its own directory, joined with ``redis-cli --cluster create --cluster-replicas N``,
and torn down by :meth:`RedisCluster.stop`. A short ``cluster-node-timeout`` lets failover
tests see a replica promoted within seconds of its master being killed.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
import redis

from tests.conftest import TIMEOUT, wait_for

__all__ = ["ClusterNode", "RedisCluster", "cluster"]


@dataclass
class ClusterNode:
    port: int
    workdir: str
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self, binary: str, node_timeout_ms: int) -> None:
        self.proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                str(node_timeout_ms),
                "--appendonly",
                "no",
                "--save",
                "",
                "--dir",
                self.workdir,
                "--logfile",
                os.path.join(self.workdir, "redis.log"),
            ]
        )

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=TIMEOUT)

    def kill(self) -> None:
        """SIGKILL, as a crash: no shutdown, no final replication."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(TIMEOUT)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(TIMEOUT)


@dataclass
class RedisCluster:
    """Three masters with ``replicas`` replicas each (six nodes by default)."""

    node_timeout_ms: int = 1000
    replicas: int = 1
    nodes: list[ClusterNode] = field(default_factory=list)
    root: str = ""

    @property
    def url(self) -> str:
        """A URL naming one node: a cluster client discovers the others from it."""
        return self.nodes[0].url

    def start(self) -> RedisCluster:
        binary = shutil.which("redis-server")
        cli = shutil.which("redis-cli")
        if binary is None or cli is None:
            raise RuntimeError("a Redis Cluster needs redis-server and redis-cli on PATH")
        self.root = tempfile.mkdtemp(prefix="pgw-test-cluster-")
        try:
            self._start_nodes(binary, cli)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_nodes(self, binary: str, cli: str) -> None:
        for i in range(3 * (1 + self.replicas)):
            workdir = os.path.join(self.root, f"node{i}")
            os.mkdir(workdir)
            node = ClusterNode(_free_cluster_port(), workdir)
            node.start(binary, self.node_timeout_ms)
            self.nodes.append(node)
        for node in self.nodes:
            wait_for(lambda n=node: _pings(n.client()))
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        subprocess.run(
            [
                cli,
                "--cluster",
                "create",
                *addresses,
                "--cluster-replicas",
                str(self.replicas),
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=3 * TIMEOUT,
        )
        wait_for(self.healthy, timeout=3 * TIMEOUT)

    def healthy(self) -> bool:
        """Every live node sees the cluster ok, with 3 masters and their synced replicas."""
        for node in self.live_nodes():
            info = node.client().cluster("info")
            if info.get("cluster_state") != "ok":
                return False
        replication = [node.client().info("replication") for node in self.live_nodes()]
        roles = sorted(info["role"] for info in replication)
        # a replica that never finished its first sync cannot take over its master
        synced = all(
            info.get("master_link_status") == "up"
            for info in replication
            if info["role"] == "slave"
        )
        return roles == ["master"] * 3 + ["slave"] * 3 * self.replicas and synced

    def live_nodes(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.proc is not None and n.proc.poll() is None]

    def masters(self) -> list[ClusterNode]:
        return [n for n in self.live_nodes() if n.client().info("replication")["role"] == "master"]

    def flush(self) -> None:
        for node in self.masters():
            node.client().flushall()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free and valid too: ephemeral
    ports are often above 55535, where the bus port would not exist."""
    while True:
        port = random.randrange(20000, 30000)
        if _free(port) and _free(port + 10000):
            return port


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


def wait_for_promotion(cluster: RedisCluster, timeout: float = 3 * TIMEOUT) -> None:
    """Wait until the cluster is ok again with three masters after a master was killed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if len(cluster.masters()) == 3 and all(
                n.client().cluster("info").get("cluster_state") == "ok"
                for n in cluster.live_nodes()
            ):
                return
        except redis.RedisError:
            pass
        time.sleep(0.1)
    raise AssertionError("no replica was promoted in time")


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisCluster]:
    """A cluster for the test module that imports this fixture, stopped after it."""
    started = RedisCluster().start()
    try:
        yield started
    finally:
        started.stop()
