"""Process entry point (``pulsar-gateway``) and the embeddable :class:`Gateway`.

This is the composition root: the one module of ``gateway/`` that imports adapters, to wire
the core to its front ends. Nothing else in the core does.

Start-up: configuration (flags > environment > defaults); the embedded redis-server when no
``--redis-url`` is given (private, AOF-persistent, under ``--data-dir``); the broker; the
binary protocol port; the HTTP port. Shutdown on SIGTERM/SIGINT runs the other way round:
stop accepting, close client connections (their consumers' unacked messages go back to
their subscriptions at once), drain Redis traffic, stop the embedded Redis last.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Sequence
from types import TracebackType

from aiohttp import web
from redis.asyncio import Redis

from gateway.broker import Broker
from gateway.config import GatewayConfig, parse_config
from gateway.embedded_redis import EmbeddedRedis

__all__ = ["Gateway", "main"]

log = logging.getLogger("gateway")


class Gateway:
    """One gateway process's worth of servers, usable in-process (tests, bench)."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.embedded: EmbeddedRedis | None = None
        self.redis: Redis | None = None
        self.broker: Broker | None = None
        self._binary: object | None = None
        self._http_runner: web.AppRunner | None = None
        self.port = config.port
        self.http_port = config.http_port

    async def start(self) -> None:
        from adapters.http.app import make_app
        from adapters.pulsar_binary.entry_format import BinaryEntryInspector
        from adapters.pulsar_binary.server import BinaryServer

        config = self.config
        url = config.redis_url
        if url is None:
            self.embedded = EmbeddedRedis(config.data_dir, fsync=config.redis_fsync)
            url = await self.embedded.start()
            log.info(
                "no --redis-url given: using the embedded redis-server at %s "
                "(append-only persistence in %s)",
                url,
                self.embedded.data_dir,
            )
        self.redis = Redis.from_url(url, protocol=2)
        await self.redis.ping()
        self.broker = Broker(config, self.redis)
        self.broker.compaction.inspector = BinaryEntryInspector()
        await self.broker.start()
        binary = BinaryServer(
            self.broker,
            host=config.bind,
            port=config.port,
            advertised_host=config.advertised_host,
            max_message_size=config.max_message_size,
            keepalive_seconds=config.keepalive_seconds,
        )
        await binary.start()
        self._binary = binary
        self.port = binary.port
        runner = web.AppRunner(make_app(self.broker), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, config.bind, config.http_port, reuse_address=True)
        await site.start()
        self._http_runner = runner
        server = site._server
        if config.http_port == 0 and server is not None:
            sockets = getattr(server, "sockets", None) or []
            if sockets:
                self.http_port = sockets[0].getsockname()[1]
        self.broker.tenants.advertise(self.port, self.http_port)
        log.info("HTTP (admin, metrics) on %s:%d", config.bind, self.http_port)

    async def stop(self) -> None:
        from adapters.pulsar_binary.server import BinaryServer

        if isinstance(self._binary, BinaryServer):
            await self._binary.close()
        if self._http_runner is not None:
            await self._http_runner.cleanup()
        if self.broker is not None:
            await self.broker.close()
        if self.redis is not None:
            await self.redis.aclose()
        if self.embedded is not None:
            await self.embedded.stop()
        log.info("gateway stopped")

    async def __aenter__(self) -> Gateway:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


async def serve(config: GatewayConfig) -> None:
    """Run a gateway until SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    gateway = Gateway(config)
    try:
        await gateway.start()
        log.info(
            "ready: pulsar://%s:%d, http://%s:%d",
            config.advertised_host,
            gateway.port,
            config.advertised_host,
            gateway.http_port,
        )
        await stop.wait()
        log.info("signal received: shutting down")
    finally:
        await gateway.stop()


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_config(argv)
    logging.basicConfig(
        level=config.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
