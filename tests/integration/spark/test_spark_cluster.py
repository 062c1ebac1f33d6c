"""A real Spark standalone cluster, not ``local[*]``: a master and two workers started from
the installed pyspark (``spark-class``, on loopback), and a driver in a subprocess
(``spark_cluster_job.py``) that streams a two-partition topic into Parquet and writes 1000
rows to another topic. This proves the executor side across processes: the data source
pickled to executors, imported there, each executor reading Redis and publishing through a
gateway on its own connections. Both executors must have done part of each job, and every
message must arrive exactly once."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pulsar
import pyarrow.parquet as pq
import pyspark
import pytest

from tests.adminhttp import admin
from tests.conftest import TIMEOUT, GatewayThread, wait_for
from tests.integration.spark.spark_fixtures import env_for_subprocess

SPARK_HOME = Path(pyspark.__file__).parent
JOB = Path(__file__).with_name("spark_cluster_job.py")
RECEIVE_MS = int(TIMEOUT * 1000)


@dataclass
class Cluster:
    """A standalone master and its workers, each a ``spark-class`` JVM."""

    root: Path
    # Every JVM binds port 0 and the master's log says which ports it got: ports chosen
    # ahead by the test could be taken by another JVM's port-0 bind while the master starts.
    url: str = ""
    master_web_port: int = 0
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[tuple[Path, IO[bytes]]] = field(default_factory=list)

    def start(self, name: str, *args: str) -> None:
        path = self.root / f"{name}.log"
        log = path.open("wb")
        self.logs.append((path, log))
        env = {
            **env_for_subprocess(),
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_WORKER_DIR": str(self.root / "work"),
        }
        self.processes.append(
            subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.root,
            )
        )

    def master_bound(self) -> bool:
        """Read the master's URL and web UI port from its log once it has bound both."""
        self.check_running()
        log = (self.root / "master.log").read_text(errors="replace")
        url = re.search(r"Starting Spark master at (spark://\S+)", log)
        web = re.search(r"started service 'MasterUI' on port (\d+)", log)
        if url is None or web is None:
            return False
        self.url, self.master_web_port = url.group(1), int(web.group(1))
        return True

    def check_running(self) -> None:
        for process in self.processes:
            if process.poll() is not None:
                raise AssertionError(f"a cluster process exited early:\n{self.log_tails()}")

    def alive_workers(self) -> int:
        self.check_running()
        url = f"http://127.0.0.1:{self.master_web_port}/json/"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                state = json.load(response)
        except OSError:
            return 0  # the master is not up yet
        return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")

    def log_tails(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-2000:]}" for path, _ in self.logs
        )

    def stop(self) -> None:
        # workers first (each kills its executors), then the master
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
        for process in reversed(self.processes):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)
        for _, log in self.logs:
            log.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A master and two workers (one core, 1 GB each) on loopback."""
    cluster = Cluster(tmp_path / "cluster")
    (cluster.root / "work").mkdir(parents=True)
    try:
        cluster.start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--webui-port",
            "0",
        )
        wait_for(cluster.master_bound, timeout=9 * TIMEOUT, interval=0.5)
        for index in range(2):
            cluster.start(
                f"worker-{index}",
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                "1",
                "--memory",
                "1g",
                "--webui-port",
                "0",
                "--work-dir",
                str(cluster.root / "work" / f"worker-{index}"),
                cluster.url,
            )
        wait_for(lambda: cluster.alive_workers() == 2, timeout=9 * TIMEOUT, interval=0.5)
        yield cluster
    finally:
        cluster.stop()


@pytest.mark.timeout(240)
def test_a_standalone_cluster_reads_a_stream_and_writes_across_two_executors(
    cluster: Cluster,
    gateway: GatewayThread,
    client_factory: Callable[..., Any],
    tmp_path: Path,
) -> None:
    source, target = "cluster-in", "cluster-out"
    url = f"{gateway.http_url}/admin/v2/persistent/public/default/{source}/partitions"
    assert admin("PUT", url, 2) == (204, None)
    client = client_factory(gateway.url)
    producer = client.create_producer(
        source, batching_enabled=True, batching_max_messages=20, block_if_queue_full=True
    )
    for i in range(500):
        producer.send_async(f"event-{i}".encode(), None, partition_key=f"key-{i % 10}")
    producer.flush()
    producer.close()

    output = tmp_path / "parquet"
    done = subprocess.run(
        [
            sys.executable,
            str(JOB),
            cluster.url,
            gateway.url,
            gateway.http_url,
            source,
            target,
            str(output),
            str(tmp_path / "checkpoint"),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env={**env_for_subprocess(), "SPARK_HOME": str(SPARK_HOME)},
        cwd=tmp_path,
    )
    assert done.returncode == 0, f"{done.stderr[-4000:]}\n{cluster.log_tails()}"
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["block_managers"] >= 3  # the driver and two executors

    # the streaming read: every message once, from both partitions, on both executors
    rows = pq.read_table(output).to_pylist()
    assert sorted(r["value"] for r in rows) == sorted(f"event-{i}" for i in range(500))
    assert len({r["message_id"] for r in rows}) == 500
    partitions = {f"persistent://public/default/{source}-partition-{p}" for p in (0, 1)}
    assert {r["partition"] for r in rows} == partitions
    assert {r["executor"] for r in rows} == {"0", "1"}, Counter(r["executor"] for r in rows)

    # the batch write: every row once, published from both executors
    consumer = client.subscribe(target, "check", initial_position=pulsar.InitialPosition.Earliest)
    messages = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(1000)]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=500)
    assert sorted(m.data() for m in messages) == sorted(f"row-{i}".encode() for i in range(1000))
    assert all(m.partition_key() == f"k{int(m.data()[4:]) % 10}" for m in messages)
    executors = Counter(m.properties()["executor"] for m in messages)
    assert set(executors) == {"0", "1"}, executors
    # each worker ran one executor in its own work directory
    executor_dirs = sorted((cluster.root / "work").glob("worker-*/app-*/*"))
    assert sorted(d.name for d in executor_dirs) == ["0", "1"]
    assert {d.parents[1].name for d in executor_dirs} == {"worker-0", "worker-1"}
