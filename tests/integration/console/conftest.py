"""Fixtures of the web console's tests: a real headless Chromium driven by Playwright.

* ``browser`` (module): Debian's ``chromium`` (``./dev test`` installs it), launched by
  Playwright with ``executable_path``: no browser download. Module-scoped, and these files
  hold sync tests only: ``sync_playwright`` runs an event loop of its own while it is open,
  which an ``async def`` test in the same module would collide with.
* ``console`` (function): a fresh browser context and page on one gateway's console. Every
  request the page makes to another origin is refused and recorded, and the test fails if
  there was one (the console works offline), or if the page raised a JavaScript error. The
  page's screenshot is saved as the test's artefact, in ``PGW_TEST_ARTIFACTS`` (default
  ``build/test-artifacts``) ``/console/<test>.png``, pass or fail.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Route, sync_playwright

from tests.conftest import ROOT, TIMEOUT

ARTIFACTS = Path(os.environ.get("PGW_TEST_ARTIFACTS", ROOT / "build" / "test-artifacts"))
ARTIFACTS /= "console"
#: Debian's chromium, headless, without the sandbox (the tests may run as root) and without
#: background requests to Google's services
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-background-networking"]


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("no chromium on PATH: ./dev test installs Debian's chromium package")
    return found


@contextlib.contextmanager
def launched_chromium() -> Iterator[Browser]:
    """Debian's chromium, headless, for as long as the block runs (leaves no event loop
    behind: a test that launches it itself may run asyncio code after)."""
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=chromium_path(), args=CHROMIUM_ARGS, timeout=TIMEOUT * 3000
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launched_chromium() as launched:
        yield launched


@dataclass
class Console:
    """One page on a gateway's console, with what it did that a test checks afterwards."""

    context: BrowserContext
    page: Page
    base_url: str
    foreign_requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def open(self, hash_route: str = "#/fleet") -> Page:
        self.page.goto(f"{self.base_url}/{hash_route}")
        return self.page

    def screenshot(self, name: str, *, notices: bool = False) -> Path:
        """The whole page as ``<ARTIFACTS>/<name>.png``; the passing notices ("saved")
        left out unless asked for, since they would cover what the picture is of."""
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        target = ARTIFACTS / f"{name}.png"
        hide = None if notices else "#notices { display: none !important; }"
        self.page.screenshot(path=str(target), full_page=True, style=hide)
        return target

    def close(self, name: str) -> None:
        """Save the page's screenshot as ``name``, close it, then fail if the page raised a
        JavaScript error or asked another origin for anything."""
        try:
            self.screenshot(_safe(name), notices=True)
        finally:
            self.context.close()
        assert self.foreign_requests == [], "the console fetched from another origin"
        assert self.errors == [], "JavaScript errors on the page"


def new_console(browser: Browser, base_url: str, **context_options: Any) -> Console:
    """A fresh browser context and page on the console served at ``base_url``; requests to
    any other origin are refused and recorded."""
    context = browser.new_context(viewport={"width": 1400, "height": 900}, **context_options)
    context.set_default_timeout(TIMEOUT * 1000)
    console = Console(context, context.new_page(), base_url.rstrip("/"))
    origin = urlsplit(console.base_url).netloc

    def guard(route: Route) -> None:
        url = urlsplit(route.request.url)
        if url.scheme in ("http", "https", "ws", "wss") and url.netloc != origin:
            console.foreign_requests.append(route.request.url)
            route.abort()
        else:
            route.continue_()

    context.route("**/*", guard)
    console.page.on("pageerror", lambda exc: console.errors.append(str(exc)))
    return console


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:150]


@pytest.fixture
def console_factory(
    browser: Browser, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Console]]:
    """``console_factory(base_url)``: a page on the console served at ``base_url``, closed
    (and checked) after the test."""
    opened: list[Console] = []

    def factory(base_url: str, **context_options: Any) -> Console:
        opened.append(new_console(browser, base_url, **context_options))
        return opened[-1]

    yield factory
    for index, console in enumerate(opened):
        console.close(request.node.name + (f"-{index}" if index else ""))
