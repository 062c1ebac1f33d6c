"""The fleet of ``compose/``, built and run for real on a Docker engine (issue: "Fleet in a box").

``compose/stack build`` (a Docker engine started here when none answers, the debootstrapped
``debian:bookworm`` base, the host's wheelhouse, the images), then ``docker compose up --wait``
under a project name of its own (so ``down -v`` touches only what this run created). Every
client reaches the fleet as a user would, from the host through the load balancer's
published ports (6650, 8080) and Prometheus's (9090): the official client produces and
consumes, a WebSocket consumer and the admin API answer, the web console in a real browser
shows the three gateways, Prometheus has scraped all three
gateways, the Spark pipeline commits micro-batches; then one gateway is killed mid-stream
and nothing the fleet acknowledged is lost while the clients carry on. At the end
``down -v``, and the engine is stopped if this run started it (``compose/stack
stop-engine``, by its pid).

Needs root (to start an engine) or a running engine; in CI (``CI`` set) anything missing
fails the run, elsewhere the module is skipped.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pulsar
import pytest
from playwright.sync_api import expect

from tests.conftest import ROOT, wait_for
from tests.integration.console.conftest import launched_chromium, new_console

pytestmark = pytest.mark.timeout(1800)

COMPOSE = ROOT / "compose"
STACK = COMPOSE / "stack"
PROJECT = "pgw-fleet-test"
#: what the stack publishes on the host (docs/fleet.md)
PORTS = {"pulsar": 6650, "http": 8080, "prometheus": 9090}
SERVICE_URL = "pulsar://localhost:6650"
HTTP = "http://localhost:8080"
PROMETHEUS = "http://localhost:9090"
GATEWAYS = 3


def run(*args: str | Path, timeout: float, log: Path | None = None) -> str:
    """Run a command; its output (also appended to ``log``) on success, else fail with the
    end of it."""
    proc = subprocess.run(
        [str(a) for a in args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )
    if log is not None:
        with log.open("a") as f:
            f.write(f"$ {' '.join(map(str, args))}\n{proc.stdout}\n")
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-40:])
        raise AssertionError(f"{' '.join(map(str, args))} exited {proc.returncode}:\n{tail}")
    return proc.stdout


def compose(*args: str, timeout: float = 120, log: Path | None = None) -> str:
    return run(
        "docker",
        "compose",
        "--project-directory",
        COMPOSE,
        "--project-name",
        PROJECT,
        *args,
        timeout=timeout,
        log=log,
    )


def engine_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    probe = subprocess.run(["docker", "info"], capture_output=True, timeout=30, check=False)
    return probe.returncode == 0


def unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the compose stack: {reason}")
    pytest.skip(reason)


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return True
    return False


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The stack of compose/ up and healthy; yields the log of every command run."""
    if not engine_answers() and os.geteuid() != 0:
        unavailable("no Docker engine answers and only root can start one")
    busy = [f"{name} {port}" for name, port in PORTS.items() if port_in_use(port)]
    if busy:
        unavailable(f"host ports in use: {', '.join(busy)} (the stack publishes them)")
    log = tmp_path_factory.mktemp("fleet") / "commands.log"
    started_engine = not engine_answers()
    try:
        t0 = time.monotonic()
        run(STACK, "build", timeout=1500, log=log)
        t1 = time.monotonic()
        compose("up", "--wait", "--wait-timeout", "300", timeout=360, log=log)
        t2 = time.monotonic()
        print(f"\nfleet: build {t1 - t0:.0f} s, up --wait {t2 - t1:.0f} s")
        yield log
    finally:
        try:
            if engine_answers():
                compose("logs", "--no-color", "--tail", "200", timeout=60, log=log)
                compose("down", "-v", "--remove-orphans", "--timeout", "10", timeout=180, log=log)
        finally:
            if started_engine:
                run(STACK, "stop-engine", timeout=120, log=log)


