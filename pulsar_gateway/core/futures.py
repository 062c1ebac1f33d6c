"""Futures already resolved, for handles whose operations have nothing to wait for (a
non-persistent producer's PUBLISH, a non-persistent consumer's acks) but answer through the
same future-returning protocols as the persistent ones; and the done-callback for futures
that may be dropped unread."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

__all__ = ["read_outcome", "resolved"]

T = TypeVar("T")


def resolved(value: T) -> asyncio.Future[T]:
    """A future of the running loop already holding ``value``."""
    fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    fut.set_result(value)
    return fut


def read_outcome(future: asyncio.Future[Any]) -> None:
    """A done-callback for a future whose waiter may be gone (a consumer closed, a client
    that left): reading its failure here keeps asyncio from logging it as never retrieved;
    a waiter that is still there gets the failure all the same."""
    if not future.cancelled():
        future.exception()
