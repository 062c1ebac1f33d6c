"""The gateway stays bounded under hostile load: each flood of :mod:`tests.soak` against a
real ``pulsar-gateway`` process and its own ``redis-server``, the gateway's resident memory
read from ``/proc`` throughout, while an official client produces and consumes beside it.

Each flood offers 1 GiB (16 KiB messages, so it takes seconds): a consumer that never reads
while a fast producer publishes to its topic, a producer that never reads its receipts,
the same two over the WebSocket API, REST produce with the largest bodies the gateway takes.
(A client that never reads its answers gets to write its 1 GiB because each 16 KiB message
is answered in a few bytes; with small messages TCP stops it once the gateway stops
reading it, python -m tests.soak --message-size 64.) The bound asserted is 100 MiB of growth;
before the gateway had flow control, the slow consumers grew it by 500-600 MiB in 20 s and
the REST flood by 190 MiB (docs/reliability.md). The normal workload must lose nothing and
keep its latency.

Also: 64 clients opening connections and writing garbage in a loop while the health
endpoint and a fresh client's CONNECT are timed, and Redis stopped (SIGSTOP) for 10 s under
load: memory bounded, the health check answering 503 promptly meanwhile, and every message
delivered once Redis is back. ``python -m tests.soak`` runs the same floods longer, and all
at once (the soak).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import ON_CLUSTER, redis_server_binary
from tests.soak import scenarios
from tests.soak.floods import GIB, KIB
from tests.soak.run import Figures, Setup

pytestmark = pytest.mark.skipif(ON_CLUSTER, reason="runs its own redis-server")

#: 1 GiB of 16 KiB messages per flood; a flood ends when its budget is spent, or at the
#: duration a test gives it
SETUP = Setup(message_size=16 * KIB, budget=GIB)
#: Resident memory growth allowed, MiB.
BOUND_MIB = 100
#: The normal workload's worst send-to-receive latency allowed during a flood, ms.
WORKLOAD_MAX_MS = 3000


@pytest.fixture(autouse=True)
def _redis_server_present() -> None:
    redis_server_binary()  # skip or fail as the rest of the suite does without one


def assert_served_throughout(figures: Figures) -> None:
    """The official client beside the flood lost nothing and waited no more than
    WORKLOAD_MAX_MS for any message."""
    workload = figures.workload
    assert workload.sent > 0
    assert (workload.lost, workload.duplicates) == (0, 0), figures.notes
    assert workload.send_errors == {}, workload.send_errors
    assert workload.latency.max_ms < WORKLOAD_MAX_MS, workload.latency


def assert_bounded(figures: Figures) -> None:
    assert not figures.rss.aborted_at_cap
    assert figures.rss.growth_mib < BOUND_MIB, (figures.rss, figures.timeline)


@pytest.mark.parametrize(
    ("flood", "duration"),
    [
        # a consumer that never reads while a fast producer fills its topic
        (scenarios.binary_slow_consumer, 60),
        (scenarios.websocket_slow_consumer, 60),
        # a producer that never reads its receipts, or its acks
        (scenarios.binary_unread_receipts, 20),
        (scenarios.websocket_unread_acks, 20),
    ],
    ids=lambda value: getattr(value, "__name__", str(value)),
)
async def test_a_client_that_never_reads(flood: Any, duration: float) -> None:
    figures = await flood(SETUP, duration=duration)
    assert figures.offered_bytes >= GIB
    assert_bounded(figures)
    assert_served_throughout(figures)


async def test_a_rest_produce_flood() -> None:
    figures = await scenarios.rest_flood(SETUP, duration=60)
    assert figures.offered_bytes >= GIB
    (flood,) = figures.floods
    assert set(flood.outcomes) == {"200"}
    assert_bounded(figures)
    assert_served_throughout(figures)


async def test_a_connection_storm_leaves_the_gateway_answering() -> None:
    figures = await scenarios.connection_storm(SETUP, duration=15)
    (flood,) = figures.floods
    assert flood.sessions > 10_000
    assert figures.probes["health"].max_ms < 1000, figures.probes
    assert figures.probes["connect"].max_ms < 1000, figures.probes
    assert figures.probe_failures == {"health": {}, "connect": {}}
    assert_bounded(figures)
    assert_served_throughout(figures)


async def test_redis_stopped_for_ten_seconds_under_load() -> None:
    """SIGSTOP for 10 s, then SIGCONT: memory bounded meanwhile, the health check answers
    503 within its 2 s timeout, and every message sent before, during and after arrives
    (sends during the stop just wait)."""
    figures = await scenarios.redis_stall(SETUP, duration=25, stall=10)
    assert figures.stall is not None
    assert figures.stall.seconds >= 10
    assert_bounded(figures)
    workload = figures.workload
    assert (workload.lost, workload.duplicates) == (0, 0), figures.notes
    assert figures.stall.received_after == figures.stall.sent_after > 0
    assert figures.stall.producer_receipts_after > 0  # the fast producer goes on
    assert figures.probe_failures["health"].get("HTTP 503", 0) >= 3
    assert figures.probes["health"].max_ms < 3000  # answered quickly whenever Redis was up
