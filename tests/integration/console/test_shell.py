"""The console is served by the gateway at ``/``, whole and offline, in a real browser."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable

from playwright.sync_api import expect

from tests.conftest import GatewayThread
from tests.integration.console.conftest import Console


def test_the_gateway_serves_the_console_at_its_root(gateway: GatewayThread) -> None:
    with urllib.request.urlopen(f"{gateway.http_url}/") as response:
        body = response.read().decode()
        policy = response.headers["Content-Security-Policy"]
    assert '<script type="module" src="/console/js/app.js">' in body
    assert "default-src 'self'" in policy
    with urllib.request.urlopen(f"{gateway.http_url}/console/js/api.js") as response:
        assert "export async function request" in response.read().decode()
    try:
        urllib.request.urlopen(f"{gateway.http_url}/console/js/nothing.js")
    except urllib.error.HTTPError as exc:
        assert exc.code == 404
        assert "reason" in json.loads(exc.read())
    else:
        raise AssertionError("a file the console does not have was served")


def test_the_console_opens_on_the_fleet(
    gateway: GatewayThread, console_factory: Callable[..., Console]
) -> None:
    console = console_factory(gateway.http_url)
    page = console.open("")
    expect(page).to_have_url(f"{gateway.http_url}/#/fleet")
    expect(page.locator("#nav a.active")).to_have_text("Fleet")
