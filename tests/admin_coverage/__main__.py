"""``python -m tests.admin_coverage [--url URL | --start [--source DIR]] [--missing]``:
which of Pulsar's admin v2 operations a gateway routes, per group (see the package doc)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from tests.admin_coverage import coverage_table, run
from tests.soak.gateway import Stack


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.admin_coverage")
    parser.add_argument("--url", help="a running gateway's HTTP address")
    parser.add_argument("--start", action="store_true", help="start redis-server and a gateway")
    parser.add_argument("--source", type=Path, help="with --start: the checkout to run")
    parser.add_argument("--missing", action="store_true", help="list the unrouted operations")
    args = parser.parse_args(argv)
    if not (args.url or args.start):
        parser.error("give --url or --start")
    stack = Stack(source=args.source) if args.start else None
    try:
        answers = run(stack.gateway.http_url if stack is not None else args.url)
    finally:
        if stack is not None:
            stack.stop()
    print(coverage_table(answers))
    if args.missing:
        for answer in answers:
            if not answer.routed:
                op = answer.operation
                print(f"{answer.status} {op.method:6} {op.path}  ({op.group}: {op.operation_id})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
