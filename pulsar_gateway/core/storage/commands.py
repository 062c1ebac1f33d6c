"""What the typed Redis commands need from a lane, and where they live.

The core sends Redis two kinds of request: Lua scripts, each with one typed call in
:mod:`.scripts`, and plain commands, each with one typed function in a module of this
package, by concern:

* :mod:`.registry`: tenants, namespaces, topic lists and partition counts;
* :mod:`.policy_store`: the hashes of JSON policies and permissions;
* :mod:`.topic_store`: a topic's subscriptions, entries, compaction state and schemas;
* :mod:`.fleet_store`: the gateways' descriptions, rate reports and unload announcements.

A function queues its command on the lane and returns the lane's future, resolving with
the decoded reply (redis-py's command methods decode the same way, see redis-py's
``redis/_parsers/helpers.py``): nothing is awaited inside, so a caller gathering several
calls still sends them in the one pipeline of the current tick
(:mod:`.lane`). Outside this package no module of the core spells a Redis command
(``tests/unit/test_architecture.py`` checks it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["CommandLane"]


class CommandLane(Protocol):
    """What a typed command needs: the lane (or a test's fake of it)."""

    def call(self, *args: Any, decode: Callable[[Any], Any] | None = None) -> asyncio.Future[Any]:
        """Queue one Redis command; the future resolves with ``decode(reply)``, or the raw
        reply without ``decode``."""
        ...
