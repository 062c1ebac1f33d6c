"""What the building blocks of a gateway's per-message work cost on this machine.

Usage::

    .venv/bin/python bench/floors.py [--quick] [--json PATH]

The performance aims (docs/benchmarks.md) ask for a few microseconds of gateway CPU per
message. This prints what the operations every path is made of cost here, each alone and
warm, in one process: CPython object construction and calls, the protobuf runtime (upb) on
a ``MessageMetadata``, the C helpers (crc32c, orjson, binascii), one event-loop turn, and a
lone Redis command's round trip through the gateway's storage lane. Nothing here is the
gateway's own logic; it is the floor that logic stands on. Another table shows how much CPU
one small, fixed piece of Python work takes right after the process slept, against warm:
on a 2-core machine shared with Redis and the load generator, each wake-up of a gateway
carrying one message at a time pays this.
"""

from __future__ import annotations

import argparse
import asyncio
import binascii
import json
import shutil
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import crc32c
import orjson
import redis.asyncio as aioredis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import RedisServer  # noqa: E402  (bench/harness.py: this directory is on the path)
from pulsar_gateway.core.storage.lane import Lane  # noqa: E402
from pulsar_gateway.proto import PulsarApi_pb2 as pb  # noqa: E402


class _Tuple3(NamedTuple):
    a: int
    b: int
    c: int


@dataclass(frozen=True, slots=True)
class _Frozen3:
    a: int
    b: int
    c: int


@dataclass(slots=True)
class _Slotted3:
    a: int
    b: int
    c: int


def _call(a: int, b: int, c: int) -> int:
    return a


#: calls per timing of an operation (fewer with --quick)
_NUMBER = 200_000


def _per_call(stmt: Callable[[], Any]) -> float:
    """Best of five, µs per call (the call of ``stmt`` itself included)."""
    return min(timeit.repeat(stmt, number=_NUMBER, repeat=5)) / _NUMBER * 1e6


def primitives() -> list[tuple[str, float]]:
    metadata = pb.MessageMetadata(
        producer_name="standalone-0-7", sequence_id=123456, publish_time=1_764_000_000_000
    ).SerializeToString()

    def parse_metadata() -> pb.MessageMetadata:
        m = pb.MessageMetadata()
        m.ParseFromString(metadata)
        m.IsInitialized()
        return m

    payload = b"x" * 100
    blob = b"x" * 150
    text = binascii.b2a_base64(payload, newline=False)
    frozen = _Frozen3(1, 2, 3)
    ws_ack = {"result": "ok", "messageId": "CAAQADAA", "context": "1"}
    ws_frame = orjson.dumps({"payload": text.decode()})
    return [
        (
            "Python function call, 3 arguments (timeit's own call included)",
            _per_call(lambda: _call(1, 2, 3)),
        ),
        ("tuple of 3", _per_call(lambda: (1, 2, 3))),
        ("NamedTuple of 3", _per_call(lambda: _Tuple3(1, 2, 3))),
        ("dataclass(slots=True) of 3", _per_call(lambda: _Slotted3(1, 2, 3))),
        ("dataclass(frozen=True, slots=True) of 3", _per_call(lambda: _Frozen3(1, 2, 3))),
        ("dataclasses.replace of that, 1 field", _per_call(lambda: replace(frozen, a=5))),
        (
            f"upb: parse a {len(metadata)}-byte MessageMetadata + IsInitialized",
            _per_call(parse_metadata),
        ),
        ("crc32c of 150 bytes", _per_call(lambda: crc32c.crc32c(blob))),
        ("orjson.dumps of a WebSocket ack", _per_call(lambda: orjson.dumps(ws_ack))),
        (
            f"orjson.loads of a {len(ws_frame)}-byte WebSocket frame",
            _per_call(lambda: orjson.loads(ws_frame)),
        ),
        (
            "base64 decode of 100 bytes (binascii)",
            _per_call(lambda: binascii.a2b_base64(text)),
        ),
    ]


async def _loop_turn(count: int) -> float:
    """µs of CPU per future resolved through call_soon and awaited: one loop turn each."""
    loop = asyncio.get_running_loop()
    start = time.process_time()
    for _ in range(count):
        fut = loop.create_future()
        loop.call_soon(fut.set_result, None)
        await fut
    return (time.process_time() - start) / count * 1e6


async def _lane_round_trip(url: str, count: int) -> float:
    """µs of this process's CPU per lone PING awaited through the storage lane."""
    client = aioredis.Redis.from_url(url)
    lane = Lane(client)
    try:
        await lane.call("PING")
        start = time.process_time()
        for _ in range(count):
            await lane.call("PING")
        return (time.process_time() - start) / count * 1e6
    finally:
        await lane.close()
        await client.aclose()


def _work() -> int:
    total = 0
    for i in range(300):
        total += i * i
    return total


def after_sleep(scale: float) -> list[tuple[float, float]]:
    """(gap ms, µs of CPU) for a fixed piece of work run right after sleeping ``gap``."""
    rows = []
    for gap in (0.0, 0.0003, 0.001, 0.003):
        rounds = int((2000 if gap < 0.002 else 500) * scale)
        total = 0
        for _ in range(rounds):
            if gap:
                time.sleep(gap)
            start = time.thread_time_ns()
            _work()
            total += time.thread_time_ns() - start
        rows.append((gap * 1000, total / rounds / 1000))
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", type=Path, help="also write the figures as JSON")
    p.add_argument("--quick", action="store_true", help="a tenth of the repetitions")
    args = p.parse_args(argv)
    global _NUMBER
    scale = 0.1 if args.quick else 1.0
    _NUMBER = int(_NUMBER * scale)

    rows = primitives()
    rows.append(
        (
            "event-loop turn: a future resolved by call_soon, awaited",
            asyncio.run(_loop_turn(int(100_000 * scale))),
        )
    )
    workdir = Path(tempfile.mkdtemp(prefix="pgw-floors-"))
    redis_server = RedisServer(workdir, aof=False)
    try:
        lane_us = asyncio.run(_lane_round_trip(redis_server.url, int(20_000 * scale)))
    finally:
        redis_server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    rows.append(("a lone PING's round trip through the storage lane (client CPU)", lane_us))

    print("| operation | µs |")
    print("|---|---:|")
    for name, value in rows:
        print(f"| {name} | {value:.3f} |")
    print()
    sleeps = after_sleep(scale)
    print("| the same 300-iteration Python loop, run right after sleeping | µs of CPU |")
    print("|---|---:|")
    for gap, value in sleeps:
        label = "no sleep (warm)" if gap == 0 else f"{gap:g} ms"
        print(f"| {label} | {value:.1f} |")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"operations_us": dict(rows), "after_sleep_us": {f"{g:g}": v for g, v in sleeps}},
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
