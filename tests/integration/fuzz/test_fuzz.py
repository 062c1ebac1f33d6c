"""A bounded fuzzing campaign in the suite (docs/reliability.md "Protocol fuzzing"):
binary-protocol sessions, WebSocket sessions and admin reads with hostile values against a real
``pulsar-gateway`` process, while an official-client producer and consumer pair round-trips on
it.

``PGW_FUZZ_INPUTS`` (default 10,000) and ``PGW_FUZZ_SEED`` (default 1: the suite replays
the same sessions, so it fails on a change, not on luck; other seeds explore further) size
and seed it; ``python -m tests.fuzz`` is the long mode (a million inputs).
:mod:`tests.fuzz.campaign` says what counts as a finding.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from tests.conftest import GatewayProcess
from tests.fuzz.campaign import run_campaign


def test_bounded_fuzz_campaign(
    gateway_process: Callable[..., GatewayProcess], redis_clean: object, redis_url: str
) -> None:
    inputs = int(os.environ.get("PGW_FUZZ_INPUTS", "10000"))
    seed = int(os.environ.get("PGW_FUZZ_SEED", "1"))
    gateway = gateway_process("--redis-url", redis_url, "--log-level", "INFO").wait_ready()
    report = run_campaign(gateway, inputs, seed=seed, concurrency=32)
    print(report.table())
    assert report.failures() == [], f"seed {seed}:\n" + "\n".join(report.failures())
    # The campaign reached the states worth attacking, not only the front door.
    answers = report.binary.answers
    assert answers.get("PRODUCER_SUCCESS", 0) > 0 and answers.get("SEND_RECEIPT", 0) > 0
    assert answers.get("MESSAGE", 0) > 0, "no session got a message delivered"
    assert report.websocket.statuses.get(101, 0) > 0
    assert report.websocket.answers.get("ws:ok", 0) > 0
    assert report.admin.statuses.get(200, 0) > 0
    assert report.pair_round_trips > 0
    assert report.connections_left <= 1