def get_json(url: str, *, missing_ok: bool = False) -> Any:
    """The JSON at ``url``; with ``missing_ok``, None for a 404 (not there yet)."""

    async def fetch() -> Any:
        timeout = aiohttp.ClientTimeout(total=10)
        async with aiohttp.ClientSession(timeout=timeout) as session, session.get(url) as r:
            if missing_ok and r.status == 404:
                return None
            assert r.status == 200, (url, r.status, await r.text())
            return await r.json(content_type=None)

    return asyncio.run(fetch())


def client() -> Any:
    return pulsar.Client(
        SERVICE_URL,
        operation_timeout_seconds=30,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )


def topic_name(label: str) -> str:
    return f"fleet-{label}-{uuid.uuid4().hex[:8]}"


def test_the_gateways_run_the_build_of_the_wheelhouse(fleet: Path) -> None:
    """The images ship the compiled build when the host could make it: the project's wheel
    in the wheelhouse is then a CPython 3.11 wheel with extension modules, and every gateway
    container says so (``pulsar-gateway --version``, as the start-up log does)."""
    (wheel,) = (COMPOSE / "wheels").glob("pulsar_redis_gateway-*.whl")
    compiled = not wheel.name.endswith("-py3-none-any.whl")
    if os.environ.get("PGW_EXPECT_BUILD") == "compiled":
        # ./dev test compiled on this host, so compose/stack wheels could too
        assert compiled, wheel.name
    for index in range(1, GATEWAYS + 1):
        version = compose("exec", "--index", str(index), "gateway", "pulsar-gateway", "--version")
        if compiled:
            assert "(compiled (mypyc, " in version, version
        else:
            assert "(pure Python)" in version, version


def test_official_client_produces_and_consumes_through_the_load_balancer(fleet: Path) -> None:
    topic = topic_name("binary")
    # a lookup names the load balancer's address, so the client keeps its one connection
    lookup = get_json(f"{HTTP}/lookup/v2/topic/persistent/public/default/{topic}")
    assert lookup["brokerUrl"] == SERVICE_URL
    c = client()
    try:
        consumer = c.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
        producer = c.create_producer(topic, batching_enabled=False)
        sent = [b"m%d" % i for i in range(50)]
        for data in sent:
            producer.send(data)
        got = []
        for _ in sent:
            message = consumer.receive(timeout_millis=10000)
            got.append(message.data())
            consumer.acknowledge(message)
        assert sorted(got) == sorted(sent)
    finally:
        c.close()


def test_websocket_consumer_and_admin_api_answer_through_the_load_balancer(fleet: Path) -> None:
    topic = topic_name("ws")
    assert "standalone" in get_json(f"{HTTP}/admin/v2/clusters")
    assert "public" in get_json(f"{HTTP}/admin/v2/tenants")
    assert "public/default" in get_json(f"{HTTP}/admin/v2/namespaces/public")

    async def consume() -> list[bytes]:
        url = f"ws://localhost:8080/ws/v2/consumer/persistent/public/default/{topic}/ws-sub"
        got: list[bytes] = []
        async with aiohttp.ClientSession() as session, session.ws_connect(url) as ws:
            # the subscription exists: a producer through the load balancer (another
            # gateway, as like as not) feeds it
            c = client()
            try:
                producer = c.create_producer(topic, batching_enabled=False)
                for i in range(10):
                    producer.send(b"w%d" % i)
            finally:
                c.close()
            while len(got) < 10:
                msg = json.loads(await asyncio.wait_for(ws.receive_str(), 15))
                got.append(base64.b64decode(msg["payload"]))
                await ws.send_str(json.dumps({"messageId": msg["messageId"]}))
        return got

    assert sorted(asyncio.run(consume())) == sorted(b"w%d" % i for i in range(10))
    stats_url = f"{HTTP}/admin/v2/persistent/public/default/{topic}/stats"

    def settled() -> bool:
        # the fleet's counters (every gateway's rate reports), the backlog from Redis
        stats = get_json(stats_url)
        return bool(
            stats["msgInCounter"] == 10 and stats["subscriptions"]["ws-sub"]["msgBacklog"] == 0
        )

    wait_for(settled, timeout=30)


