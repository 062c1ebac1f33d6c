"""Tenants, namespaces, topics and namespace policies managed from the console, in a real
browser, each change checked through the admin REST API afterwards."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import aiohttp
from playwright.sync_api import Page, expect

from tests.conftest import TIMEOUT, GatewayThread
from tests.integration.console.conftest import Console

TOPIC_COUNT = 10_000


def admin(gw: GatewayThread, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """One admin REST call with urllib: (status, decoded JSON body or None)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        gw.http_url + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            text = response.read().decode()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as exc:
        text = exc.read().decode()
        return exc.code, json.loads(text) if text else None


def make_namespace(gw: GatewayThread, tenant: str, namespace: str) -> None:
    info = {"adminRoles": [], "allowedClusters": ["standalone"]}
    assert admin(gw, "PUT", f"/admin/v2/tenants/{tenant}", info)[0] == 204
    assert admin(gw, "PUT", f"/admin/v2/namespaces/{tenant}/{namespace}")[0] == 204


def in_dialog(
    page: Page, fields: dict[str, str | bool] | None = None, confirm: bool = True
) -> None:
    """Fill the open dialog's fields (text, select or checkbox) and confirm (or cancel) it."""
    box = page.locator('[data-test="dialog"]')
    expect(box).to_be_visible()
    for name, value in (fields or {}).items():
        field = box.locator(f'[data-test="field-{name}"]')
        if isinstance(value, bool):
            field.set_checked(value)
        elif field.evaluate("el => el.tagName") == "SELECT":
            field.select_option(value)
        else:
            field.fill(value)
    box.locator(
        '[data-test="dialog-confirm"]' if confirm else '[data-test="dialog-cancel"]'
    ).click()
    expect(box).to_have_count(0)


def test_tenant_namespace_and_topics_are_created_and_deleted_from_the_pages(
    gateway: GatewayThread, console_factory: Callable[..., Console]
) -> None:
    """Creating a tenant, a namespace, a topic and a partitioned topic of 3 partitions from
    the pages makes them exist for the admin API, and so does editing the tenant's admin
    roles; a partitioned topic is one row with its count; deleting each (after a
    confirmation) removes it."""
    console = console_factory(gateway.http_url)
    page = console.open("#/tenants")
    page.get_by_role("button", name="Create tenant").click()
    in_dialog(page, {"tenant": "acme", "adminRoles": "ops, sre"})
    expect(page.locator('[data-test="tenant-row"][data-tenant="acme"]')).to_be_visible()
    assert admin(gateway, "GET", "/admin/v2/tenants/acme") == (
        200,
        {"adminRoles": ["ops", "sre"], "allowedClusters": ["standalone"]},
    )

    page.locator('[data-tenant="acme"] [data-test="tenant-link"]').click()
    expect(page.locator('[data-test="admin-roles"]')).to_have_text("opssre")
    page.locator('[data-test="edit-admin-roles"]').click()
    in_dialog(page, {"adminRoles": "ops, audit"})
    # the page shows what the gateway kept (in its order), read again after the change
    expect(page.locator('[data-test="admin-roles"]')).to_have_text("auditops")
    assert sorted(admin(gateway, "GET", "/admin/v2/tenants/acme")[1]["adminRoles"]) == [
        "audit",
        "ops",
    ]
    page.get_by_role("button", name="Create namespace").click()
    in_dialog(page, {"namespace": "orders"})
    row = page.locator('[data-test="namespace-row"][data-namespace="orders"]')
    expect(row).to_be_visible()
    assert admin(gateway, "GET", "/admin/v2/namespaces/acme") == (200, ["acme/orders"])
    console.screenshot("tenant-namespaces")

    row.locator('[data-test="namespace-link"]').click()
    expect(page.locator('[data-test="topic-count"]')).to_have_text("0 topics")
    page.get_by_role("button", name="Create topic").click()
    in_dialog(page, {"topic": "created"})
    page.get_by_role("button", name="Create topic").click()
    in_dialog(page, {"topic": "events", "partitions": "3"})
    expect(page.locator('[data-test="topic-count"]')).to_have_text("2 topics")
    events = page.locator('[data-test="topic-row"][data-topic="persistent://acme/orders/events"]')
    expect(events.locator('[data-test="topic-partitions"]')).to_have_text("3 partitions")
    created = page.locator('[data-test="topic-row"][data-topic="persistent://acme/orders/created"]')
    expect(created.locator('[data-test="topic-partitions"]')).to_have_text("non-partitioned")
    expect(events.get_by_role("link")).to_have_attribute(
        "href", "#/topics/persistent/acme/orders/events"
    )
    console.screenshot("namespace-topics")
    _, topics = admin(gateway, "GET", "/admin/v2/persistent/acme/orders")
    assert "persistent://acme/orders/created" in topics
    assert admin(gateway, "GET", "/admin/v2/persistent/acme/orders/events/partitions") == (
        200,
        {"partitions": 3},
    )

    # a cancelled confirmation deletes nothing
    events.get_by_role("button", name="Delete").click()
    in_dialog(page, confirm=False)
    assert admin(gateway, "GET", "/admin/v2/persistent/acme/orders/events/partitions")[0] == 200
    events.get_by_role("button", name="Delete").click()
    in_dialog(page)
    expect(events).to_have_count(0)
    created.get_by_role("button", name="Delete").click()
    in_dialog(page)
    expect(page.locator('[data-test="topic-count"]')).to_have_text("0 topics")
    assert admin(gateway, "GET", "/admin/v2/persistent/acme/orders") == (200, [])
    assert admin(gateway, "GET", "/admin/v2/persistent/acme/orders/partitioned") == (200, [])

    page.locator('[data-test="crumbs"]').get_by_role("link", name="acme").click()
    row.get_by_role("button", name="Delete").click()
    in_dialog(page)
    expect(row).to_have_count(0)
    assert admin(gateway, "GET", "/admin/v2/namespaces/acme") == (200, [])
    page.locator('[data-test="crumbs"]').get_by_role("link", name="Tenants").click()
    page.locator('[data-tenant="acme"]').get_by_role("button", name="Delete").click()
    in_dialog(page)
    expect(page.locator('[data-tenant="acme"]')).to_have_count(0)
    assert admin(gateway, "GET", "/admin/v2/tenants/acme")[0] == 404


