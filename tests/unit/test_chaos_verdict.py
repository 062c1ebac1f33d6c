"""The chaos run's verdict (tests/chaos/verdict.py) on recorded histories: each kind of
failure it must find is found, and what Pulsar allows is not failed."""

from __future__ import annotations

from tests.chaos.verdict import ACK_WINDOW_S, Delivery, Outage, Sent, judge_topic

DUPLICATE_RECEIPT = ((1 << 64) - 1, (1 << 64) - 1)


def sent(seq: int, key: str = "k", key_seq: int | None = None, deliver_at: int = 0) -> Sent:
    return Sent("t", seq, key, seq if key_seq is None else key_seq, deliver_at, (7, seq))


def delivery(
    s: Sent,
    at: float,
    *,
    gateway: int = 0,
    acked: float | None = None,
    entry: tuple[int, int] | None = None,
) -> Delivery:
    return Delivery(
        "t", s.seq, s.key, s.key_seq, s.deliver_at_ms, entry or s.entry,
        f"c-{gateway}", gateway, at, at + 0.001 if acked is None else acked,
    )  # fmt: skip


def judge(sent_: list[Sent], deliveries: list[Delivery], outages=(), **kinds):
    kinds.setdefault("ordered", False)
    kinds.setdefault("delayed", False)
    return judge_topic("t", sent_, deliveries, list(outages), **kinds)


def test_a_clean_history_passes():
    messages = [sent(i) for i in range(3)]
    verdict = judge(messages, [delivery(m, 10.0 + m.seq) for m in messages], ordered=True)
    assert verdict.failures() == []
    assert (verdict.sent, verdict.received, verdict.deliveries) == (3, 3, 3)


def test_a_message_with_a_receipt_never_received_is_lost():
    messages = [sent(i) for i in range(3)]
    verdict = judge(messages, [delivery(messages[0], 1.0), delivery(messages[2], 2.0)])
    assert verdict.lost == [1]
    assert "1 acknowledged messages lost" in verdict.failures()[0]


def test_a_message_stored_twice_is_a_dedup_duplicate():
    m = sent(0)
    twice = [delivery(m, 1.0), delivery(m, 2.0, entry=(7, 99))]
    assert judge([m], twice).dedup_duplicates == [0]
    # a re-sent message answered as a duplicate names no entry: not a second copy
    resent = Sent("t", 0, "k", 0, 0, DUPLICATE_RECEIPT)
    assert judge([resent], [delivery(m, 1.0)]).dedup_duplicates == []


def test_acked_then_delivered_again_fails_unless_a_failure_had_it_in_flight():
    m = sent(0)
    history = [delivery(m, 1.0, gateway=1, acked=1.1), delivery(m, 20.0, gateway=2)]
    verdict = judge([m], history)
    assert verdict.acked_redelivered_beyond_window == [0]
    # the acknowledging consumer's gateway died within the window: allowed
    own = Outage(1, 1.1 + ACK_WINDOW_S - 0.1, 8.0)
    assert judge([m], history, [own]).acked_redelivered_in_window == 1
    # Redis died while it was in flight: allowed
    assert judge([m], history, [Outage(-1, 0.5, 1.05)]).failures() == []
    # another gateway's death, or one after the window, excuses nothing
    other = Outage(2, 1.05, 3.0)
    late = Outage(1, 1.1 + ACK_WINDOW_S + 0.5, 9.0)
    assert judge([m], history, [other, late]).acked_redelivered_beyond_window == [0]


def test_a_redelivery_before_the_ack_is_counted_not_failed():
    m = sent(0)
    history = [delivery(m, 1.0, acked=5.0), delivery(m, 2.0, gateway=1)]
    verdict = judge([m], history)
    assert (verdict.redelivered, verdict.failures()) == (1, [])


def test_delayed_message_received_before_its_time_is_early():
    on_time = sent(0, deliver_at=5000)
    early = sent(1, deliver_at=5000)
    history = [delivery(on_time, 5.0), delivery(early, 4.9)]
    assert judge([on_time, early], history, delayed=True).early == [1]
    assert judge([on_time, early], history).early == []  # only judged on delayed topics


def test_first_deliveries_must_follow_the_producers_order_per_key():
    a0, b0, a1, b1 = sent(0, "a", 0), sent(1, "b", 0), sent(2, "a", 1), sent(3, "b", 1)
    # keys interleave freely, and a redelivery of an older message is not out of order
    fine = [delivery(b0, 1, acked=9), delivery(a0, 2), delivery(b1, 3), delivery(b0, 4)]
    fine.append(delivery(a1, 5))
    assert judge([a0, b0, a1, b1], fine, ordered=True).failures() == []
    swapped = [delivery(a1, 1), delivery(a0, 2), delivery(b0, 3), delivery(b1, 4)]
    assert judge([a0, b0, a1, b1], swapped, ordered=True).out_of_order == [2, 0]
    assert judge([a0, b0, a1, b1], swapped).out_of_order == []  # Shared: no order