def test_the_console_shows_the_fleet_through_the_load_balancer(fleet: Path) -> None:
    """The web console, opened in headless Chromium through HAProxy (each of its requests
    may reach another gateway), lists the three gateways and the Redis they share, finds a
    topic the official client filled, and its test producer's message, sent over a
    WebSocket through the balancer, reaches an official consumer."""
    topic = topic_name("console")
    c = client()
    try:
        consumer = c.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
        producer = c.create_producer(topic, batching_enabled=False)
        producer.send(b"from the official client")
        assert consumer.receive(timeout_millis=10000).data() == b"from the official client"
        # the browser runs in this test only: Playwright's sync API holds an event loop
        # while it is open, which the asyncio code of the tests after this one would meet
        with launched_chromium() as browser:
            console = new_console(browser, HTTP)
            try:
                page = console.open("#/fleet")
                rows = page.locator("[data-test=gateway-row]")
                # a row per gateway process (the image runs one worker per CPU), each
                # naming its host (every gateway advertises the balancer's address):
                # every one of the three containers is there

                def hosts() -> set[str]:
                    return {r.get_attribute("data-host") or "" for r in rows.all()}

                wait_for(lambda: len(hosts()) == GATEWAYS, timeout=30)
                expect(page.locator("[data-test=redis-mode]")).to_have_text("standalone")
                console.screenshot("compose-fleet")
                page = console.open("#/namespaces/public/default")
                page.locator("[data-test=topic-filter]").fill(topic)
                expect(page.locator("[data-test=topic-row]")).to_have_count(1)
                page = console.open(f"#/clients?topic=persistent://public/default/{topic}")
                page.locator("[data-test=producer-payload]").fill("from the console")
                page.locator("[data-test=send]").click()
                result = page.locator("[data-test=send-result]").first
                expect(result).to_have_attribute("data-result", "ok")
            finally:
                console.close("test_the_console_shows_the_fleet_through_the_load_balancer")
        assert consumer.receive(timeout_millis=10000).data() == b"from the console"
    finally:
        c.close()


def test_prometheus_scrapes_every_gateway_and_loads_the_alerts(fleet: Path) -> None:
    def healthy_targets() -> list[dict[str, Any]] | None:
        targets = get_json(f"{PROMETHEUS}/api/v1/targets")["data"]["activeTargets"]
        up = [t for t in targets if t["labels"]["job"] == "gateways" and t["health"] == "up"]
        return up if len(up) == GATEWAYS else None

    targets = wait_for(healthy_targets, timeout=60)
    assert len({t["scrapeUrl"] for t in targets}) == GATEWAYS
    # each gateway's own series, as Prometheus stored them
    query = f"{PROMETHEUS}/api/v1/query?query=pulsar_gateway_connections_opened_total"
    instances = wait_for(
        lambda: (
            len(r := {s["metric"]["instance"] for s in get_json(query)["data"]["result"]})
            == GATEWAYS
            and r
        ),
        timeout=60,
    )
    assert instances == {t["labels"]["instance"] for t in targets}
    rules = get_json(f"{PROMETHEUS}/api/v1/rules")["data"]["groups"]
    alerts = {r["name"] for g in rules for r in g["rules"] if r["type"] == "alerting"}
    assert alerts == {
        "GatewayDown",
        "NoGatewayUp",
        "BacklogGrowing",
        "DelayedMessagesLate",
        "RedisErrors",
    }
    assert all(r["health"] == "ok" for g in rules for r in g["rules"]), rules


def test_spark_pipeline_runs_against_the_fleet(fleet: Path) -> None:
    # it published its 1000 sample orders through the load balancer (its topic exists once
    # the pipeline's JVM has started and its producer is created)...
    orders = f"{HTTP}/admin/v2/persistent/public/default/orders/stats"

    def published() -> bool:
        stats = get_json(orders, missing_ok=True)
        return stats is not None and stats["msgInCounter"] >= 1000

    wait_for(published, timeout=180, interval=2)

    # ...and its streaming queries commit micro-batches (Structured Streaming's commit log)
    def committed() -> bool:
        out = compose(
            "exec",
            "-T",
            "spark-pipeline",
            "sh",
            "-c",
            "ls /output/_checkpoints/*/commits/ 2>/dev/null || true",
        )
        return any(line.strip().isdigit() for line in out.splitlines())

    wait_for(committed, timeout=240, interval=3)


