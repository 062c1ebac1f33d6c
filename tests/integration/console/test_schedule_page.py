"""The schedule page: a subscription's delayed messages by due time (histogram and list),
zoomed and panned, cancelled and rescheduled from the page."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pulsar
import pytest
from playwright.sync_api import Page, expect

from tests.conftest import GatewayThread, wait_for
from tests.integration.console.conftest import Console
from tests.integration.console.support import by, call, topic_admin

TOPIC = "persistent://public/default/console-schedule"
SUB = "later"
ROUTE = f"#/schedule/persistent/public/default/console-schedule/{SUB}"
SCHEDULED = topic_admin(TOPIC) + f"/subscription/{SUB}/scheduled"


def scheduled(gateway: GatewayThread) -> dict[str, int]:
    """messageId → deliverAt of every message scheduled on the subscription."""
    page = call(gateway.http_url, "GET", SCHEDULED + "?limit=1000")
    return {m["messageId"]: m["deliverAt"] for m in page["messages"]}


def bucket_of(page: Page, deliver_at: int) -> int:
    """The histogram's bucket for a time, from the window the page drew."""
    histogram = by(page, "histogram")
    start = int(histogram.get_attribute("data-from") or 0)
    width = int(histogram.get_attribute("data-bucket-ms") or 1)
    return (deliver_at - start) // width


def test_scheduled_messages_show_by_due_time_and_are_cancelled_and_rescheduled(
    gateway: GatewayThread,
    client_factory: Callable[..., Any],
    console_factory: Callable[..., Console],
) -> None:
    """Messages due in 10, 20 and 30 minutes fall in their buckets of the hour's histogram
    and in its list (with their keys and properties), the one due in 3 hours counts as
    after the window; a click on a bar zooms into it. A message cancelled on the page leaves
    the schedule (and the backlog); one rescheduled to now + 2 s reaches a consumer, and
    nothing else does."""
    client = client_factory(gateway.url)
    client.subscribe(TOPIC, SUB, consumer_type=pulsar.ConsumerType.Shared).close()
    producer = client.create_producer(TOPIC)
    ids = {}
    for minutes in (10, 20, 30, 180):
        sent = producer.send(
            f"due in {minutes} min".encode(),
            partition_key=f"k{minutes}",
            properties={"order": str(minutes)},
            deliver_after=timedelta(minutes=minutes),
        )
        ids[minutes] = f"{sent.ledger_id()}:{sent.entry_id()}"
    due = scheduled(gateway)
    assert set(due) == set(ids.values())

    console = console_factory(gateway.http_url)
    page = console.open(ROUTE)
    expect(by(page, "figure-inWindow")).to_have_attribute("data-value", "3")
    expect(by(page, "figure-after")).to_have_attribute("data-value", "1")
    expect(by(page, "figure-before")).to_have_attribute("data-value", "0")
    for minutes in (10, 20, 30):
        index = bucket_of(page, due[ids[minutes]])
        expect(page.locator(f'[data-test="bucket"][data-index="{index}"]')).to_have_attribute(
            "data-count", "1"
        )
    expect(by(page, "scheduled-row")).to_have_count(3)
    first_row = page.locator(f'[data-test="scheduled-row"][data-id="{ids[10]}"]')
    expect(first_row).to_contain_text("k10")
    expect(by(first_row, "property")).to_have_text("order=10")
    expect(by(first_row, "due")).to_contain_text("in ")
    console.screenshot("schedule-hour")

    # zoom: the bar of the message due in 20 minutes, then every preset window of 7 days
    page.locator(f'[data-test="bucket"][data-index="{bucket_of(page, due[ids[20]])}"]').click()
    expect(by(page, "scheduled-row")).to_have_count(1)
    expect(by(page, "scheduled-row")).to_have_attribute("data-id", ids[20])
    expect(by(page, "figure-before")).to_have_attribute("data-value", "1")
    expect(by(page, "figure-after")).to_have_attribute("data-value", "2")
    by(page, "later").click()
    expect(by(page, "no-scheduled")).to_be_visible()
    by(page, "preset-7days").click()
    expect(by(page, "scheduled-row")).to_have_count(4)
    console.screenshot("schedule-week")

    # cancel the one due in 10 minutes
    by(first_row, "cancel").click()
    by(page, "dialog-confirm").click()
    expect(by(page, "scheduled-row")).to_have_count(3)
    expect(first_row).to_have_count(0)
    assert ids[10] not in scheduled(gateway)
    stats = call(gateway.http_url, "GET", topic_admin(TOPIC) + "/stats")
    assert stats["subscriptions"][SUB]["msgBacklog"] == 3

    # reschedule the one due in 30 minutes to 2 seconds from now
    row = page.locator(f'[data-test="scheduled-row"][data-id="{ids[30]}"]')
    by(row, "reschedule").click()
    by(page, "field-after").fill("2")
    console.screenshot("schedule-reschedule")
    by(page, "dialog-confirm").click()
    expect(by(row, "due")).to_contain_text(" s")
    wait_for(lambda: scheduled(gateway).get(ids[30], 0) < due[ids[30]] - 60_000)

    consumer = client.subscribe(TOPIC, SUB, consumer_type=pulsar.ConsumerType.Shared)
    message = consumer.receive(timeout_millis=10_000)
    assert message.data() == b"due in 30 min"
    consumer.acknowledge(message)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=1500)
    assert set(scheduled(gateway)) == {ids[20], ids[180]}
