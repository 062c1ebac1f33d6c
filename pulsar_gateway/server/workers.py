"""One worker of ``pulsar-gateway --workers N``: what it is told by its supervisor, and
its part of the host's ``/metrics``.

A worker is a whole gateway sharing the host's ports with its siblings (``SO_REUSEPORT``);
:mod:`.supervisor` starts it with the same flags and describes its role in one environment
variable (:data:`ROLE_ENV`): its number, how many there are, the run directory they share,
the socket to say "ready" on, and the supervisor's pid (a worker whose supervisor is gone
stops: nothing would restart it or stop it at shutdown).

Metrics. A scrape of the host's HTTP port reaches any one worker, so each worker's answer
holds every worker's per-process series (connections, commands, messages, errors, HTTP
requests, the lateness histogram), labelled ``worker="<n>"``; the fleet-wide topic series
are the host's share (:meth:`pulsar_gateway.core.fleet.membership.Fleet.metrics_share`).
Each worker serves its own series on a Unix socket in the run directory
(``worker-<n>.sock``: connect, read to the end); the worker answering a scrape reads its
siblings' and merges the families. ``prometheus_client``'s multiprocess mode gathers
processes' metrics too, but only for the library's own metric classes, each update written
to a memory-mapped file; the gateway's hot-path counters are plain integers read by a
collector at scrape time (:mod:`pulsar_gateway.core.fleet.metrics`), which that mode
cannot see. A worker that does not answer within :data:`SIBLING_TIMEOUT` (dead, or being
restarted) is missing from that scrape; a restarted worker's counters start from zero,
which Prometheus's ``rate()`` reads as a counter reset.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from pulsar_gateway.core.periodic import Periodic

__all__ = ["ROLE_ENV", "SIBLING_TIMEOUT", "WORKER_LABEL", "WorkerMetrics", "WorkerRole"]

log = logging.getLogger("pulsar_gateway.workers")

#: The environment variable holding a worker's role (JSON), set by the supervisor only.
ROLE_ENV: Final = "_PULSAR_GATEWAY_WORKER"
#: The label telling the workers' per-process series apart.
WORKER_LABEL: Final = "worker"
#: How long a scrape waits for a sibling's series.
SIBLING_TIMEOUT: Final = 1.0


@dataclass(frozen=True, slots=True)
class WorkerRole:
    """What a worker is told by its supervisor.

    Attributes:
        index: this worker's number, 1..``count``.
        count: how many workers share the ports.
        run_dir: the directory of the workers' metrics sockets.
        ready_fd: the socket this worker writes its URLs to once it serves (-1: none).
        supervisor_pid: the supervisor; the worker stops when it is gone.
    """

    index: int
    count: int
    run_dir: str
    ready_fd: int = -1
    supervisor_pid: int = 0

    def to_env(self) -> str:
        return json.dumps(
            {
                "index": self.index,
                "count": self.count,
                "run_dir": self.run_dir,
                "ready_fd": self.ready_fd,
                "supervisor_pid": self.supervisor_pid,
            }
        )

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> WorkerRole | None:
        """The role the supervisor gave this process; None when it was not started as a
        worker."""
        text = (os.environ if environ is None else environ).get(ROLE_ENV)
        if not text:
            return None
        data = json.loads(text)
        return cls(
            int(data["index"]),
            int(data["count"]),
            str(data["run_dir"]),
            int(data["ready_fd"]),
            int(data["supervisor_pid"]),
        )

    def socket_path(self, index: int) -> Path:
        """Where worker ``index`` serves its per-process series."""
        return Path(self.run_dir) / f"worker-{index}.sock"

    def announce_ready(self, urls: Iterable[str]) -> None:
        """Tell the supervisor this worker serves (its URLs, one line), once."""
        if self.ready_fd < 0:
            return
        with contextlib.suppress(OSError), socket.socket(fileno=self.ready_fd) as channel:
            channel.sendall((", ".join(urls) + "\n").encode())

    def orphaned(self) -> bool:
        """Whether the supervisor is gone (this process was handed to another parent)."""
        return os.getppid() != self.supervisor_pid


def watch_supervisor(role: WorkerRole, stop: asyncio.Event) -> Periodic:
    """A loop that sets ``stop`` once the supervisor is gone (killed with SIGKILL, say):
    a worker left alone would serve on with nobody to restart or stop it."""

    async def check() -> None:
        if role.orphaned():
            log.warning("the supervisor (pid %d) is gone: stopping", role.supervisor_pid)
            stop.set()

    return Periodic("supervisor watch", 1.0, check)


class _Families:
    """Metric families as a collector (what ``generate_latest`` takes)."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def labelled(families: Iterable[Metric], worker: str) -> Iterator[Metric]:
    """``families`` with every sample labelled ``worker``."""
    for family in families:
        out = Metric(family.name, family.documentation, family.type, family.unit)
        out.samples = [
            sample._replace(labels={**sample.labels, WORKER_LABEL: worker})
            for sample in family.samples
        ]
        yield out


def merge(texts: Iterable[str]) -> bytes:
    """One exposition of several workers' expositions: each family once, holding every
    worker's samples (the text format wants a family's samples together)."""
    families: dict[str, Metric] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            known = families.get(family.name)
            if known is None:
                families[family.name] = family
            else:
                known.samples.extend(family.samples)
    return generate_latest(_Families(families.values()))


class WorkerMetrics:
    """Serves this worker's per-process series to its siblings, and gathers theirs.

    Args:
        registry: this worker's metrics (:class:`pulsar_gateway.core.GatewayMetrics`).
        role: this worker's role (its number, its siblings' sockets).
    """

    def __init__(self, registry: CollectorRegistry, role: WorkerRole) -> None:
        self._registry = registry
        self._role = role
        self._server: asyncio.Server | None = None

    def own(self) -> bytes:
        """This worker's series, labelled with its number."""
        return generate_latest(_Families(labelled(self._registry.collect(), str(self._role.index))))

    async def start(self) -> None:
        path = self._role.socket_path(self._role.index)
        path.unlink(missing_ok=True)  # left by this worker's predecessor, killed
        self._server = await asyncio.start_unix_server(self._answer, path=str(path))

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            writer.write(self.own())
            await writer.drain()
        except OSError:
            pass  # the sibling gave up waiting
        finally:
            writer.close()

    async def _sibling(self, index: int) -> str:
        path = self._role.socket_path(index)
        try:
            async with asyncio.timeout(SIBLING_TIMEOUT):
                reader, writer = await asyncio.open_unix_connection(str(path))
                try:
                    return (await reader.read()).decode()
                finally:
                    writer.close()
        except (OSError, TimeoutError) as exc:
            log.debug("worker %d's metrics not read: %s", index, exc)
            return ""

    async def host(self) -> bytes:
        """Every worker's per-process series (this one's, then its siblings')."""
        role = self._role
        siblings = [i for i in range(1, role.count + 1) if i != role.index]
        texts = await asyncio.gather(*(self._sibling(i) for i in siblings))
        return merge([self.own().decode(), *texts])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._role.socket_path(self._role.index).unlink(missing_ok=True)
