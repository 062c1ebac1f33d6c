"""The Lua scripts in ``gateway/lua/``, loaded once as package data.

Each ``.lua`` file is one atomic operation and opens with its contract (every ``KEYS[i]``,
``ARGV[i]`` and return code). ``lib.lua`` holds helpers and is prepended to each script, so
the text sent to Redis is self-contained. Scripts are called with ``EVALSHA`` from the
per-tick pipeline (:mod:`gateway.storage`); after a Redis restart or ``SCRIPT FLUSH`` the
pipeline reloads them and retries (the cold path, tested).

Status codes returned by scripts are turned into domain exceptions here, in one table.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

from gateway.errors import ConsumerAssignError, ConsumerBusy, GatewayError

__all__ = [
    "SCRIPTS",
    "STATUS_CONSUMER_ASSIGN_ERROR",
    "STATUS_CONSUMER_BUSY",
    "STATUS_CONSUMER_GONE",
    "STATUS_NOT_ACTIVE",
    "STATUS_OK",
    "Script",
    "raise_for_status",
]

STATUS_OK = 0
STATUS_CONSUMER_BUSY = 1
STATUS_CONSUMER_GONE = 2
STATUS_NOT_ACTIVE = 3
STATUS_CONSUMER_ASSIGN_ERROR = 4

_STATUS_ERRORS: dict[int, type[GatewayError]] = {
    STATUS_CONSUMER_BUSY: ConsumerBusy,
    STATUS_CONSUMER_ASSIGN_ERROR: ConsumerAssignError,
}


def raise_for_status(code: int, message: bytes | str) -> None:
    """Raise the domain exception for a script's status ``code`` (no-op for OK)."""
    if code == STATUS_OK:
        return
    text = message.decode() if isinstance(message, bytes) else message
    raise _STATUS_ERRORS.get(code, GatewayError)(text)


@dataclass(frozen=True, slots=True)
class Script:
    """One Lua script with its SHA1, ready for ``EVALSHA``."""

    name: str
    source: str
    sha: str


def _load() -> dict[str, Script]:
    folder = resources.files("gateway") / "lua"
    lib = (folder / "lib.lua").read_text()
    scripts: dict[str, Script] = {}
    for item in folder.iterdir():
        if not item.name.endswith(".lua") or item.name == "lib.lua":
            continue
        source = lib + "\n" + item.read_text()
        name = item.name.removesuffix(".lua")
        scripts[name] = Script(name, source, hashlib.sha1(source.encode()).hexdigest())
    return scripts


#: Every script by name (file name without ``.lua``).
SCRIPTS: dict[str, Script] = _load()
