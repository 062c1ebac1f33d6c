"""The Lua scripts in ``lua/``, loaded once as package data, and their typed calls.

Each ``.lua`` file is one atomic operation on one topic partition (one cluster slot) and
opens with its contract: every ``KEYS[i]``, every ``ARGV[i]`` and every reply. The text sent
to Redis is self-contained: a prelude generated here, then ``lib.lua`` (shared helpers), then
the script. The prelude carries the names Python defines once and Lua must spell the same
way: the stored-entry fields (:mod:`pulsar_gateway.core.model.entry`) and the reserved
consumers of a consumer group (:mod:`pulsar_gateway.core.storage.keys`)::

    local F_BLOB = 'm'
    ...
    local PARKED = '~parked'

Callers never build argument lists or read replies by index: every script has one typed
call in a module of this package (``dispatch.dispatch(lane, keys, subscription=..., ...)``)
with named parameters, a reply dataclass and, where a script answers a status, an enum of
its codes. A typed call queues ``EVALSHA`` on the lane (:class:`ScriptRunner`, the per-tick
pipeline of :mod:`pulsar_gateway.core.storage.lane`) and returns a future that resolves with
the decoded reply. After a Redis restart or ``SCRIPT FLUSH`` the lane loads the scripts again
and re-sends the refused calls (the cold path, tested).

Every call runs the whole text, so ``lib.lua``'s definitions (dozens of closures) are made
again each time: about 20 µs of Redis CPU, nothing for a dispatch of many messages but ten
times a bare ``XADD`` for a one-message append. The scripts of :data:`WITHOUT_LIB`, on the
per-message path, get the prelude only and carry the few helpers they need themselves.

Modules: :mod:`.append` (appends), :mod:`.producers` (the producer registry),
:mod:`.subscriptions` (consumers joining and leaving), :mod:`.dispatch`, :mod:`.acks`,
:mod:`.cursors` (subscription admin), :mod:`.scheduled` (scheduled-message admin),
:mod:`.topics` (topic metadata and lifecycle), :mod:`.inactivity` (inactive topics and
subscriptions), :mod:`.stats`, :mod:`.metadata` (fleet, tenants, policies),
:mod:`.non_persistent`.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final, Protocol, TypeVar

from pulsar_gateway.core.model import entry
from pulsar_gateway.core.storage import keys

__all__ = [
    "READ_ONLY",
    "SCRIPTS",
    "WITHOUT_LIB",
    "Arg",
    "Script",
    "ScriptRunner",
    "count_or_none",
    "prelude",
    "text",
    "texts",
]

T = TypeVar("T")

#: A script argument as the lane packs it.
Arg = bytes | str | int | float


@dataclass(frozen=True, slots=True)
class Script:
    """One Lua script with its SHA1, ready for ``EVALSHA``."""

    name: str
    source: str
    sha: str
    #: the script only reads (:data:`READ_ONLY`): its reply needs no replica's confirmation
    read_only: bool = False


class ScriptRunner(Protocol):
    """What a typed call needs: the lane (or a test's fake of it)."""

    def eval(
        self,
        script: Script,
        keys: Sequence[str],
        args: Sequence[Arg],
        decode: Callable[[Any], T],
    ) -> asyncio.Future[T]:
        """Queue ``EVALSHA`` of ``script``; the future resolves with ``decode(reply)``."""
        ...


def text(value: bytes | str | int) -> str:
    """A reply value as text (replies are raw bytes)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def texts(values: Sequence[bytes | str | int]) -> list[str]:
    """Reply values as text."""
    return [text(value) for value in values]


def count_or_none(reply: Any) -> int | None:
    """A non-negative count or version, None for the scripts' -1 ("no such thing", or
    "lost a race")."""
    value = int(reply)
    return None if value < 0 else value


def _lua_string(value: bytes) -> str:
    # Every name is printable ASCII without quotes or backslashes (checked by the tests).
    return "'" + value.decode("ascii") + "'"


def prelude() -> str:
    """The Lua prelude: Python's names for entry fields and reserved consumers."""
    lines = ["-- Generated from pulsar_gateway.core.model.entry and .storage.keys: do not edit."]
    lines += [f"local F_{name} = {_lua_string(value)}" for name, value in entry.FIELDS.items()]
    lines += [f"local {name} = {_lua_string(value)}" for name, value in keys.RESERVED.items()]
    return "\n".join(lines) + "\n"


#: Scripts that write nothing (checked against their text by the unit tests): with replica
#: acknowledgements on, their replies are handed out whatever the ``WAIT`` answers.
READ_ONLY: Final = frozenset(
    {
        "backlog_size_after",
        "backlog_usage",
        "internal_stats",
        "last_message_id",
        "message_id_at_time",
        "position_at_time",
        "subscription_peek",
        "topic_counts",
        "topic_stats",
    }
)


#: Scripts sent without ``lib.lua`` (see above): the per-message append.
WITHOUT_LIB: Final = frozenset({"append_entries"})


def _load() -> dict[str, Script]:
    folder = resources.files(__name__) / "lua"
    names = prelude()
    head = names + (folder / "lib.lua").read_text()
    scripts: dict[str, Script] = {}
    for item in folder.iterdir():
        if not item.name.endswith(".lua") or item.name == "lib.lua":
            continue
        name = item.name.removesuffix(".lua")
        source = (names if name in WITHOUT_LIB else head) + "\n" + item.read_text()
        sha = hashlib.sha1(source.encode()).hexdigest()
        scripts[name] = Script(name, source, sha, read_only=name in READ_ONLY)
    return scripts


#: Every script by name (file name without ``.lua``), for ``SCRIPT LOAD``.
SCRIPTS: Final[dict[str, Script]] = _load()
