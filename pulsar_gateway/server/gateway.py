"""The embeddable :class:`Gateway`: one gateway process's worth of servers.

Start-up: the embedded redis-server when no ``--redis-url`` is given (private,
AOF-persistent, under ``--data-dir``); the core (:func:`.wiring.build`); the binary
protocol port; the HTTP port. Shutdown runs the other way round: stop accepting, close
client connections (their consumers' unacked messages go back to their subscriptions at
once), stop the core and drain Redis traffic, stop the embedded Redis last.
"""

from __future__ import annotations

import logging
import ssl
from types import TracebackType

from aiohttp import web
from redis.asyncio import Redis

from pulsar_gateway.adapters.http.app import SERVER_LOGGER, make_app
from pulsar_gateway.adapters.pulsar_binary.server import BinaryServer, ConnectionLimits
from pulsar_gateway.core import Services
from pulsar_gateway.core.storage import EmbeddedRedis, is_cluster
from pulsar_gateway.entry_codec import BinaryEntryInspector
from pulsar_gateway.server import wiring
from pulsar_gateway.server.config import GatewayConfig
from pulsar_gateway.server.tls import server_context
from pulsar_gateway.server.wiring import Core
from pulsar_gateway.server.workers import WorkerMetrics, WorkerRole

__all__ = ["Gateway"]

log = logging.getLogger("pulsar_gateway")


async def _serve_http(
    runner: web.AppRunner,
    host: str,
    port: int,
    ssl_context: ssl.SSLContext | None,
    reuse_port: bool,
) -> int:
    """Listen for the HTTP app on ``host:port`` (with TLS when ``ssl_context``; sharing the
    port with this host's other workers when ``reuse_port``); the port bound (port 0 asks
    for a free one)."""
    site = web.TCPSite(
        runner,
        host,
        port,
        ssl_context=ssl_context,
        reuse_address=True,
        reuse_port=reuse_port or None,
    )
    await site.start()
    server = site._server
    if port == 0 and server is not None:
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            return int(sockets[0].getsockname()[1])
    return port


class Gateway:
    """One gateway process's worth of servers, usable in-process (tests, bench).

    ``worker``: this process is one of the workers of ``pulsar-gateway --workers N``
    (:mod:`.supervisor`): it shares the ports with its siblings and answers ``/metrics``
    for all of them (:mod:`.workers`).
    """

    def __init__(self, config: GatewayConfig, worker: WorkerRole | None = None) -> None:
        self.config = config
        self.worker = worker
        self._worker_metrics: WorkerMetrics | None = None
        self.embedded: EmbeddedRedis | None = None
        self.redis: Redis | None = None
        #: the built core (None until started): its services and background work
        self.core: Core | None = None
        self._binary: BinaryServer | None = None
        self._http_runner: web.AppRunner | None = None
        self.port = config.port
        self.http_port = config.http_port
        #: the TLS listeners' ports once started, None without TLS
        self.port_tls: int | None = None
        self.http_port_tls: int | None = None

    @property
    def services(self) -> Services:
        """The core's services (the gateway must be started)."""
        if self.core is None:
            raise RuntimeError("the gateway is not started")
        return self.core.services

    async def start(self) -> None:
        config = self.config
        ssl_context = server_context(config)  # first: a bad certificate stops nothing
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
        cluster = await is_cluster(self.redis)
        if cluster:
            log.info("%s is a Redis Cluster node: routing commands to its masters by slot", url)
        self.core = wiring.build(
            config,
            self.redis,
            inspector=BinaryEntryInspector(),
            storage_url=url,
            redis_cluster=cluster,
        )
        await self.core.start()
        services = self.core.services
        binary = BinaryServer(
            services,
            host=config.bind,
            port=config.port,
            advertised_host=config.advertised_host,
            max_message_size=config.max_message_size,
            keepalive_seconds=config.keepalive_seconds,
            ssl_context=ssl_context,
            port_tls=config.binary_port_tls or 0,
            reuse_port=self.worker is not None,
            auth_refresh_seconds=config.authentication_refresh_check_seconds,
            limits=ConnectionLimits(
                max_connections=config.broker_max_connections,
                max_connections_per_ip=config.broker_max_connections_per_ip,
                write_high_water_mark=config.pulsar_channel_write_buffer_high_water_mark,
                write_low_water_mark=config.pulsar_channel_write_buffer_low_water_mark,
                pause_receiving_if_unwritable=(
                    config.pulsar_channel_pause_receiving_requests_if_unwritable
                ),
            ),
        )
        await binary.start()
        self._binary = binary
        self.port = binary.port
        self.port_tls = binary.port_tls
        process_metrics = None
        if self.worker is not None:
            self._worker_metrics = WorkerMetrics(services.metrics.registry, self.worker)
            await self._worker_metrics.start()
            process_metrics = self._worker_metrics.host
        app = make_app(services, process_metrics=process_metrics)
        runner = web.AppRunner(app, access_log=None, logger=SERVER_LOGGER)
        await runner.setup()
        self._http_runner = runner
        reuse_port = self.worker is not None
        self.http_port = await _serve_http(runner, config.bind, config.http_port, None, reuse_port)
        log.info("HTTP (admin, metrics) on %s:%d", config.bind, self.http_port)
        if ssl_context is not None and config.web_port_tls is not None:
            self.http_port_tls = await _serve_http(
                runner, config.bind, config.web_port_tls, ssl_context, reuse_port
            )
            log.info("HTTPS (admin, metrics, wss) on %s:%d", config.bind, self.http_port_tls)
        services.cluster.advertise(self.port, self.http_port, self.port_tls, self.http_port_tls)
        # described in the fleet before "ready": the fleet's other gateways count this one's
        # scrape target from now on (Fleet.metrics_share)
        await self.core.membership.heartbeat()

    async def stop(self) -> None:
        if self._binary is not None:
            await self._binary.close()
        if self._http_runner is not None:
            await self._http_runner.cleanup()
        if self._worker_metrics is not None:
            await self._worker_metrics.close()
        if self.core is not None:
            await self.core.close()
        if self.redis is not None:
            await self.redis.aclose()
        if self.embedded is not None:
            await self.embedded.stop()
        log.info("gateway stopped")

    @property
    def urls(self) -> list[str]:
        """Where clients reach this gateway (advertised host): the binary protocol and HTTP
        URLs, with TLS and without (the gateway must be started)."""
        cluster = self.services.cluster
        urls = [
            cluster.broker_service_url,
            cluster.broker_service_url_tls,
            cluster.service_url,
            cluster.service_url_tls,
        ]
        return [url for url in urls if url is not None]

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
