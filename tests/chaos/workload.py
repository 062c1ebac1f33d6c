"""The chaos run's workload, with the official client (``pulsar-client`` 3.13): one named
producer per topic (deduplication is on, so each is a dedup producer) and one consumer per
gateway on each topic's subscription, each in a thread of its own, recording what they did
(:mod:`tests.chaos.verdict`).

Producers use one client whose service URL names every gateway (``pulsar://a,b,c``): its
lookups go round the list, so a producer whose gateway dies reconnects through another, and
re-sends what it had in flight (``send_timeout_millis=0``: a message waits for its receipt
as long as it takes, as an application that must not drop one). Each gateway has a client
of its own for the consumers, so what a consumer may lose when its gateway dies is known
(:func:`tests.chaos.verdict.in_flight_during`); those reconnect when their gateway is back.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pulsar

from tests.chaos.verdict import Delivery, Sent

NAMESPACE = "public/default"
#: Each consumer's prefetch: small, so a message's receive time stays close to its delivery.
RECEIVER_QUEUE = 50


@dataclass(frozen=True)
class TopicPlan:
    """One topic of the workload and its subscription."""

    tag: str
    subscription_type: Any  # pulsar.ConsumerType
    keys: int = 1  # distinct message keys (Key_Shared routes by key)
    delay_ms: tuple[int, int] | None = None  # deliver-at = now + a random delay in this range

    @property
    def topic(self) -> str:
        return f"persistent://{NAMESPACE}/chaos-{self.tag}"

    @property
    def ordered(self) -> bool:
        """Pulsar keeps these in order: Failover per topic, Key_Shared per key."""
        return self.subscription_type in (
            pulsar.ConsumerType.Failover,
            pulsar.ConsumerType.KeyShared,
        )


PLANS = (
    TopicPlan("shared", pulsar.ConsumerType.Shared),
    TopicPlan("key-shared", pulsar.ConsumerType.KeyShared, keys=32),
    TopicPlan("failover", pulsar.ConsumerType.Failover),
    TopicPlan("delayed", pulsar.ConsumerType.Shared, delay_ms=(200, 3000)),
)


def encode(seq: int, key: str, key_seq: int, deliver_at_ms: int) -> bytes:
    return f"{seq}|{key}|{key_seq}|{deliver_at_ms}".encode()


def decode(payload: bytes) -> tuple[int, str, int, int]:
    seq, key, key_seq, deliver_at = payload.decode().split("|")
    return int(seq), key, int(key_seq), int(deliver_at)


def entry_of(message_id: Any) -> tuple[int, int]:
    return int(message_id.ledger_id()), int(message_id.entry_id())


class ProducerLoop(threading.Thread):
    """Sends ``rate`` messages a second on one topic until stopped, then waits for every
    receipt."""

    def __init__(
        self, client: Any, plan: TopicPlan, rate: float, seed: int, sent: list[Sent]
    ) -> None:
        super().__init__(name=f"producer {plan.tag}", daemon=True)
        self.plan = plan
        self.rate = rate
        self.rng = random.Random(seed)
        self.sent = sent
        self.errors: Counter[str] = Counter()
        self.count = 0
        self.stopping = threading.Event()
        self.producer = client.create_producer(
            plan.topic,
            producer_name=f"chaos-{plan.tag}",
            send_timeout_millis=0,
            batching_enabled=False,
            max_pending_messages=1000,
            block_if_queue_full=True,
        )

    def run(self) -> None:
        key_counts: Counter[str] = Counter()
        started = time.monotonic()
        while not self.stopping.is_set():
            ahead = started + self.count / self.rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
            key = f"k{self.rng.randrange(self.plan.keys)}"
            key_seq = key_counts[key]
            key_counts[key] += 1
            deliver_at = 0
            if self.plan.delay_ms is not None:
                deliver_at = int(time.time() * 1000) + self.rng.randint(*self.plan.delay_ms)
            self.producer.send_async(
                encode(self.count, key, key_seq, deliver_at),
                self._receipt(self.count, key, key_seq, deliver_at),
                partition_key=key if self.plan.keys > 1 else None,
                deliver_at=deliver_at or None,
            )
            self.count += 1

    def _receipt(self, seq: int, key: str, key_seq: int, deliver_at: int) -> Any:
        def done(result: Any, message_id: Any) -> None:
            if result == pulsar.Result.Ok:
                entry = entry_of(message_id)
                self.sent.append(Sent(self.plan.tag, seq, key, key_seq, deliver_at, entry))
            else:
                self.errors[str(result)] += 1

        return done

    def finish(self, timeout: float) -> None:
        """Stop sending and wait (up to ``timeout``) until every message sent has a receipt
        or an error."""
        self.stopping.set()
        self.join(timeout)
        deadline = time.monotonic() + timeout
        while len(self.sent) + self.errors.total() < self.count and time.monotonic() < deadline:
            time.sleep(0.1)

    @property
    def unanswered(self) -> int:
        return self.count - len(self.sent) - self.errors.total()


class ConsumerLoop(threading.Thread):
    """Receives and acknowledges every message of one consumer until stopped."""

    def __init__(
        self, client: Any, plan: TopicPlan, gateway: int, deliveries: list[Delivery]
    ) -> None:
        self.consumer_name = f"{plan.tag}-{gateway}"
        super().__init__(name=f"consumer {self.consumer_name}", daemon=True)
        self.plan = plan
        self.gateway = gateway
        self.deliveries = deliveries
        self.errors: Counter[str] = Counter()
        self.stopping = threading.Event()
        self.consumer = client.subscribe(
            plan.topic,
            "chaos",
            consumer_type=plan.subscription_type,
            consumer_name=self.consumer_name,
            receiver_queue_size=RECEIVER_QUEUE,
            initial_position=pulsar.InitialPosition.Earliest,
        )

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                msg = self.consumer.receive(timeout_millis=100)
            except pulsar.Timeout:
                continue
            except Exception as exc:  # reported; a consumer keeps going
                self.errors[f"receive: {type(exc).__name__}"] += 1
                time.sleep(0.1)
                continue
            received = time.time()
            try:
                self.consumer.acknowledge(msg)
                acked = time.time()
            except Exception as exc:
                self.errors[f"acknowledge: {type(exc).__name__}"] += 1
                acked = 0.0
            seq, key, key_seq, deliver_at = decode(msg.data())
            entry = entry_of(msg.message_id())
            self.deliveries.append(
                Delivery(
                    self.plan.tag,
                    seq,
                    key,
                    key_seq,
                    deliver_at,
                    entry,
                    self.consumer_name,
                    self.gateway,
                    received,
                    acked,
                )
            )

    def stop(self, timeout: float) -> None:
        self.stopping.set()
        self.join(timeout)
