"""Producer access modes (PIP-68), as ``CommandProducer.producer_access_mode`` numbers them.

* Shared: any number of producers (the default);
* Exclusive: one producer; another one is refused at once (ProducerBusy / ProducerFenced);
* WaitForExclusive: the producer waits until it can be the only one;
* ExclusiveWithFencing: the producer takes the topic, fencing the current exclusive one.
"""

from __future__ import annotations

import enum

__all__ = ["ProducerAccessMode"]


class ProducerAccessMode(enum.IntEnum):
    """``CommandProducer.producer_access_mode`` (PIP-68)."""

    SHARED = 0
    EXCLUSIVE = 1
    WAIT_FOR_EXCLUSIVE = 2
    EXCLUSIVE_WITH_FENCING = 3
