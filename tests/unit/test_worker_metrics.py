"""A worker's role and its part of the host's ``/metrics`` (pulsar_gateway/server/workers.py):
every worker's per-process series in one exposition, each family once, labelled by worker."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pulsar_gateway.core import GatewayMetrics
from pulsar_gateway.server.workers import ROLE_ENV, WorkerMetrics, WorkerRole


def _families(text: bytes) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """{family: {(sample name and sorted labels): value}}."""
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text.decode()):
        samples = out.setdefault(family.name, {})
        for sample in family.samples:
            key = (("__name__", sample.name), *sorted(sample.labels.items()))
            samples[key] = sample.value
    return out


def test_the_role_goes_through_the_environment() -> None:
    role = WorkerRole(2, 4, "/run/x", ready_fd=7, supervisor_pid=123)
    assert WorkerRole.from_environ({ROLE_ENV: role.to_env()}) == role
    assert WorkerRole.from_environ({}) is None
    assert role.socket_path(3) == Path("/run/x/worker-3.sock")


def test_a_worker_knows_when_its_supervisor_is_gone() -> None:
    assert not WorkerRole(1, 2, "/x", supervisor_pid=os.getppid()).orphaned()
    assert WorkerRole(1, 2, "/x", supervisor_pid=os.getpid()).orphaned()


def _metrics(connections: int, lateness_ms: list[int], commands: int) -> GatewayMetrics:
    metrics = GatewayMetrics()
    metrics.connections_opened.labels("binary").inc(connections)
    metrics.observe_delayed_lateness(lateness_ms)
    for _ in range(commands):
        metrics.count_command("binary", "SEND")
    metrics.in_messages = commands
    return metrics


async def test_the_answering_worker_gathers_every_workers_series(tmp_path: Path) -> None:
    m1, m2 = _metrics(3, [5, 20], 7), _metrics(4, [2000], 11)
    w1 = WorkerMetrics(m1.registry, WorkerRole(1, 3, str(tmp_path)))
    w2 = WorkerMetrics(m2.registry, WorkerRole(2, 3, str(tmp_path)))
    await w1.start()
    await w2.start()
    try:
        # worker 3 is not running (being restarted): left out, the scrape still answered
        for answering in (w1, w2):
            text = await answering.host()
            # each family's HELP and TYPE once, as the text format requires
            for kind in ("HELP", "TYPE"):
                lines = [line for line in text.decode().splitlines() if line.startswith("# ")]
                names = [line.split()[2] for line in lines if line.split()[1] == kind]
                assert len(names) == len(set(names)), names
            got = _families(text)
            opened = got["pulsar_gateway_connections_opened"]
            name = ("__name__", "pulsar_gateway_connections_opened_total")
            assert opened[(name, ("protocol", "binary"), ("worker", "1"))] == 3
            assert opened[(name, ("protocol", "binary"), ("worker", "2"))] == 4
            commands = got["pulsar_gateway_commands"]
            name = ("__name__", "pulsar_gateway_commands_total")
            assert (
                commands[(name, ("command", "SEND"), ("protocol", "binary"), ("worker", "1"))] == 7
            )
            assert (
                commands[(name, ("command", "SEND"), ("protocol", "binary"), ("worker", "2"))] == 11
            )
            lateness = got["pulsar_gateway_delayed_delivery_lateness_seconds"]
            count = ("__name__", "pulsar_gateway_delayed_delivery_lateness_seconds_count")
            assert lateness[(count, ("worker", "1"))] == 2
            assert lateness[(count, ("worker", "2"))] == 1
            bucket = ("__name__", "pulsar_gateway_delayed_delivery_lateness_seconds_bucket")
            assert lateness[(bucket, ("le", "0.025"), ("worker", "1"))] == 2
            assert lateness[(bucket, ("le", "0.025"), ("worker", "2"))] == 0
            assert {labels[-1] for labels in got["pulsar_gateway_in_messages"]} == {
                ("worker", "1"),
                ("worker", "2"),
            }
    finally:
        await w1.close()
        await w2.close()
    assert not list(tmp_path.iterdir()), "each worker removes its socket"


async def test_a_sibling_that_does_not_answer_is_left_out(tmp_path: Path) -> None:
    # a socket file with nobody listening: the worker that crashed left it behind
    (tmp_path / "worker-2.sock").touch()
    w1 = WorkerMetrics(_metrics(1, [], 0).registry, WorkerRole(1, 2, str(tmp_path)))
    await w1.start()
    try:
        got = _families(await w1.host())
    finally:
        await w1.close()
    workers = {
        dict(labels[1:]).get("worker") for labels in got["pulsar_gateway_connections_opened"]
    }
    assert workers == {"1"}


@pytest.mark.parametrize("stale", [True, False])
async def test_a_restarted_worker_takes_over_its_socket(tmp_path: Path, stale: bool) -> None:
    if stale:
        (tmp_path / "worker-1.sock").touch()  # its predecessor was killed
    w1 = WorkerMetrics(_metrics(2, [], 0).registry, WorkerRole(1, 2, str(tmp_path)))
    w2 = WorkerMetrics(_metrics(5, [], 0).registry, WorkerRole(2, 2, str(tmp_path)))
    await w1.start()
    await w2.start()
    try:
        got = _families(await w2.host())
    finally:
        await w1.close()
        await w2.close()
    opened = got["pulsar_gateway_connections_opened"]
    name = ("__name__", "pulsar_gateway_connections_opened_total")
    assert opened[(name, ("protocol", "binary"), ("worker", "1"))] == 2
    assert opened[(name, ("protocol", "binary"), ("worker", "2"))] == 5
