"""bench/perf.py against a real redis-server and gateway that it starts (``--start``): the
figures it reports hold together (every message published is received, at the asked rate,
with latencies and CPU per message measured), for the gateway and for the same hop on raw
Redis (``--compare-raw``). Also bench/floors.py and bench/aims.py, run the same way."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, redis_server_binary


def run_tool(tmp_path: Path, script: str, *argv: str, timeout: float = 150) -> tuple[str, Any]:
    """Run ``bench/<script>`` with ``argv`` and ``--json``; its printed report and its
    JSON result."""
    redis_server_binary()  # the tools start their own; CI must have one
    out = tmp_path / f"{script}.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *argv, "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, json.loads(out.read_text())


def perf(tmp_path: Path, *argv: str) -> tuple[str, dict[str, Any]]:
    """Run bench/perf.py with ``argv``; its printed report and its JSON result."""
    report, result = run_tool(tmp_path, "perf.py", *argv)
    return report, result


@pytest.mark.timeout(180)
def test_e2e_run_reports_consistent_figures(tmp_path: Path) -> None:
    argv = ["e2e", "--start", "--rate", "500", "--batch", "1", "--topics", "2"]
    stdout, result = perf(tmp_path, *argv, "--duration", "2", "--warmup", "1", "--compare-raw")
    assert "| msg/s |" in stdout
    # 500 msg/s over 2 topics for 2 s: about 1,000 each way, all received
    assert 800 <= result["published"] <= 1100
    assert abs(result["received"] - result["published"]) <= 50
    for name in ("publish_latency_ms", "e2e_latency_ms"):
        p = result[name]
        assert 0 < p["p50"] <= p["p99"] <= p["max"] < 1000
    assert result["gateway_us_per_msg"] > 0 and result["redis_us_per_msg"] > 0
    # the same hop on raw Redis, in the same run: XADD -> XREADGROUP, no gateway
    raw = result["raw"]
    assert 800 <= raw["published"] <= 1100
    assert abs(raw["received"] - raw["published"]) <= 50
    assert 0 < raw["e2e_latency_ms"]["p50"] <= raw["e2e_latency_ms"]["max"] < 1000
    assert raw["gateway_us_per_msg"] is None
    assert "| e2e latency p99, ms |" in stdout


@pytest.mark.timeout(180)
def test_connections_spread_over_several_started_gateways(tmp_path: Path) -> None:
    argv = ["produce", "--start", "--gateways", "2", "--connections", "2", "--topics", "2"]
    stdout, result = perf(tmp_path, *argv, "--rate", "400", "--duration", "2", "--warmup", "1")
    assert result["config"]["gateways"] == 2
    assert "2 gateway(s)" in stdout
    # 400 msg/s over 2 s, through connections to either gateway, all receipted
    assert 650 <= result["published"] <= 900
    assert result["gateway_us_per_msg"] > 0


@pytest.mark.timeout(120)
def test_floors_measures_every_operation(tmp_path: Path) -> None:
    """bench/floors.py times each building block (a lane round trip against a redis-server
    it starts) and prints the tables the benchmark docs quote."""
    report, figures = run_tool(tmp_path, "floors.py", "--quick", timeout=110)
    operations = figures["operations_us"]
    assert len(operations) == 13
    assert all(value > 0 for value in operations.values()), operations
    # a round trip to Redis costs more than any in-process operation
    lane = next(v for k, v in operations.items() if "round trip" in k)
    assert lane == max(operations.values())
    assert set(figures["after_sleep_us"]) == {"0", "0.3", "1", "3"}
    assert "| operation | µs |" in report


@pytest.mark.timeout(400)
def test_aims_measures_every_path_against_raw_redis(tmp_path: Path) -> None:
    """bench/aims.py --quick: one run measures every path of the aims and the raw XADD
    reference, and prints one table with a figure, a ratio or an aim, and a verdict each."""
    report, result = run_tool(tmp_path, "aims.py", "--quick", timeout=380)
    cases = [
        "raw",
        "produce",
        "consume",
        "consume-each",
        "ws-produce",
        "ws-consume",
        "rest",
        "e2e",
        "metrics",
    ]
    rows = {row["case"]: row for row in result["rows"]}
    assert list(rows) == cases
    assert all(row["measured"] and row["error"] is None for row in rows.values()), rows
    raw = rows.pop("raw")
    assert raw["raw"] > 0 and raw["redis_us_per_msg"] > 0  # client and Redis CPU per XADD
    for case, row in rows.items():
        assert row["gateway"] > 0, case
        # every aim gets a verdict; consume-each is there for scale, without an aim
        assert isinstance(row["met"], bool) if case != "consume-each" else row["met"] is None
        if case in ("produce", "consume", "consume-each", "ws-produce", "ws-consume", "rest"):
            # the ratio is against this run's raw reference
            assert row["raw"] == raw["raw"], case
            assert row["ratio"] == pytest.approx(row["gateway"] / raw["raw"]), case
    assert rows["e2e"]["raw"] > 0  # the same hop on raw Redis, same rate
    # the table: one line per path, each with a number and a verdict
    table = [line for line in report.splitlines() if line.startswith("| ")][1:]  # no header
    assert len(table) == len(cases), report
    for line in table[1:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert re.match(r"[\d,.]+ (µs/msg|ms)$", cells[1]), line
        assert cells[5] in (("yes", "no") if cells[4] else ("",)), line
    assert re.search(r"gateway build: (pure Python|compiled)", report), report
    assert result["commit"] and result["date"] and "aims.py --quick" in result["command"]
