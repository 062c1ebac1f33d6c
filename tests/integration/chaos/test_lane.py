"""The storage lane when Redis fails in awkward places: every caller gets an answer, and a
Redis that stays away costs a few connection attempts, not a loop of them.

Each test runs its own ``redis-server`` (or a TCP listener that plays a broken one), so it
can make Redis misbehave without disturbing the rest of the suite.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import socket
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis
from redis.asyncio import Redis
from redis.asyncio.connection import Connection, ConnectionPool

from pulsar_gateway.core.errors import StorageError
from pulsar_gateway.core.model.subscription_type import SubscriptionType
from pulsar_gateway.core.storage import lane as lane_module
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import subscriptions
from pulsar_gateway.core.storage.scripts.subscriptions import SubscribeReply
from tests.conftest import ON_CLUSTER, TIMEOUT, redis_server_binary, start_redis_server

pytestmark = pytest.mark.skipif(ON_CLUSTER, reason="each test runs a Redis of its own")

KEYS = KeySchema("pgw").topic("persistent://public/default/lane").subscription("s")


@pytest.fixture
def own_redis() -> Iterator[tuple[Any, int]]:
    """A redis-server of the test's own: (process, port)."""
    workdir = tempfile.mkdtemp(prefix="pgw-lane-redis-")
    proc, port = start_redis_server(redis_server_binary(), workdir)
    try:
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(TIMEOUT)
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
async def own_lane(own_redis: tuple[Any, int]) -> AsyncIterator[Lane]:
    _, port = own_redis
    client = Redis(port=port, protocol=2)
    lane = Lane(client)
    await lane.load_scripts()
    yield lane
    with contextlib.suppress(Exception):
        await asyncio.wait_for(lane.close(), TIMEOUT)
    await client.aclose()


def subscribe(lane: Lane, uid: str) -> asyncio.Future[SubscribeReply]:
    return subscriptions.subscribe(
        lane,
        KEYS,
        subscription="s",
        subscription_type=SubscriptionType.SHARED,
        start_position=b"0-0",
        consumer=uid,
        consumer_name=uid,
        lease_ms=10_000,
        priority_level=0,
        partition=-1,
        key_shared=None,
        durable=True,
    )


async def test_a_failed_script_reload_fails_the_refused_calls(own_redis, own_lane):
    """Redis lost the scripts (SCRIPT FLUSH, as after a restart) and the reload fails (here
    Redis now wants a password the gateway does not have): the calls Redis refused with
    NOSCRIPT fail with a StorageError, and the commands Redis answered in the same pipeline
    keep their answers. None is left unresolved."""
    _, port = own_redis
    assert await own_lane.call("PING") == b"PONG"  # the lane's connection is open
    await own_lane.redis.connection_pool.disconnect()  # the reload needs a new connection
    with redis.Redis(port=port) as admin:
        admin.script_flush()
        admin.config_set("requirepass", "not-the-gateway's")
    script_call = subscribe(own_lane, "g-1")
    plain = own_lane.call("PING")
    _, pending = await asyncio.wait([script_call, plain], timeout=TIMEOUT)
    assert not pending, "a call of the pipeline was never answered"
    assert plain.result() == b"PONG"
    with pytest.raises(StorageError, match="Redis is unavailable"):
        script_call.result()


async def test_a_failed_script_reload_fails_refused_calls_of_every_pipeline(own_redis, own_lane):
    """Several pipelines in flight when Redis answers NOSCRIPT: the first pipeline's reader
    does the reload; when it fails, its refused calls and the later pipelines' calls all
    get an answer."""
    _, port = own_redis
    await own_lane.call("PING")
    await own_lane.redis.connection_pool.disconnect()
    with redis.Redis(port=port) as admin:
        admin.script_flush()
        admin.config_set("requirepass", "secret")
    calls = []
    for i in range(12):
        calls.append(subscribe(own_lane, f"g-{i}"))
        calls.append(own_lane.call("PING"))
        if i % 3 == 0:
            await asyncio.sleep(0)  # a pipeline goes out
    done, pending = await asyncio.wait(calls, timeout=TIMEOUT)
    assert not pending
    for fut in done:
        fut.exception()  # every outcome is read
    assert all(isinstance(c.exception(), StorageError) for c in calls[0::2])


