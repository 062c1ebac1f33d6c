"""The ``pulsar-gateway`` command (also ``python -m pulsar_gateway``).

Configuration comes from flags, then environment variables, then defaults
(:mod:`.config`); the gateway runs until SIGTERM or SIGINT. With ``--workers N`` (N > 1)
this process supervises N worker processes (:mod:`.supervisor`), each started with this
module and told its role (:mod:`.workers`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import sys
from collections.abc import Sequence

from redis.exceptions import RedisError

from pulsar_gateway.core.storage.embedded_redis import EmbeddedRedisError
from pulsar_gateway.server.config import GatewayConfig, parse_config, version_text
from pulsar_gateway.server.gateway import Gateway
from pulsar_gateway.server.supervisor import Supervisor, WorkerFailed
from pulsar_gateway.server.workers import WorkerRole, watch_supervisor

__all__ = ["main", "serve"]

log = logging.getLogger("pulsar_gateway")

#: What stops a gateway from starting and is the operator's to fix, said in one line
#: rather than a traceback: a port taken or not allowed, an address that is not this
#: machine's (OSError), Redis unreachable or refusing (RedisError), the embedded Redis
#: failing to start.
STARTUP_FAILURES = (OSError, RedisError, EmbeddedRedisError)


class StartupFailed(Exception):
    """The gateway could not start (the cause is chained)."""


async def serve(config: GatewayConfig, worker: WorkerRole | None = None) -> None:
    """Run a gateway until SIGTERM or SIGINT (``worker``: as one of a supervisor's workers,
    until its supervisor is gone too)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    gateway = Gateway(config, worker=worker)
    watch = watch_supervisor(worker, stop) if worker is not None else None
    try:
        try:
            await gateway.start()
        except STARTUP_FAILURES as exc:
            reason = str(exc) or type(exc).__name__
            if isinstance(exc, RedisError):
                reason = f"Redis at {config.redis_url or 'the embedded server'}: {reason}"
            raise StartupFailed(reason) from exc
        # What start-up made (modules, classes, the wiring) lives as long as the process:
        # out of the collector's reach, a full collection scans only what serving creates
        # (a /metrics scrape of 1,000 topics: 110 -> 80 ms of CPU, docs/benchmarks.md).
        gc.freeze()
        if worker is None or watch is None:
            log.info("ready: %s", ", ".join(gateway.urls))
        else:
            # the supervisor says "ready:" once every worker serves
            worker.announce_ready(gateway.urls)
            watch.start()
        await stop.wait()
        log.info("signal received: shutting down")
    finally:
        if watch is not None:
            await watch.stop()
        await gateway.stop()


class OneLineFormatter(logging.Formatter):
    """One line per record (tracebacks aside): messages quote what clients sent (topic,
    producer and subscription names), and a name holding a line break must not start a
    line of its own that looks like a record of the gateway (log forging)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        if "\n" in record.message or "\r" in record.message:
            record.message = record.message.replace("\r", "\\r").replace("\n", "\\n")
        return super().formatMessage(record)


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    config = parse_config(args)
    worker = WorkerRole.from_environ()
    # a worker's lines carry its number: the workers share the supervisor's stderr
    where = f"worker-{worker.index} " if worker is not None else ""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        OneLineFormatter(f"%(asctime)s %(levelname)s {where}%(name)s: %(message)s")
    )
    logging.basicConfig(level=config.log_level, handlers=[handler])
    if worker is None:
        log.info("%s starting", version_text())
    try:
        with contextlib.suppress(KeyboardInterrupt):
            if config.workers > 1:
                asyncio.run(Supervisor(config, args).run())
            else:
                asyncio.run(serve(config, worker))
    except (StartupFailed, WorkerFailed) as exc:
        log.critical("cannot start: %s", exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
