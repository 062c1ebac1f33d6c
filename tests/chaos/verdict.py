"""What a chaos run recorded, and the verdict on it: pure data, no I/O.

The workload records every send receipt (:class:`Sent`) and every delivery with the time its
``receive`` returned and its ``acknowledge`` returned (:class:`Delivery`); the chaos loop
records every failure it caused (:class:`Outage`). :func:`judge` counts, per topic:

* **lost**: messages whose send receipt came back (Redis stored them) and that no consumer
  ever received;
* **dedup duplicates**: a message stored more than once, seen as deliveries of one sequence
  id under two message ids, or a delivery under another id than its receipt named (every
  producer is a named producer on a topic with deduplication on, and the client re-sends
  what it had in flight after each reconnection);
* **acked redelivered beyond the in-flight window**: a delivery of a message after a
  consumer had received and acknowledged it, when no failure of that consumer's gateway nor
  of Redis happened while the message was in flight, from its delivery to
  ``ACK_WINDOW_S`` after its acknowledgement (the client groups acknowledgements for
  100 ms, Pulsar's default ``acknowledgementsGroupTimeMicros``; a gateway killed or Redis
  down in that window may lose the acknowledgement, which is Pulsar's at-least-once
  contract too). Redeliveries inside the window are counted, not failed;
* **early**: a delayed message received before its ``deliver_at`` (1 ms of rounding; the
  gateways, Redis and the client share one clock);
* **out of order**: on ordered subscriptions (Key_Shared per key, Failover per topic) a
  message received for the first time while an earlier message of its key (by the
  producer's order) had never been received.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

#: How long after ``acknowledge`` returned an acknowledgement may still be on its way to
#: Redis (s): the client's 100 ms grouping, the gateway's pipeline, slack for a loaded host.
#: Measured: in the runs of docs/reliability.md every allowed redelivery's acknowledgement
#: came less than 0.2 s before the failure that lost it, or during it.
ACK_WINDOW_S = 1.0
#: Rounding allowed on a delayed message's time (ms): deliver-at is in ms.
EARLY_SLACK_MS = 1


@dataclass(frozen=True)
class Sent:
    """A message its producer got a receipt for."""

    topic: str
    seq: int
    key: str
    key_seq: int  # the message's place among its key's messages, in send order
    deliver_at_ms: int  # 0 when not delayed
    entry: tuple[int, int]  # (ledger id, entry id) from the receipt


@dataclass(frozen=True)
class Delivery:
    """One message received by one consumer, and acknowledged (``acked`` 0 when the
    acknowledgement raised)."""

    topic: str
    seq: int
    key: str
    key_seq: int
    deliver_at_ms: int
    entry: tuple[int, int]
    consumer: str
    gateway: int  # the index of the gateway the consumer's client connects to
    received: float  # time.time() when receive returned
    acked: float  # time.time() when acknowledge returned
    redelivery_count: int = 0


@dataclass(frozen=True)
class Outage:
    """A failure the chaos loop caused: a gateway (by index) or Redis (``gateway`` -1) down
    from ``start`` to ``end`` (back and answering)."""

    gateway: int
    start: float
    end: float

    @property
    def what(self) -> str:
        return "redis" if self.gateway < 0 else f"gateway {self.gateway}"


@dataclass
class TopicVerdict:
    topic: str
    ordered: bool
    delayed: bool
    sent: int = 0
    deliveries: int = 0
    received: int = 0  # distinct messages
    lost: list[int] = field(default_factory=list)
    dedup_duplicates: list[int] = field(default_factory=list)
    redelivered: int = 0  # deliveries after the first, not of an acknowledged message
    acked_redelivered_in_window: int = 0
    acked_redelivered_beyond_window: list[int] = field(default_factory=list)
    early: list[int] = field(default_factory=list)
    out_of_order: list[int] = field(default_factory=list)
    ack_failures: int = 0

    def failures(self) -> list[str]:
        found = []
        for label, seqs in (
            ("acknowledged messages lost", self.lost),
            ("dedup duplicates", self.dedup_duplicates),
            (
                "acked messages redelivered beyond the in-flight window",
                self.acked_redelivered_beyond_window,
            ),
            ("delayed messages delivered early", self.early),
            ("messages out of order", self.out_of_order),
        ):
            if seqs:
                found.append(f"{self.topic}: {len(seqs)} {label} (seq {sorted(seqs)[:10]})")
        return found


def is_duplicate_receipt(entry: tuple[int, int]) -> bool:
    """The receipt of a SEND the gateway found it already stored names no entry: Pulsar
    answers it with message id (-1, -1) (``MessageDeduplication``), which the client reads
    as unsigned."""
    return entry[0] < 0 or entry[0] >= 1 << 63


def in_flight_during(first: Delivery, outages: Iterable[Outage]) -> bool:
    """Whether a failure that may lose ``first``'s acknowledgement happened while it was in
    flight: its consumer's gateway or Redis down at some moment between its delivery and
    ``ACK_WINDOW_S`` after its acknowledgement."""
    until = first.acked + ACK_WINDOW_S
    return any(
        (o.gateway < 0 or o.gateway == first.gateway)
        and o.start <= until
        and o.end >= first.received
        for o in outages
    )


def judge_topic(
    topic: str,
    sent: list[Sent],
    deliveries: list[Delivery],
    outages: list[Outage],
    *,
    ordered: bool,
    delayed: bool,
) -> TopicVerdict:
    verdict = TopicVerdict(topic, ordered, delayed, sent=len(sent), deliveries=len(deliveries))
    receipts = {s.seq: s for s in sent}
    entries: dict[int, set[tuple[int, int]]] = defaultdict(set)
    for s in sent:
        if not is_duplicate_receipt(s.entry):
            entries[s.seq].add(s.entry)
    first_acked: dict[int, Delivery] = {}
    seen: set[int] = set()
    # per key: how many of its messages were received, and the highest place among them
    # (all of 0..n-1 received exactly when the count is n and the highest is n - 1)
    count_of_key: dict[str, int] = defaultdict(int)
    highest_of_key: dict[str, int] = defaultdict(lambda: -1)
    for d in sorted(deliveries, key=lambda d: d.received):
        entries[d.seq].add(d.entry)
        if not d.acked:
            verdict.ack_failures += 1
        if d.seq in seen:
            acked = first_acked.get(d.seq)
            if acked is None or d.received <= acked.acked:
                verdict.redelivered += 1
            elif in_flight_during(acked, outages):
                verdict.acked_redelivered_in_window += 1
            else:
                verdict.acked_redelivered_beyond_window.append(d.seq)
        else:
            seen.add(d.seq)
            if ordered:
                if count_of_key[d.key] != d.key_seq or highest_of_key[d.key] >= d.key_seq:
                    verdict.out_of_order.append(d.seq)
                count_of_key[d.key] += 1
                highest_of_key[d.key] = max(highest_of_key[d.key], d.key_seq)
        if d.acked and d.seq not in first_acked:
            first_acked[d.seq] = d
        if delayed and d.received * 1000 < d.deliver_at_ms - EARLY_SLACK_MS:
            verdict.early.append(d.seq)
    verdict.received = len(seen)
    verdict.lost = sorted(set(receipts) - seen)
    verdict.dedup_duplicates = sorted(seq for seq, ids in entries.items() if len(ids) > 1)
    return verdict
