"""The fleet page: the gateways alive, with the figures each reports, and the Redis they
share, as ``GET /admin/v2/fleet`` answers them."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.conftest import ON_CLUSTER, TIMEOUT, GatewayThread, wait_for
from tests.integration.console.conftest import Console

# The cluster pass of ./dev test runs this file on a Redis Cluster too: the page then shows
# its three masters with their slots and their three replicas
pytestmark = pytest.mark.cluster

#: the figures of a gateway's row, as the page formats them (ui.js count and rate)
COUNTS = ("connections", "producers", "consumers", "topics")


def fleet(gw: GatewayThread) -> dict[str, Any]:
    with urllib.request.urlopen(f"{gw.http_url}/admin/v2/fleet", timeout=TIMEOUT) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer


def shown_counts(page: Page, gateway_id: str) -> dict[str, str]:
    row = page.locator(f'[data-test="gateway-row"][data-gateway-id="{gateway_id}"]')
    return {name: row.locator(f'[data-test="gateway-{name}"]').inner_text() for name in COUNTS}


def page_matches_api(page: Page, gw: GatewayThread) -> bool:
    """Whether every gateway's counts on the page are the API's (the page refreshes every
    5 s, the gateways report on their own schedule: the two meet within a refresh)."""
    for gateway in fleet(gw)["gateways"]:
        expected = {name: f"{gateway[name]:,}" for name in COUNTS}
        if shown_counts(page, gateway["gatewayId"]) != expected:
            return False
    return True


def test_the_fleet_page_lists_the_gateway_with_its_figures(
    gateway_factory: Callable[..., GatewayThread],
    console_factory: Callable[..., Console],
    client_factory: Callable[..., Any],
) -> None:
    """One gateway with a producer connected: once the gateway reports it, its row shows its
    ids, URLs and the counts the API reports; Redis shows with its version and memory, as
    one master (standalone) or as a Redis Cluster's masters with their slots and replicas."""
    gateway = gateway_factory(stats_interval_seconds=1.0)
    client = client_factory(gateway.url)
    client.create_producer("persistent://public/default/fleet-figures")
    wait_for(lambda: fleet(gateway)["gateways"][0]["producers"] == 1, timeout=3 * TIMEOUT)
    console = console_factory(gateway.http_url)
    page = console.open("#/fleet")
    answer = fleet(gateway)
    [reported] = answer["gateways"]
    row = page.locator(f'[data-test="gateway-row"][data-gateway-id="{reported["gatewayId"]}"]')
    expect(row.locator('[data-test="gateway-producers"]')).to_have_text("1")
    expect(row).to_contain_text(reported["brokerServiceUrl"])
    expect(row).to_contain_text(reported["serviceUrl"])
    expect(page.locator('[data-test="fleet-cluster"]')).to_have_text(answer["cluster"])
    wait_for(lambda: page_matches_api(page, gateway), timeout=3 * TIMEOUT)

    redis = answer["redis"]
    expect(page.locator('[data-test="redis-mode"]')).to_have_text(
        "cluster" if ON_CLUSTER else "standalone"
    )
    expect(page.locator('[data-test="redis-version"]')).to_have_text(redis["version"])
    expect(page.locator('[data-test="redis-used-memory"]')).to_have_text(
        re.compile(r"^\d+(\.\d)? (B|KiB|MiB|GiB)$")
    )
    masters = page.locator('[data-test="redis-node-row"][data-role="master"]')
    replicas = page.locator('[data-test="redis-node-row"][data-role="replica"]')
    if ON_CLUSTER:  # tests/redis_cluster.py: 3 masters, a replica each
        expect(masters).to_have_count(3)
        expect(replicas).to_have_count(3)
        for node in redis["nodes"]:
            if node["role"] == "master":
                row = masters.filter(has_text=node["id"])
                expect(row).to_contain_text(node["slots"])
        console.screenshot("fleet-redis-cluster")
    else:
        expect(masters).to_have_count(1)
        console.screenshot("fleet")


def test_two_gateways_on_one_redis_both_appear(
    gateway_factory: Callable[..., GatewayThread], console_factory: Callable[..., Console]
) -> None:
    """Two gateways on the same Redis: the page of either lists both, each with its own
    broker service URL."""
    first, second = gateway_factory(), gateway_factory()
    console = console_factory(second.http_url)
    page = console.open("#/fleet")
    rows = page.locator('[data-test="gateway-row"]')
    expect(rows).to_have_count(2)
    expect(page.locator('[data-test="gateway-count"]')).to_have_text("2 gateways alive")
    for gw in (first, second):
        expect(rows.filter(has_text=gw.url)).to_have_count(1)
    console.screenshot("fleet-two-gateways")
