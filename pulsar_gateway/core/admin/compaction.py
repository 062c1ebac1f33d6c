"""Topic compaction: a view of a topic keeping only the latest message of each key.

Theory of operation (Pulsar's ``TwoPhaseCompactor``, topic-compaction cookbook). A
compaction reads the topic up to a *horizon*, the topic's last entry when it starts; its
input is the previous compacted view (everything up to the previous horizon) followed by
the topic's entries after that horizon, so each compaction only reads what is new, and the
view survives retention trimming the topic below the horizon.

* Phase one reads every message's key and notes the latest (entry id, batch index) of each
  key. A message whose value is null (``null_value``, or an empty payload) is a tombstone:
  it removes its key. Messages without a key are dropped, as Pulsar >= 3.2 does
  (``topicCompactionRetainNullKey=false``, PIP-318).
* Phase two reads the same entries again and writes those holding a latest message to a new
  stream with their *same ids* (``XADD`` with explicit ids). A client batch whose messages are
  partly superseded is rewritten as Pulsar's ``RawBatchConverter`` does: same entry id, same batch
  size, superseded messages marked ``compacted_out`` with an empty payload; the entry also carries
  the ``ack_set`` that makes the official client skip them (``a`` field, see
  :mod:`pulsar_gateway.core.model.entry`). An entry the inspector cannot read (encrypted, corrupt)
  is kept whole, as Pulsar does.
* The new view replaces the old one in one script (``RENAME``), with the new horizon, so a
  reader never sees half a view.

The core does not know the wire format: an :class:`EntryInspector`, given by the composition
root (``pulsar_gateway/server/``), reads keys out of a stored blob and rewrites batches.

Fleet behaviour: the compaction state hash holds the status and a lease; a second trigger
anywhere in the fleet while one runs gets :class:`CompactionAlreadyRunning` (HTTP 409). The
running gateway renews the lease between chunks; if it dies, the lease runs out, the status
reads ERROR and the next trigger starts over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter

from pulsar_gateway.core.errors import GatewayError, NotAllowed, TopicNotFound
from pulsar_gateway.core.model.entry import (
    ACK_SET,
    BLOB,
    NUM_MESSAGES,
    EntryFormatError,
    ack_set_of_kept,
)
from pulsar_gateway.core.model.topic_name import TopicName, parse_topic_name
from pulsar_gateway.core.storage import fleet_store, topic_store
from pulsar_gateway.core.storage.keys import KeySchema, TopicKeys
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import topics
from pulsar_gateway.core.storage.scripts.topics import CompactionBegin

__all__ = [
    "CompactionAlreadyRunning",
    "CompactionResult",
    "CompactionService",
    "EntryInspector",
    "MessageKey",
]

log = logging.getLogger(__name__)

#: Entries read per XRANGE.
CHUNK = 500
#: Lease of a running compaction, ms; renewed every chunk.
LEASE_MS = 30_000

#: LongRunningProcessStatus.Status values (Pulsar admin API).
NOT_RUN, RUNNING, SUCCESS, ERROR = "NOT_RUN", "RUNNING", "SUCCESS", "ERROR"


class CompactionAlreadyRunning(GatewayError):
    """A compaction of this topic is running somewhere in the fleet (Pulsar: HTTP 409)."""


@dataclass(frozen=True, slots=True)
class MessageKey:
    """What compaction needs of one message: its key (None: no key) and whether its value
    is null (a tombstone, or a slot already compacted out)."""

    key: str | None
    null: bool


class EntryInspector(Protocol):
    """Reads and rewrites stored entries; implemented next to the wire format."""

    def messages(self, blob: bytes) -> list[MessageKey]:
        """One :class:`MessageKey` per message of the entry, in batch-index order; a single
        item for an entry that cannot be split (it is then kept or dropped whole).

        Raises:
            EntryFormatError: the entry cannot be read.
        """

    def rewrite(self, blob: bytes, keep: Sequence[bool]) -> bytes:
        """The entry with every message whose ``keep`` is False compacted out (same count
        and order of messages, so batch indexes and message ids do not change).

        Raises:
            EntryFormatError: the entry cannot be read.
        """


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What one compaction did."""

    horizon: bytes | None
    entries_read: int
    entries_written: int
    keys: int


