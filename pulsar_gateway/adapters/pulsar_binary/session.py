"""Binds one binary connection's commands to the core's services.

A :class:`Session` is Pulsar's ``ServerCnx`` without the socket: it routes each command
(already accepted by the connection's state table) to the part that answers it, each part
built with only the core services it uses:

* :class:`.discovery.TopicDiscovery`: lookups, partition metadata, namespace topic lists and
  schemas;
* :class:`.producer_side.ProducerSide`: PRODUCER, SEND (answered in send order) and
  CLOSE_PRODUCER;
* :class:`.consumer_side.ConsumerSide`: SUBSCRIBE, FLOW, ACK, REDELIVER, CLOSE_CONSUMER,
  UNSUBSCRIBE, GET_LAST_MESSAGE_ID and SEEK; the core delivers messages to its
  :class:`.consumer_side.ConsumerFrameSink` objects.

They share a :class:`.session_state.SessionState`: the connection, its role, the tasks
answering requests. :func:`open_session` picks the services from the gateway's bundle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pulsar_gateway.adapters.pulsar_binary import commands as c
from pulsar_gateway.adapters.pulsar_binary.connection import ServerConnection
from pulsar_gateway.adapters.pulsar_binary.consumer_side import ConsumerSide
from pulsar_gateway.adapters.pulsar_binary.discovery import TopicDiscovery
from pulsar_gateway.adapters.pulsar_binary.producer_side import ProducerSide
from pulsar_gateway.adapters.pulsar_binary.session_state import SessionState
from pulsar_gateway.adapters.pulsar_binary.throttle import ConcurrencyLimit, Throttle
from pulsar_gateway.core import ConsumerHandle, GatewayMetrics, ProducerHandle, Services

__all__ = ["Session", "open_session"]


class Session:
    """The broker side of one binary connection.

    Args:
        state: the connection side its parts share.
        discovery, producers, consumers: the parts that answer its commands.
        metrics: counts the commands (``pulsar_gateway_commands_total``).
    """

    def __init__(
        self,
        state: SessionState,
        discovery: TopicDiscovery,
        producers: ProducerSide,
        consumers: ConsumerSide,
        metrics: GatewayMetrics,
    ) -> None:
        self.state = state
        self.discovery = discovery
        self.producer_side = producers
        self.consumer_side = consumers
        self._metrics = metrics
        self._handlers: dict[type, Callable[[Any], None]] = {
            c.PartitionedMetadata: discovery.partitioned_metadata,
            c.Lookup: discovery.lookup,
            c.GetTopicsOfNamespace: discovery.get_topics_of_namespace,
            c.GetSchema: discovery.get_schema,
            c.GetOrCreateSchema: discovery.get_or_create_schema,
            c.Producer: producers.producer,
            c.Send: producers.send,
            c.CloseProducer: producers.close_producer,
            c.Subscribe: consumers.subscribe,
            c.Flow: consumers.flow,
            c.Ack: consumers.ack,
            c.Redeliver: consumers.redeliver,
            c.CloseConsumer: consumers.close_consumer,
            c.Unsubscribe: consumers.unsubscribe,
            c.GetLastMessageId: consumers.get_last_message_id,
            c.Seek: consumers.seek,
        }

    @property
    def producers(self) -> dict[int, ProducerHandle]:
        """The connection's producers by the client's producer id."""
        return self.producer_side.producers

    @property
    def consumers(self) -> dict[int, ConsumerHandle]:
        """The connection's consumers by the client's consumer id."""
        return self.consumer_side.consumers

    @property
    def busy(self) -> bool:
        """Requests are still being answered."""
        return self.state.busy

    @property
    def closed(self) -> bool:
        return self.state.closed

    @closed.setter
    def closed(self, closed: bool) -> None:
        self.state.closed = closed

    @property
    def client_address(self) -> str:
        """The client's ``host:port``, for the stats' ``address`` (set by the server)."""
        return self.state.client_address

    @client_address.setter
    def client_address(self, address: str) -> None:
        self.state.client_address = address

    def handle(self, command: c.Command) -> None:
        """Handle one command (already accepted by the connection's state table)."""
        command_type = type(command)
        handler = self._handlers.get(command_type)
        if handler is not None:
            self._metrics.count_command("binary", command_type.__name__)
            handler(command)
        elif isinstance(command, c.Unsupported):
            self._metrics.count_command("binary", command.type_name)
            self.state.conn.refuse_unsupported(command)
        else:
            self._metrics.count_command("binary", command_type.__name__)

    def set_writable(self, writable: bool) -> None:
        """The connection's send buffer went over its high water mark (False) or back under
        its low one (True)."""
        self.consumer_side.set_writable(writable)

    async def close(self) -> None:
        """The connection is gone: close producers, release consumers' unacked messages,
        wait for the requests still being answered."""
        self.state.closed = True
        await self.producer_side.close()
        await self.consumer_side.close()
        await self.state.finish()


def open_session(
    services: Services,
    conn: ServerConnection,
    wants_flush: Callable[[], None],
    *,
    service_url: str,
    service_url_tls: str | None = None,
    throttle: Throttle | None = None,
    max_pending: int = 1000,
    lookups: ConcurrencyLimit | None = None,
) -> Session:
    """A session for ``conn``, its parts given the services each uses.

    Args:
        service_url, service_url_tls: where LOOKUP sends clients (``pulsar+ssl://``; None
            without TLS).
        throttle: pauses reading the connection (see :mod:`.throttle`); ``max_pending``
            publishes, or as many other requests, waiting for Redis pause it.
        lookups: the gateway-wide count of lookups in progress.
    """
    authorization = services.authorization
    state = SessionState(
        conn, wants_flush, authorization, throttle=throttle, max_pending=max_pending
    )
    discovery = TopicDiscovery(
        state,
        authorization=authorization,
        topics=services.topics,
        tenants=services.tenants,
        cluster=services.cluster,
        schemas=services.schemas,
        service_url=service_url,
        service_url_tls=service_url_tls,
        lookups=lookups,
    )
    producers = ProducerSide(
        state,
        authorization=authorization,
        producers=services.producers,
        publish_buffer=services.publish_buffer.gate,
    )
    consumers = ConsumerSide(
        state,
        authorization=authorization,
        schemas=services.schemas,
        subscriptions=services.subscriptions,
    )
    return Session(state, discovery, producers, consumers, services.metrics)
