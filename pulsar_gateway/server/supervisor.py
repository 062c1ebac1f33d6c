"""``pulsar-gateway --workers N``: N gateway processes sharing this host's ports, under one
supervising process.

One gateway process runs its Python on one core at a time (the interpreter's global lock),
so one process uses about one core. The supervisor starts N workers, each a whole gateway
and a member of the fleet (its own gateway id, leases and consumers): they share nothing
but Redis and the ports, as a fleet's gateways behind a load balancer share nothing but
Redis. Each worker binds the binary, TLS and HTTP ports with ``SO_REUSEPORT``, and the
kernel spreads new connections over them (socket(7)).

The supervisor:

* starts the embedded redis-server when no ``--redis-url`` is given and hands its URL to
  the workers, and stops it last;
* starts each worker (``python -m pulsar_gateway.server.main`` with the same flags, and
  ``--workers 1``; its role in :data:`.workers.ROLE_ENV`) and waits for each to say it
  serves; a worker that exits before that stops the start, since its cause (a port taken,
  Redis refusing, a certificate that does not load) would stop every retry too;
* restarts a worker that exits later, after :attr:`Supervisor.backoff` seconds, doubled at
  each exit up to :attr:`Supervisor.max_backoff`, and back to the start once a worker has
  served for :attr:`Supervisor.stable_after` seconds;
* on SIGTERM or SIGINT sends SIGTERM to every worker, which drains as a single gateway does
  (its clients' connections closed, their consumers' unacknowledged messages handed back to
  their subscriptions), kills a worker still running after :attr:`Supervisor.grace`
  seconds, then stops the embedded Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from pulsar_gateway.core.storage import EmbeddedRedis
from pulsar_gateway.server.config import GatewayConfig
from pulsar_gateway.server.workers import ROLE_ENV, WorkerRole

__all__ = ["Supervisor", "WorkerFailed"]

log = logging.getLogger("pulsar_gateway.supervisor")


class WorkerFailed(Exception):
    """A worker exited before it served (its own log says why)."""


class _Worker:
    """One worker slot: the process now in it, restarted when it dies."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.process: asyncio.subprocess.Process | None = None
        self.urls = ""