def _fields(raw: list[Any]) -> dict[bytes, bytes]:
    return {raw[i]: raw[i + 1] for i in range(0, len(raw), 2)}


class CompactionService:
    """Runs compactions for this gateway and answers their status."""

    def __init__(
        self,
        lane: Lane,
        keys: KeySchema,
        *,
        gateway_id: str,
        inspector: EntryInspector | None,
        registry: CollectorRegistry,
    ) -> None:
        """``inspector`` reads the wire format of stored entries (the composition root
        gives the binary adapter's); without one, compaction is refused."""
        self._lane = lane
        self._key_schema = keys
        self._gateway_id = gateway_id
        self.inspector = inspector
        #: drop messages without a key (Pulsar's topicCompactionRetainNullKey=false)
        self.retain_null_key = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self.runs = Counter(
            "pulsar_gateway_compactions",
            "Compactions run by this gateway, by result",
            ["result"],
            registry=registry,
        )

    def _keys(self, topic: TopicName | str) -> tuple[TopicName, TopicKeys]:
        name = topic if isinstance(topic, TopicName) else parse_topic_name(topic)
        return name, self._key_schema.topic(name)

    # -- admin -------------------------------------------------------------------------

    async def trigger(self, topic: TopicName | str) -> None:
        """Start compacting ``topic`` in the background (Pulsar ``triggerCompaction``).

        Raises:
            CompactionAlreadyRunning: a compaction of the topic is running in the fleet.
            TopicNotFound: the topic has no stream.
            NotAllowed: no entry inspector is configured.
        """
        name, keys = self._keys(topic)
        token, old, new = await self._begin(keys)
        task = asyncio.get_running_loop().create_task(
            self._run_logged(name, keys, token, old, new), name=f"compaction {name}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def compact(self, topic: TopicName | str) -> CompactionResult:
        """Compact ``topic`` now and return when done (tests, and :meth:`trigger`'s task)."""
        _, keys = self._keys(topic)
        token, old, new = await self._begin(keys)
        return await self._run(keys, token, old, new)

    async def status(self, topic: TopicName | str) -> dict[str, str]:
        """Pulsar's ``LongRunningProcessStatus``: ``{"status", "lastError"}``."""
        _, keys = self._keys(topic)
        state = await topic_store.compaction_state(self._lane, keys)
        status = state.get(b"status", NOT_RUN.encode()).decode()
        error = state.get(b"lastError", b"").decode()
        if status == RUNNING:
            now = await fleet_store.clock_ms(self._lane)
            if int(state.get(b"lease", b"0")) <= now:
                status, error = ERROR, "the gateway running the compaction stopped"
        return {"status": status, "lastError": error}

    async def horizon(self, topic: TopicName | str) -> bytes | None:
        """The last entry id the compacted view covers; None before the first compaction."""
        _, keys = self._keys(topic)
        return await topic_store.compaction_horizon(self._lane, keys)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # -- the two phases ------------------------------------------------------------------

    async def _begin(self, keys: TopicKeys) -> tuple[str, bytes, bytes]:
        if self.inspector is None:
            raise NotAllowed("compaction needs an entry inspector; none is configured")
        token = f"{self._gateway_id}-{secrets.token_hex(4)}"
        start = await topics.compaction_begin(self._lane, keys, token=token, lease_ms=LEASE_MS)
        if start.status is CompactionBegin.RUNNING:
            raise CompactionAlreadyRunning("Compaction already in progress")
        if start.status is CompactionBegin.NO_TOPIC:
            raise TopicNotFound("Topic not found")
        return token, start.old_horizon, start.new_horizon

    async def _run_logged(
        self, name: TopicName, keys: TopicKeys, token: str, old: bytes, new: bytes
    ) -> None:
        try:
            result = await self._run(keys, token, old, new)
        except Exception:  # recorded in the state hash by _run; the task must not die loud
            log.warning("compaction of %s failed", name, exc_info=True)
        else:
            log.info(
                "compacted %s up to %s: %d entries read, %d written, %d keys",
                name,
                (result.horizon or b"-").decode(),
                result.entries_read,
                result.entries_written,
                result.keys,
            )

    async def _run(self, keys: TopicKeys, token: str, old: bytes, new: bytes) -> CompactionResult:
        try:
            if not new or new == old:
                # Nothing after the last horizon (Pulsar: "Skip compaction of the empty
                # topic"): the view stays as it is.
                await self._commit(keys, token, old or b"", replace=False)
                self.runs.labels("success").inc()
                return CompactionResult(old or None, 0, 0, 0)
            latest, read = await self._phase_one(keys, token, old, new)
            written = await self._phase_two(keys, token, old, new, latest)
            await self._commit(keys, token, new, replace=True)
        except BaseException as exc:
            self.runs.labels("error").inc()
            with contextlib.suppress(Exception):
                await topics.compaction_fail(
                    self._lane, keys, token=token, error=str(exc) or type(exc).__name__
                )
            raise
        self.runs.labels("success").inc()
        return CompactionResult(new, read, written, len(latest))

    async def _commit(self, keys: TopicKeys, token: str, horizon: bytes, replace: bool) -> None:
        current = await topics.compaction_commit(
            self._lane, keys, token=token, horizon=horizon, replace=replace
        )
        if not current:
            raise GatewayError("this compaction was taken over by another run")

    async def _entries(
        self, keys: TopicKeys, token: str, old: bytes, new: bytes
    ) -> AsyncIterator[tuple[bytes, dict[bytes, bytes]]]:
        """The input: the previous view, then the topic after the old horizon up to the new."""
        lane = self._lane
        sources = [(keys.compacted, b"-", b"+")] if old else []
        sources.append((keys.stream, b"(" + old if old else b"-", new))
        for key, start, end in sources:
            while True:
                rows = await topic_store.entries(lane, key, start, end, CHUNK)
                for entry_id, raw in rows:
                    yield entry_id, _fields(raw)
                if len(rows) < CHUNK:
                    break
                start = b"(" + rows[-1][0]
                current = await topics.compaction_renew(
                    self._lane, keys, token=token, lease_ms=LEASE_MS
                )
                if not current:
                    raise GatewayError("this compaction was taken over by another run")

    def _messages(self, blob: bytes) -> list[MessageKey] | None:
        assert self.inspector is not None
        try:
            return self.inspector.messages(blob)
        except EntryFormatError:
            return None

    async def _phase_one(
        self, keys: TopicKeys, token: str, old: bytes, new: bytes
    ) -> tuple[dict[str, tuple[bytes, int]], int]:
        latest: dict[str, tuple[bytes, int]] = {}
        read = 0
        async for entry_id, fields in self._entries(keys, token, old, new):
            read += 1
            for index, message in enumerate(self._messages(fields.get(BLOB, b"")) or ()):
                if message.key is None:
                    continue
                if message.null:
                    latest.pop(message.key, None)
                else:
                    latest[message.key] = (entry_id, index)
        return latest, read

    async def _phase_two(
        self,
        keys: TopicKeys,
        token: str,
        old: bytes,
        new: bytes,
        latest: dict[str, tuple[bytes, int]],
    ) -> int:
        lane = self._lane
        inspector = self.inspector
        assert inspector is not None
        writes: list[asyncio.Future[Any]] = []
        written = 0
        async for entry_id, fields in self._entries(keys, token, old, new):
            blob = fields.get(BLOB, b"")
            messages = self._messages(blob)
            extra: list[bytes] = []
            if messages is None:
                pass  # unreadable: kept whole, as Pulsar does
            else:
                keep = [
                    not m.null
                    and (
                        latest.get(m.key) == (entry_id, i)
                        if m.key is not None
                        else self.retain_null_key
                    )
                    for i, m in enumerate(messages)
                ]
                if not any(keep):
                    continue
                if not all(keep):
                    blob = inspector.rewrite(blob, keep)
                    extra = [ACK_SET, ack_set_of_kept(keep)]
            kept: list[Any] = [BLOB, blob]
            if NUM_MESSAGES in fields:
                kept += [NUM_MESSAGES, fields[NUM_MESSAGES]]
            writes.append(topic_store.append_compacted(lane, keys, entry_id, [*kept, *extra]))
            written += 1
            if len(writes) >= CHUNK:
                await asyncio.gather(*writes)
                writes.clear()
        await asyncio.gather(*writes)
        return written
