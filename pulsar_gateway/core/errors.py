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
    │   ├── TooManyTopics             maxTopicsPerNamespace     (admin HTTP 412)
    │   ├── InvalidPartitionCount     e.g. fewer partitions     (admin HTTP 406/422)
    │   ├── SubscriptionConflict      subscription exists       (admin HTTP 409)
    │   └── SubscriptionBusy          consumers connected       (admin HTTP 412)
    ├── ConsumerBusy                  exclusive rule, type clash -> ConsumerBusy
    ├── ConsumerAssignError           Key_Shared ranges refused -> ConsumerAssignError
    ├── ProducerBusy                  producer name in use,     -> ProducerBusy
    │                                 or an exclusive producer
    ├── ProducerFenced                exclusive access refused  -> ProducerFenced
    ├── TopicTerminated               topic terminated: no more -> TopicTerminatedError
    │                                 publishing                   (HTTP 412)
    ├── IncompatibleSchema            schema change refused     -> IncompatibleSchema
    ├── ConsumerNotFound              unknown consumer id       -> ConsumerNotFound
    ├── ProducerNotFound              unknown producer id       -> NotAllowedError
    ├── SubscriptionNotFound                                    -> SubscriptionNotFound
    ├── TopicNotFound                                           -> TopicNotFound
    ├── MessageNotFound               no such message           (admin HTTP 404)
    ├── MessageTooLarge                                         -> NotAllowedError
    ├── EncryptionRequired            encryptionRequired policy -> MetadataError (HTTP 412)
    ├── ProducerBlockedQuotaExceeded  backlog over a quota that (admin and REST HTTP 503)
    │   │                             blocks producers
    │   ├── ProducerBlockedQuotaExceededError      policy     -> ProducerBlocked-
    │   │                             producer_request_hold       QuotaExceededError
    │   │                             (retriable)
    │   └── ProducerBlockedQuotaExceededException  policy     -> ProducerBlocked-
    │                                 producer_exception          QuotaExceededException
    ├── TenantNotFound                tenant missing            (admin HTTP 404)
    ├── NamespaceNotFound             namespace missing         (admin HTTP 404)
    ├── InvalidNamespaceName          bad tenant/namespace name (admin HTTP 412)
    ├── InvalidTenantInfo             TenantInfo refused        (admin HTTP 412)
    ├── NotAllowed ...
    │   ├── AlreadyExists             tenant/namespace exists   (admin HTTP 409)
    │   ├── NotEmpty                  still has namespaces or   (admin HTTP 409)
    │   │                             topics
    │   └── ConcurrentModification    lost a compare-and-set    (admin HTTP 409)
    ├── StorageError                  Redis failed (retriable)  -> PersistenceError
    │   └── ServiceNotReady           shutting down (retriable) -> ServiceNotReady
    ├── AuthenticationError           no/bad token              -> AuthenticationError
    │                                                              (HTTP 401)
    └── AuthorizationError            role lacks permission     -> AuthorizationError
                                                                   (HTTP 403)

``retriable`` is a class attribute clients of the core may read, in the manner of aiokafka's
errors: a retriable error may succeed if the same request is sent again later.
"""

from __future__ import annotations

__all__ = [
    "AlreadyExists",
    "AuthenticationError",
    "AuthorizationError",
    "ConcurrentModification",
    "ConsumerAssignError",
    "ConsumerBusy",
    "ConsumerNotFound",
    "EncryptionRequired",
    "GatewayError",
    "IncompatibleSchema",
    "InvalidNamespaceName",
    "InvalidPartitionCount",
    "InvalidTenantInfo",
    "InvalidTopicName",
    "MessageNotFound",
    "MessageTooLarge",
    "NamespaceNotFound",
    "NotAllowed",
    "NotEmpty",
    "ProducerBlockedQuotaExceeded",
    "ProducerBlockedQuotaExceededError",
    "ProducerBlockedQuotaExceededException",
    "ProducerBusy",
    "ProducerFenced",
    "ProducerNotFound",
    "ServiceNotReady",
    "StorageError",
    "SubscriptionBusy",
    "SubscriptionConflict",
    "SubscriptionNotFound",
    "TenantNotFound",
    "TooManyTopics",
    "TopicBusy",
    "TopicConflict",
    "TopicNotFound",
    "TopicTerminated",
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


class TopicTerminated(GatewayError):
    """The topic was terminated: nothing more can be published to it (Pulsar
    ``TopicTerminatedException``)."""


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


class TooManyTopics(NotAllowed):
    """Creating the topic would take its namespace past ``maxTopicsPerNamespace``."""


class InvalidPartitionCount(NotAllowed):
    """A partition count Pulsar refuses (not positive, or a decrease)."""


class MessageTooLarge(GatewayError):
    """The message is larger than the gateway's max message size."""


class EncryptionRequired(GatewayError):
    """The namespace requires encrypted messages (``encryptionRequired``) and the producer,
    or the message, is not encrypted."""


class StorageError(GatewayError):
    """Redis could not complete the operation; the same request may succeed later."""

    retriable = True


class ServiceNotReady(StorageError):
    """The gateway is starting or shutting down."""


class TenantNotFound(GatewayError):
    """The tenant does not exist."""


class NamespaceNotFound(GatewayError):
    """The namespace does not exist."""


class InvalidNamespaceName(GatewayError):
    """A tenant or namespace name that breaks Pulsar's ``NamedEntity`` rules."""


class InvalidTenantInfo(GatewayError):
    """A TenantInfo Pulsar refuses: no allowed cluster, a blank or unknown one, or an
    admin role with surrounding whitespace (``TenantsBase.validateClustersAsync``)."""


class AlreadyExists(NotAllowed):
    """The tenant or namespace exists already."""


class NotEmpty(NotAllowed):
    """The tenant still has namespaces, or the namespace still has topics."""


class ConcurrentModification(NotAllowed):
    """Other admins kept changing the same policy; the request may be sent again."""


class ProducerBlockedQuotaExceeded(GatewayError):
    """The topic's backlog is over a quota whose policy blocks producers (Pulsar's
    ``TopicBacklogQuotaExceededException``, which carries the policy); raised as one of
    the two subclasses, one per policy, as Pulsar answers one ``ServerError`` per policy."""


class ProducerBlockedQuotaExceededError(ProducerBlockedQuotaExceeded):
    """Policy ``producer_request_hold``: the client holds its messages and tries again."""

    retriable = True


class ProducerBlockedQuotaExceededException(ProducerBlockedQuotaExceeded):
    """Policy ``producer_exception``: the client fails its pending sends."""


class AuthenticationError(GatewayError):
    """The credentials are missing, malformed, expired or not signed by the configured key
    (Pulsar's ``javax.naming.AuthenticationException``)."""


class AuthorizationError(GatewayError):
    """The authenticated role may not do this (Pulsar answers ``AuthorizationError``)."""


class SubscriptionConflict(NotAllowed):
    """The subscription exists already (admin create)."""


class SubscriptionBusy(NotAllowed):
    """The subscription has connected consumers and the request did not force it."""
