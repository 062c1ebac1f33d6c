"""The ``pulsar-gateway`` command: embedded Redis, persistence, signals, HTTP endpoints."""

from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.request

import psutil
import pulsar
import pytest

from tests.conftest import TIMEOUT, free_port


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _samples(text: str) -> dict[str, float]:
    """Prometheus text -> {"name{labels}": value} (labels as rendered)."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def test_embedded_redis_persists_across_restarts(gateway_process, client_factory, tmp_path):
    data_dir = str(tmp_path / "data")
    first = gateway_process("--data-dir", data_dir).wait_ready()
    assert "embedded redis-server" in first.log()
    redis_children = [
        p
        for p in psutil.Process(first.proc.pid).children(recursive=True)
        if "redis-server" in p.name()
    ]
    assert redis_children, "the gateway should run its own redis-server"

    client = client_factory(first.url)
    consumer = client.subscribe("durable", "keep", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer("durable")
    for i in range(3):
        producer.send(f"d-{i}".encode())
    consumer.close()
    client.close()

    assert first.stop() == 0  # SIGTERM: clean exit
    for child in redis_children:
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE

    second = gateway_process("--data-dir", data_dir).wait_ready()
    client = client_factory(second.url)
    consumer = client.subscribe("durable", "keep")
    got = [consumer.receive(timeout_millis=int(TIMEOUT * 1000)).data() for _ in range(3)]
    assert got == [b"d-0", b"d-1", b"d-2"]
    assert second.stop(sig=2) == 0  # SIGINT too


def test_http_health_metrics_and_json_errors(gateway, client):
    status, body = _get(f"{gateway.http_url}/admin/v2/brokers/health")
    assert (status, body) == (200, b"ok")

    consumer = client.subscribe("metered", "m")
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe("metered", "m")
    producer = client.create_producer("metered")
    for _ in range(3):
        producer.send(b"x")
    for _ in range(3):
        consumer.acknowledge(consumer.receive(timeout_millis=int(TIMEOUT * 1000)))
    status, body = _get(f"{gateway.http_url}/metrics")
    assert status == 200
    samples = _samples(body.decode())
    # one client, one socket: LOOKUP answers keep it on the connection it opened
    assert samples['pulsar_gateway_connections{protocol="binary"}'] == 1.0
    assert samples["pulsar_gateway_in_messages_total"] == 3.0
    assert samples["pulsar_gateway_out_messages_total"] == 3.0
    assert samples['pulsar_gateway_commands_total{command="Send",protocol="binary"}'] == 3.0
    assert samples['pulsar_gateway_errors_total{error="ConsumerBusy",protocol="binary"}'] == 1.0

    status, body = _get(f"{gateway.http_url}/admin/v2/nope")
    assert status == 404
    assert "reason" in json.loads(body)


def test_flags_and_environment_configure_the_process(gateway_process, client_factory, redis_url):
    gp = gateway_process(
        env={"PULSAR_GATEWAY_REDIS_URL": redis_url, "PULSAR_GATEWAY_LOG_LEVEL": "debug"}
    ).wait_ready()
    assert "embedded" not in gp.log()
    assert " DEBUG " in gp.log()
    client = client_factory(gp.url)
    producer = client.create_producer("env-configured")
    assert producer.send(b"ok") is not None
    assert gp.stop() == 0


def test_bad_flag_is_refused(gateway_process):
    gp = gateway_process("--port", "99999")
    assert gp.proc.wait(TIMEOUT) == 2
    assert "--port" in gp.log()


def test_startup_failures_are_one_line(gateway_process, redis_url):
    """A port already taken, or a Redis nobody answers at: exit status 1 and one line saying
    why, not a traceback."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = gateway_process("--redis-url", redis_url, "--port", str(taken.getsockname()[1]))
        assert busy.proc.wait(3 * TIMEOUT) == 1
    port = free_port()
    nobody = gateway_process("--redis-url", f"redis://127.0.0.1:{port}")
    assert nobody.proc.wait(3 * TIMEOUT) == 1
    unreachable = f"Redis at redis://127.0.0.1:{port}: Error 111 connecting"
    for gp, reason in ((busy, "address already in use"), (nobody, unreachable)):
        log = gp.log()
        assert "CRITICAL pulsar_gateway: cannot start:" in log and reason in log, log
        assert "Traceback" not in log, log


def test_sigterm_releases_consumers_to_other_gateways(
    gateway_process, gateway, client_factory, redis_url
):
    gp = gateway_process("--redis-url", redis_url).wait_ready()
    client = client_factory(gp.url)
    held = client.subscribe("term", "s", consumer_type=pulsar.ConsumerType.Shared)
    producer = client_factory(gateway.url).create_producer("term")
    producer.send(b"held")
    assert held.receive(timeout_millis=int(TIMEOUT * 1000)).data() == b"held"
    other = client_factory(gateway.url).subscribe(
        "term", "s", consumer_type=pulsar.ConsumerType.Shared
    )
    assert gp.stop() == 0
    msg = other.receive(timeout_millis=int(TIMEOUT * 1000))
    assert (msg.data(), msg.redelivery_count()) == (b"held", 1)
    assert os.path.exists(gp.log_path)
