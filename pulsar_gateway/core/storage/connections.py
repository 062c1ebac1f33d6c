"""The lane's kind of Redis connection: the pool's connection class, able to write
synchronously (:mod:`.lane`'s pipelines, :mod:`.notifier`'s pub/sub).

Kept out of :mod:`.lane` so that the lane's module holds no subclass of a third-party
class: redis-py's connection classes are slotted (``AbstractConnection`` declares
``__slots__``) and the class for a pool is built with ``type()`` at run time, while a build
compiling the lane with mypyc turns its classes into native classes, which take only some
base classes (mypyc's docs, "Native classes"); this module can stay interpreted.
"""

from __future__ import annotations

import asyncio

from redis.asyncio.connection import AbstractConnection, ConnectionPool

__all__ = ["LaneConnection", "direct_connection"]


class LaneConnection(AbstractConnection):
    """A connection that can put bytes on its socket now: the base of every class
    :func:`direct_connection` builds, so each connection it returns is an instance of this.

    redis-py writes only from coroutines (``send_packed_command`` awaits ``drain``); the
    lane must put a pipeline on the socket synchronously, in the loop tick that packed it,
    so the next tick's pipeline follows before Redis answers and ``Lane.flush_now`` lets
    Redis work while the gateway encodes. A subclass of the connection class is redis-py's
    extension point for connections (``ConnectionPool(connection_class=...)``); the stream
    writer is the one its ``connect()`` opened.
    """

    _writer: asyncio.StreamWriter | None

    def write_now(self, data: bytes) -> bool:
        """Queue ``data`` on the socket now; False when the connection is closed."""
        writer = self._writer
        if writer is None:
            return False
        writer.write(data)
        return True


_lane_classes: dict[type[AbstractConnection], type[LaneConnection]] = {}


def direct_connection(pool: ConnectionPool) -> LaneConnection:
    """A new connection like the pool's (address, TLS, credentials, database), outside
    the pool, able to write synchronously: the lane's, and the notifier's pub/sub ones."""
    base = pool.connection_class
    cls = _lane_classes.get(base)
    if cls is None:
        # LaneConnection first: its write_now, then everything of the pool's class (TCP,
        # TLS, unix socket) ahead of AbstractConnection, which both derive from.
        cls = _lane_classes[base] = type(f"Lane{base.__name__}", (LaneConnection, base), {})
    return cls(**pool.connection_kwargs)
