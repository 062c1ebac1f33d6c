"""The long fuzzing campaign: ``python -m tests.fuzz [--inputs N] [--seed S] ...``.

Starts a ``pulsar-gateway`` process (WARNING log level, so every error of its own is in its
log) on its own ``redis-server`` (or ``--redis-url``), runs :func:`tests.fuzz.campaign.
run_campaign` with progress lines, prints the report and exits 1 when it found anything.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile

from tests.conftest import GatewayProcess, redis_server_binary, start_redis_server
from tests.fuzz.campaign import Report, replay_session, rss_kib, run_campaign


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    parser.add_argument("--inputs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=32, help="sessions at once")
    parser.add_argument(
        "--websocket-share", type=float, default=0.3, help="share of WebSocket sessions"
    )
    parser.add_argument("--redis-url", help="an existing Redis (default: start one)")
    parser.add_argument(
        "--replay",
        type=int,
        action="append",
        metavar="SESSION_SEED",
        help="run only the session a campaign reported with this seed (repeatable)",
    )
    args = parser.parse_args()

    redis_proc = None
    workdir = tempfile.mkdtemp(prefix="pgw-fuzz-")
    url = args.redis_url
    if url is None:
        redis_proc, port = start_redis_server(redis_server_binary(), workdir)
        url = f"redis://127.0.0.1:{port}"
    gateway = GatewayProcess(["--redis-url", url, "--log-level", "INFO"]).wait_ready()
    print(
        f"gateway pid {gateway.proc.pid} on :{gateway.port} (HTTP :{gateway.http_port}), "
        f"Redis {url}, log {gateway.log_path}",
        flush=True,
    )

    def progress(report: Report) -> None:
        alive = gateway.proc.poll() is None
        rss = f"{rss_kib(gateway.proc.pid) / 1024:.0f} MiB" if alive else "exited"
        print(
            f"  {report.seconds:5.0f} s {report.inputs:>10,} inputs, gateway {rss}, "
            f"stalled sessions {len(report.stalled)} {report.stalled[-1:]}",
            flush=True,
        )

    if args.replay:
        try:
            for seed in args.replay:
                kind, budget, stats = replay_session(gateway, seed, args.websocket_share)
                print(
                    f"session seed {seed}: {kind}, {stats.inputs} inputs (budget {budget}) in "
                    f"{stats.seconds:.1f} s; answers {stats.answers}, errors {stats.errors}, "
                    f"statuses {stats.statuses}, findings {stats.samples[:5]}",
                    flush=True,
                )
        finally:
            gateway.stop()
            if redis_proc is not None:
                redis_proc.terminate()
            shutil.rmtree(workdir, ignore_errors=True)
        return 0

    try:
        report = run_campaign(
            gateway,
            args.inputs,
            seed=args.seed,
            concurrency=args.concurrency,
            websocket_share=args.websocket_share,
            progress=progress,
        )
    finally:
        gateway.stop()
        if redis_proc is not None:
            redis_proc.terminate()
            redis_proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)
    print(report.table())
    failures = report.failures()
    for failure in failures:
        print("FAIL", failure)
    print("PASS" if not failures else f"{len(failures)} findings", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
