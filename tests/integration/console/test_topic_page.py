"""The topic page: live figures and chart from the stats, producers and consumers with the
gateway they are connected to, a backlog's messages, and the subscription operations."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pulsar
from playwright.sync_api import Locator, Page, expect

from tests.conftest import GatewayThread, wait_for
from tests.integration.console.conftest import Console
from tests.integration.console.support import by, call, topic_admin

TOPIC = "persistent://public/default/console-topic"
ROUTE = "#/topics/persistent/public/default/console-topic"
#: a figure's data-value that is a number above 0
POSITIVE = re.compile(r"^(?!0(\.0*)?$)\d+(\.\d+)?(e[-+]?\d+)?$")


def subscription(page: Page, name: str) -> Locator:
    return page.locator(f'[data-test="subscription"][data-name="{name}"]')


def backlog(gateway: GatewayThread, name: str) -> int:
    stats = call(gateway.http_url, "GET", topic_admin(TOPIC) + "/stats")
    return int(stats["subscriptions"][name]["msgBacklog"])


@contextmanager
def steady_traffic(producer: Any) -> Iterator[None]:
    """Messages sent every 20 ms until the block ends: a rate the stats keep seeing."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(0.02):
            producer.send_async(b"tick", None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        producer.flush()


def test_the_page_shows_live_rates_backlog_chart_and_each_clients_gateway(
    gateway_factory: Callable[..., GatewayThread],
    client_factory: Callable[..., Any],
    console_factory: Callable[..., Console],
) -> None:
    """Produced traffic shows as msgRateIn above 0 and a growing backlog, polled into the
    figures and the chart; the producer and the consumer are listed with the broker id of the
    gateway they are connected to."""
    gateway = gateway_factory(stats_interval_seconds=1)
    client = client_factory(gateway.url)
    consumer = client.subscribe(
        TOPIC, "audit", consumer_type=pulsar.ConsumerType.Shared, consumer_name="reader-1"
    )
    producer = client.create_producer(TOPIC, producer_name="writer-1")
    console = console_factory(gateway.http_url)
    page = console.open(ROUTE)
    broker_id = gateway.http_url.removeprefix("http://")

    with steady_traffic(producer):
        expect(by(page, "figure-msgRateIn")).to_have_attribute("data-value", POSITIVE)
        audit = subscription(page, "audit")
        expect(by(audit, "sub-msgBacklog")).to_have_attribute("data-value", POSITIVE)
        expect(by(page, "rate-chart")).to_have_attribute(
            "data-points", re.compile(r"^([2-9]|\d\d+)$")
        )
        expect(by(page, "series-in")).to_have_attribute("d", re.compile(r"L"))
        writer = by(page, "producers").locator("tr", has_text="writer-1")
        expect(by(writer, "gateway")).to_have_text(broker_id)
        reader = by(audit, "consumers").locator("tr", has_text="reader-1")
        expect(by(reader, "gateway")).to_have_text(broker_id)
        console.screenshot("topic-live")
    consumer.close()


def test_peek_shows_a_messages_payload_as_text_and_json_with_its_key_and_properties(
    gateway: GatewayThread,
    client_factory: Callable[..., Any],
    console_factory: Callable[..., Console],
) -> None:
    """The head of a subscription's backlog, read through the JSON peek: the key, the
    properties and the ids, and the payload pretty-printed as JSON or shown as sent."""
    client = client_factory(gateway.url)
    client.subscribe(TOPIC, "peeker").close()
    producer = client.create_producer(TOPIC, batching_enabled=False)
    body = {"order": 42, "items": ["tea", "cake"]}
    sent = producer.send(
        json.dumps(body).encode(), partition_key="order-42", properties={"source": "test"}
    )
    page = (console := console_factory(gateway.http_url)).open(ROUTE)

    by(subscription(page, "peeker"), "peek").click()
    message = by(by(page, "peek-messages"), "message").first
    expect(by(message, "fact-key")).to_have_text("order-42")
    expect(by(message, "fact-ledger-entry")).to_have_text(f"{sent.ledger_id()}:{sent.entry_id()}")
    expect(by(message, "property")).to_have_text("source=test")
    payload = by(message, "payload")
    expect(payload).to_have_text(json.dumps(body, indent=2))
    page.evaluate("window.scrollTo(0, 0)")  # the sticky header stays on top of the full page
    console.screenshot("topic-peek")
    by(message, "view-text").click()
    expect(payload).to_have_text(json.dumps(body))
    by(message, "view-hex").click()
    expect(payload).to_contain_text("7b 22 6f 72")  # {"or


def confirm(page: Page, **fields: str) -> None:
    """Fill the open dialog's fields and press its confirm button."""
    dialog = by(page, "dialog")
    for name, value in fields.items():
        by(dialog, f"field-{name}").fill(value)
    by(dialog, "dialog-confirm").click()
    expect(dialog).to_have_count(0)


def test_subscription_operations_ask_first_and_act_through_the_admin_api(
    gateway: GatewayThread,
    client_factory: Callable[..., Any],
    console_factory: Callable[..., Console],
) -> None:
    """Skip, clear, reset to a time, expire, create and delete: each asks before it acts
    (cancelling changes nothing), and the admin API then shows its effect."""
    client = client_factory(gateway.url)
    client.subscribe(TOPIC, "ops").close()
    producer = client.create_producer(TOPIC, batching_enabled=False)
    for i in range(10):
        producer.send(f"m{i}".encode())
    page = console_factory(gateway.http_url).open(ROUTE)
    ops = subscription(page, "ops")
    expect(by(ops, "sub-msgBacklog")).to_have_attribute("data-value", "10")

    by(ops, "clear-backlog").click()
    by(page, "dialog-cancel").click()
    assert backlog(gateway, "ops") == 10

    by(ops, "skip").click()
    confirm(page, count="3")
    expect(by(ops, "sub-msgBacklog")).to_have_attribute("data-value", "7")
    assert backlog(gateway, "ops") == 7

    by(ops, "clear-backlog").click()
    confirm(page)
    expect(by(ops, "sub-msgBacklog")).to_have_attribute("data-value", "0")
    assert backlog(gateway, "ops") == 0

    by(ops, "reset-cursor").click()
    confirm(page, time="2020-01-01T00:00")
    expect(by(ops, "sub-msgBacklog")).to_have_attribute("data-value", "10")
    assert backlog(gateway, "ops") == 10

    by(ops, "expire").click()
    confirm(page, seconds="0")
    expect(by(ops, "sub-msgBacklog")).to_have_attribute("data-value", "0")
    assert backlog(gateway, "ops") == 0

    by(page, "create-subscription").click()
    dialog = by(page, "dialog")
    by(dialog, "field-position").select_option("earliest")
    confirm(page, name="made-here")
    made = subscription(page, "made-here")
    expect(by(made, "sub-msgBacklog")).to_have_attribute("data-value", "10")
    assert "made-here" in call(gateway.http_url, "GET", topic_admin(TOPIC) + "/subscriptions")

    by(made, "delete-subscription").click()
    confirm(page)
    expect(made).to_have_count(0)
    wait_for(
        lambda: (
            "made-here" not in call(gateway.http_url, "GET", topic_admin(TOPIC) + "/subscriptions")
        )
    )
