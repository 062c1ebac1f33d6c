"""What the parts of one binary session share: the connection they answer on, the role it
authenticated, the tasks answering its requests and whether it is closed.

A request that needs Redis runs as a task (:meth:`SessionState.spawn`) and writes its
answer when it ends, with its own request id. Too many of them pause reading the connection
(Pulsar's ``maxPendingRequestsPerConnection``, counted as ``ServerCnx`` counts pending
requests): the count is released at half.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from pulsar_gateway.adapters.pulsar_binary.connection import ServerConnection
from pulsar_gateway.adapters.pulsar_binary.errors import server_error
from pulsar_gateway.adapters.pulsar_binary.throttle import PendingLimit, Throttle, ThrottleType
from pulsar_gateway.core import (
    AuthorizationError,
    AuthorizationService,
    ClientInfo,
    GatewayError,
    TopicName,
    parse_topic_name,
)

__all__ = ["Check", "SessionState"]

log = logging.getLogger(__name__)

#: An authorization check of the core (``AuthorizationService.can_*``).
Check = Callable[[TopicName, str | None], Awaitable[bool]]


class SessionState:
    """The connection side of one session, shared by its discovery, producer and consumer
    parts.

    Attributes:
        conn: the sans-I/O connection answers are written to.
        wants_flush: asks the server to write what the connection holds (once per tick).
        throttle: the reasons the connection is not being read.
        closed: the connection is gone; nothing more is written.
        client_address: the client's ``host:port``, for the stats' ``address``.
    """

    def __init__(
        self,
        conn: ServerConnection,
        wants_flush: Callable[[], None],
        authorization: AuthorizationService,
        *,
        throttle: Throttle | None = None,
        max_pending: int = 1000,
    ) -> None:
        self.conn = conn
        self.wants_flush = wants_flush
        self.throttle = throttle or Throttle(lambda _: None)
        self.max_pending = max_pending
        self._authorization = authorization
        self._pending_requests = PendingLimit(
            self.throttle, ThrottleType.PENDING_REQUESTS, max_pending
        )
        self._tasks: set[asyncio.Task[None]] = set()
        self.closed = False
        self.client_address = ""

    @property
    def busy(self) -> bool:
        """Requests are still being answered."""
        return bool(self._tasks)

    @property
    def role(self) -> str | None:
        """The role CONNECT authenticated (None when authentication is off)."""
        authenticated = self.conn.authenticated
        return None if authenticated is None else authenticated.role

    def client_info(self) -> ClientInfo:
        """What the stats say of this client."""
        return ClientInfo(
            address=self.client_address, version=self.conn.client_version, reconnects=True
        )

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Answer a request in a task of its own."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        self._pending_requests.add()
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._pending_requests.done()
        if not task.cancelled() and task.exception() is not None:
            log.error("request handler failed", exc_info=task.exception())
        self.wants_flush()

    def error(self, request_id: int, exc: BaseException) -> None:
        """ERROR for ``request_id``, with the Pulsar error ``exc`` maps to."""
        code, message = server_error(exc)
        self.conn.send_error(request_id, code, message)

    async def refusal(self, topic: str, check: Check, message: str) -> GatewayError | None:
        """Why the connection's role may not do this on ``topic`` (``ServerCnx``
        ``isTopicOperationAllowed``): None when allowed (always, with authorization off),
        else the error to answer with (AuthorizationError with Pulsar's message, or the
        failure of the check itself)."""
        if not self._authorization.enabled:
            return None
        try:
            if await check(parse_topic_name(topic), self.role):
                return None
        except GatewayError as exc:
            return exc
        return AuthorizationError(message)

    async def finish(self) -> None:
        """Wait for the requests still being answered (the connection is gone)."""
        for task in list(self._tasks):
            if not task.done():
                try:
                    await task
                except (GatewayError, asyncio.CancelledError):
                    pass
