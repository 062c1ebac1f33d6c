"""``pulsar-gateway --workers N``: worker processes sharing the ports under a supervisor that
restarts them and drains them, with ``/metrics`` whole whichever worker answers."""

from __future__ import annotations

import signal
import socket
import time
import urllib.request
from pathlib import Path

import psutil
import pulsar
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import TIMEOUT, GatewayProcess, wait_for

WORKER_COMMAND = "pulsar_gateway.server.main"


def _workers(supervisor: GatewayProcess) -> list[psutil.Process]:
    children = psutil.Process(supervisor.proc.pid).children()
    return [c for c in children if WORKER_COMMAND in " ".join(c.cmdline())]


def _scrape(gp: GatewayProcess) -> str:
    url = f"http://127.0.0.1:{gp.http_port}/metrics"
    with urllib.request.urlopen(url, timeout=TIMEOUT) as resp:
        return str(resp.read().decode())


def _by_worker(text: str, family: str, sample: str, **labels: str) -> dict[str, float]:
    """{worker: value} of ``sample`` with ``labels``."""
    out = {}
    for metric in text_string_to_metric_families(text):
        if metric.name != family:
            continue
        for s in metric.samples:
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                out[s.labels["worker"]] = s.value
    return out


def test_workers_share_the_ports_and_answer_metrics_for_the_host(
    gateway_process, client_factory, tmp_path: Path
) -> None:
    gp = gateway_process("--workers", "2", "--data-dir", str(tmp_path / "data")).wait_ready()
    log = gp.log()
    assert "(2 workers, pids" in log
    workers = _workers(gp)
    assert len(workers) == 2
    # one embedded redis-server, the supervisor's, which the workers share
    redis = [c for c in psutil.Process(gp.proc.pid).children() if "redis-server" in c.name()]
    assert len(redis) == 1
    assert log.count("redis-server") >= 1 and "worker-1 " in log and "worker-2 " in log

    # the kernel spreads connections over the workers (by address and port: 24 clients
    # all on one worker would have a chance of 2**-23)
    topic = "persistent://public/default/spread"
    consumer = client_factory(gp.url).subscribe(
        topic, "all", consumer_type=pulsar.ConsumerType.Shared
    )
    sent = []
    for i in range(24):
        producer = client_factory(gp.url).create_producer(topic)
        for j in range(5):
            producer.send(b"%d-%d" % (i, j))
            sent.append(b"%d-%d" % (i, j))
    got = []
    for _ in sent:
        msg = consumer.receive(timeout_millis=int(TIMEOUT * 1000))
        got.append(msg.data())
        consumer.acknowledge(msg)
    assert sorted(got) == sorted(sent)

    text = _scrape(gp)
    opened = _by_worker(
        text,
        "pulsar_gateway_connections_opened",
        "pulsar_gateway_connections_opened_total",
        protocol="binary",
    )
    assert set(opened) == {"1", "2"}
    assert sum(opened.values()) == 25, opened
    assert min(opened.values()) >= 1, opened
    in_messages = _by_worker(text, "pulsar_gateway_in_messages", "pulsar_gateway_in_messages_total")
    assert sum(in_messages.values()) == 120
    # each family once, whichever worker answers; the topic's fleet-wide series are this
    # host's (its only scrape target) in every answer, once
    for _ in range(6):
        text = _scrape(gp)
        types = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
        assert len(types) == len(set(types))
        topic_lines = [
            line
            for line in text.splitlines()
            if line.startswith("pulsar_msg_backlog{")
            and 'topic="persistent://public/default/spread"' in line
        ]
        assert len(topic_lines) == 1, topic_lines

    assert gp.stop() == 0
    assert all(not w.is_running() or w.status() == psutil.STATUS_ZOMBIE for w in workers)
    assert all(not r.is_running() or r.status() == psutil.STATUS_ZOMBIE for r in redis)
    assert "supervisor stopped" in gp.log()


