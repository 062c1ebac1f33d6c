"""Redis Cluster benchmark: the same cases on one Redis node and on a 3-master cluster.

Usage::

    .venv/bin/python bench/bench_cluster.py [--messages N] [--quick] [--passes P]
                                            [--topics K] [--replica-ack-timeout-ms MS]
                                            [--json PATH]

Default: N = 100,000 messages per case, 3 passes (about 3 minutes on 2 cores); ``--quick``:
N = 60,000, 2 passes (about 70-80 s).

One run starts, in its own temp dir, on free loopback ports (no RDB snapshots, AOF off):

- **single node**: one redis-server and one replica of it (``--replicaof``), so that both
  deployments carry the same replication work per write;
- **cluster**: six redis-servers with ``--cluster-enabled yes`` joined by ``redis-cli
  --cluster create --cluster-replicas 1``: 3 masters (5461-5462 slots each), one replica
  each, ``cluster-node-timeout`` 15 s (no spurious failover when the 2 cores are saturated;
  the roles are checked again after the cases).

Each pass then measures the single node, then the cluster (passes alternate, so drift on a
shared machine hits both alike; medians are printed), with 100-byte payloads spread
round-robin over K topics (default 6; a multiple of 3, the names drawn so that each cluster
master serves K/3 of them, since a topic's keys live in one slot), fresh topics per case,
deleted afterwards:

1. raw redis-py, no gateway running: pipelined ``XADD`` (one entry per message, 1000
   commands per master per round trip, the pipelines of all masters written before any
   reply is read, so the masters work at once); the same followed by one ``WAIT 1 <timeout>``
   per pipeline; ``XREADGROUP COUNT 1000`` + ``XACK`` of the ``XADD`` streams.
2. a gateway subprocess (``python -m pulsar_gateway.server.main --redis-url <a master>``;
   on a cluster node it routes every command to its slot's master), driven by the official
   client ``pulsar-client`` in this process, after an untimed warm-up: produce with batching
   ON (one producer per topic, ``send_async`` round-robin, from the first send to the last
   receipt), consume those topics with one Shared multi-topic consumer acking each message
   (from ``subscribe()`` until Redis holds no pending entry), then the same with batching OFF;
   last, send latency: 2,000 synchronous ``send()`` calls (batching off, one topic), p50 /
   p99 / max from the call to its receipt.
3. replica acks: a second gateway with ``--redis-replica-acks 1`` (it appends one ``WAIT 1``
   to every pipeline that wrote and answers receipts after it), the same five cases. The
   flag is looked for in ``--help`` at run time; a gateway without it skips this part.

Then the slot distribution: which master of the started cluster serves the stream key
(``KeySchema().topic(name).stream``, ``redis.crc.key_slot``) of 1,000 topics
``persistent://public/default/t-<i>`` and of the 1,000 partitions of a partitioned topic
``persistent://public/default/t`` (``t-partition-<i>``): count per master, min, max and
standard deviation (about 14.9 for uniform hashing over three equal masters).

Reading the output: msg/s per case on each deployment, against raw redis-py on the same
deployment and cluster / single node; then where the CPU goes, from /proc for every process
(the run time of its threads from ``/proc/<pid>/task/*/schedstat``, nanosecond resolution,
falling back to ``/proc/<pid>/stat`` ticks as bench.py reads them): the gateway's CPU per
message, the CPU of all masters summed, per message (and per master, per message of the
topics it serves), the replicas' CPU per message (a replica applies every write it is sent),
this process (the official client) and every other process on the host (the idle deployment
and other users' work among them). From the masters' ``INFO``: commands per message, messages
per socket read (``total_reads_processed``: how full the pipelines arriving are), ``WAIT``
calls. Before the cases, every redis-server's idle CPU (cron, cluster bus, replication
pings; no client) is measured over a few seconds: the floor under the per-message figures
of slow cases. On a machine with fewer cores than processes the cluster cannot be faster
than one node: its six redis-servers, the gateway and the client share the cores; the
figures to read are Redis CPU per message, summed and per master, and the gateway's.

Robustness: every wait has a timeout; a watchdog thread ends the run (gateway SIGTERM, every
redis-server stopped, temp dir removed) when a phase overruns or a started process dies,
since a blocked call of the official client cannot be interrupted. Children get SIGTERM if
this process dies. Self-contained (its helpers follow ``bench/harness.py``'s).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import random
import secrets
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import psutil
import pulsar
import redis
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from harness import (
    KEY_PREFIX,
    NAMESPACE,
    PAYLOAD_SIZE,
    RECEIVER_QUEUE,
    ROOT,
    AckCounter,
    BenchError,
    GatewayProcess,
    fmt_rate,
    git_describe,
    receive_and_ack,
    run_cli,
    spawn,
    stop_process,
    wait_until,
)
from pulsar_gateway.core.storage.keys import KeySchema

SUBSCRIPTION = "bench-cluster"
PIPELINE = 1000  # raw commands per master per round trip, XREADGROUP COUNT
MASTERS = 3
CLUSTER_NODE_TIMEOUT_MS = 15_000
DISTRIBUTION_NAMES = 1000
ACKS_FLAG = "--redis-replica-acks"
ACK_TIMEOUT_FLAG = "--redis-replica-ack-timeout-ms"


# -- small helpers ----------------------------------------------------------------------------


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_redis_port(taken: set[int]) -> int:
    """A free port whose cluster bus port (+10000) is free and below 65536 too."""
    for _ in range(1000):
        port = random.randrange(20000, 30000)
        if port not in taken and _port_free(port) and _port_free(port + 10000):
            taken.add(port)
            return port
    raise BenchError("no free port pair for redis-server")


def cmd(client: redis.Redis, *args: Any) -> Any:
    """A Redis command, reply as redis-py parses it (typed Any for mypy)."""
    return client.execute_command(*args)  # type: ignore[no-untyped-call]


def info(client: redis.Redis, section: str) -> dict[str, Any]:
    return client.info(section)


def glob_escape(text: str) -> str:
    """``text`` matched literally by a Redis glob (SCAN MATCH)."""
    return "".join("\\" + c if c in "\\*?[]" else c for c in text)


# -- processes --------------------------------------------------------------------------------


class RedisNode:
    """One redis-server on loopback, in its own directory."""

    def __init__(self, name: str, workdir: Path, port: int, extra: list[str]) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise BenchError("redis-server is not on PATH")
        self.name = name
        self.port = port
        self.workdir = workdir
        workdir.mkdir(parents=True)
        self.proc = spawn(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--repl-diskless-sync-delay",
                "0",
                "--dir",
                str(workdir),
                "--logfile",
                str(workdir / "redis.log"),
                *extra,
            ],
            workdir / "stdout.log",
        )
        self.ps = psutil.Process(self.proc.pid)
        self.client = redis.Redis(host="127.0.0.1", port=port, protocol=2, socket_timeout=60)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def wait_ready(self) -> None:
        def pings() -> bool:
            if self.proc.poll() is not None:
                raise BenchError(f"redis-server {self.name} exited with {self.proc.returncode}")
            try:
                return bool(self.client.ping())
            except redis.ConnectionError:
                return False

        wait_until(pings, 20, f"redis-server {self.name} to answer PING")

    def role(self) -> str:
        return str(info(self.client, "replication")["role"])

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()
        stop_process(self.proc, f"redis-server {self.name}", 15)


class Deployment:
    """Masters and their replicas, with the slot map (one master: every slot is its)."""

    def __init__(self, label: str, masters: list[RedisNode], replicas: list[RedisNode]) -> None:
        self.label = label
        self.masters = masters
        self.replicas = replicas  # replicas[i] replicates masters[i]
        self.owner = [0] * REDIS_CLUSTER_HASH_SLOTS  # slot -> index in masters
        self.ranges: list[list[tuple[int, int]]] = [[(0, REDIS_CLUSTER_HASH_SLOTS - 1)]]

    @property
    def nodes(self) -> list[RedisNode]:
        return [*self.masters, *self.replicas]

    @property
    def url(self) -> str:
        return self.masters[0].url

    def master_of(self, key: str) -> int:
        return self.owner[key_slot(key.encode())]

    def slot_count(self, index: int) -> int:
        return sum(end - start + 1 for start, end in self.ranges[index])

    def check_roles(self) -> None:
        """Masters are still masters and every replica is linked: no failover happened."""
        for node in self.masters:
            if node.role() != "master":
                raise BenchError(f"{self.label}: {node.name} is no longer a master (failover)")
        for node in self.replicas:
            if info(node.client, "replication").get("master_link_status") != "up":
                raise BenchError(f"{self.label}: replica {node.name} lost its master link")

    def stop(self) -> None:
        for node in self.nodes:
            with contextlib.suppress(Exception):
                node.stop()


def start_single(workdir: Path, ports: set[int], started: list[RedisNode]) -> Deployment:
    master = RedisNode("single", workdir / "single", free_redis_port(ports), [])
    started.append(master)
    master.wait_ready()
    replica = RedisNode(
        "single-replica",
        workdir / "single-replica",
        free_redis_port(ports),
        ["--replicaof", "127.0.0.1", str(master.port)],
    )
    started.append(replica)
    replica.wait_ready()
    wait_until(
        lambda: info(replica.client, "replication").get("master_link_status") == "up",
        30,
        "the single node's replica to sync",
        interval=0.1,
    )
    return Deployment("single node", [master], [replica])


def start_cluster(workdir: Path, ports: set[int], started: list[RedisNode]) -> Deployment:
    cli = shutil.which("redis-cli")
    if cli is None:
        raise BenchError("a Redis Cluster needs redis-cli on PATH")
    nodes = []
    for i in range(2 * MASTERS):
        node = RedisNode(
            f"cluster-{i}",
            workdir / f"cluster-{i}",
            free_redis_port(ports),
            [
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                str(CLUSTER_NODE_TIMEOUT_MS),
            ],
        )
        started.append(node)
        nodes.append(node)
    for node in nodes:
        node.wait_ready()
    created = subprocess.run(
        [
            cli,
            "--cluster",
            "create",
            *(f"127.0.0.1:{n.port}" for n in nodes),
            "--cluster-replicas",
            "1",
            "--cluster-yes",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if created.returncode != 0:
        raise BenchError(f"redis-cli --cluster create failed:\n{created.stdout}{created.stderr}")

    def healthy() -> bool:
        for node in nodes:
            if info(node.client, "cluster").get("cluster_enabled") != 1:
                return False
            state = cast(dict[str, Any], node.client.cluster("info"))
            if state.get("cluster_state") != "ok":
                return False
        repl = [info(n.client, "replication") for n in nodes]
        roles = sorted(r["role"] for r in repl)
        synced = all(r.get("master_link_status") == "up" for r in repl if r["role"] == "slave")
        return roles == ["master"] * MASTERS + ["slave"] * MASTERS and synced

    wait_until(healthy, 60, "the cluster to be ok with 3 synced replicas", interval=0.2)
    by_port = {n.port: n for n in nodes}
    # CLUSTER SLOTS: [start, end, [master host, port, id, ...], replicas...]
    raw = cmd(nodes[0].client, "CLUSTER", "SLOTS")
    ranges: dict[int, list[tuple[int, int]]] = {}
    replica_of: dict[int, int] = {}
    for entry in raw:
        start, end, master = int(entry[0]), int(entry[1]), int(entry[2][1])
        ranges.setdefault(master, []).append((start, end))
    for node in nodes:  # CLUSTER SLOTS may not list the replicas yet: ask them
        repl = info(node.client, "replication")
        if repl["role"] == "slave":
            replica_of[int(repl["master_port"])] = node.port
    master_ports = sorted(ranges, key=lambda p: min(ranges[p]))
    if len(master_ports) != MASTERS or set(replica_of) != set(master_ports):
        raise BenchError(f"unexpected cluster layout: {raw!r}")
    masters = [by_port[p] for p in master_ports]
    replicas = [by_port[replica_of[p]] for p in master_ports]
    for i, (m, r) in enumerate(zip(masters, replicas, strict=True)):
        m.name, r.name = f"master-{i + 1}", f"replica-{i + 1}"
    dep = Deployment("cluster", masters, replicas)
    dep.ranges = [sorted(ranges[p]) for p in master_ports]
    for index, port in enumerate(master_ports):
        for start, end in ranges[port]:
            for slot in range(start, end + 1):
                dep.owner[slot] = index
    return dep


def gateway_flags() -> set[str]:
    """The ``--flags`` this gateway's ``--help`` lists."""
    out = subprocess.run(
        [sys.executable, "-m", "pulsar_gateway.server.main", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    return {word.strip(",[]") for word in out.split() if word.startswith("--")}


# -- run environment: watchdog, cleanup -------------------------------------------------------


class Env:
    """Temp dir, every process started, and a watchdog that cleans up on overrun or death."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.workdir = Path(tempfile.mkdtemp(prefix="pgw-bench-cluster-"))
        self.nodes: list[RedisNode] = []
        self.gateways: list[GatewayProcess] = []  # watched: their exit fails the run
        self.retired: list[GatewayProcess] = []  # being stopped or stopped
        self.clients: list[Any] = []  # pulsar.Client
        self.failed = True
        self._phase = "start-up"
        self._timeout = 0.0
        self._deadline: float | None = None
        self._watch = True
        self._lock = threading.Lock()
        self._cleaned = False
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="watchdog", daemon=True)
        self._thread.start()

    def log(self, msg: str) -> None:
        print(f"[{time.monotonic() - self.started:7.1f}s] {msg}", file=sys.stderr, flush=True)

    @contextlib.contextmanager
    def phase(self, name: str, timeout: float) -> Iterator[None]:
        saved = (self._phase, self._timeout, self._deadline)
        self._phase, self._timeout = name, timeout
        self._deadline = time.monotonic() + timeout
        try:
            yield
        finally:
            self._phase, self._timeout, self._deadline = saved

    def _dead(self) -> str | None:
        for gw in self.gateways:
            if gw.proc.poll() is not None:
                return f"{gw.name} exited ({gw.proc.returncode})"
        for node in self.nodes:
            if node.proc.poll() is not None:
                return f"redis-server {node.name} exited ({node.proc.returncode})"
        return None

    def _run(self) -> None:
        while not self._stopped.wait(0.5):
            reason = self._dead() if self._watch else None
            if reason is not None:
                reason += f" during {self._phase}"
            elif self._deadline is not None and time.monotonic() > self._deadline:
                reason = f"{self._phase} did not finish within {self._timeout:.0f}s"
            if reason is None:
                continue
            print(f"bench failed (watchdog): {reason}", file=sys.stderr, flush=True)
            try:
                self.cleanup()
            finally:
                os._exit(3)

    def stop_gateway(self, gw: GatewayProcess, client: Any) -> None:
        with contextlib.suppress(Exception):
            client.close()
        if client in self.clients:
            self.clients.remove(client)
        # no longer watched (its exit is expected), still stopped by cleanup() if need be
        self.gateways.remove(gw)
        self.retired.append(gw)
        gw.stop()

    def cleanup(self) -> None:
        with self._lock:
            if self._cleaned:
                return
            self._cleaned = True
            self._watch = False
            for client in self.clients:
                with contextlib.suppress(Exception):
                    client.close()
            for gw in self.gateways:
                if gw.proc.poll() is not None or self.failed:
                    print(f"--- {gw.name} log (tail) ---", file=sys.stderr)
                    with contextlib.suppress(Exception):
                        print(gw.log_text()[-4000:], file=sys.stderr, flush=True)
                with contextlib.suppress(Exception):
                    gw.stop()
            for gw in self.retired:
                with contextlib.suppress(Exception):
                    gw.stop()
            for node in self.nodes:  # SIGTERM all first, then wait for each
                with contextlib.suppress(Exception):
                    if node.proc.poll() is None:
                        node.proc.send_signal(signal.SIGTERM)
            for node in self.nodes:
                with contextlib.suppress(Exception):
                    node.stop()
            shutil.rmtree(self.workdir, ignore_errors=True)

    def close(self) -> None:
        self._stopped.set()


# -- measurement ------------------------------------------------------------------------------


@dataclass
class Result:
    deployment: str
    case: str
    messages: int
    seconds: float
    #: CPU seconds during the case: gateway, bench, master-<i>, replica-<i>, other
    cpu: dict[str, float]
    #: INFO commandstats deltas summed over the masters: calls, usec, wait_calls
    redis: dict[str, int]
    #: messages per master (by the topics' slots)
    per_master: list[int]
    extra: dict[str, Any] = field(default_factory=dict)
    pass_no: int = 1

    @property
    def rate(self) -> float:
        return self.messages / self.seconds

    def us(self, key: str) -> float:
        return 1e6 * self.cpu.get(key, 0.0) / self.messages

    def pct(self, key: str) -> float:
        return 100.0 * self.cpu.get(key, 0.0) / self.seconds

    def masters_us(self) -> float:
        return sum(self.us(k) for k in self.cpu if k.startswith("master-"))

    def replicas_us(self) -> float:
        return sum(self.us(k) for k in self.cpu if k.startswith("replica-"))

    def per_master_us(self) -> list[float]:
        return [
            1e6 * self.cpu[f"master-{i + 1}"] / n if n else 0.0
            for i, n in enumerate(self.per_master)
        ]


def schedstat_seconds(pid: int) -> float | None:
    """CPU time of the live threads of ``pid``, with nanosecond resolution (the first field
    of ``/proc/<pid>/task/<tid>/schedstat``); None without schedstat."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:  # the thread exited
            continue
        except (OSError, ValueError, IndexError):
            return None
    return total / 1e9


def median_result(results: list[Result]) -> Result:
    """One result of medians over passes: seconds, each process's CPU, each Redis count."""
    if len(results) == 1:
        return results[0]
    first = results[0]

    def med(values: list[float]) -> float:
        return float(statistics.median(values))

    return Result(
        first.deployment,
        first.case,
        first.messages,
        med([r.seconds for r in results]),
        {k: med([r.cpu[k] for r in results]) for k in first.cpu},
        {k: round(med([r.redis[k] for r in results])) for k in first.redis},
        first.per_master,
        {
            **{
                k: med([r.extra[k] for r in results])
                for k, v in first.extra.items()
                if isinstance(v, int | float) and all(k in r.extra for r in results)
            },
            "passes msg/s": ", ".join(fmt_rate(r.rate) for r in results),
        },
        0,
    )


class Meter:
    """CPU seconds of a deployment's redis-servers, a gateway and this process from /proc,
    and the masters' ``INFO commandstats``."""

    def __init__(self, dep: Deployment, gateway: GatewayProcess | None) -> None:
        self.dep = dep
        self.procs: dict[str, psutil.Process] = {"bench": psutil.Process()}
        if gateway is not None:
            self.procs["gateway"] = gateway.ps
        for i, node in enumerate(dep.masters):
            self.procs[f"master-{i + 1}"] = node.ps
        for i, node in enumerate(dep.replicas):
            self.procs[f"replica-{i + 1}"] = node.ps

    def cpu(self) -> dict[str, tuple[float, float]]:
        """Per process (run time of its threads in ns from ``/proc/<pid>/task/*/schedstat``,
        user + system in clock ticks from ``/proc/<pid>/stat``), both in seconds."""
        out = {}
        for name, proc in self.procs.items():
            t = proc.cpu_times()
            ticks = t.user + t.system
            precise = schedstat_seconds(proc.pid)
            out[name] = (ticks if precise is None else precise, ticks)
        m = psutil.cpu_times()
        machine = m.user + m.nice + m.system + m.irq + m.softirq + m.steal
        out["machine"] = (machine, machine)
        return out

    def commandstats(self) -> dict[str, int]:
        """Summed over the masters: commands run, µs inside them, WAITs, socket reads."""
        calls = usec = wait_calls = reads = 0
        for node in self.dep.masters:
            reads += int(info(node.client, "stats").get("total_reads_processed", 0))
            for name, stat in info(node.client, "commandstats").items():
                if name in ("cmdstat_info", "cmdstat_ping"):
                    continue
                calls += int(stat["calls"])
                usec += int(stat["usec"])
                if name == "cmdstat_wait":
                    wait_calls += int(stat["calls"])
        return {"calls": calls, "usec": usec, "wait_calls": wait_calls, "reads": reads}

    @contextlib.contextmanager
    def measure(self, out: dict[str, Any]) -> Iterator[None]:
        """Fills ``out["cpu"]`` and ``out["redis"]`` with the deltas over the block."""
        s0, c0 = self.commandstats(), self.cpu()
        yield
        c1, s1 = self.cpu(), self.commandstats()
        delta = {}
        for k in c0:
            precise, ticks = c1[k][0] - c0[k][0], c1[k][1] - c0[k][1]
            # a thread that exited during the block took its schedstat time with it: then
            # the process-wide tick count is the better figure
            delta[k] = ticks if ticks > precise + 0.03 else precise
        machine = delta.pop("machine")
        delta["other"] = max(0.0, machine - sum(delta.values()))
        out["cpu"] = delta
        out["redis"] = {k: s1[k] - s0[k] for k in s0}


# -- the cases on one deployment --------------------------------------------------------------


class DeploymentBench:
    def __init__(
        self, args: argparse.Namespace, env: Env, dep: Deployment, run_id: str, pass_no: int
    ) -> None:
        self.args = args
        self.pass_no = pass_no
        self.env = env
        self.dep = dep
        self.run_id = run_id
        self.n: int = args.messages
        self.k: int = args.topics
        self.schema = KeySchema(KEY_PREFIX)
        self.payload = os.urandom(PAYLOAD_SIZE)
        self.results: list[Result] = []
        self._names = 0

    # -- topics and keys --

    def stream(self, topic: str) -> str:
        return self.schema.topic(topic).stream

    def node(self, topic: str) -> RedisNode:
        return self.dep.masters[self.dep.master_of(self.stream(topic))]

    def topics(self, label: str) -> list[str]:
        """K fresh topic names, K/3 served by each cluster master (all of them on one node)."""
        quota = self.k // len(self.dep.masters)
        taken = [0] * len(self.dep.masters)
        out: list[str] = []
        while len(out) < self.k:
            self._names += 1
            name = (
                f"persistent://{NAMESPACE}/bench-{self.run_id}-p{self.pass_no}-{label}-"
                f"{self._names:04d}"
            )
            index = self.dep.master_of(self.stream(name))
            if taken[index] < quota:
                taken[index] += 1
                out.append(name)
        return out

    def per_master(self, topics: list[str], n: int) -> list[int]:
        counts = [0] * len(self.dep.masters)
        for topic in topics:
            counts[self.dep.master_of(self.stream(topic))] += n // len(topics)
        return counts

    def drop(self, topics: list[str]) -> None:
        """Delete every key of the topics (on their master) and their namespace entries."""
        for topic in topics:
            client = self.node(topic).client
            base = self.stream(topic)[: -len(":stream")]
            keys = list(client.scan_iter(match=glob_escape(base) + ":*", count=1000))
            if keys:
                client.delete(*keys)
        ns_key = self.schema.namespace_topics(NAMESPACE)
        ns_node = self.dep.masters[self.dep.master_of(ns_key)]
        with contextlib.suppress(redis.ResponseError):
            ns_node.client.srem(ns_key, *topics)

    def xlen(self, topics: list[str]) -> int:
        return sum(int(cmd(self.node(t).client, "XLEN", self.stream(t))) for t in topics)

    def pending(self, topics: list[str]) -> int:
        total = 0
        for t in topics:
            reply = cmd(self.node(t).client, "XPENDING", self.stream(t), SUBSCRIPTION)
            total += int(reply["pending"] if isinstance(reply, dict) else reply[0])
        return total

    def case_timeout(self) -> float:
        return 60.0 + self.n / 500.0

    def measured(
        self,
        case: str,
        messages: int,
        seconds: float,
        m: dict[str, Any],
        topics: list[str],
        extra: dict[str, Any] | None = None,
    ) -> Result:
        """Record a case measured by a :class:`Meter` (``m``) over ``topics``."""
        result = Result(
            self.dep.label,
            case,
            messages,
            seconds,
            m["cpu"],
            m["redis"],
            self.per_master(topics, messages),
            extra or {},
        )
        return self.record(result)

    def record(self, result: Result) -> Result:
        result.pass_no = self.pass_no
        self.results.append(result)
        extra = "".join(f", {k} {v}" for k, v in result.extra.items())
        self.env.log(
            f"{self.dep.label} {result.case}: {result.rate:,.0f} msg/s in {result.seconds:.2f}s; "
            f"µs/msg gateway {result.us('gateway'):.1f}, masters {result.masters_us():.1f}, "
            f"replicas {result.replicas_us():.1f}, bench {result.us('bench'):.1f}; "
            f"redis calls {result.redis['calls']:,}, reads {result.redis['reads']:,}, "
            f"WAIT {result.redis['wait_calls']:,}{extra}"
        )
        return result

    # -- raw redis-py --

    def _raw_xadd(self, topics: list[str], n: int, wait: int) -> int:
        """n XADDs spread round-robin over the topics' streams, in pipelines of PIPELINE
        commands per master (+ ``WAIT wait timeout`` when wait > 0), all masters' pipelines
        written before the replies are read. Returns how many WAITs timed out short."""
        keys_of: list[list[str]] = [[] for _ in self.dep.masters]
        for topic in topics:
            keys_of[self.dep.master_of(self.stream(topic))].append(self.stream(topic))
        share = [n * len(keys) // len(topics) for keys in keys_of]
        used = [(i, keys) for i, keys in enumerate(keys_of) if keys]
        conns = {i: self.dep.masters[i].client.connection_pool.get_connection() for i, _ in used}
        payload = self.payload
        short = 0
        sent = [0] * len(keys_of)
        try:
            while any(sent[i] < share[i] for i, _ in used):
                batches: list[tuple[int, int]] = []
                for i, keys in used:
                    count = min(PIPELINE, share[i] - sent[i])
                    if count <= 0:
                        continue
                    commands: list[tuple[Any, ...]] = [
                        ("XADD", keys[(sent[i] + j) % len(keys)], "*", "m", payload)
                        for j in range(count)
                    ]
                    if wait:
                        commands.append(("WAIT", wait, self.args.replica_ack_timeout_ms))
                    conn = conns[i]
                    packed = conn.pack_commands(commands)  # type: ignore[no-untyped-call]
                    conn.send_packed_command(packed)  # type: ignore[no-untyped-call]
                    batches.append((i, len(commands)))
                    sent[i] += count
                for i, replies in batches:
                    conn = conns[i]
                    for _ in range(replies - 1):
                        conn.read_response()
                    last = conn.read_response()
                    if wait and int(last) < wait:
                        short += 1
        finally:
            for i, conn in conns.items():
                self.dep.masters[i].client.connection_pool.release(conn)
        return short

    def raw_xadd(self, wait: int) -> tuple[Result, list[str]]:
        label = f"raw-xadd-wait{wait}" if wait else "raw-xadd"
        warm = self.topics(f"warm-{label}")
        self._raw_xadd(warm, self.args.warmup, wait)
        self.drop(warm)
        topics = self.topics(label)
        meter = Meter(self.dep, None)
        m: dict[str, Any] = {}
        with meter.measure(m):
            t0 = time.perf_counter()
            short = self._raw_xadd(topics, self.n, wait)
            t1 = time.perf_counter()
        if self.xlen(topics) != self.n:
            raise BenchError(f"{label}: {self.xlen(topics)} entries, expected {self.n}")
        extra = {"WAITs short of replicas": short} if wait else {}
        return self.measured(label, self.n, t1 - t0, m, topics, extra), topics

    def _raw_consume(self, topics: list[str]) -> int:
        got = 0
        for topic in topics:
            client, key = self.node(topic).client, self.stream(topic)
            cmd(client, "XGROUP", "CREATE", key, SUBSCRIPTION, "0")
            while True:
                reply = cmd(
                    client,
                    "XREADGROUP",
                    "GROUP",
                    SUBSCRIPTION,
                    "c1",
                    "COUNT",
                    PIPELINE,
                    "STREAMS",
                    key,
                    ">",
                )
                if not reply or not reply[0][1]:
                    break
                ids = [entry[0] for entry in reply[0][1]]
                cmd(client, "XACK", key, SUBSCRIPTION, *ids)
                got += len(ids)
        return got

    def raw_consume(self, topics: list[str]) -> Result:
        meter = Meter(self.dep, None)
        m: dict[str, Any] = {}
        with meter.measure(m):
            t0 = time.perf_counter()
            got = self._raw_consume(topics)
            t1 = time.perf_counter()
        if got != self.n or self.pending(topics):
            raise BenchError(f"raw consume read {got} of {self.n}")
        return self.measured("raw-consume", self.n, t1 - t0, m, topics)

    # -- through a gateway --

    @contextlib.contextmanager
    def gateway(self, name: str, extra: list[str]) -> Iterator[tuple[GatewayProcess, Any]]:
        gw = GatewayProcess(
            self.dep.url,
            self.env.workdir,
            name=f"{self.dep.label}-{name}-p{self.pass_no}".replace(" ", "-"),
            extra=extra,
            wait=False,
        )
        self.env.gateways.append(gw)
        gw.wait_ready()
        client = pulsar.Client(
            gw.url,
            operation_timeout_seconds=30,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        )
        self.env.clients.append(client)
        self.env.log(
            f"{self.dep.label}: gateway {name} pid {gw.proc.pid} on {gw.url} {' '.join(extra)}"
        )
        try:
            yield gw, client
        finally:
            with self.env.phase(f"stopping gateway {name}", 60):
                self.env.stop_gateway(gw, client)

    def _producers(self, client: Any, topics: list[str], batching: bool) -> list[Any]:
        return [
            client.create_producer(
                topic,
                batching_enabled=batching,
                batching_max_messages=1000,
                batching_max_publish_delay_ms=10,
                block_if_queue_full=True,
                max_pending_messages=self.args.max_pending,
                send_timeout_millis=30000,
            )
            for topic in topics
        ]

    def _produce(self, producers: list[Any], n: int) -> tuple[float, float]:
        """n messages round-robin over the producers; (first send, last receipt) times."""
        counter = AckCounter(n)
        payload = self.payload
        sends = [p.send_async for p in producers]
        k = len(sends)
        t0 = time.perf_counter()
        for i in range(n):
            sends[i % k](payload, counter)
        for p in producers:
            p.flush()
        if not counter.done.wait(self.case_timeout()):
            raise BenchError(f"only {counter.acks} of {n} sends acknowledged")
        if counter.errors:
            raise BenchError(f"send errors: {dict(counter.errors)}")
        return t0, counter.last

    def _consume(self, client: Any, topics: list[str], n: int) -> tuple[float, float, float]:
        """One Shared consumer on the topics: receive + ack n messages, then wait until Redis
        holds no pending entry. Returns (start, last receive, acks in Redis) times."""
        deadline = time.monotonic() + self.case_timeout()
        t0 = time.perf_counter()
        consumer = client.subscribe(
            topics,
            SUBSCRIPTION,
            consumer_type=pulsar.ConsumerType.Shared,
            receiver_queue_size=RECEIVER_QUEUE,
            initial_position=pulsar.InitialPosition.Earliest,
        )
        try:
            t1, t2 = receive_and_ack(consumer, n, deadline, lambda: self.pending(topics))
        finally:
            consumer.close()
        return t0, t1, t2

    def warm_up(self, client: Any) -> None:
        for batching in (True, False):
            warm = self.topics("warm")
            producers = self._producers(client, warm, batching)
            try:
                self._produce(producers, self.args.warmup)
            finally:
                for p in producers:
                    p.close()
            self._consume(client, warm, self.args.warmup)
            self.drop(warm)

    def gw_produce(self, gw: GatewayProcess, client: Any, label: str, batching: bool) -> list[str]:
        topics = self.topics(label)
        producers = self._producers(client, topics, batching)
        meter = Meter(self.dep, gw)
        m: dict[str, Any] = {}
        try:
            with meter.measure(m):
                t0, t1 = self._produce(producers, self.n)
        finally:
            for p in producers:
                p.close()
        gw.check_alive()
        self.measured(label, self.n, t1 - t0, m, topics, {"stream entries": self.xlen(topics)})
        return topics

    def gw_latency(self, gw: GatewayProcess, client: Any, label: str) -> None:
        """Synchronous sends, batching off, one topic: each receipt's round trip."""
        n = self.args.latency_sends
        topic = self.topics(label)[0]
        producer = self._producers(client, [topic], False)[0]
        payload, send, times = self.payload, producer.send, []
        meter = Meter(self.dep, gw)
        m: dict[str, Any] = {}
        try:
            for _ in range(min(200, n)):  # untimed: the topic's first appends
                send(payload)
            with meter.measure(m):
                t0 = time.perf_counter()
                for _ in range(n):
                    t = time.perf_counter()
                    send(payload)
                    times.append(time.perf_counter() - t)
                t1 = time.perf_counter()
        finally:
            producer.close()
        self.drop([topic])
        gw.check_alive()
        times.sort()
        self.measured(
            label,
            n,
            t1 - t0,
            m,
            [topic],
            {
                "p50 ms": round(1000 * times[len(times) // 2], 3),
                "p99 ms": round(1000 * times[min(len(times) - 1, len(times) * 99 // 100)], 3),
                "max ms": round(1000 * times[-1], 3),
            },
        )

    def gw_consume(self, gw: GatewayProcess, client: Any, label: str, topics: list[str]) -> None:
        meter = Meter(self.dep, gw)
        m: dict[str, Any] = {}
        with meter.measure(m):
            t0, t1, t2 = self._consume(client, topics, self.n)
        gw.check_alive()
        self.measured(
            label,
            self.n,
            t2 - t0,
            m,
            topics,
            {
                "receive-loop msg/s": round(self.n / (t1 - t0)),
                "ack tail ms": round(1000 * (t2 - t1), 1),
            },
        )

    def run(self, acks_extra: list[str] | None) -> None:
        env, limit = self.env, 2 * self.case_timeout() + 60
        with env.phase(f"{self.dep.label}: raw redis-py", 3 * limit):
            _, raw_topics = self.raw_xadd(0)
            self.raw_consume(raw_topics)
            self.drop(raw_topics)
            _, wait_topics = self.raw_xadd(1)
            self.drop(wait_topics)
        variants: list[tuple[str, list[str]]] = [("", [])]
        if acks_extra is not None:
            variants.append(("acks1-", acks_extra))
        for prefix, extra in variants:
            with (
                env.phase(f"{self.dep.label}: gateway {prefix or 'plain'} start-up", 120),
                self.gateway(prefix.rstrip("-") or "plain", extra) as (gw, client),
            ):
                with env.phase(f"{self.dep.label}: {prefix}warm-up", limit):
                    self.warm_up(client)
                for batching, fill in ((True, "batch"), (False, "nobatch")):
                    label = f"{prefix}produce-{'batching' if batching else 'nobatch'}"
                    with env.phase(f"{self.dep.label}: {label}", limit):
                        topics = self.gw_produce(gw, client, label, batching)
                    label = f"{prefix}consume-{fill}-filled"
                    with env.phase(f"{self.dep.label}: {label}", limit):
                        self.gw_consume(gw, client, label, topics)
                    self.drop(topics)
                if self.args.latency_sends:
                    label = f"{prefix}send-latency"
                    with env.phase(f"{self.dep.label}: {label}", limit):
                        self.gw_latency(gw, client, label)
        self.dep.check_roles()


def measure_idle(deployments: list[Deployment], seconds: float) -> dict[str, dict[str, Any]]:
    """CPU % of every redis-server with no client and no gateway (cron, cluster bus,
    replication pings): the floor under each case's per-message figures."""
    meters = {d.label: Meter(d, None) for d in deployments}
    before = {label: m.cpu() for label, m in meters.items()}
    time.sleep(seconds)
    out: dict[str, dict[str, Any]] = {}
    for label, meter in meters.items():
        after = meter.cpu()
        pct = {
            k: round(100.0 * (after[k][0] - before[label][k][0]) / seconds, 2)
            for k in after
            if k.startswith(("master-", "replica-"))
        }
        out[label] = {
            "masters %": [v for k, v in pct.items() if k.startswith("master-")],
            "replicas %": [v for k, v in pct.items() if k.startswith("replica-")],
        }
    return out


# -- slot distribution ------------------------------------------------------------------------


def distribution(dep: Deployment, names: list[str]) -> dict[str, Any]:
    schema = KeySchema(KEY_PREFIX)
    counts = [0] * len(dep.masters)
    slots = set()
    for name in names:
        key = schema.topic(name).stream
        slots.add(key_slot(key.encode()))
        counts[dep.master_of(key)] += 1
    return {
        "counts": counts,
        "min": min(counts),
        "max": max(counts),
        "stddev": statistics.pstdev(counts),
        "distinct slots": len(slots),
    }


def slot_distribution(dep: Deployment) -> dict[str, dict[str, Any]]:
    n = DISTRIBUTION_NAMES
    return {
        f"{n:,} topics persistent://public/default/t-<i>": distribution(
            dep, [f"persistent://{NAMESPACE}/t-{i}" for i in range(n)]
        ),
        f"{n:,} partitions of persistent://public/default/t (t-partition-<i>)": distribution(
            dep, [f"persistent://{NAMESPACE}/t-partition-{i}" for i in range(n)]
        ),
    }


# -- main -------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--messages",
        "-n",
        type=int,
        default=None,
        help="messages per case (default 100000; 60000 with --quick)",
    )
    p.add_argument("--quick", action="store_true", help="small run: N=60000, 2 passes")
    p.add_argument(
        "--passes",
        type=int,
        default=None,
        help="passes, single node and cluster in turn; medians are printed (default 3; "
        "2 with --quick)",
    )
    p.add_argument(
        "--topics",
        type=int,
        default=6,
        help="topics per case, a multiple of 3: K/3 on each cluster master (default 6)",
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=None,
        help="messages per warm-up (default N/20, between 1000 and 10000)",
    )
    p.add_argument(
        "--max-pending",
        type=int,
        default=10_000,
        help="producers' max_pending_messages (default 10000)",
    )
    p.add_argument(
        "--replica-ack-timeout-ms",
        type=int,
        default=1000,
        help="the WAIT timeout of the replica-ack cases, raw and gateway (default 1000)",
    )
    p.add_argument(
        "--latency-sends",
        type=int,
        default=None,
        help="synchronous sends of the latency case, per gateway (default 2000; 1000 with "
        "--quick; 0 skips it)",
    )
    p.add_argument(
        "--idle-seconds",
        type=float,
        default=None,
        help="seconds over which the redis-servers' idle CPU is measured (default 5; 2 with "
        "--quick)",
    )
    p.add_argument("--json", metavar="PATH", default=None, help="also write results as JSON")
    args = p.parse_args(argv)
    if args.latency_sends is None:
        args.latency_sends = 1000 if args.quick else 2000
    if args.idle_seconds is None:
        args.idle_seconds = 2.0 if args.quick else 5.0
    if args.messages is None:
        args.messages = 60_000 if args.quick else 100_000
    if args.passes is None:
        args.passes = 2 if args.quick else 3
    if args.warmup is None:
        args.warmup = max(1000, min(10_000, args.messages // 20))
    if args.topics <= 0 or args.topics % MASTERS:
        p.error("--topics must be a positive multiple of 3")
    if args.messages <= 0 or args.warmup <= 0 or args.passes <= 0 or args.latency_sends < 0:
        p.error("--messages, --warmup and --passes must be positive, --latency-sends >= 0")
    # whole messages per topic, in every case and warm-up
    args.messages = -(-args.messages // args.topics) * args.topics
    args.warmup = -(-args.warmup // args.topics) * args.topics
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    env = Env()
    log = env.log
    run_id = secrets.token_hex(3)
    results: list[Result] = []
    deployments: list[Deployment] = []
    distributions: dict[str, dict[str, Any]] = {}
    idle: dict[str, dict[str, Any]] = {}
    acks_note = ""
    version = "unknown"
    try:
        with env.phase("start-up", 180):
            flags = gateway_flags()
            acks_extra: list[str] | None = None
            if ACKS_FLAG in flags:
                extra = [ACKS_FLAG, "1"]
                if ACK_TIMEOUT_FLAG in flags:
                    extra += [ACK_TIMEOUT_FLAG, str(args.replica_ack_timeout_ms)]
                acks_extra = extra
                acks_note = f"ran with `{' '.join(extra)}`"
            else:
                acks_note = f"skipped: this gateway has no {ACKS_FLAG} flag (see --help)"
                log(f"replica-ack gateway cases {acks_note}")
            ports: set[int] = set()
            single = start_single(env.workdir, ports, env.nodes)
            deployments.append(single)
            log(
                f"single node: master :{single.masters[0].port}, replica :{single.replicas[0].port}"
            )
            cluster = start_cluster(env.workdir, ports, env.nodes)
            deployments.append(cluster)
            log(
                "cluster: "
                + ", ".join(
                    f"{m.name} :{m.port} (replica :{r.port})"
                    for m, r in zip(cluster.masters, cluster.replicas, strict=True)
                )
            )
            version = str(info(single.masters[0].client, "server")["redis_version"])
            distributions = slot_distribution(cluster)
            time.sleep(1.0)  # let start-up work (first syncs, gossip) settle
            idle = measure_idle(deployments, args.idle_seconds)
            log(f"idle redis-server CPU over {args.idle_seconds:.0f}s: {idle}")
        for pass_no in range(1, args.passes + 1):
            for dep in deployments:
                log(f"pass {pass_no}/{args.passes}: {dep.label}")
                bench = DeploymentBench(args, env, dep, run_id, pass_no)
                try:
                    bench.run(acks_extra)
                finally:
                    results.extend(bench.results)
        env.failed = False
    except KeyboardInterrupt:
        env.failed = False  # no log dump on ^C / SIGTERM
        raise
    finally:
        with env.phase("shutdown", 120):
            env.cleanup()
        env.close()

    runtime = time.monotonic() - env.started
    report(args, version, deployments, results, distributions, idle, acks_note, runtime)
    return {
        "args": vars(args),
        "redis_version": version,
        "deployments": {
            d.label: {
                "masters": [n.port for n in d.masters],
                "replicas": [n.port for n in d.replicas],
                "slots per master": [d.slot_count(i) for i in range(len(d.masters))],
            }
            for d in deployments
        },
        "replica_acks": acks_note,
        "results": [{**asdict(r), "rate": r.rate} for r in results],
        "slot_distribution": distributions,
        "idle_cpu_percent": idle,
        "runtime_seconds": runtime,
    }


CASES = [
    ("produce-batching", "produce, batching ON", "raw-xadd"),
    ("produce-nobatch", "produce, batching OFF", "raw-xadd"),
    ("consume-batch-filled", "consume Shared, ack each (batch-filled)", "raw-consume"),
    ("consume-nobatch-filled", "consume Shared, ack each (one msg per entry)", "raw-consume"),
    ("raw-xadd", "raw: pipelined XADD, 1 entry/msg", None),
    ("raw-consume", "raw: XREADGROUP 1000 + XACK", None),
]
ACK_CASES = [
    ("produce-batching", "produce, batching ON"),
    ("produce-nobatch", "produce, batching OFF"),
    ("consume-batch-filled", "consume (batch-filled)"),
    ("consume-nobatch-filled", "consume (one msg per entry)"),
    ("raw-xadd", "raw pipelined XADD"),
]


def report(
    args: argparse.Namespace,
    version: str,
    deployments: list[Deployment],
    results: list[Result],
    distributions: dict[str, dict[str, Any]],
    idle: dict[str, dict[str, Any]],
    acks_note: str,
    runtime: float,
) -> None:
    grouped: dict[tuple[str, str], list[Result]] = {}
    for result in results:
        grouped.setdefault((result.deployment, result.case), []).append(result)
    by = {key: median_result(rs) for key, rs in grouped.items()}
    single, cluster = deployments
    labels = [d.label for d in deployments]

    def get(dep: str, case: str) -> Result | None:
        return by.get((dep, case))

    def ratio(a: float | None, b: float | None) -> str:
        return "n/a" if a is None or b is None or not b else f"{a / b:.2f}"

    def rate(r: Result | None) -> float | None:
        return None if r is None else r.rate

    out: list[str] = []
    command = shlex.join([sys.executable, *sys.argv])
    out += [
        "# pulsar-redis-gateway Redis Cluster bench",
        "",
        f"- command: `{command}`",
        f'- Redis {version}, AOF off (`--save ""`); gateway {git_describe()}',
        f"- single node: 1 master + 1 replica; cluster: {MASTERS} masters + {MASTERS} replicas "
        f"(slots per master {', '.join(str(cluster.slot_count(i)) for i in range(MASTERS))}), "
        f"cluster-node-timeout {CLUSTER_NODE_TIMEOUT_MS} ms",
        f"- N = {args.messages:,} messages per case over {args.topics} topics "
        f"({args.topics // MASTERS} per cluster master), {PAYLOAD_SIZE}-byte payloads, "
        f"warm-up {args.warmup:,} messages per gateway; {args.passes} pass(es), single node "
        f"and cluster in turn{' (medians)' if args.passes > 1 else ''}",
        f"- client: pulsar-client {pulsar.__version__} in the bench process, "
        f"one producer per topic, max_pending_messages={args.max_pending}; one Shared "
        f"multi-topic consumer, receiver_queue_size={RECEIVER_QUEUE}; redis-py "
        f"{redis.__version__}; Python {platform.python_version()}; {os.cpu_count()} CPUs",
        f"- replica acks (`{ACKS_FLAG} 1`) gateway cases: {acks_note}",
        f"- idle redis-server CPU (no client, no gateway, {args.idle_seconds:.0f} s): "
        + "; ".join(
            f"{label}: masters {', '.join(f'{v:.2f}%' for v in d['masters %'])}, replicas "
            f"{', '.join(f'{v:.2f}%' for v in d['replicas %'])}"
            for label, d in idle.items()
        ),
        "",
        "| case | single node msg/s | vs raw | cluster msg/s | vs raw | cluster / single |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for key, label, raw_key in CASES:
        s, c = rate(get(single.label, key)), rate(get(cluster.label, key))
        if raw_key is None:
            out.append(f"| {label} | {fmt_rate(s)} | | {fmt_rate(c)} | | {ratio(c, s)} |")
            continue
        rs, rc = rate(get(single.label, raw_key)), rate(get(cluster.label, raw_key))
        out.append(
            f"| {label} | {fmt_rate(s)} | {ratio(s, rs)} | {fmt_rate(c)} | {ratio(c, rc)} "
            f"| {ratio(c, s)} |"
        )

    out += [
        "",
        "CPU per message (µs, from /proc: CPU seconds during the case / N); masters summed, "
        "then per master per message of the topics it serves; replicas summed; CPU % of the "
        "bench process (the client) and of every other process; from the masters' INFO: "
        "commands per message and messages per socket read (how full the pipelines are):",
        "",
        "| case | deployment | msg/s | gateway µs/msg | masters µs/msg | per master µs/msg "
        "| replicas µs/msg | Redis calls/msg | msgs/read | bench CPU | other CPU |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    order = [c[0] for c in CASES] + ["raw-xadd-wait1"]
    order += [f"acks1-{c[0]}" for c in ACK_CASES if not c[0].startswith("raw")]
    for key in order:
        for dep in labels:
            r = get(dep, key)
            if r is None:
                continue
            per = " / ".join(f"{v:.1f}" for v in r.per_master_us())
            out.append(
                f"| {key} | {dep} | {fmt_rate(r.rate)} | "
                f"{r.us('gateway'):.1f} | {r.masters_us():.1f} | {per} | "
                f"{r.replicas_us():.1f} | {r.redis['calls'] / r.messages:.2f} | "
                f"{r.messages / max(1, r.redis['reads']):.1f} | "
                f"{r.pct('bench'):.0f}% | {r.pct('other'):.0f}% |"
            )

    out += [
        "",
        f"Replica acks: each case without and with `WAIT 1` (gateway `{ACKS_FLAG} 1`; raw: one "
        "`WAIT 1` after each pipeline of 1000 XADDs per master):",
        "",
        "| case | deployment | msg/s | with WAIT 1 | ratio | masters µs/msg | with WAIT 1 "
        "| gateway µs/msg | with WAIT 1 | WAIT calls | msgs per WAIT |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, label in ACK_CASES:
        acked_key = "raw-xadd-wait1" if key.startswith("raw") else f"acks1-{key}"
        for dep in labels:
            base, acked = get(dep, key), get(dep, acked_key)
            if base is None:
                continue
            if acked is None:
                out.append(
                    f"| {label} | {dep} | {fmt_rate(base.rate)} | skipped | | "
                    f"{base.masters_us():.1f} | | {base.us('gateway'):.1f} | | | |"
                )
                continue
            waits = acked.redis["wait_calls"]
            out.append(
                f"| {label} | {dep} | {fmt_rate(base.rate)} | {fmt_rate(acked.rate)} | "
                f"{ratio(acked.rate, base.rate)} | {base.masters_us():.1f} | "
                f"{acked.masters_us():.1f} | {base.us('gateway'):.1f} | "
                f"{acked.us('gateway'):.1f} | {waits:,} | "
                f"{(acked.messages / waits if waits else 0):,.1f} |"
            )

    lat = [
        (dep, get(dep, "send-latency"), get(dep, "acks1-send-latency"))
        for dep in labels
        if get(dep, "send-latency") is not None
    ]
    if lat:
        out += [
            "",
            f"Send latency without and with `WAIT 1`: {args.latency_sends:,} synchronous "
            "`send()` calls, batching off, one topic, each from the call to its receipt (ms):",
            "",
            "| deployment | p50 | with WAIT 1 | p99 | with WAIT 1 | max | with WAIT 1 |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for dep, plain, acked in lat:
            assert plain is not None
            cells = []
            for k in ("p50 ms", "p99 ms", "max ms"):
                cells.append(f"{plain.extra[k]:.2f}")
                cells.append("skipped" if acked is None else f"{acked.extra[k]:.2f}")
            out.append(f"| {dep} | " + " | ".join(cells) + " |")

    if args.passes > 1:
        out += [
            "",
            "msg/s of each pass:",
            "",
            "| case | " + " | ".join(labels) + " |",
            "|---|" + "---|" * len(labels),
        ]
        for key in order:
            cells = [
                ", ".join(fmt_rate(r.rate) for r in grouped.get((dep, key), [])) or "n/a"
                for dep in labels
            ]
            if any(c != "n/a" for c in cells):
                out.append(f"| {key} | " + " | ".join(cells) + " |")

    out += [
        "",
        "Slot distribution: the master serving each name's stream key in the started cluster "
        f"(uniform hashing over three equal masters: standard deviation about "
        f"{(2 * DISTRIBUTION_NAMES / 9) ** 0.5:.1f}):",
        "",
        "| names | "
        + " | ".join(
            f"{m.name} ({cluster.slot_count(i)} slots)" for i, m in enumerate(cluster.masters)
        )
        + " | min | max | stddev | distinct slots |",
        "|---|" + "---:|" * (MASTERS + 4),
    ]
    for label, d in distributions.items():
        counts = " | ".join(str(c) for c in d["counts"])
        out.append(
            f"| {label} | {counts} | {d['min']} | {d['max']} | {d['stddev']:.1f} "
            f"| {d['distinct slots']} |"
        )
    ns_key = KeySchema(KEY_PREFIX).namespace_topics(NAMESPACE)
    out += [
        "",
        f"- the namespace's keys (`{ns_key}`, one hash tag) are on "
        f"{cluster.masters[cluster.master_of(ns_key)].name}",
        f"- load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        "",
        f"Runtime: {runtime:.1f}s",
    ]
    print("\n".join(out), flush=True)


def main(argv: list[str] | None = None) -> int:
    return run_cli(parse_args(argv), run)


if __name__ == "__main__":
    sys.exit(main())
