"""What the console's own tests share: the admin REST API as they check it (small blocking
calls: the tests are sync, beside Playwright's own loop) and the pages' ``data-test`` names."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

from playwright.sync_api import Locator, Page

from tests.conftest import TIMEOUT

T = TypeVar("T")


def call(base_url: str, method: str, path: str, body: Any = None) -> Any:
    """``method path`` on the gateway; the JSON answer (None when empty)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{base_url}{path}", data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
        raw = response.read()
    return json.loads(raw) if raw else None


def eventually(check: Callable[[], T], timeout: float = TIMEOUT) -> T:
    """``check()``'s first truthy answer, asked again until ``timeout`` (what the gateway
    does after a page's request may finish a moment later, e.g. a delivery)."""
    deadline = time.monotonic() + timeout
    while True:
        answer = check()
        if answer or time.monotonic() > deadline:
            assert answer, "the condition never held"
            return answer
        time.sleep(0.1)


def topic_admin(topic: str) -> str:
    """``persistent://t/ns/x`` → ``/admin/v2/persistent/t/ns/x``."""
    domain, rest = topic.split("://", 1)
    return f"/admin/v2/{domain}/{rest}"


def by(scope: Page | Locator, name: str) -> Locator:
    """The elements named ``data-test="name"`` inside ``scope``."""
    return scope.locator(f'[data-test="{name}"]')
