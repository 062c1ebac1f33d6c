"""The normal workload a flood must not hurt: the official client (``pulsar-client`` 3.13), one
producer sending ``rate`` messages a second (batching off) and one Shared consumer
acknowledging each, on a topic of their own, each in a thread (the client's API blocks).

Recorded: each message's send time (the payload is its sequence number), its receipt or
error, and its first reception; latency is send -> receive end to end, lost is a message
with a receipt that was never received (after a drain at the end), duplicates are the
receptions beyond a message's first (at-least-once allows them, they are counted apart).
Times are taken in Python, in the harness process: a busy harness adds to them (the floods'
event loop shares the interpreter), which is small beside what a stalled gateway adds.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pulsar

from tests.soak.measure import Latency

#: How long a send may wait for its receipt before the client fails it, ms.
SEND_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class WorkloadFigures:
    """What the normal workload saw."""

    sent: int
    receipted: int
    #: distinct messages received
    received: int
    #: receipted and never received
    lost: int
    #: receptions beyond a message's first
    duplicates: int
    send_errors: dict[str, int]
    receive_errors: dict[str, int]
    #: send -> first receive, of the messages sent in the measured window
    latency: Latency


class NormalWorkload:
    """The producer and consumer threads on ``topic`` of the gateway at ``service_url``;
    :meth:`start`, then :meth:`finish` (always: it closes the client)."""

    def __init__(self, service_url: str, topic: str, rate: float = 200.0) -> None:
        self.rate = rate
        self.client = pulsar.Client(
            service_url,
            operation_timeout_seconds=30,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        )
        try:
            self.consumer = self.client.subscribe(
                topic,
                "normal",
                consumer_type=pulsar.ConsumerType.Shared,
                receiver_queue_size=100,
                initial_position=pulsar.InitialPosition.Earliest,
            )
            self.producer = self.client.create_producer(
                topic,
                batching_enabled=False,
                send_timeout_millis=SEND_TIMEOUT_MS,
                max_pending_messages=1000,
                block_if_queue_full=True,
            )
        except BaseException:
            self.client.close()
            raise
        #: time.monotonic() of each send, by sequence number
        self.sent_at: list[float] = []
        self._lock = threading.Lock()  # the answers come on the client's threads
        self.receipted: set[int] = set()
        self.send_errors: Counter[str] = Counter()
        self.answered = 0
        #: time.monotonic() of each message's first reception, by sequence number
        self.received_at: dict[int, float] = {}
        self.duplicates = 0
        self.receive_errors: Counter[str] = Counter()
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        self._threads = [
            threading.Thread(target=self._produce, name="normal producer", daemon=True),
            threading.Thread(target=self._consume, name="normal consumer", daemon=True),
        ]

    def start(self) -> NormalWorkload:
        for thread in self._threads:
            thread.start()
        return self

    def _produce(self) -> None:
        started = time.monotonic()
        count = 0
        while not self._stop_producing.is_set():
            ahead = started + count / self.rate - time.monotonic()
            if ahead > 0:
                self._stop_producing.wait(ahead)
                continue
            if ahead < -1:  # held up (a full queue): go on at the rate, no burst
                started -= ahead
            self.sent_at.append(time.monotonic())
            try:
                self.producer.send_async(str(count).encode(), self._answer(count))
            except pulsar.PulsarException as exc:
                self._answered(type(exc).__name__)
            count += 1

    def _answer(self, sequence: int) -> Any:
        def done(result: Any, _message_id: Any) -> None:
            if result == pulsar.Result.Ok:
                self.receipted.add(sequence)
                self._answered()
            else:
                self._answered(str(result))

        return done

    def _answered(self, error: str | None = None) -> None:
        with self._lock:
            self.answered += 1
            if error is not None:
                self.send_errors[error] += 1

    def _consume(self) -> None:
        while not self._stop_consuming.is_set():
            try:
                message = self.consumer.receive(timeout_millis=100)
            except pulsar.Timeout:
                continue
            except pulsar.PulsarException as exc:
                self.receive_errors[type(exc).__name__] += 1
                time.sleep(0.1)
                continue
            now = time.monotonic()
            sequence = int(message.data())
            if sequence in self.received_at:
                self.duplicates += 1
            else:
                self.received_at[sequence] = now
            try:
                self.consumer.acknowledge(message)
            except pulsar.PulsarException as exc:
                self.receive_errors[f"acknowledge: {type(exc).__name__}"] += 1

    def finish(self, drain_timeout: float = 30.0) -> None:
        """Stop producing, wait for every send's answer and every receipted message's
        reception (each up to ``drain_timeout`` s), stop consuming, close the client."""
        try:
            self._stop_producing.set()
            self._threads[0].join()
            deadline = time.monotonic() + SEND_TIMEOUT_MS / 1000 + drain_timeout
            while self.answered < len(self.sent_at) and time.monotonic() < deadline:
                time.sleep(0.05)
            deadline = time.monotonic() + drain_timeout
            while self.receipted - self.received_at.keys() and time.monotonic() < deadline:
                time.sleep(0.05)
            self._stop_consuming.set()
            self._threads[1].join()
        finally:
            self.client.close()

    def received_between(self, since: float, until: float = math.inf) -> tuple[int, int]:
        """(sent, received) of the messages sent from ``since`` to ``until``."""
        window = [n for n, at in enumerate(self.sent_at) if since <= at < until]
        return len(window), sum(1 for n in window if n in self.received_at)

    def latency(self, since: float, until: float = math.inf) -> Latency:
        """Send -> first receive of the messages sent from ``since`` to ``until``."""
        return Latency.of(
            [
                self.received_at[n] - at
                for n, at in enumerate(self.sent_at)
                if since <= at < until and n in self.received_at
            ]
        )

    def figures(self, since: float) -> WorkloadFigures:
        """The whole run's counts; the latency of what was sent from ``since`` on."""
        return WorkloadFigures(
            sent=len(self.sent_at),
            receipted=len(self.receipted),
            received=len(self.received_at),
            lost=len(self.receipted - self.received_at.keys()),
            duplicates=self.duplicates,
            send_errors=dict(self.send_errors),
            receive_errors=dict(self.receive_errors),
            latency=self.latency(since),
        )
