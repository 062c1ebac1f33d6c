"""How the binary session answers an ACK whose ids need two core calls (whole entries and
batch indexes, or a cumulative ack with a batch-index tail): the ACK_RESPONSE waits for
both and reports a failure of either. No sockets, no Redis: a consumer that records its
calls and answers with futures the test resolves."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from pulsar_gateway.adapters.pulsar_binary import codec
from pulsar_gateway.adapters.pulsar_binary.commands import Ack
from pulsar_gateway.adapters.pulsar_binary.connection import ServerConnection
from pulsar_gateway.adapters.pulsar_binary.session import Session
from pulsar_gateway.core import PublishBuffer, StorageError, SubscriptionType
from pulsar_gateway.proto import PulsarApi_pb2 as pb


class _Consumer:
    """Records the core calls an ACK makes; each returns a future the test resolves."""

    subscription_type = SubscriptionType.EXCLUSIVE
    uid = "c-1"

    def __init__(self) -> None:
        self.calls: dict[str, asyncio.Future[int]] = {}

    def _call(self, name: str) -> asyncio.Future[int]:
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.calls[name] = fut
        return fut

    def ack(self, ids: Any) -> asyncio.Future[int]:
        return self._call("ack")

    def ack_batch_indexes(self, acks: Any) -> asyncio.Future[int]:
        return self._call("batch")

    def ack_cumulative(self, upto: bytes) -> asyncio.Future[int]:
        return self._call("cumulative")


def _session() -> tuple[Session, ServerConnection, _Consumer]:
    conn = ServerConnection()
    # _ack calls no service; the session reads the publish buffer's gate when it starts
    services = SimpleNamespace(publish_buffer=PublishBuffer(0))
    session = Session(services, conn, "pulsar://127.0.0.1:6650", lambda: None)  # type: ignore[arg-type]
    consumer = _Consumer()
    session.consumers[7] = consumer  # type: ignore[assignment]
    return session, conn, consumer


def _ack_responses(conn: ServerConnection) -> list[pb.CommandAckResponse]:
    decoder = codec.FrameDecoder()
    decoder.feed(conn.data_to_send())
    out = []
    while (frame := decoder.next_frame()) is not None:
        if frame.type == pb.BaseCommand.ACK_RESPONSE:
            out.append(frame.command.ackResponse)
    return out


def _mixed_ack(cumulative: bool = False) -> Ack:
    if cumulative:
        return Ack(7, True, ((3, 5),), {0: (0b1100,)}, None, 42)
    return Ack(7, False, ((3, 4), (3, 5)), {1: (0b1100,)}, None, 42)


async def _answer_after(first: str, second: str, *, fail: str, cumulative: bool) -> Any:
    session, conn, consumer = _session()
    session._ack(_mixed_ack(cumulative))
    assert set(consumer.calls) == {first, second}
    outcome = {first: 1, second: 1}
    for name in (first, second):
        fut = consumer.calls[name]
        if name == fail:
            fut.set_exception(StorageError("XACK failed"))
        else:
            fut.set_result(outcome[name])
        await asyncio.sleep(0)
        if name == first:
            assert _ack_responses(conn) == [], "answered before both calls finished"
    await asyncio.sleep(0)
    (response,) = _ack_responses(conn)
    return response


async def test_an_ack_of_whole_and_batch_index_ids_reports_the_whole_ack_failing() -> None:
    response = await _answer_after("ack", "batch", fail="ack", cumulative=False)
    assert response.request_id == 42
    assert response.HasField("error")


async def test_an_ack_of_whole_and_batch_index_ids_reports_the_batch_ack_failing() -> None:
    response = await _answer_after("ack", "batch", fail="batch", cumulative=False)
    assert response.HasField("error")


async def test_a_cumulative_ack_with_a_batch_tail_reports_the_cumulative_part_failing() -> None:
    response = await _answer_after("cumulative", "batch", fail="cumulative", cumulative=True)
    assert response.HasField("error")


async def test_an_ack_of_whole_and_batch_index_ids_succeeds_once_both_do() -> None:
    session, conn, consumer = _session()
    session._ack(_mixed_ack())
    consumer.calls["batch"].set_result(1)
    await asyncio.sleep(0)
    assert _ack_responses(conn) == []
    consumer.calls["ack"].set_result(1)
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    (response,) = _ack_responses(conn)
    assert not response.HasField("error")
