"""The test clients page: a WebSocket producer and consumer in the browser, against the
official client on the binary protocol."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pulsar
from playwright.sync_api import expect

from tests.conftest import GatewayThread, wait_for
from tests.integration.console.conftest import Console
from tests.integration.console.support import by, call, topic_admin

TOPIC = "persistent://public/default/console-clients"
ROUTE = f"#/clients?topic={TOPIC}"


def test_a_message_sent_from_the_page_reaches_an_official_consumer(
    gateway: GatewayThread,
    client_factory: Callable[..., Any],
    console_factory: Callable[..., Console],
) -> None:
    """The page's producer sends the payload, key and properties typed in; the answer's
    message id is shown, and an official consumer receives the message unchanged."""
    consumer = client_factory(gateway.url).subscribe(TOPIC, "it")
    console = console_factory(gateway.http_url)
    page = console.open(ROUTE)
    producer = by(page, "producer")
    expect(by(producer, "producer-topic")).to_have_value(TOPIC)
    by(producer, "producer-key").fill("order-7")
    by(producer, "producer-properties").fill('{"source": "console"}')
    by(producer, "producer-payload").fill("hello from the console")
    by(producer, "send").click()
    answer = by(producer, "send-result").first
    expect(answer).to_have_attribute("data-result", "ok")
    expect(by(producer, "state")).to_contain_text("connected")

    message = consumer.receive(timeout_millis=10_000)
    assert message.data() == b"hello from the console"
    assert message.partition_key() == "order-7"
    assert message.properties() == {"source": "console"}
    sent_id = pulsar.MessageId.deserialize(
        base64.b64decode(answer.get_attribute("data-message-id") or "")
    )
    assert (sent_id.ledger_id(), sent_id.entry_id()) == (
        message.message_id().ledger_id(),
        message.message_id().entry_id(),
    )
    console.screenshot("clients-produce")


def test_the_pages_consumer_shows_and_acknowledges_what_an_official_producer_sends(
    gateway: GatewayThread,
    client_factory: Callable[..., Any],
    console_factory: Callable[..., Console],
) -> None:
    """The page's consumer subscribes (Shared), shows a message with its key, properties and
    JSON payload, and acknowledges it: the subscription's backlog goes back to 0."""
    console = console_factory(gateway.http_url)
    page = console.open(ROUTE)
    consumer = by(page, "consumer")
    by(consumer, "consumer-subscription").fill("watch")
    by(consumer, "connect").click()
    expect(by(consumer, "state")).to_contain_text("subscribed to watch (Shared)")

    producer = client_factory(gateway.url).create_producer(TOPIC)
    producer.send(b'{"reading": 21.5}', partition_key="sensor-1", properties={"unit": "C"})
    message = by(by(consumer, "received"), "message").first
    expect(by(message, "fact-key")).to_have_text("sensor-1")
    expect(by(message, "property")).to_have_text("unit=C")
    expect(by(message, "payload")).to_have_text(json.dumps({"reading": 21.5}, indent=2))
    console.screenshot("clients-consume")

    def acknowledged() -> bool:
        stats = call(gateway.http_url, "GET", topic_admin(TOPIC) + "/stats")
        return stats["subscriptions"]["watch"]["msgBacklog"] == 0

    wait_for(acknowledged)
    by(consumer, "disconnect").click()
    expect(by(consumer, "state")).to_have_text("disconnected")


def test_a_delayed_message_sent_from_the_page_shows_on_the_schedule(
    gateway: GatewayThread, console_factory: Callable[..., Console]
) -> None:
    """A send with a delay is a scheduled message: the schedule page of a Shared
    subscription (made by the page's consumer, which then leaves) lists it under the id the
    producer's answer gave."""
    console = console_factory(gateway.http_url)
    page = console.open(ROUTE)
    consumer = by(page, "consumer")
    by(consumer, "consumer-subscription").fill("delayed")
    by(consumer, "connect").click()
    expect(by(consumer, "state")).to_contain_text("subscribed to delayed (Shared)")
    by(consumer, "disconnect").click()
    producer = by(page, "producer")
    by(producer, "producer-delay").fill(str(10 * 60 * 1000))
    by(producer, "send").click()
    answer = by(producer, "send-result").first
    expect(answer).to_have_attribute("data-result", "ok")
    sent = pulsar.MessageId.deserialize(
        base64.b64decode(answer.get_attribute("data-message-id") or "")
    )

    page = console.open("#/schedule/persistent/public/default/console-clients/delayed")
    row = by(page, "scheduled-row")
    expect(row).to_have_count(1)
    expect(row).to_have_attribute("data-id", f"{sent.ledger_id()}:{sent.entry_id()}")
    expect(by(row, "due")).to_contain_text("in 10 min")


def test_a_refused_websocket_shows_the_gateways_reason(
    gateway: GatewayThread, console_factory: Callable[..., Console]
) -> None:
    """The browser only sees close code 1006 for a refused upgrade; the page asks the REST
    lookup of the topic and shows the reason the gateway gives (here: no such namespace)."""
    page = console_factory(gateway.http_url).open(
        "#/clients?topic=persistent://public/nowhere/console-clients"
    )
    consumer = by(page, "consumer")
    by(consumer, "connect").click()
    expect(by(consumer, "consumer-error")).to_contain_text("404")
    expect(by(consumer, "consumer-error")).to_contain_text("nowhere")
    expect(by(consumer, "state")).to_have_text("refused")