def edit(page: Page, key: str, **fields: str | bool) -> None:
    page.locator(f'[data-test="edit-{key}"]').click()
    in_dialog(page, fields)


def test_namespace_policies_and_permissions_are_edited_from_the_page(
    gateway: GatewayThread, console_factory: Callable[..., Console]
) -> None:
    """Unset policies read "not set"; retention, message TTL, delayed delivery with a fixed
    delay, deduplication, a backlog quota and a permission set from the page are what the
    admin API then answers, and the page shows the gateway's value after each change."""
    make_namespace(gateway, "acme", "orders")
    base = "/admin/v2/namespaces/acme/orders"
    console = console_factory(gateway.http_url)
    page = console.open("#/namespaces/acme/orders?tab=policies")
    for key in ("retention", "messageTTL", "deduplication", "backlogQuota", "delayedDelivery"):
        expect(
            page.locator(f'[data-test="policy-{key}-value"] [data-test="not-set"]')
        ).to_be_visible()

    edit(page, "retention", retentionTimeInMinutes="1440", retentionSizeInMB="2048")
    expect(page.locator('[data-test="policy-retention-value"]')).to_contain_text("2,048 MB")
    assert admin(gateway, "GET", f"{base}/retention") == (
        200,
        {"retentionTimeInMinutes": 1440, "retentionSizeInMB": 2048},
    )

    edit(page, "messageTTL", seconds="3600")
    expect(page.locator('[data-test="policy-messageTTL-value"]')).to_contain_text("3,600 s")
    assert admin(gateway, "GET", f"{base}/messageTTL") == (200, 3600)

    edit(page, "delayedDelivery", fixedDeliveryDelayInMillis="60000")
    value = page.locator('[data-test="policy-delayedDelivery-value"]')
    expect(value).to_contain_text("60,000 ms")
    expect(value.locator('[data-test="not-set"]')).to_have_count(0)
    assert admin(gateway, "GET", f"{base}/delayedDelivery") == (
        200,
        {
            "active": True,
            "tickTime": 1000,
            "maxDeliveryDelayInMillis": 0,
            "fixedDeliveryDelayInMillis": 60000,
        },
    )

    edit(page, "deduplication", enabled="enabled")
    expect(page.locator('[data-test="policy-deduplication-value"]')).to_have_text("enabled")
    assert admin(gateway, "GET", f"{base}/deduplication") == (200, True)

    # 100 MiB, below the 2 GiB retention (a quota at or above it is refused)
    edit(page, "backlogQuota", limitSize="104857600", limitTime="-1", policy="producer_exception")
    quota = page.locator('[data-test="backlog-quota"][data-type="destination_storage"]')
    expect(quota).to_contain_text("100.0 MiB")
    expect(quota).to_contain_text("producer_exception")
    _, quotas = admin(gateway, "GET", f"{base}/backlogQuotaMap")
    assert quotas["destination_storage"]["limitSize"] == 104857600
    assert quotas["destination_storage"]["policy"] == "producer_exception"
    console.screenshot("namespace-policies")

    # a refused change is a notice with the gateway's reason; the value shown stays
    edit(page, "backlogQuota", limitSize=str(4 * 1024**3))
    expect(page.locator('[data-test="notice-error"]')).to_contain_text("retention")
    expect(quota).to_contain_text("100.0 MiB")

    page.locator('[data-test="unset-messageTTL"]').click()
    in_dialog(page)
    expect(
        page.locator('[data-test="policy-messageTTL-value"] [data-test="not-set"]')
    ).to_be_visible()
    assert admin(gateway, "GET", f"{base}/messageTTL") == (200, None)

    page.locator('[data-test="tab-permissions"]').click()
    expect(page.locator('[data-test="no-permissions"]')).to_be_visible()
    page.get_by_role("button", name="Grant").click()
    in_dialog(page, {"role": "app", "consume": False})
    grant = page.locator('[data-test="permission-row"][data-role="app"]')
    expect(grant.locator('[data-test="permission-actions"]')).to_have_text("produce")
    assert admin(gateway, "GET", f"{base}/permissions") == (200, {"app": ["produce"]})
    page.get_by_role("button", name="Grant").click()
    in_dialog(page, {"role": "billing"})
    expect(page.locator('[data-role="billing"] [data-test="permission-actions"]')).to_have_text(
        "consumeproduce"
    )
    console.screenshot("namespace-permissions")
    grant.get_by_role("button", name="Revoke").click()
    in_dialog(page)
    expect(grant).to_have_count(0)
    assert admin(gateway, "GET", f"{base}/permissions") == (
        200,
        {"billing": ["consume", "produce"]},
    )


