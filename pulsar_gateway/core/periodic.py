"""Background work that repeats: one task per job, stepped by tests, stopped cleanly.

Lease renewals, the fleet heartbeat, rate reports and maintenance rounds each run as a
:class:`Periodic`: ``run_once`` is the job (tests call it directly, as arq's
``_poll_iteration``), the task calls it every ``interval`` seconds. A failure is logged and
the next round comes as usual: Redis being away for a while must not end background work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from pulsar_gateway.core.errors import GatewayError

__all__ = ["Periodic"]

log = logging.getLogger(__name__)


class Periodic:
    """Runs ``job`` every ``interval`` seconds (first after one interval) until stopped."""

    def __init__(self, name: str, interval: float, job: Callable[[], Awaitable[object]]) -> None:
        self.name = name
        self.interval = interval
        self._job = job
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self._job()
            except asyncio.CancelledError:
                raise
            except GatewayError as exc:  # Redis unavailable for a while: try next time
                log.warning("%s failed: %s", self.name, exc)
            except Exception:
                log.warning("%s failed", self.name, exc_info=True)
