"""Which sequence id an entry records for deduplication (pure)."""

from __future__ import annotations

from pulsar_gateway.core.policies.deduplication import to_record


def test_a_single_message_records_its_own_id() -> None:
    assert to_record(7, 1) == 7


def test_a_batch_records_its_last_message() -> None:
    assert to_record(10, 5) == 14  # messages 10..14


def test_highest_sequence_id_wins_when_larger() -> None:
    assert to_record(10, 1, highest_sequence_id=20) == 20
    assert to_record(10, 3, highest_sequence_id=5) == 12


def test_only_the_last_chunk_records() -> None:
    assert [to_record(3, 1, chunk_id=i, num_chunks=4) for i in range(4)] == [None, None, None, 3]


def test_zero_messages_counts_as_one() -> None:
    assert to_record(4, 0) == 4
