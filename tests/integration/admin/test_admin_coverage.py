"""Every operation of Pulsar's published admin v2 description (``tests/admin_coverage/
operations.tsv``, 493 operations) sent to a live gateway: none is answered by the router's
own 404/405, no answer is a server error but the 501 of what does not apply over Redis, and
every error carries Pulsar's ``{"reason": ...}``. ``python -m tests.admin_coverage`` prints
the same per group."""

from __future__ import annotations

import asyncio

from tests.admin_coverage import coverage_table, load_operations, probe
from tests.conftest import GatewayThread


def test_every_pulsar_admin_operation_is_answered(gateway: GatewayThread) -> None:
    operations = load_operations()
    assert len(operations) == 493
    answers = asyncio.run(probe(gateway.http_url, operations))
    unrouted = [
        f"{a.operation.method} {a.operation.path} -> {a.status}" for a in answers if not a.routed
    ]
    assert unrouted == [], coverage_table(answers)
    server_errors = [
        f"{a.operation.method} {a.operation.path} -> {a.status} {a.reason}"
        for a in answers
        if a.status >= 500 and a.status != 501
    ]
    assert server_errors == []
    without_reason = [
        f"{a.operation.method} {a.operation.path} -> {a.status}"
        for a in answers
        if a.status >= 400 and not a.reason
    ]
    assert without_reason == []
