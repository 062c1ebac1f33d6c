"""``python -m tests.soak [--scenario NAME ...] [--duration S] [--gateway-arg ARG ...]
[--source DIR] [--rss-cap-mib M] [--budget-mib B] [--message-size BYTES] [--json PATH]``

Runs the chosen scenarios (default: all, one after another, each on a fresh redis-server
and gateway process) and prints the report. A flag of the gateway that starts with ``-``
is given as ``--gateway-arg=--flag``. Exits 1 when a scenario failed to run, lost normal
messages or was aborted at the RSS cap.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from tests.soak.floods import MIB
from tests.soak.gateway import code_location
from tests.soak.report import details, row, table
from tests.soak.run import Figures, Setup
from tests.soak.scenarios import SCENARIOS


async def run_scenarios(
    names: Sequence[str],
    setup: Setup,
    duration: float | None,
    progress: Callable[[str], None],
) -> list[Figures | tuple[str, str]]:
    """Each scenario in turn; a scenario that raises is reported as (name, traceback)."""
    results: list[Figures | tuple[str, str]] = []
    for name in names:
        progress(f"running {name} ...")
        try:
            kwargs = {} if duration is None else {"duration": duration}
            figures = await SCENARIOS[name](setup, **kwargs)
        except Exception as exc:
            results.append((name, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
            progress(f"{name} FAILED: {type(exc).__name__}: {exc}")
            continue
        results.append(figures)
        progress(row(figures))
        progress("\n".join(details(figures)))
    return results


def _as_json(result: Figures | tuple[str, str]) -> dict[str, object]:
    if not isinstance(result, Figures):
        return {"scenario": result[0], "error": result[1]}
    return {
        **dataclasses.asdict(result),
        "offered_bytes": result.offered_bytes,
        "accepted_bytes": result.accepted_bytes,
        "rss_growth_mib": result.rss.growth_mib,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.soak",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--scenario", action="append", choices=list(SCENARIOS), help="repeatable; default all"
    )
    parser.add_argument(
        "--duration",
        type=float,
        help="seconds of flooding of each scenario (default: its own, 20 s; "
        "redis_stall 25 s; soak 180 s)",
    )
    parser.add_argument(
        "--gateway-arg", action="append", default=[], metavar="ARG", help="extra gateway flag"
    )
    parser.add_argument(
        "--source",
        type=Path,
        help="checkout whose gateway runs (first on the child's PYTHONPATH, its working "
        "directory); default: an inherited PYTHONPATH, else this checkout",
    )
    parser.add_argument("--rss-cap-mib", type=float, default=3072.0)
    parser.add_argument("--budget-mib", type=float, default=1024.0, help="bytes per flood")
    parser.add_argument(
        "--message-size", type=int, default=1024, help="payload bytes of the socket floods"
    )
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args(argv)
    setup = Setup(
        gateway_args=tuple(args.gateway_arg),
        source=args.source.resolve() if args.source else None,
        rss_cap_mib=args.rss_cap_mib,
        budget=int(args.budget_mib * MIB),
        message_size=args.message_size,
    )
    print(f"gateway code: {code_location(setup.source)}", flush=True)
    names = args.scenario or list(SCENARIOS)
    results = asyncio.run(
        run_scenarios(names, setup, args.duration, lambda line: print(line, flush=True))
    )
    print()
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps([_as_json(r) for r in results], indent=2))
    bad = [
        r for r in results if not isinstance(r, Figures) or r.workload.lost or r.rss.aborted_at_cap
    ]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
