"""The WebSocket API's paths on the gateway's HTTP port (Pulsar's servlet paths)::

    /ws/v2/producer/{domain}/{tenant}/{namespace}/{topic}      WebSocketProducerServlet
    /ws/v2/consumer/{domain}/{tenant}/{namespace}/{topic}/{sub} WebSocketConsumerServlet
    /ws/v2/reader/{domain}/{tenant}/{namespace}/{topic}        WebSocketReaderServlet
    /ws/v3/consumer/{sub}?topics=...|topicsPattern=...        WebSocketMultiTopicConsumerServlet
    /ws/pingpong, /ws/v2/pingpong                              WebSocketPingPongServlet

``{domain}`` is ``persistent`` or ``non-persistent``; a producer's or reader's topic may
contain ``/`` (Pulsar joins the remaining path segments), a consumer's is one segment
(``ConsumerHandler.extractSubscription`` wants exactly nine). Path segments are
percent-decoded (``Codec.decode``).

Every handler checks the request before the upgrade and answers refusals with an HTTP
status (:mod:`pulsar_gateway.adapters.websocket.session`), so a client sees why it was refused.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from pulsar_gateway.adapters.resource import SERVICES
from pulsar_gateway.adapters.websocket import consumer as consumers
from pulsar_gateway.adapters.websocket import params as p
from pulsar_gateway.adapters.websocket.producer import ProducerSession, TopicProducer
from pulsar_gateway.adapters.websocket.session import (
    Session,
    SessionRegistry,
    fail,
    fail_for,
    serve_frames,
)
from pulsar_gateway.core import GatewayError, Services, TopicName, parse_topic_name

__all__ = ["add_routes"]

_DOMAIN = "{domain:persistent|non-persistent}"
_TOPIC = f"{_DOMAIN}/{{tenant}}/{{namespace}}"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _path_topic(request: web.Request) -> TopicName:
    info = request.match_info
    name = f"{info['domain']}://{info['tenant']}/{info['namespace']}/{info['topic']}"
    try:
        return parse_topic_name(name)
    except GatewayError as exc:
        raise p.ParamError(str(exc)) from None


async def _prepared(ws: web.WebSocketResponse, request: web.Request) -> bool:
    """Upgrade; False when the client left before the upgrade could be answered (the
    caller releases what it opened for the session)."""
    try:
        await ws.prepare(request)
    except ConnectionResetError:
        return False
    return True


def _max_frame(services: Services) -> int:
    # A frame carries a base64 payload (4/3 of the bytes) inside JSON.
    return services.limits.max_message_size * 2 + 64 * 1024


class _Endpoints:
    """The handlers, bound to the app's broker and session registry."""

    def __init__(self, registry: SessionRegistry) -> None:
        self.registry = registry

    def _socket(self, request: web.Request) -> web.WebSocketResponse:
        """The response to upgrade with, refusing a request that is no upgrade."""
        # No permessage-deflate: frames are mostly JSON with base64 payloads, and aiohttp
        # sends compressed frames from a task of its own, whose failure on a socket the
        # client closed nobody could read (the fuzzer saw them reported as never retrieved).
        ws = web.WebSocketResponse(
            max_msg_size=_max_frame(request.app[SERVICES]), autoping=True, compress=False
        )
        if not ws.can_prepare(request).ok:
            fail(web.HTTPBadRequest, "Expected a WebSocket upgrade request")
        return ws

    async def producer(self, request: web.Request) -> web.StreamResponse:
        services = request.app[SERVICES]
        ws = self._socket(request)
        self.registry.admit(services)
        try:
            try:
                topic = _path_topic(request)
                params = p.parse_producer_params(request.query)
                producer = await TopicProducer.create(services, topic, params)
            except (p.ParamError, GatewayError) as exc:
                fail_for(services, exc, "producer")
            try:
                if not await _prepared(ws, request):
                    return ws
                async with Session(services, self.registry, ws) as session:
                    handler = ProducerSession(session, producer)
                    handler.start()
                    try:
                        await serve_frames(session, handler.on_text, _binary_refused)
                    finally:
                        await handler.stop()
            finally:
                await producer.close()
        finally:
            self.registry.release()
        return ws

    async def consumer(self, request: web.Request) -> web.StreamResponse:
        return await self._consume(request, consumers.Mode.CONSUMER)

    async def reader(self, request: web.Request) -> web.StreamResponse:
        return await self._consume(request, consumers.Mode.READER)

    async def multi_topic_consumer(self, request: web.Request) -> web.StreamResponse:
        return await self._consume(request, consumers.Mode.MULTI_TOPIC)

    async def _consume(self, request: web.Request, mode: consumers.Mode) -> web.StreamResponse:
        services = request.app[SERVICES]
        ws = self._socket(request)
        self.registry.admit(services)
        try:
            what = "reader" if mode is consumers.Mode.READER else "consumer"
            endpoint = consumers.ConsumerEndpoint(services)
            try:
                await self._subscribe(endpoint, request, mode)
            except (p.ParamError, GatewayError) as exc:
                await endpoint.close()
                fail_for(services, exc, what)
            except BaseException:
                await endpoint.close()
                raise
            try:
                if not await _prepared(ws, request):
                    return ws
                async with Session(services, self.registry, ws) as session:
                    endpoint.start(session)
                    await serve_frames(session, endpoint.on_text, _binary_refused)
            finally:
                await endpoint.close()
        finally:
            self.registry.release()
        return ws

    async def _subscribe(
        self, endpoint: consumers.ConsumerEndpoint, request: web.Request, mode: consumers.Mode
    ) -> None:
        info = request.match_info
        if mode is consumers.Mode.READER:
            await endpoint.open_reader(_path_topic(request), p.parse_reader_params(request.query))
        elif mode is consumers.Mode.CONSUMER:
            topic = _path_topic(request)
            params = p.parse_consumer_params(request.query)
            await endpoint.open_consumer([topic], info["subscription"], params)
        else:
            multi = p.parse_multi_topic_params(request.query)
            await endpoint.open_multi_topic(multi, info["subscription"])

    async def ping_pong(self, request: web.Request) -> web.StreamResponse:
        """``PingPongHandler``: answers WebSocket pings (aiohttp's autoping), ignores the
        rest; for clients that check liveness through a proxy."""
        services = request.app[SERVICES]
        ws = self._socket(request)
        self.registry.admit(services)
        try:
            if not await _prepared(ws, request):
                return ws
            async with Session(services, self.registry, ws) as session:
                async for _ in session.ws:
                    pass
        finally:
            self.registry.release()
        return ws


def _binary_refused() -> str:
    return '{"result":"error:3","errorMsg":"Binary frames are not supported: send JSON text"}'


def add_routes(app: web.Application) -> None:
    """Register the WebSocket endpoints (and the shutdown hook closing open sessions)."""
    services = app[SERVICES]
    registry = SessionRegistry(services.limits.websocket_max_sessions)
    endpoints = _Endpoints(registry)
    routes: tuple[tuple[str, Handler], ...] = (
        (f"/ws/v2/producer/{_TOPIC}/{{topic:.+}}", endpoints.producer),
        (f"/ws/v2/consumer/{_TOPIC}/{{topic}}/{{subscription}}", endpoints.consumer),
        (f"/ws/v2/reader/{_TOPIC}/{{topic:.+}}", endpoints.reader),
        ("/ws/v3/consumer/{subscription}", endpoints.multi_topic_consumer),
        ("/ws/pingpong", endpoints.ping_pong),
        ("/ws/v2/pingpong", endpoints.ping_pong),
    )
    for path, handler in routes:
        app.router.add_get(path, handler)

    async def close_sessions(_: web.Application) -> None:
        await registry.close_all()

    app.on_shutdown.append(close_sessions)
