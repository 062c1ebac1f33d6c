"""WebSocket API helpers for tests, with aiohttp's real WebSocket client."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp

from tests.conftest import TIMEOUT, GatewayThread

NS = "public/default"


def ws_url(gw: GatewayThread, path: str, **query: Any) -> str:
    base = gw.http_url.replace("http://", "ws://") + path
    if query:
        base += "?" + urlencode({k: str(v) for k, v in query.items()})
    return base


def producer_url(gw: GatewayThread, topic: str, domain: str = "persistent", **query: Any) -> str:
    return ws_url(gw, f"/ws/v2/producer/{domain}/{NS}/{quote(topic)}", **query)


def consumer_url(
    gw: GatewayThread, topic: str, sub: str, domain: str = "persistent", **query: Any
) -> str:
    return ws_url(gw, f"/ws/v2/consumer/{domain}/{NS}/{quote(topic)}/{quote(sub)}", **query)


def reader_url(gw: GatewayThread, topic: str, domain: str = "persistent", **query: Any) -> str:
    return ws_url(gw, f"/ws/v2/reader/{domain}/{NS}/{quote(topic)}", **query)


def full(topic: str, domain: str = "persistent") -> str:
    return f"{domain}://{NS}/{topic}"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


class WsClient:
    """One WebSocket session: JSON frames in and out."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws

    async def send(self, obj: Any) -> None:
        await self.ws.send_str(obj if isinstance(obj, str) else json.dumps(obj))

    async def receive(self, timeout: float = TIMEOUT) -> Any:
        msg = await self.ws.receive(timeout=timeout)
        assert msg.type == aiohttp.WSMsgType.TEXT, f"expected a text frame, got {msg!r}"
        return json.loads(msg.data)

    async def receive_many(self, count: int, timeout: float = TIMEOUT) -> list[Any]:
        return [await self.receive(timeout) for _ in range(count)]

    async def nothing_within(self, seconds: float) -> bool:
        """True when no frame arrives within ``seconds``."""
        try:
            msg = await self.ws.receive(timeout=seconds)
        except TimeoutError:
            return True
        raise AssertionError(f"unexpected frame {msg!r}")

    async def produce(self, payload: bytes, **fields: Any) -> Any:
        """Send one message and return its ack."""
        await self.send({"payload": b64(payload), **fields})
        return await self.receive()

    async def ack(self, message: dict[str, Any]) -> None:
        await self.send({"messageId": message["messageId"]})


@asynccontextmanager
async def connect(url: str, **kwargs: Any) -> AsyncIterator[WsClient]:
    timeout = aiohttp.ClientTimeout(total=TIMEOUT)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.ws_connect(url, **kwargs) as ws,
    ):
        yield WsClient(ws)


async def refused(url: str) -> tuple[int, Any]:
    """Try an upgrade that the gateway should refuse: (status, JSON body)."""
    headers = {
        "Connection": "Upgrade",
        "Upgrade": "websocket",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode(),
    }
    http = url.replace("ws://", "http://", 1)
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT)) as session,
        session.get(http, headers=headers) as resp,
    ):
        text = await resp.text()
        return resp.status, json.loads(text) if text else None
