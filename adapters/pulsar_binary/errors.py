"""Domain errors to Pulsar ``ServerError`` codes, in one table.

The counterpart of the broker's ``BrokerServiceException.getClientErrorCode``. The codes
drive the client's retry decisions (protocol brief 6.1): ``ConsumerBusy`` and
``ProducerBusy`` are fatal, ``PersistenceError`` and ``ServiceNotReady`` are retried.
"""

from __future__ import annotations

from gateway import errors
from proto import PulsarApi_pb2 as pb

__all__ = ["server_error"]

_TABLE: tuple[tuple[type[Exception], int], ...] = (
    (errors.InvalidTopicName, pb.InvalidTopicName),
    (errors.ConsumerBusy, pb.ConsumerBusy),
    (errors.ConsumerAssignError, pb.ConsumerAssignError),
    (errors.ProducerBusy, pb.ProducerBusy),
    (errors.ProducerFenced, pb.ProducerFenced),
    (errors.IncompatibleSchema, pb.IncompatibleSchema),
    (errors.ConsumerNotFound, pb.ConsumerNotFound),
    (errors.ProducerNotFound, pb.NotAllowedError),
    (errors.SubscriptionNotFound, pb.SubscriptionNotFound),
    (errors.TopicNotFound, pb.TopicNotFound),
    (errors.NotAllowed, pb.NotAllowedError),
    (errors.MessageTooLarge, pb.NotAllowedError),
    (errors.ProducerBlockedQuotaExceeded, pb.ProducerBlockedQuotaExceededException),
    (errors.ServiceNotReady, pb.ServiceNotReady),
    (errors.StorageError, pb.PersistenceError),
)


def server_error(exc: BaseException) -> tuple[int, str]:
    """The ``(ServerError, message)`` a client should see for ``exc``."""
    for cls, code in _TABLE:
        if isinstance(exc, cls):
            return code, str(exc) or cls.__name__
    return pb.UnknownError, f"{type(exc).__name__}: {exc}"