class Supervisor:
    """Runs ``config.workers`` gateway processes until SIGTERM or SIGINT.

    Args:
        config: the gateway's settings (``workers`` > 1).
        argv: the flags the gateway was started with, given to each worker.
        backoff, max_backoff: the first and the longest wait before a restart (seconds).
        stable_after: how long a worker must serve for the next restart to wait
            ``backoff`` again.
        grace: how long shutdown waits for the workers to drain before killing them.
    """

    def __init__(
        self,
        config: GatewayConfig,
        argv: Sequence[str],
        *,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        stable_after: float = 60.0,
        grace: float = 30.0,
    ) -> None:
        self.config = config
        self.argv = list(argv)
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.stable_after = stable_after
        self.grace = grace
        self.workers = [_Worker(index) for index in range(1, config.workers + 1)]
        self._stopping = asyncio.Event()
        self._run_dir = ""
        self._redis_url = config.redis_url

    async def run(self) -> None:
        """Start the workers, keep them running until a signal, then drain them.

        Raises:
            WorkerFailed: a worker exited before it served.
        """
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._stopping.set)
        embedded = None
        self._run_dir = tempfile.mkdtemp(prefix="pulsar-gateway-workers-")
        try:
            if self._redis_url is None:
                embedded = EmbeddedRedis(self.config.data_dir, fsync=self.config.redis_fsync)
                self._redis_url = await embedded.start()
                log.info(
                    "no --redis-url given: the workers use the embedded redis-server at %s "
                    "(append-only persistence in %s)",
                    self._redis_url,
                    embedded.data_dir,
                )
            await self._start_all()
            if not self._stopping.is_set():
                log.info(
                    "ready: %s (%d workers, pids %s)",
                    self.workers[0].urls,
                    len(self.workers),
                    " ".join(str(w.process.pid) for w in self.workers if w.process),
                )
                keepers = [asyncio.ensure_future(self._keep(worker)) for worker in self.workers]
                await self._stopping.wait()
                # a restart in progress is abandoned: its worker is stopped with the others
                for keeper in keepers:
                    keeper.cancel()
                await asyncio.gather(*keepers, return_exceptions=True)
        finally:
            await self._stop_all()
            if embedded is not None:
                await embedded.stop()
            shutil.rmtree(self._run_dir, ignore_errors=True)
            log.info("supervisor stopped")

    async def _start_all(self) -> None:
        """Start every worker and wait until each serves, or until a signal.

        Raises:
            WorkerFailed: a worker exited before it served.
        """
        starts = [asyncio.ensure_future(self._start(worker)) for worker in self.workers]
        stopping = asyncio.ensure_future(self._stopping.wait())
        pending: set[asyncio.Future[Any]] = {*starts, stopping}
        try:
            while pending != {stopping} and not stopping.done():
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for finished in done - {stopping}:
                    finished.result()
        finally:
            stopping.cancel()
            for start in starts:
                start.cancel()
                if start.done() and not start.cancelled():
                    start.exception()  # the first one raised; the others' are its echo

    async def _start(self, worker: _Worker) -> None:
        """Start a worker's process and wait until it serves.

        Raises:
            WorkerFailed: it exited first.
        """
        ours, theirs = socket.socketpair()
        role = WorkerRole(
            worker.index,
            len(self.workers),
            self._run_dir,
            theirs.fileno(),
            supervisor_pid=os.getpid(),
        )
        args = [*self.argv, "--workers", "1"]
        if self._redis_url != self.config.redis_url:
            args += ["--redis-url", str(self._redis_url)]
        try:
            worker.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "pulsar_gateway.server.main",
                *args,
                env={**os.environ, ROLE_ENV: role.to_env()},
                pass_fds=(theirs.fileno(),),
                stdin=asyncio.subprocess.DEVNULL,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        # the worker writes one line once it serves; end of stream: it exited first
        reader, writer = await asyncio.open_connection(sock=ours)
        try:
            line = await reader.readline()
        finally:
            writer.close()
        if not line:
            code = await worker.process.wait()
            raise WorkerFailed(f"worker {worker.index} exited ({code}) before it served")
        worker.urls = line.decode().strip()
        log.info("worker %d (pid %d) serves", worker.index, worker.process.pid)

    async def _keep(self, worker: _Worker) -> None:
        """Restart ``worker`` whenever it exits (until cancelled at shutdown)."""
        delay = self.backoff
        while True:
            process = worker.process
            started = time.monotonic()
            if process is not None:
                await process.wait()
                if self._stopping.is_set():
                    return  # it had the signal too (Ctrl-C reaches the whole process group)
                if time.monotonic() - started >= self.stable_after:
                    delay = self.backoff
                log.error(
                    "worker %d (pid %d) exited (%s): restarting it in %.0f s",
                    worker.index,
                    process.pid,
                    process.returncode,
                    delay,
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.max_backoff)
            try:
                await self._start(worker)
            except WorkerFailed as exc:
                log.error("%s", exc)

    async def _stop_all(self) -> None:
        """SIGTERM to every worker, then wait for them to drain (kill after the grace)."""
        running = [
            w.process
            for w in self.workers
            if w.process is not None and w.process.returncode is None
        ]
        for process in running:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        if not running:
            return
        log.info("stopping %d workers", len(running))
        _, late = await asyncio.wait(
            [asyncio.ensure_future(p.wait()) for p in running], timeout=self.grace
        )
        if late:
            log.error("%d workers did not stop within %.0f s: killing them", len(late), self.grace)
            for process in running:
                if process.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
            await asyncio.gather(*late)