def test_a_dead_worker_is_restarted_and_sigterm_drains_every_worker(
    gateway_process, client_factory, redis_url: str
) -> None:
    gp = gateway_process(
        "--workers", "2", "--redis-url", redis_url, "--key-prefix", "workers-restart"
    ).wait_ready()
    first, second = _workers(gp)
    first.send_signal(signal.SIGKILL)
    first.wait(TIMEOUT)

    def replaced() -> bool:
        pids = {w.pid for w in _workers(gp)}
        return len(pids) == 2 and first.pid not in pids and second.pid in pids

    wait_for(replaced, timeout=3 * TIMEOUT)
    wait_for(lambda: gp.log().count("serves") == 3, timeout=3 * TIMEOUT)
    assert f"(pid {first.pid}) exited (-9): restarting it in 1 s" in gp.log()
    # dying again soon after: the wait doubles
    (again,) = [w for w in _workers(gp) if w.pid != second.pid]
    again.send_signal(signal.SIGKILL)
    wait_for(lambda: gp.log().count("serves") == 4, timeout=3 * TIMEOUT)
    assert f"(pid {again.pid}) exited (-9): restarting it in 2 s" in gp.log()

    # still serving on the shared port, from either worker
    client = client_factory(gp.url)
    consumer = client.subscribe("after-restart", "s", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer("after-restart")
    producer.send(b"one")
    msg = consumer.receive(timeout_millis=int(TIMEOUT * 1000))
    assert msg.data() == b"one"
    # an unacknowledged message goes back to its subscription when the workers drain
    producer.send(b"two")
    assert consumer.receive(timeout_millis=int(TIMEOUT * 1000)).data() == b"two"
    consumer.acknowledge(msg)

    workers = _workers(gp)
    assert gp.stop(signal.SIGTERM) == 0
    assert all(not w.is_running() or w.status() == psutil.STATUS_ZOMBIE for w in workers)
    assert gp.log().count("signal received: shutting down") == 2
    assert gp.log().count("pulsar_gateway: gateway stopped") == 2

    single = gateway_process("--redis-url", redis_url, "--key-prefix", "workers-restart")
    client = client_factory(single.wait_ready().url)
    consumer = client.subscribe("after-restart", "s", consumer_type=pulsar.ConsumerType.Shared)
    # "two" (and "one", whose acknowledgement the client may not have sent yet: it groups
    # them for 100 ms)
    redelivered = {consumer.receive(timeout_millis=int(TIMEOUT * 1000)).data()}
    if redelivered == {b"one"}:
        redelivered.add(consumer.receive(timeout_millis=int(TIMEOUT * 1000)).data())
    assert b"two" in redelivered
    assert single.stop() == 0


def test_a_worker_that_cannot_start_stops_the_start(gateway_process, redis_url: str) -> None:
    # the HTTP port is taken by a socket without SO_REUSEPORT: no worker can share it
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        gp = gateway_process("--workers", "2", "--redis-url", redis_url, "--http-port", str(port))
        assert gp.proc.wait(3 * TIMEOUT) == 1
    assert time.monotonic() - started < 3 * TIMEOUT
    log = gp.log()
    assert "cannot start: worker" in log and "before it served" in log
    assert "ready:" not in log
    # the supervisor waited for every worker before it exited
    left = [
        p
        for p in psutil.process_iter(["cmdline"])
        if WORKER_COMMAND in " ".join(p.info["cmdline"] or []) and str(port) in p.info["cmdline"]
    ]
    assert left == []


def test_workers_stop_when_their_supervisor_is_killed(gateway_process, redis_url: str) -> None:
    gp = gateway_process(
        "--workers", "2", "--redis-url", redis_url, "--key-prefix", "workers-orphan"
    ).wait_ready()
    workers = _workers(gp)
    gp.proc.send_signal(signal.SIGKILL)
    gp.proc.wait(TIMEOUT)
    _, alive = psutil.wait_procs(workers, timeout=3 * TIMEOUT)
    assert alive == [], "a worker outlived its supervisor"


@pytest.mark.parametrize("flag", ["--port", "--http-port"])
def test_workers_refuse_port_zero(gateway_process, flag: str) -> None:
    gp = gateway_process("--workers", "2", flag, "0")
    assert gp.proc.wait(TIMEOUT) == 2
    assert "would give each worker a different one" in gp.log()
