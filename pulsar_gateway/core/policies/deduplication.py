"""Message deduplication: which sequence id an entry records for its producer.

Pulsar's broker keeps, per producer name, the highest sequence id it stored
(``MessageDeduplication.highestSequencedPersisted``) and drops a SEND whose sequence id is
not above it, answering it with a receipt for message id ``(-1, -1)`` as if it were stored
(``PersistentTopic.publishMessage``, ``MessageDupStatus.Dup``). The C++ client accepts that
receipt and completes the send with that id. The gateway keeps the same number in the
topic's ``last-sequence-ids`` hash and checks and updates it in the append script
(``lua/append_entries.lua``), so two gateways racing on one producer name stay exact.

Deduplication is a namespace or topic policy (``deduplication``, a bool, as in Pulsar's
admin API); off by default, like ``brokerDeduplicationEnabled``.
"""

from __future__ import annotations

from typing import Any

from pulsar_gateway.core.model.topic_name import TopicName

__all__ = ["DEDUPLICATION_POLICY", "DUPLICATE_RECEIPT_ID", "enabled", "to_record"]

#: Policy name in Pulsar's admin API (``/namespaces/{ns}/deduplication``).
DEDUPLICATION_POLICY = "deduplication"


def to_record(
    sequence_id: int,
    num_messages: int,
    highest_sequence_id: int = 0,
    chunk_id: int | None = None,
    num_chunks: int | None = None,
) -> int | None:
    """The sequence id an entry records, or None when it records nothing.

    Args:
        sequence_id: ``CommandSend.sequence_id`` (a batch's first message's).
        num_messages: messages in the entry; a batch's messages carry consecutive sequence
            ids, so its highest is ``sequence_id + num_messages - 1`` (what Pulsar uses when
            ``highest_sequence_id`` is absent, which the C++ client never sets).
        highest_sequence_id: ``CommandSend.highest_sequence_id`` when set.
        chunk_id: ``MessageMetadata.chunk_id`` of a chunk.
        num_chunks: ``MessageMetadata.num_chunks_from_msg`` of a chunk.

    Returns:
        None for a chunk other than its message's last: every chunk carries the message's
        sequence id, and recording it at chunk 0 would make chunks 1..n-1 duplicates
        (Pulsar records on the last chunk only, ``MessageDeduplication.isDuplicateNormal``).
    """
    if chunk_id is not None and num_chunks is not None and chunk_id != num_chunks - 1:
        return None
    return max(sequence_id + max(num_messages, 1) - 1, highest_sequence_id, sequence_id)


#: What a duplicate's receipt carries: Pulsar answers ``(ledgerId=-1, entryId=-1)``.
DUPLICATE_RECEIPT_ID = (-1, -1)


async def enabled(policies: Any, topic: TopicName) -> bool:
    """The effective ``deduplication`` policy of ``topic`` (namespace, then topic level)."""
    return (await policies.effective(topic, DEDUPLICATION_POLICY)) is True
