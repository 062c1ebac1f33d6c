"""The WebSocket ``isEndOfTopic`` request (Pulsar's ``ConsumerHandler.handleEndOfTopic``,
``{"endOfTopic": consumer.hasReachedEndOfTopic()}``): false while the topic takes messages
or the session has not been sent all of it, true once the topic was terminated (admin
``terminate``) and every message was pushed; for consumers, readers and partitioned
topics."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.adminhttp import call
from tests.conftest import TIMEOUT, GatewayThread
from tests.wsclient import WsClient, connect, consumer_url, producer_url, reader_url, unb64

TOPICS = "/admin/v2/persistent/public/default"


async def end_of_topic(ws: WsClient) -> bool:
    await ws.send({"type": "isEndOfTopic"})
    reply = await ws.receive()
    assert set(reply) == {"endOfTopic"}, reply
    return bool(reply["endOfTopic"])


async def until_end_of_topic(ws: WsClient) -> None:
    """Ask until the answer is true (the core learns it from a dispatch round after the
    termination), within TIMEOUT."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TIMEOUT
    while not await end_of_topic(ws):
        assert loop.time() < deadline, "never reached the end of the topic"
        await asyncio.sleep(0.05)


async def terminate(gateway: GatewayThread, topic: str, suffix: str = "terminate") -> Any:
    status, body = await call("POST", f"{gateway.http_url}{TOPICS}/{topic}/{suffix}")
    assert status == 200, body
    return body


async def test_a_consumer_reaches_the_end_once_it_was_sent_everything(
    gateway: GatewayThread, topic: str
) -> None:
    url = consumer_url(gateway, topic, "sub", receiverQueueSize=1)
    async with connect(url) as ws, connect(producer_url(gateway, topic)) as producer:
        for i in range(3):
            await producer.produce(f"m{i}".encode())
        first = await ws.receive()
        assert unb64(first["payload"]) == b"m0"
        assert not await end_of_topic(ws)  # a live topic never ends
        await terminate(gateway, topic)
        # the window holds one unacknowledged message: two are still to come
        assert not await end_of_topic(ws)
        got = [first]
        for _ in range(2):
            await ws.ack(got[-1])
            got.append(await ws.receive())
        assert [unb64(m["payload"]) for m in got] == [b"m0", b"m1", b"m2"]
        await ws.ack(got[-1])
        await until_end_of_topic(ws)
        assert await end_of_topic(ws)  # and it stays so


async def test_a_reader_after_termination_reads_everything_then_the_end(
    gateway: GatewayThread, topic: str
) -> None:
    async with connect(producer_url(gateway, topic)) as producer:
        for i in range(2):
            await producer.produce(f"r{i}".encode())
    await terminate(gateway, topic)
    async with connect(reader_url(gateway, topic, messageId="earliest")) as ws:
        got = [await ws.receive(), await ws.receive()]
        assert [unb64(m["payload"]) for m in got] == [b"r0", b"r1"]
        for msg in got:
            await ws.ack(msg)
        await until_end_of_topic(ws)


async def test_an_empty_terminated_topic_ends_at_once(gateway: GatewayThread, topic: str) -> None:
    assert (await call("PUT", f"{gateway.http_url}{TOPICS}/{topic}"))[0] == 204
    last = await terminate(gateway, topic)
    assert (last["ledgerId"], last["entryId"]) == (-1, -1)
    async with connect(consumer_url(gateway, topic, "sub")) as ws:
        await until_end_of_topic(ws)


async def test_a_partitioned_topic_ends_once_all_its_partitions_did(
    gateway: GatewayThread, topic: str
) -> None:
    assert (await call("PUT", f"{gateway.http_url}{TOPICS}/{topic}/partitions", 2))[0] == 204
    partition = f"{topic}-partition-0"
    async with (
        connect(consumer_url(gateway, topic, "sub")) as ws,
        connect(consumer_url(gateway, partition, "watch")) as watch,
    ):
        await terminate(gateway, partition)
        # once partition 0 is seen ended, the other is still open: not the end
        await until_end_of_topic(watch)
        assert not await end_of_topic(ws)
        await terminate(gateway, topic, "terminate/partitions")
        await until_end_of_topic(ws)
