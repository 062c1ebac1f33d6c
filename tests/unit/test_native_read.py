"""The native read's dispatch policy as data (:func:`native_read.settle`): which of the
entries an ``XREADGROUP`` read go to the consumer, which are handed back and which are
scheduled, against the ``dispatch.lua`` reply of the same round. The calls themselves (the
script, the read, ``settle_read.lua``) are covered in ``tests/unit/test_consuming.py``
on a FakeLane and in ``tests/integration/storage/test_scripts.py`` on Redis."""

from __future__ import annotations

import pytest

from pulsar_gateway.core.consuming.native_read import Settlement, settle
from pulsar_gateway.core.model.entry import (
    BLOB,
    BROKER_TIME,
    DELIVER_AT,
    NUM_MESSAGES,
    PUBLISH_TIME,
    Delivery,
)
from pulsar_gateway.core.storage.scripts.dispatch import DispatchReply, DispatchStatus

NOW = 10_000


def _plain(i: int) -> tuple[bytes, list[bytes]]:
    """A one-message entry as stored today: blob, broker time, publish time."""
    return b"1-%d" % i, [BLOB, b"m%d" % i, BROKER_TIME, b"9000", PUBLISH_TIME, b"9000"]


def _batch(i: int, size: int) -> tuple[bytes, list[bytes]]:
    return b"1-%d" % i, [BLOB, b"b%d" % i, BROKER_TIME, b"9000", NUM_MESSAGES, b"%d" % size]


def _delayed(i: int, at: int) -> tuple[bytes, list[bytes]]:
    return b"1-%d" % i, [BLOB, b"d%d" % i, BROKER_TIME, b"9000", DELIVER_AT, b"%d" % at]


def _reply(*, room: int = -1, delivered: list[Delivery] | None = None) -> DispatchReply:
    return DispatchReply(DispatchStatus.OK, deliveries=delivered or [], now_ms=NOW, room=room)


def _ids(reply: DispatchReply) -> list[bytes]:
    return [d.stream_id for d in reply.deliveries]


def test_whole_entries_go_while_a_permit_is_left_the_rest_is_handed_back() -> None:
    reply = _reply()
    entries = [_plain(0), _batch(1, 3), _plain(2), _plain(3)]

    # 3 permits: the plain entry, then the whole batch of 3 (a permit was left), no more
    settlement = settle(reply, entries, 3, shared=True)

    assert _ids(reply) == [b"1-0", b"1-1"]
    assert [d.num_messages for d in reply.deliveries] == [1, 3]
    assert settlement == Settlement([b"1-2", b"1-3"], [])


def test_the_scripts_own_deliveries_count_against_the_permits() -> None:
    reply = _reply(delivered=[Delivery(b"0-9", b"redelivered", 2, 1)])

    settlement = settle(reply, [_plain(0), _plain(1)], 3, shared=True)

    assert _ids(reply) == [b"0-9", b"1-0"]
    assert settlement.hand_back == [b"1-1"]


def test_the_unacked_room_caps_the_entries_and_is_lowered() -> None:
    reply = _reply(room=2)

    settlement = settle(reply, [_plain(0), _plain(1), _plain(2)], 100, shared=True)

    assert _ids(reply) == [b"1-0", b"1-1"]
    assert settlement.hand_back == [b"1-2"]
    assert reply.room == 0


@pytest.mark.parametrize(("shared", "scheduled"), [(True, True), (False, False)])
def test_an_entry_not_yet_due_is_scheduled_on_shared_only(shared: bool, scheduled: bool) -> None:
    reply = _reply()
    entries = [_delayed(0, NOW + 5_000), _delayed(1, NOW - 1), _plain(2)]

    settlement = settle(reply, entries, 100, shared=shared)

    if scheduled:  # PIP-26: Shared holds it back until it is due
        assert _ids(reply) == [b"1-1", b"1-2"]
        assert settlement == Settlement([], [(b"1-0", NOW + 5_000)])
    else:  # Exclusive and Failover deliver it in order
        assert _ids(reply) == [b"1-0", b"1-1", b"1-2"]
        assert settlement == Settlement([], [])


@pytest.mark.parametrize(
    "status", [DispatchStatus.CONSUMER_GONE, DispatchStatus.NOT_ACTIVE, DispatchStatus.BLOCKED]
)
def test_everything_read_is_handed_back_when_the_script_refused(status: DispatchStatus) -> None:
    reply = DispatchReply(status)

    settlement = settle(reply, [_plain(0), _plain(1)], 100, shared=True)

    assert reply.deliveries == []
    assert settlement == Settlement([b"1-0", b"1-1"], [])