async def _create_topics(base_url: str, names: list[str]) -> None:
    # 64 requests in flight on one connection pool: the admin API's own create, as fast
    # as one gateway takes them
    limit = asyncio.Semaphore(64)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as session:

        async def create(name: str) -> None:
            async with limit, session.put(f"{base_url}/{name}") as response:
                assert response.status == 204, await response.text()

        await asyncio.gather(*(create(name) for name in names))


def test_a_namespace_of_ten_thousand_topics_stays_usable(
    gateway: GatewayThread, console_factory: Callable[..., Console]
) -> None:
    """With 10,000 topics the namespace page shows the count within seconds, holds only the
    rows in view in the DOM, and filtering to one topic answers within seconds."""
    make_namespace(gateway, "big", "many")
    names = [f"topic-{i:05d}" for i in range(TOPIC_COUNT)]
    started = time.monotonic()
    # a thread of its own for the event loop: Playwright's sync API keeps one in this one
    with ThreadPoolExecutor(1) as pool:
        pool.submit(
            asyncio.run, _create_topics(f"{gateway.http_url}/admin/v2/persistent/big/many", names)
        ).result()
    created = time.monotonic() - started
    print(f"created {TOPIC_COUNT} topics through the admin API in {created:.1f} s")

    console = console_factory(gateway.http_url)
    started = time.monotonic()
    page = console.open("#/namespaces/big/many")
    expect(page.locator('[data-test="topic-count"]')).to_have_text("10,000 topics", timeout=5000)
    shown = time.monotonic() - started
    rows = page.locator('[data-test="topic-row"]')
    expect(rows.first).to_be_visible()
    assert rows.count() < 100, "the list renders only the rows in view"

    started = time.monotonic()
    page.locator('[data-test="topic-filter"]').fill("topic-04321")
    expect(page.locator('[data-test="topic-count"]')).to_have_text(
        "1 of 10,000 topics", timeout=3000
    )
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-topic", "persistent://big/many/topic-04321")
    filtered = time.monotonic() - started
    console.screenshot("namespace-filtered")

    # the end of the list is reachable by scrolling, still with few rows in the DOM
    page.locator('[data-test="topic-filter"]').fill("")
    page.locator('[data-test="topic-list"]').evaluate("el => { el.scrollTop = el.scrollHeight; }")
    last = page.locator('[data-test="topic-row"][data-topic="persistent://big/many/topic-09999"]')
    expect(last).to_be_visible()
    assert rows.count() < 100
    print(f"page showed the count in {shown:.2f} s, filtered in {filtered:.2f} s")
