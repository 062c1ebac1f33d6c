"""The console on a gateway with token authentication and authorization on: it asks for a
token, shows a superuser everything, and shows a tenant admin its tenant and a clear
refusal elsewhere, never a blank page."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import jwt
import pulsar
import pytest
from playwright.sync_api import Page, expect

from tests.conftest import TIMEOUT, GatewayThread
from tests.integration.console.conftest import Console
from tests.integration.console.support import call

SECRET = b"console-secret-0123456789abcdef-0123"  # >= 32 bytes for HS256
SUPERUSER = "admin"
TENANT_ADMIN = "acme-admin"


def token(role: str, key: bytes = SECRET) -> str:
    return jwt.encode({"sub": role}, key, algorithm="HS256")


def as_superuser(gw: GatewayThread, method: str, path: str, body: object = None) -> None:
    call(gw.http_url, method, path, body, token=token(SUPERUSER))


@pytest.fixture
def secured(gateway_factory: Callable[..., GatewayThread]) -> GatewayThread:
    """A gateway with authentication and authorization on, a superuser, and two tenants:
    ``acme`` (namespaces ns1 and ns2, administered by ``acme-admin``) and ``globex``."""
    gw = gateway_factory(
        authentication_enabled=True,
        authorization_enabled=True,
        superuser_roles=(SUPERUSER,),
        token_secret_key="data:;base64," + base64.b64encode(SECRET).decode(),
    )
    for tenant, admins in (("acme", [TENANT_ADMIN]), ("globex", [])):
        info = {"adminRoles": admins, "allowedClusters": ["standalone"]}
        as_superuser(gw, "PUT", f"/admin/v2/tenants/{tenant}", info)
    for path in ("acme/ns1", "acme/ns2", "globex/ns1"):
        as_superuser(gw, "PUT", f"/admin/v2/namespaces/{path}")
    return gw


def log_in(page: Page, value: str) -> None:
    """Give the login form a token (the console is on it)."""
    expect(page.locator('[data-test="login-form"]')).to_be_visible()
    page.locator('[data-test="token-input"]').fill(value)
    page.locator('[data-test="login-submit"]').click()


def test_without_a_token_the_console_asks_for_one(
    secured: GatewayThread, console_factory: Callable[..., Console]
) -> None:
    """A page opened without a token becomes the login form with the gateway's reason, and
    after logging in the user is back on the page asked for."""
    console = console_factory(secured.http_url)
    page = console.open("#/tenants")
    expect(page.locator('[data-test="login-reason"]')).to_have_text("Authentication required")
    console.screenshot("login")
    log_in(page, token(SUPERUSER))
    expect(page).to_have_url(f"{secured.http_url}/#/tenants")
    expect(page.locator('[data-test="tenant-row"][data-tenant="acme"]')).to_be_visible()


def test_a_superuser_token_sees_the_fleet(
    secured: GatewayThread, console_factory: Callable[..., Console]
) -> None:
    """A superuser's token opens the fleet page with the gateway on it."""
    console = console_factory(secured.http_url)
    page = console.open("#/fleet")
    log_in(page, token(SUPERUSER))
    expect(page.locator('[data-test="gateway-row"]')).to_have_count(1)
    expect(page.locator('[data-test="session-role"]')).to_have_text("token set")


