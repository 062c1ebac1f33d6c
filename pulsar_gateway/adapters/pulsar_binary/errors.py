"""Domain errors to Pulsar ``ServerError`` codes, in one table.

The counterpart of the broker's ``BrokerServiceException.getClientErrorCode``. The codes
drive the client's retry decisions (``isResultRetryable`` in the C++ client's
``lib/ResultUtils.h``; docs/binary_protocol.md "Error codes and retries"): ``ConsumerBusy`` and
``ProducerBusy`` are fatal, ``PersistenceError`` and ``ServiceNotReady`` are retried.
Of the two backlog quota codes, a client that had the producer already reconnects after
either (``ProducerImpl::handleCreateProducer`` in pulsar-client-cpp), failing its pending
sends only on ``ProducerBlockedQuotaExceededException``.
"""

from __future__ import annotations

from pulsar_gateway.core import (
    AuthenticationError,
    AuthorizationError,
    ConsumerAssignError,
    ConsumerBusy,
    ConsumerNotFound,
    EncryptionRequired,
    IncompatibleSchema,
    InvalidTopicName,
    MessageTooLarge,
    NotAllowed,
    ProducerBlockedQuotaExceededError,
    ProducerBlockedQuotaExceededException,
    ProducerBusy,
    ProducerFenced,
    ProducerNotFound,
    ServiceNotReady,
    StorageError,
    SubscriptionNotFound,
    TopicNotFound,
    TopicTerminated,
)
from pulsar_gateway.proto import PulsarApi_pb2 as pb

__all__ = ["server_error"]

_TABLE: tuple[tuple[type[Exception], pb.ServerError], ...] = (
    (InvalidTopicName, pb.InvalidTopicName),
    (ConsumerBusy, pb.ConsumerBusy),
    (ConsumerAssignError, pb.ConsumerAssignError),
    (ProducerBusy, pb.ProducerBusy),
    (ProducerFenced, pb.ProducerFenced),
    (IncompatibleSchema, pb.IncompatibleSchema),
    (ConsumerNotFound, pb.ConsumerNotFound),
    (ProducerNotFound, pb.NotAllowedError),
    (SubscriptionNotFound, pb.SubscriptionNotFound),
    (TopicNotFound, pb.TopicNotFound),
    (TopicTerminated, pb.TopicTerminatedError),
    (NotAllowed, pb.NotAllowedError),
    (MessageTooLarge, pb.NotAllowedError),
    (EncryptionRequired, pb.MetadataError),  # ServerCnx.handleProducer, Producer
    # one code per policy, as ServerCnx.handleProducer answers: the client holds its
    # messages and reconnects on the Error, fails them on the Exception
    (ProducerBlockedQuotaExceededError, pb.ProducerBlockedQuotaExceededError),
    (ProducerBlockedQuotaExceededException, pb.ProducerBlockedQuotaExceededException),
    (ServiceNotReady, pb.ServiceNotReady),
    (StorageError, pb.PersistenceError),
    (AuthenticationError, pb.AuthenticationError),
    (AuthorizationError, pb.AuthorizationError),
)


def server_error(exc: BaseException) -> tuple[pb.ServerError, str]:
    """The ``(ServerError, message)`` a client should see for ``exc``."""
    for cls, code in _TABLE:
        if isinstance(exc, cls):
            return code, str(exc) or cls.__name__
    return pb.UnknownError, f"{type(exc).__name__}: {exc}"
