"""The JSON peek (``GET .../subscription/{sub}/peek?count=n``, beyond Pulsar): the first
``n`` entries of a subscription's backlog, as ``position/1`` to ``position/n`` give them,
with each client batch split into its messages.

A real gateway and redis-server; messages from the official client (batched and not,
compressed); every call through aiohttp.
"""

from __future__ import annotations

import base64
from typing import Any

import pulsar
import pytest

from tests.adminhttp import admin, admin_raw
from tests.conftest import TIMEOUT, GatewayThread, wait_for

RECEIVE_MS = int(TIMEOUT * 1000)


def sub_url(gw: GatewayThread, topic: str, sub: str, domain: str = "persistent") -> str:
    return f"{gw.http_url}/admin/v2/{domain}/public/default/{topic}/subscription/{sub}"


def peek_json(gw: GatewayThread, topic: str, sub: str, query: str = "") -> list[dict[str, Any]]:
    status, body = admin("GET", f"{sub_url(gw, topic, sub)}/peek{query}")
    assert status == 200, body
    assert isinstance(body, dict) and set(body) == {"messages"}
    return list(body["messages"])


def create_subscription(gw: GatewayThread, topic: str, sub: str) -> None:
    status, body = admin("PUT", sub_url(gw, topic, sub), "earliest")
    assert status == 204, body


def mid_text(mid: Any, batch_index: int | None = None) -> str:
    text = f"{mid.ledger_id()}:{mid.entry_id()}"
    return text if batch_index is None else f"{text}:{batch_index}"


def send_batch(producer: Any, payloads: list[bytes], **kwargs: Any) -> list[Any]:
    sent: list[Any] = []
    for payload in payloads:
        producer.send_async(payload, lambda res, mid: sent.append(mid), **kwargs)
    producer.flush()
    wait_for(lambda: len(sent) == len(payloads))
    return sent


def test_peek_lists_entries_with_batches_split(gateway, client_factory, topic):
    client = client_factory(gateway.url)
    create_subscription(gateway, topic, "s")
    single = client.create_producer(topic, producer_name="single", batching_enabled=False)
    first = single.send(
        b"hello", properties={"color": "red"}, partition_key="k1", event_timestamp=1234
    )
    batching = client.create_producer(
        topic,
        producer_name="batching",
        batching_enabled=True,
        batching_max_messages=3,
        batching_max_publish_delay_ms=60_000,
        compression_type=pulsar.CompressionType.LZ4,
    )
    batch = send_batch(batching, [b"b-0", b"b-1", b"b-2"], properties={"n": "1"})
    last = single.send(b"world")

    messages = peek_json(gateway, topic, "s")  # count defaults to 10: every entry here
    assert [m["messageId"] for m in messages] == [
        mid_text(first),
        *(mid_text(batch[0], i) for i in range(3)),
        mid_text(last),
    ]
    head = messages[0]
    assert head == {
        "messageId": mid_text(first),
        "ledgerId": first.ledger_id(),
        "entryId": first.entry_id(),
        "batchIndex": -1,
        "position": 1,
        "publishTime": head["publishTime"],
        "eventTime": 1234,
        "key": "k1",
        "properties": {"color": "red"},
        "producerName": "single",
        "sequenceId": 0,
        "payload": base64.b64encode(b"hello").decode(),
        "size": 5,
    }
    assert head["publishTime"] > 0
    for i, message in enumerate(messages[1:4]):
        assert message["batchIndex"] == i
        assert message["position"] == 2  # one entry, the batch
        assert (message["ledgerId"], message["entryId"]) == (
            batch[0].ledger_id(),
            batch[0].entry_id(),
        )
        assert base64.b64decode(message["payload"]) == f"b-{i}".encode()  # decompressed
        assert message["properties"] == {"n": "1"}
        assert message["producerName"] == "batching"
        assert message["sequenceId"] == i
        assert message["key"] is None and message["eventTime"] == 0 and message["size"] == 3
    assert messages[4]["position"] == 3 and messages[4]["sequenceId"] == 1

    # count is of entries: two entries are the single message and the whole batch
    assert [m["position"] for m in peek_json(gateway, topic, "s", "?count=2")] == [1, 2, 2, 2]
    # the same entries as the entry-wise peek, position by position
    for n in (1, 2, 3):
        status, headers, _ = admin_raw("GET", f"{sub_url(gateway, topic, 's')}/position/{n}")
        assert status == 200
        ids = {
            m["messageId"].rsplit(":", 1)[0] if m["batchIndex"] >= 0 else m["messageId"]
            for m in messages
            if m["position"] == n
        }
        assert ids == set(headers["x-pulsar-message-id"])

    # acknowledged entries are not counted
    consumer = client.subscribe(topic, "s")
    consumer.acknowledge(consumer.receive(timeout_millis=RECEIVE_MS))
    wait_for(lambda: peek_json(gateway, topic, "s", "?count=1")[0]["batchIndex"] == 0)


def test_peek_an_empty_backlog_and_a_short_one(gateway, client_factory, topic):
    create_subscription(gateway, topic, "s")
    assert peek_json(gateway, topic, "s") == []
    producer = client_factory(gateway.url).create_producer(topic, batching_enabled=False)
    for i in range(3):
        producer.send(f"m{i}".encode())
    messages = peek_json(gateway, topic, "s", "?count=100")
    assert [base64.b64decode(m["payload"]) for m in messages] == [b"m0", b"m1", b"m2"]
    assert [m["position"] for m in messages] == [1, 2, 3]


@pytest.mark.parametrize(
    "query",
    [
        "?count=0",
        "?count=101",
        "?count=-1",
        "?count=x",
        "?count=",
        "?count=1.5",
        "?count=" + "9" * 5000,
    ],
)
def test_bad_counts_are_400(gateway, topic, query):
    create_subscription(gateway, topic, "s")
    status, body = admin("GET", f"{sub_url(gateway, topic, 's')}/peek{query}")
    assert status == 400, (query, body)
    assert body["reason"]


def test_peek_errors(gateway, client_factory, topic):
    client_factory(gateway.url).create_producer(topic).send(b"x")
    assert admin("GET", f"{sub_url(gateway, topic, 'nope')}/peek") == (
        404,
        {"reason": "Subscription not found"},
    )
    status, body = admin("GET", f"{sub_url(gateway, topic + '-x', 's')}/peek")
    assert status == 404 and body["reason"].startswith("Topic ")
    # non-persistent and partitioned topics: 405, as the entry-wise peek
    status, body = admin("GET", f"{sub_url(gateway, topic, 's', 'non-persistent')}/peek")
    assert status == 405 and body["reason"]
    base = f"{gateway.http_url}/admin/v2/persistent/public/default/{topic}-p"
    assert admin("PUT", f"{base}/partitions", 2)[0] == 204
    status, body = admin("GET", f"{base}/subscription/s/peek")
    assert status == 405 and body["reason"]
