"""The example pipeline ``spark/examples/orders_pipeline.py``, run as a user runs it: one
command against a running gateway (``--produce 200 --once``), then its outputs checked
against the orders it published: the Parquet files and the ``orders-totals`` topic hold the
right count and sum per customer and 10-second window, for every window the watermark has
closed, once each."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pulsar
import pyarrow.parquet as pq
import pytest
import redis

from tests.adminhttp import admin
from tests.conftest import ROOT, TIMEOUT, GatewayThread
from tests.integration.spark.spark_fixtures import env_for_subprocess

EXAMPLE = ROOT / "spark" / "examples" / "orders_pipeline.py"
RECEIVE_MS = int(TIMEOUT * 1000)
WINDOW = dt.timedelta(seconds=10)
WATERMARK = dt.timedelta(seconds=10)


def consume_all(client: Any, topic: str) -> list[Any]:
    """Every message of ``topic`` from the start (until none comes for a second)."""
    consumer = client.subscribe(topic, "check", initial_position=pulsar.InitialPosition.Earliest)
    messages = []
    while True:
        try:
            messages.append(consumer.receive(timeout_millis=1000 if messages else RECEIVE_MS))
        except pulsar.Timeout:
            break
    consumer.close()
    return messages


def parse_ts(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def window_start(ts: dt.datetime) -> dt.datetime:
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return epoch + (ts - epoch) // WINDOW * WINDOW


@pytest.mark.timeout(300)
def test_orders_pipeline_totals_orders_per_customer_and_window(
    gateway: GatewayThread,
    client_factory: Callable[..., Any],
    redis_clean: redis.Redis,
    tmp_path: Path,
) -> None:
    dedup = f"{gateway.http_url}/admin/v2/namespaces/public/default/deduplication"
    assert admin("POST", dedup, True)[0] == 204
    output = tmp_path / "orders-out"
    command = [
        sys.executable,
        str(EXAMPLE),
        "--service-url",
        gateway.url,
        "--admin-url",
        gateway.http_url,
        "--produce",
        "200",
        "--output",
        str(output),
        "--once",
    ]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=240,
        env=env_for_subprocess(),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    out = done.stdout
    assert "published 200 orders to orders with pulsar-client" in out

    # what the pipeline should have found: the orders as published
    client = client_factory(gateway.url)
    orders = [json.loads(m.data(), parse_float=Decimal) for m in consume_all(client, "orders")]
    assert len(orders) == 200
    assert len({o["order_id"] for o in orders}) == 200
    expected: dict[tuple[str, dt.datetime], tuple[int, Decimal]] = defaultdict(
        lambda: (0, Decimal(0))
    )
    for order in orders:
        key = (order["customer"], window_start(parse_ts(order["ts"])))
        count, total = expected[key]
        expected[key] = (count + 1, total + order["amount"])
    # append mode: a window is written once the watermark (latest event time minus 10 s)
    # has passed its end; the latest windows wait for newer orders
    watermark = max(parse_ts(o["ts"]) for o in orders) - WATERMARK
    closed = {key: value for key, value in expected.items() if key[1] + WINDOW <= watermark}
    assert 10 <= len(closed) < len(expected)

    # the Parquet output: one row per closed customer-window, with the right count and sum
    rows = pq.read_table(output).to_pylist()
    parquet = {
        (r["customer"], r["window_start"].replace(tzinfo=dt.UTC)): (r["orders"], r["total"])
        for r in rows
    }
    assert len(rows) == len(parquet)
    assert parquet == closed
    assert all(r["window_end"] - r["window_start"] == WINDOW for r in rows)

    # the orders-totals topic: the same totals as JSON, keyed by customer, once each
    messages = consume_all(client, "orders-totals")
    published = {}
    for message in messages:
        total = json.loads(message.data(), parse_float=Decimal)
        start = parse_ts(total["window_start"])
        assert message.partition_key() == total["customer"]
        end_ms = int(parse_ts(total["window_end"]).timestamp() * 1000)
        assert message.event_timestamp() == end_ms
        published[(total["customer"], start)] = (total["orders"], total["total"])
    assert len(messages) == len(published)
    assert published == closed

    # the summary: totals written, and the customer with the largest total first
    assert f"this run: {len(closed)} window totals written to orders-totals" in out
    per_customer: dict[str, Decimal] = defaultdict(Decimal)
    for (customer, _), (_, total) in closed.items():
        per_customer[customer] += total
    top = max(per_customer, key=lambda customer: per_customer[customer])
    assert out.split("top customers:")[1].split()[0] == top
