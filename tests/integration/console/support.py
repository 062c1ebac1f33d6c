"""What the console's own tests share: the admin REST API as they check it (small blocking
calls: the tests are sync, beside Playwright's own loop) and the pages' ``data-test`` names."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from playwright.sync_api import Locator, Page

from tests.conftest import TIMEOUT


def call(base_url: str, method: str, path: str, body: Any = None, *, token: str = "") -> Any:
    """``method path`` on the gateway (with ``token`` as the bearer, if any); the JSON answer
    (None when empty). Blocking, with urllib: asyncio.run (``tests.adminhttp``) cannot run
    while Playwright's sync API holds its event loop in this thread."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{base_url}{path}", data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
        raw = response.read()
    return json.loads(raw) if raw else None


def topic_admin(topic: str) -> str:
    """``persistent://t/ns/x`` → ``/admin/v2/persistent/t/ns/x``."""
    domain, rest = topic.split("://", 1)
    return f"/admin/v2/{domain}/{rest}"


def by(scope: Page | Locator, name: str) -> Locator:
    """The elements named ``data-test="name"`` inside ``scope``."""
    return scope.locator(f'[data-test="{name}"]')
