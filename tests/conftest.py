"""Fixtures shared by the test suite.

* ``redis_url`` (session): a real ``redis-server`` started from PATH in a temp dir on a free
  port, or the server named by ``PGW_TEST_REDIS_URL`` (compose, CI services). Skips cleanly
  when neither exists, so unit tests still run anywhere.
* ``redis_clean`` (function): flushes that server before the test.
* ``PGW_TEST_REDIS_CLUSTER=1`` puts both on a real Redis Cluster instead (3 masters and
  3 replicas, :mod:`tests.redis_cluster`): ``redis_url`` names one of its nodes (every
  gateway then runs its cluster lane) and ``redis_clean`` is a ``redis.cluster.RedisCluster``
  client. The files marked ``cluster`` are the ones ``./dev test`` runs that way too.
* ``gateway`` / ``gateway_factory``: real gateways on that Redis, each running in its own
  thread and event loop (the official client's sync API blocks, so the gateway must not share
  the test's loop). ``gateway_process`` runs one as a subprocess of the real
  ``pulsar-gateway`` command, for signal and kill tests.
* ``client_factory``: official ``pulsar.Client`` objects, closed after the test.

Every gateway a test starts records the storage commands a Redis Cluster would refuse
(keys of several slots, or a ``SCAN`` that sees one node); stopping it fails the test if
there were any.

Timeouts are written in units of ``TIMEOUT`` seconds, scaled by ``PGW_TEST_TIME_SCALE``.

Every test under ``tests/integration/<kind>/`` gets the marker of its kind
(:data:`KIND_MARKERS`), so ``-m "not spark"`` leaves out the Spark tests.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.asyncio import Redis as AsyncRedis
from redis.cluster import RedisCluster as ClusterClient

from pulsar_gateway.core.model.entry import BROKER_TIME
from pulsar_gateway.core.model.topic_name import parse_topic_name
from pulsar_gateway.core.storage import ClusterLane
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.server.config import GatewayConfig
from pulsar_gateway.server.main import Gateway

ROOT = Path(__file__).resolve().parent.parent
TIME_SCALE = float(os.environ.get("PGW_TEST_TIME_SCALE", "1"))
#: A generous "should have happened by now" in seconds.
TIMEOUT = 10.0 * TIME_SCALE
#: The tests run on a real Redis Cluster (``PGW_TEST_REDIS_CLUSTER=1``), not one node.
ON_CLUSTER = os.environ.get("PGW_TEST_REDIS_CLUSTER", "") not in ("", "0")


#: The folders of ``tests/integration`` whose tests carry a marker of the same name (declared
#: in pyproject.toml); the other folders group ordinary tests and add none.
KIND_MARKERS = ("spark", "chaos", "fuzz", "docker", "process", "console")
INTEGRATION = ROOT / "tests" / "integration"


# tryfirst: the marks must be on the items before pytest's own hook deselects by ``-m``
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(INTEGRATION):
            kind = item.path.relative_to(INTEGRATION).parts[0]
            if kind in KIND_MARKERS:
                item.add_marker(kind)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate: Callable[[], Any], timeout: float = TIMEOUT, interval: float = 0.02) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout:.1f}s")
        time.sleep(interval)


def stream_key(topic: str) -> str:
    """The Redis stream of a topic (short or full name), from the one key-schema owner."""
    return KeySchema().topic(parse_topic_name(topic)).stream


def broker_time(client: redis.Redis | ClusterClient, topic: str, message_id: Any) -> int:
    """When Redis stored the entry of ``message_id`` (an official client's id): its broker
    timestamp, ms. Entry ids say nothing of time since ledgers."""
    sid = f"{message_id.ledger_id()}-{message_id.entry_id()}"
    ((_, fields),) = client.xrange(stream_key(topic), sid, sid)
    return int(fields[BROKER_TIME])


def data_keys(client: redis.Redis | ClusterClient) -> list[str]:
    """Every key in Redis but the fleet's bookkeeping, sorted: the gateway registry, the
    gateways' descriptions of themselves and the rate reports (written by any live gateway)
    and the tenant registry (which holds the standalone defaults from the start). For tests
    that check what a topic leaves behind.
    ``SCAN`` (not ``KEYS``, which a cluster client sends to one node): on a cluster, the
    client walks every master."""
    schema = KeySchema()
    registry = schema.tenant_namespaces("")
    return sorted(
        key
        for key in {k.decode() for k in client.scan_iter()}
        if key not in (schema.gateways, schema.gateway_info, schema.tenants)
        and not key.startswith(registry)
        and not key.endswith(":gateway-stats")
    )


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name unique to the test (Redis is flushed per test as well)."""
    name = re.sub(r"[^A-Za-z0-9-]+", "-", request.node.name).strip("-")
    return f"t-{name}"[:200]


# -- Redis ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    if ON_CLUSTER:
        yield from _cluster_url()
        return
    url = os.environ.get("PGW_TEST_REDIS_URL")
    if url:
        yield url
        return
    binary = redis_server_binary()
    workdir = tempfile.mkdtemp(prefix="pgw-test-redis-")
    proc, port = start_redis_server(binary, workdir)
    try:
        yield f"redis://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


def _cluster_url() -> Iterator[str]:
    """A real Redis Cluster (3 masters, 3 replicas) for the session; the URL of one node."""
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        pytest.fail("PGW_TEST_REDIS_CLUSTER needs redis-server and redis-cli on PATH")
    from tests.redis_cluster import RedisCluster  # it imports this module

    cluster = RedisCluster().start()
    try:
        yield cluster.url
    finally:
        cluster.stop()


def redis_server_binary() -> str:
    """The ``redis-server`` on PATH; CI must have one (``./dev test`` installs it), elsewhere
    the tests that need it are skipped."""
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("CI must provide redis-server (.ci/run installs it)")
        pytest.skip("no redis-server on PATH and PGW_TEST_REDIS_URL not set")
    return binary


def start_redis_server(
    binary: str, workdir: str, *extra: str
) -> tuple[subprocess.Popen[bytes], int]:
    """A ``redis-server`` on a free loopback port, files in ``workdir``, no persistence,
    ``extra`` arguments last (``--replicaof``...); returns once it answers."""
    port = free_port()
    proc = subprocess.Popen(
        [
            *(binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""),
            *("--appendonly", "no", "--dir", workdir),
            *("--logfile", os.path.join(workdir, "redis.log"), *extra),
        ],
    )
    with redis.Redis(port=port) as client:
        wait_for(lambda: _pings(client))
    return proc, port


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


@pytest.fixture
def redis_clean(redis_url: str) -> Iterator[redis.Redis]:
    """A sync client on the test Redis, flushed before the test. On a cluster
    (``PGW_TEST_REDIS_CLUSTER``) a ``redis.cluster.RedisCluster``, whose ``FLUSHALL`` and
    ``scan_iter`` reach every master and whose key commands go to the key's master."""
    kind: Any = ClusterClient if ON_CLUSTER else redis.Redis
    client = kind.from_url(redis_url)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
async def storage(redis_clean: redis.Redis, redis_url: str) -> AsyncIterator[Lane]:
    """A storage lane on the flushed test Redis, scripts loaded: for tests of the scripts
    and their typed calls without a gateway."""
    client = AsyncRedis.from_url(redis_url, protocol=2)
    lane = Lane(client)
    await lane.load_scripts()
    yield lane
    await lane.close()
    await client.aclose()


# -- gateways ------------------------------------------------------------------------------


def audit_slots(gateway: Gateway) -> list[str]:
    """Record every command of ``gateway``'s storage lane that a Redis Cluster would refuse
    (keys of several slots) or that would see one node only (``SCAN``); the list is checked
    empty when the gateway stops, so every integration test also proves its traffic fits a
    cluster."""
    from pulsar_gateway.core.storage.slots import CrossSlot, command_slot

    problems: list[str] = []
    assert gateway.core is not None

    def audit(args: Any, script: Any) -> None:
        name = script.name if script is not None else str(args[0])
        try:
            command_slot(args)
            if str(args[0]).upper() in ("SCAN", "KEYS"):
                problems.append(f"{name}: walks one node's keys only")
        except CrossSlot as exc:
            problems.append(f"{name}: {exc}")

    gateway.core.lane.audit = audit
    return problems


class GatewayThread:
    """A real gateway on its own event loop in a background thread."""

    def __init__(self, config: GatewayConfig) -> None:
        self.gateway = Gateway(config)
        self.slot_problems: list[str] = []
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def start(self) -> GatewayThread:
        self._thread.start()
        self.call(self.gateway.start())
        self.slot_problems = audit_slots(self.gateway)
        return self

    def call(self, coro: Any, timeout: float = TIMEOUT) -> Any:
        """Run a coroutine on the gateway's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.gateway.port}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.gateway.http_port}"

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        try:
            self.call(self.gateway.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(TIMEOUT)
            self.loop.close()
        assert self.slot_problems == [], "commands a Redis Cluster would refuse"


def make_config(redis_url: str, **overrides: Any) -> GatewayConfig:
    base = GatewayConfig(
        port=0, http_port=0, bind="127.0.0.1", redis_url=redis_url, log_level="INFO"
    )
    return replace(base, **overrides)


@pytest.fixture
def gateway_factory(
    redis_clean: redis.Redis, redis_url: str
) -> Iterator[Callable[..., GatewayThread]]:
    started: list[GatewayThread] = []

    def factory(**overrides: Any) -> GatewayThread:
        gw = GatewayThread(make_config(redis_url, **overrides)).start()
        started.append(gw)
        if ON_CLUSTER and gw.gateway.config.redis_url == redis_url:
            assert gw.gateway.core is not None
            assert isinstance(gw.gateway.core.lane, ClusterLane), "not on the Redis Cluster"
        return gw

    yield factory
    for gw in reversed(started):
        gw.stop()


@pytest.fixture
def gateway(gateway_factory: Callable[..., GatewayThread]) -> GatewayThread:
    return gateway_factory()


class GatewayProcess:
    """The real ``pulsar-gateway`` command in a subprocess."""

    def __init__(
        self,
        args: list[str],
        env: dict[str, str] | None = None,
        *,
        port: int | None = None,
        http_port: int | None = None,
    ) -> None:
        self.port = port or free_port()
        self.http_port = http_port or free_port()
        self.log_path = Path(tempfile.mkstemp(prefix="pgw-gateway-", suffix=".log")[1])
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pulsar_gateway.server.main",
                "--port",
                str(self.port),
                "--http-port",
                str(self.http_port),
                "--bind",
                "127.0.0.1",
                *args,
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
        )

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 3 * TIMEOUT) -> GatewayProcess:
        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"gateway exited early:\n{self.log()}")
            return "ready:" in self.log()

        wait_for(ready, timeout)
        return self

    def stop(self, sig: int = 15, timeout: float = 2 * TIMEOUT) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout)
        self._log.close()
        return int(self.proc.returncode)


@pytest.fixture
def gateway_process() -> Iterator[Callable[..., GatewayProcess]]:
    started: list[GatewayProcess] = []

    def factory(*args: str, env: dict[str, str] | None = None) -> GatewayProcess:
        gp = GatewayProcess(list(args), env)
        started.append(gp)
        return gp

    yield factory
    for gp in started:
        if gp.proc.poll() is None:
            gp.proc.kill()
            gp.proc.wait(TIMEOUT)
        gp._log.close()
        gp.log_path.unlink(missing_ok=True)


# -- the official client -------------------------------------------------------------------


@pytest.fixture
def client_factory() -> Iterator[Callable[..., Any]]:
    import pulsar

    clients: list[Any] = []

    def factory(url: str, **kwargs: Any) -> Any:
        kwargs.setdefault("operation_timeout_seconds", 10)
        kwargs.setdefault("logger", pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        client = pulsar.Client(url, **kwargs)
        clients.append(client)
        return client

    yield factory
    for client in clients:
        try:
            client.close()
        except pulsar.AlreadyClosed:  # the test closed it itself
            pass


@pytest.fixture
def client(gateway: GatewayThread, client_factory: Callable[..., Any]) -> Any:
    return client_factory(gateway.url)
