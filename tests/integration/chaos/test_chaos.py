"""Chaos under load, the suite's short run (docs/reliability.md "Chaos under load"): the
official-client workload of ``tests/chaos`` (Shared, Key_Shared, Failover and delayed messages,
every producer a dedup producer) on three gateway processes and a ``redis-server`` with
``appendfsync always``, while gateways are SIGKILLed and restarted at random and Redis is
SIGKILLed and restarted twice. Nothing acknowledged may be lost, nothing stored twice, no
acknowledged message redelivered unless a failure had it in flight, no delayed message early,
and no Key_Shared key nor Failover topic out of order (``tests/chaos/verdict.py``).

``PGW_CHAOS_SECONDS`` (default 30) and ``PGW_CHAOS_SEED`` (default 1) size it; the long
mode is ``python -m tests.chaos`` (docs/reliability.md).
"""

from __future__ import annotations

import os

from tests.chaos.run import ChaosConfig, run_chaos
from tests.conftest import redis_server_binary


def test_chaos_loses_duplicates_and_reorders_nothing() -> None:
    config = ChaosConfig(
        duration=float(os.environ.get("PGW_CHAOS_SECONDS", "30")),
        seed=int(os.environ.get("PGW_CHAOS_SEED", "1")),
    )
    report = run_chaos(config, redis_server_binary(), progress=print)
    print(report.table())
    assert not report.failures(), "\n".join(
        [report.table(), *report.failures(), *(f"log kept: {p}" for p in report.logs)]
    )