def test_a_tenant_admin_sees_its_tenant_and_refusals_elsewhere(
    secured: GatewayThread, console_factory: Callable[..., Console]
) -> None:
    """A tenant admin lists its tenant's namespaces and edits their policies, while the
    TenantInfo (a superuser's) is refused in its own part of the page; the fleet, the
    tenant list and another tenant each say "Not authorized" with the gateway's reason."""
    console = console_factory(secured.http_url)
    page = console.open("#/tenants/acme")
    log_in(page, token(TENANT_ADMIN))
    expect(page.locator('[data-test="namespace-row"]')).to_have_count(2)
    info = page.locator('[data-test="tenant-info"] [data-test="error"]')
    expect(info).to_contain_text("Not authorized")
    expect(info).to_contain_text("super-user")
    console.screenshot("tenant-admin-tenant")

    page.locator('[data-namespace="ns1"] [data-test="namespace-link"]').click()
    expect(page.locator('[data-test="topic-count"]')).to_have_text("0 topics")
    page.locator('[data-test="tab-policies"]').click()
    expect(
        page.locator('[data-test="policy-retention-value"] [data-test="not-set"]')
    ).to_be_visible()

    for route in ("#/fleet", "#/tenants"):
        page.goto(f"{secured.http_url}/{route}")
        error = page.locator('[data-test="error"]')
        expect(error).to_contain_text("Not authorized")
        expect(error).to_contain_text("This operation requires super-user access")
        if route == "#/fleet":
            console.screenshot("tenant-admin-fleet")

    page.goto(f"{secured.http_url}/#/tenants/globex")
    namespaces = page.locator('[data-test="namespace-list"] [data-test="error"]')
    expect(namespaces).to_contain_text("Not authorized")
    expect(namespaces).to_contain_text(
        "Don't have permission to administrate resources on this tenant"
    )

    # every part of another tenant's namespace page refuses in place; the tabs still work
    page.goto(f"{secured.http_url}/#/namespaces/globex/ns1")
    expect(page.locator('[data-test="panel-topics"] [data-test="error"]')).to_contain_text(
        "Not authorized"
    )
    page.locator('[data-test="tab-policies"]').click()
    expect(page.locator('[data-test="policy-retention"] [data-test="error"]')).to_contain_text(
        "Not authorized"
    )
    expect(page.locator('[data-test="edit-retention"]')).to_be_disabled()
    page.locator('[data-test="tab-permissions"]').click()
    expect(page.locator('[data-test="panel-permissions"] [data-test="error"]')).to_contain_text(
        "Not authorized"
    )


def test_a_bad_token_gets_the_refusal_reason(
    secured: GatewayThread, console_factory: Callable[..., Console]
) -> None:
    """A token the gateway does not accept (signed with another key) sends the user back to
    the login form, which says the gateway refused it and why."""
    console = console_factory(secured.http_url)
    page = console.open("#/tenants")
    log_in(page, token(SUPERUSER, key=b"another-secret-0123456789abcdef-0123"))
    expect(page.locator('[data-test="login-reason"]')).to_have_text(
        "The gateway refused the token: Authentication required"
    )
    console.screenshot("login-refused")


def test_the_test_clients_carry_the_token_and_show_a_refusal(
    secured: GatewayThread,
    console_factory: Callable[..., Console],
    client_factory: Callable[..., Any],
) -> None:
    """The page's WebSockets carry the token (as ``?token=``: a browser cannot set their
    headers): a role allowed to produce on acme/ns1 sends from the page and an official
    consumer receives the message; on acme/ns2, where the role has no permission, the send
    shows the gateway's 403 and its reason."""
    grant = "/admin/v2/namespaces/acme/ns1/permissions/acme-app"
    as_superuser(secured, "POST", grant, ["produce"])
    topic = "persistent://acme/ns1/console-auth"
    official = client_factory(
        secured.url, authentication=pulsar.AuthenticationToken(token(SUPERUSER))
    )
    consumer = official.subscribe(topic, "audit")
    console = console_factory(secured.http_url)
    page = console.open(f"#/login?next={quote(f'#/clients?topic={topic}', safe='')}")
    log_in(page, token("acme-app"))
    producer = page.locator('[data-test="producer"]')
    expect(producer.locator('[data-test="producer-topic"]')).to_have_value(topic)
    producer.locator('[data-test="producer-payload"]').fill("with a token")
    producer.locator('[data-test="send"]').click()
    sent = producer.locator('[data-test="send-result"][data-context="1"]')
    expect(sent).to_have_attribute("data-result", "ok")
    assert consumer.receive(timeout_millis=int(TIMEOUT * 1000)).data() == b"with a token"

    producer.locator('[data-test="producer-topic"]').fill("persistent://acme/ns2/console-auth")
    producer.locator('[data-test="send"]').click()
    refused = producer.locator('[data-test="send-result"][data-context="2"]')
    expect(refused).to_have_attribute("data-result", "error")
    expect(refused).to_contain_text("403")
    console.screenshot("clients-refused")
