"""Ledgers: how a topic partition's entries are grouped, and when a new group starts.

Strategy (docs/architecture.md "Design decisions", message ids map to stream ids): Pulsar stores
a topic as a managed ledger, a sequence of BookKeeper ledgers, and a message id is ``(ledgerId,
entryId)`` with entry ids 0, 1, 2, ... within a ledger; clients and tools rely on it (an entry
id tells how many entries of its ledger precede it). Here a ledger is a run of stream ids
sharing their first part: entry ``E`` of ledger ``L`` is stream id ``L-E``, so ids stay totally
ordered (stream order); the append script numbers the entries from the ledger's count, whichever
gateway appends. A ledger's id is the time Redis opened it (ms), after every earlier ledger and
stored broker timestamp.

The append script opens a new ledger when the current one is full, with Pulsar's rule
(``ManagedLedgerImpl.currentLedgerIsFull``) and its configuration names and defaults:

* ``managedLedgerMaxEntriesPerLedger`` (50,000) or ``managedLedgerMaxSizePerLedgerMbytes``
  (2,048 MB) reached, once the ledger is older than
  ``managedLedgerMinLedgerRolloverTimeMinutes`` (10);
* or the ledger is older than ``managedLedgerMaxLedgerRolloverTimeMinutes`` (240).

As in Pulsar the check runs at an append, so an idle topic keeps its ledger open.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["LedgerRollover"]

_MINUTE_MS = 60_000
_MB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class LedgerRollover:
    """When a topic partition's current ledger is full (Pulsar's ``managedLedger*``
    settings).

    Attributes:
        max_entries: ``managedLedgerMaxEntriesPerLedger``.
        max_size_mb: ``managedLedgerMaxSizePerLedgerMbytes`` (blob bytes).
        min_rollover_minutes: ``managedLedgerMinLedgerRolloverTimeMinutes``.
        max_rollover_minutes: ``managedLedgerMaxLedgerRolloverTimeMinutes``.
        argument: the four limits as ``append_entries.lua`` takes them, made once.
    """

    max_entries: int = 50_000
    max_size_mb: int = 2048
    min_rollover_minutes: int = 10
    max_rollover_minutes: int = 240
    argument: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_entries < 1 or self.max_size_mb < 1:
            raise ValueError("a ledger must hold at least one entry and one MB")
        if self.min_rollover_minutes < 0 or self.max_rollover_minutes < 1:
            raise ValueError("rollover times must be >= 0 (minimum) and >= 1 (maximum)")
        object.__setattr__(
            self,
            "argument",
            f"{self.max_entries} {self.max_size_mb * _MB} "
            f"{self.min_rollover_minutes * _MINUTE_MS} {self.max_rollover_minutes * _MINUTE_MS}",
        )
