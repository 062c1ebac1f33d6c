"""Futures already resolved, for handles whose operations have nothing to wait for (a
non-persistent producer's PUBLISH, a non-persistent consumer's acks) but answer through the
same future-returning protocols as the persistent ones."""

from __future__ import annotations

import asyncio
from typing import TypeVar

__all__ = ["resolved"]

T = TypeVar("T")


def resolved(value: T) -> asyncio.Future[T]:
    """A future of the running loop already holding ``value``."""
    fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    fut.set_result(value)
    return fut