class _ExplodingConnection(Connection):
    """A connection whose opening fails with an error that is neither Redis's nor the
    socket's (a library bug, an unexpected TLS state)."""

    attempts = 0

    async def connect(self) -> None:
        _ExplodingConnection.attempts += 1
        raise RuntimeError("not a RedisError")


async def test_an_unexpected_connect_failure_backs_off(caplog):
    """Opening the connection fails with something other than a RedisError or OSError:
    the queued commands fail with StorageError, the lane tries again with back-off (not in
    a tight loop), and says so once."""
    pool = ConnectionPool(connection_class=_ExplodingConnection)
    client = Redis(connection_pool=pool)
    lane = Lane(client)
    _ExplodingConnection.attempts = 0
    caplog.set_level(logging.INFO, logger=lane_module.__name__)
    outcomes = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 1.0
    while loop.time() < deadline:
        try:
            await asyncio.wait_for(lane.call("PING"), TIMEOUT)
        except StorageError:
            outcomes.append("error")
    # 50 ms doubling to 2 s: at most a handful of attempts in a second, however many
    # commands arrive meanwhile
    assert 2 <= _ExplodingConnection.attempts <= 6, _ExplodingConnection.attempts
    assert len(outcomes) >= 2
    warnings = [r for r in caplog.records if "unreachable" in r.getMessage()]
    assert len(warnings) == 1
    await client.aclose()


async def test_a_redis_that_never_answers_the_connection_times_out(monkeypatch):
    """A server that accepts TCP and then stays silent (a stopped Redis): the connection
    attempt gives up after CONNECT_TIMEOUT and the queued command fails, rather than
    waiting forever."""
    monkeypatch.setattr(lane_module, "CONNECT_TIMEOUT", 0.3)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        client = Redis(port=port, protocol=2)
        lane = Lane(client)
        started = asyncio.get_running_loop().time()
        with pytest.raises(StorageError):
            await asyncio.wait_for(lane.call("PING"), TIMEOUT)
        assert asyncio.get_running_loop().time() - started < 0.3 + 2.0
        await client.aclose()


async def test_the_lane_reconnects_once_redis_is_back(own_redis, caplog):
    """Redis killed and started again on its port: calls fail meanwhile, then succeed, and
    the recovery is logged once."""
    proc, port = own_redis
    client = Redis(port=port, protocol=2)
    lane = Lane(client)
    caplog.set_level(logging.INFO, logger=lane_module.__name__)
    assert await lane.call("PING") == b"PONG"
    proc.kill()
    proc.wait(TIMEOUT)
    with pytest.raises(StorageError):
        await asyncio.wait_for(lane.call("PING"), TIMEOUT)
    with pytest.raises(StorageError):
        await asyncio.wait_for(lane.call("PING"), TIMEOUT)
    workdir = tempfile.mkdtemp(prefix="pgw-lane-redis-")
    binary = redis_server_binary()
    restarted = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", workdir],
        stdout=subprocess.DEVNULL,
    )
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TIMEOUT
        while True:
            try:
                assert await asyncio.wait_for(lane.call("PING"), TIMEOUT) == b"PONG"
                break
            except StorageError:
                assert loop.time() < deadline, "the lane never reconnected"
                await asyncio.sleep(0.1)
        assert sum("reachable again" in r.getMessage() for r in caplog.records) == 1
    finally:
        await lane.close()
        await client.aclose()
        restarted.kill()
        restarted.wait(TIMEOUT)
        shutil.rmtree(workdir, ignore_errors=True)
