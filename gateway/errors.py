"""The gateway's error hierarchy.

Every failure the core reports is a :class:`GatewayError`. Adapters translate these into
their own protocol's errors through one table each (the binary adapter into Pulsar's
``ServerError``, the HTTP adapter into status codes); nothing else crosses that boundary.

::

    GatewayError                      (retriable = False)
    ├── InvalidTopicName              bad topic name            -> InvalidTopicName
    ├── NotAllowed                    refused by policy/state   -> NotAllowedError
    │   ├── TopicConflict             name in use, wrong kind   (admin HTTP 409)
    │   ├── TopicBusy                 consumers connected       (admin HTTP 412)
    │   ├── InvalidPartitionCount     e.g. fewer partitions     (admin HTTP 406/422)
    │   ├── SubscriptionConflict      subscription exists       (admin HTTP 409)
    │   └── SubscriptionBusy          consumers connected       (admin HTTP 412)
    ├── ConsumerBusy                  exclusive rule, type clash -> ConsumerBusy
    ├── ConsumerAssignError           Key_Shared ranges refused -> ConsumerAssignError
    ├── ProducerBusy                  producer name in use,     -> ProducerBusy
    │                                 or an exclusive producer
    ├── ProducerFenced                exclusive access refused  -> ProducerFenced
    ├── IncompatibleSchema            schema change refused     -> IncompatibleSchema
    ├── ConsumerNotFound              unknown consumer id       -> ConsumerNotFound
    ├── ProducerNotFound              unknown producer id       -> NotAllowedError
    ├── SubscriptionNotFound                                    -> SubscriptionNotFound
    ├── TopicNotFound                                           -> TopicNotFound
    ├── MessageTooLarge                                         -> NotAllowedError
    └── StorageError                  Redis failed (retriable)  -> PersistenceError
        └── ServiceNotReady           shutting down (retriable) -> ServiceNotReady

``retriable`` is a class attribute clients of the core may read, in the manner of aiokafka's
errors: a retriable error may succeed if the same request is sent again later.
"""

from __future__ import annotations

__all__ = [
    "ConsumerAssignError",
    "ConsumerBusy",
    "ConsumerNotFound",
    "GatewayError",
    "IncompatibleSchema",
    "InvalidPartitionCount",
    "InvalidTopicName",
    "MessageNotFound",
    "MessageTooLarge",
    "NotAllowed",
    "ProducerBusy",
    "ProducerFenced",
    "ProducerNotFound",
    "ServiceNotReady",
    "StorageError",
    "SubscriptionBusy",
    "SubscriptionConflict",
    "SubscriptionNotFound",
    "TopicBusy",
    "TopicConflict",
    "TopicNotFound",
]


class GatewayError(Exception):
    """Root of every error the core raises."""

    retriable = False


class InvalidTopicName(GatewayError):
    """The topic name does not follow Pulsar's naming rules."""


class NotAllowed(GatewayError):
    """The request is well formed but refused (Pulsar ``NotAllowedError``)."""


class ConsumerBusy(GatewayError):
    """An Exclusive subscription already has a consumer, or the type differs."""


class ConsumerAssignError(GatewayError):
    """Key_Shared STICKY hash ranges are invalid or overlap another consumer's."""


class ProducerBusy(GatewayError):
    """A producer with that name is already connected to the topic."""


class ProducerFenced(GatewayError):
    """Exclusive access refused: another producer holds the topic, or the topic epoch moved
    on since this producer last held it (Pulsar ``ProducerFencedException``)."""


class IncompatibleSchema(GatewayError):
    """The schema cannot be registered next to the topic's existing versions."""


class ConsumerNotFound(GatewayError):
    """No consumer with that id exists on this connection."""


class ProducerNotFound(GatewayError):
    """No producer with that id exists on this connection."""


class SubscriptionNotFound(GatewayError):
    """The subscription does not exist."""


class TopicNotFound(GatewayError):
    """The topic does not exist."""


class MessageNotFound(GatewayError):
    """No such message in the state the request needs (e.g. not scheduled)."""


class TopicConflict(NotAllowed):
    """The topic exists already, or is of the other kind (partitioned or not)."""


class TopicBusy(NotAllowed):
    """The topic has connected consumers and the request did not force it."""


class InvalidPartitionCount(NotAllowed):
    """A partition count Pulsar refuses (not positive, or a decrease)."""


class MessageTooLarge(GatewayError):
    """The message is larger than the gateway's max message size."""


class StorageError(GatewayError):
    """Redis could not complete the operation; the same request may succeed later."""

    retriable = True


class ServiceNotReady(StorageError):
    """The gateway is starting or shutting down."""


class SubscriptionConflict(NotAllowed):
    """The subscription exists already (admin create)."""


class SubscriptionBusy(NotAllowed):
    """The subscription has connected consumers and the request did not force it."""