def gateway_containers() -> list[str]:
    return compose("ps", "--quiet", "gateway").split()


def binary_connections(container: str) -> int:
    """Established TCP connections on port 6650 inside ``container`` (its network
    namespace's table, read from the host)."""
    pid = run("docker", "inspect", "--format", "{{.State.Pid}}", container, timeout=30).strip()
    count = 0
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == 6650 and fields[3] == "01":  # ESTABLISHED
                count += 1
    return count


def test_a_gateway_killed_mid_stream_loses_nothing_acknowledged(fleet: Path) -> None:
    # the Spark pipeline's connections would blur which gateway holds ours
    compose("stop", "spark-pipeline", timeout=120)
    topic = topic_name("kill")
    containers = gateway_containers()
    assert len(containers) == GATEWAYS
    before = {c: binary_connections(c) for c in containers}
    c = client()  # one connection: its producer and its consumer share one gateway
    receipted: list[bytes] = []
    received: set[bytes] = set()
    failed: list[str] = []
    try:
        consumer = c.subscribe(
            topic, "s", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=100
        )
        producer = c.create_producer(topic, batching_enabled=False, send_timeout_millis=60000)
        after = {c_: binary_connections(c_) for c_ in containers}
        grew = [c_ for c_ in containers if after[c_] > before[c_]]
        assert len(grew) == 1, (before, after)
        (victim,) = grew

        stop = threading.Event()

        def consume() -> None:
            while not stop.is_set():
                try:
                    message = consumer.receive(timeout_millis=200)
                except pulsar.Timeout:
                    continue
                received.add(message.data())
                consumer.acknowledge(message)

        reader = threading.Thread(target=consume, daemon=True)
        reader.start()
        lock = threading.Lock()

        def on_sent(data: bytes) -> Any:
            def callback(result: Any, _msg_id: Any) -> None:
                with lock:
                    if result == pulsar.Result.Ok:
                        receipted.append(data)
                    else:
                        failed.append(str(result))

            return callback

        sent_at_kill = 0
        killed_at = 0.0
        start = time.monotonic()
        i = 0
        while time.monotonic() - start < 8:
            elapsed = time.monotonic() - start
            if not killed_at and elapsed >= 2:
                # a crash, not a stop: SIGKILL to the container's init (restart policy applies)
                pid = int(
                    run("docker", "inspect", "--format", "{{.State.Pid}}", victim, timeout=30)
                )
                os.kill(pid, signal.SIGKILL)
                killed_at = time.monotonic()
                sent_at_kill = i
            data = b"k%05d" % i
            producer.send_async(data, on_sent(data))
            i += 1
            time.sleep(0.005)
        producer.flush()
        with lock:
            confirmed = set(receipted)
        assert sent_at_kill > 0 and killed_at
        after_kill = {d for d in confirmed if int(d[1:]) > sent_at_kill}
        # the producer carried on through another gateway
        assert len(after_kill) > 100, (len(confirmed), sent_at_kill, failed[:5])
        # everything the fleet acknowledged reaches the consumer (which carried on too)
        wait_for(lambda: confirmed <= received, timeout=60)
        stop.set()
        reader.join(timeout=5)
        print(
            f"\nfleet: {i} sent, {len(confirmed)} receipted ({len(after_kill)} after the kill),"
            f" {len(failed)} failed, {len(confirmed - received)} receipted but not received"
        )
    finally:
        c.close()

    # the killed gateway comes back (restart: unless-stopped) and the fleet is whole again
    def whole() -> bool:
        targets = get_json(f"{PROMETHEUS}/api/v1/targets")["data"]["activeTargets"]
        return sum(t["health"] == "up" for t in targets if t["labels"]["job"] == "gateways") == (
            GATEWAYS
        )

    wait_for(whole, timeout=90, interval=1)
    status = compose("ps", "--format", "json", "gateway")
    states = [json.loads(line) for line in status.splitlines() if line.strip()]
    assert [s["State"] for s in states] == ["running"] * GATEWAYS, states
