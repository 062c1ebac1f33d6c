"""The chaos run: ``python -m tests.chaos [--duration S] [--seed N] [--rate R] ...``.

Starts its own ``redis-server`` (AOF, fsync always) and three gateways, runs the workload
while killing, prints the report and exits 1 when it found anything.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys

from tests.chaos.run import ChaosConfig, run_chaos


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of chaos")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rate", type=float, default=100.0, help="messages/s per topic")
    parser.add_argument("--redis-kills", type=int, default=2)
    parser.add_argument("--dump", help="write what was recorded to this file (JSON lines)")
    args = parser.parse_args()
    binary = shutil.which("redis-server")
    if binary is None:
        print("no redis-server on PATH", file=sys.stderr)
        return 2
    config = ChaosConfig(
        duration=args.duration, seed=args.seed, rate=args.rate, redis_kills=args.redis_kills
    )
    report = run_chaos(config, binary, progress=lambda line: print(line, flush=True))
    print(report.table())
    if args.dump:
        with open(args.dump, "w") as out:
            for kind, rows in (
                ("outage", report.outages),
                ("sent", [s for messages in report.sent.values() for s in messages]),
                ("delivery", report.deliveries),
            ):
                for row in rows:
                    out.write(json.dumps({"kind": kind, **dataclasses.asdict(row)}) + "\n")
    failures = report.failures()
    for failure in failures:
        print("FAIL", failure)
    for path in report.logs:
        print("log kept:", path)
    print("PASS" if not failures else f"{len(failures)} findings", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
