"""Admin REST calls for tests, with aiohttp (a real HTTP client)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from tests.conftest import TIMEOUT


async def call_text(
    method: str, url: str, body: Any = None, raw: bytes | str | None = None
) -> tuple[int, str]:
    """One HTTP request: (status, body text). ``raw`` is sent as is instead of ``body`` as
    JSON (for malformed bodies)."""
    data = raw if raw is not None else (None if body is None else json.dumps(body))
    timeout = aiohttp.ClientTimeout(total=TIMEOUT)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.request(
            method, url, data=data, headers={"Content-Type": "application/json"}
        ) as resp,
    ):
        return resp.status, await resp.text()


async def call(
    method: str, url: str, body: Any = None, raw: bytes | str | None = None
) -> tuple[int, Any]:
    """As :func:`call_text`, the body decoded as JSON (None when empty)."""
    status, text = await call_text(method, url, body, raw)
    return status, json.loads(text) if text else None


def admin(
    method: str, url: str, body: Any = None, raw: bytes | str | None = None
) -> tuple[int, Any]:
    """:func:`call` from synchronous code."""
    return asyncio.run(call(method, url, body, raw))


def admin_text(
    method: str, url: str, body: Any = None, raw: bytes | str | None = None
) -> tuple[int, str]:
    """:func:`call_text` from synchronous code (for bodies that are not JSON)."""
    return asyncio.run(call_text(method, url, body, raw))


async def call_as(token: str | None, method: str, url: str, body: Any = None) -> tuple[int, Any]:
    """As :func:`call`, with ``Authorization: Bearer <token>`` (no header when None)."""
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body)
    timeout = aiohttp.ClientTimeout(total=TIMEOUT)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.request(method, url, data=data, headers=headers) as resp,
    ):
        text = await resp.text()
        return resp.status, json.loads(text) if text else None


def admin_as(token: str | None, method: str, url: str, body: Any = None) -> tuple[int, Any]:
    """:func:`call_as` from synchronous code."""
    return asyncio.run(call_as(token, method, url, body))


async def call_raw(method: str, url: str) -> tuple[int, dict[str, list[str]], bytes]:
    """One HTTP request answered with bytes (peeks): (status, headers by lower-case name,
    each with all its values, body)."""
    timeout = aiohttp.ClientTimeout(total=TIMEOUT)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.request(method, url) as resp,
    ):
        headers: dict[str, list[str]] = {}
        for name, value in resp.headers.items():
            headers.setdefault(name.lower(), []).append(value)
        return resp.status, headers, await resp.read()


def admin_raw(method: str, url: str) -> tuple[int, dict[str, list[str]], bytes]:
    """:func:`call_raw` from synchronous code."""
    return asyncio.run(call_raw(method, url))


def create_namespace(http_url: str, namespace: str) -> None:
    """Create ``namespace`` (``tenant/ns``, or a legacy ``tenant/cluster/ns``) and its
    tenant if missing: topics are usable only in namespaces that exist, as in Pulsar."""
    tenant = namespace.split("/", 1)[0]
    info = {"adminRoles": [], "allowedClusters": ["standalone"]}
    status, body = admin("PUT", f"{http_url}/admin/v2/tenants/{tenant}", info)
    assert status in (204, 409), (status, body)
    parts = namespace.split("/")
    path = f"v2/namespaces/{namespace}" if len(parts) == 2 else f"namespaces/{namespace}"
    status, body = admin("PUT", f"{http_url}/admin/{path}")
    assert status in (204, 409), (status, body)
