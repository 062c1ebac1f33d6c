"""Admin operations on subscriptions and their cursors (Pulsar ``PersistentTopicsBase``
``internalCreateSubscription``, ``internalDeleteSubscription``, ``internalSkipMessages``,
``internalSkipAllMessages``, ``internalExpireMessages*``, ``internalResetCursor*``,
``internalPeekNthMessage``, ``internalGetMessageById``, ``internalExamineMessage``,
``internalGetLastMessageId``).

Strategy: a subscription is a consumer group on the partition's stream (docs/architecture.md
"Design decisions"); its cursor is the group's last-delivered id and its unacked set the group's
pending entries (with the reserved consumers of ``pulsar_gateway/core/storage/keys.py``: parked,
scheduled, Key_Shared waiting). Every change here is one Lua script on one partition
(``lua/subscription_*.lua``, helpers in ``lua/lib.lua`` "Cursor moves"), atomic with the
dispatchers of every gateway. A partitioned topic's base name applies an operation to each
partition in turn where Pulsar does (create, delete, skip_all, expire by age, reset by time),
and is refused where Pulsar refuses it (skip, expire and reset at a position, peek: HTTP 405).

Positions: a stream id ``L-E`` is the Pulsar entry ``L:E`` (:mod:`..model.ledger`).
Expire by age reads an entry's broker timestamp, the Redis clock at append (Pulsar's broker
entry timestamp, within milliseconds of the producer's publish_time), in the scripts: the
same clock the message TTL uses. Reset by time reads the entries' publish times (stored
field ``p``, the producer's ``MessageMetadata.publish_time``), as the binary protocol's SEEK
by time does and as Pulsar's ``PersistentMessageFinder`` does when the broker adds no entry
metadata (lib.lua ``first_published_at``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pulsar_gateway.core.errors import (
    MessageNotFound,
    NotAllowed,
    SubscriptionBusy,
    SubscriptionConflict,
    SubscriptionNotFound,
    TopicNotFound,
)
from pulsar_gateway.core.model.entry import StoredEntry
from pulsar_gateway.core.model.message_id import MessageId, start_position, time_position
from pulsar_gateway.core.model.subscription_type import InitialPosition
from pulsar_gateway.core.model.topic_name import TopicName
from pulsar_gateway.core.storage import topic_store
from pulsar_gateway.core.storage.lane import Lane
from pulsar_gateway.core.storage.scripts import cursors, subscriptions, topics
from pulsar_gateway.core.storage.scripts.cursors import (
    DeleteReply,
    DeleteStatus,
    ExpireOutcome,
    PeekStatus,
)
from pulsar_gateway.core.topics.partitioned_topics import PartitionedTopics
from pulsar_gateway.core.topics.topic import Topic, Topics

__all__ = ["CursorPosition", "SubscriptionAdmin"]

#: ``ResetCursorData`` / ``MessageIdImpl`` "latest": Long.MAX_VALUE for both ids.
_LATEST = (1 << 63) - 1


#: Above any ledger id or entry number stored (ledger ids are Redis ms times, entries a
#: count), and exact in the scripts' Lua numbers (doubles).
MAX_LEDGER_ID = 2**53


@dataclass(frozen=True, slots=True)
class CursorPosition:
    """A ``ResetCursorData``: an entry, whether the position is just after it
    (``isExcluded``), and a batch index inside it (-1 none)."""

    ledger_id: int
    entry_id: int
    partition: int = -1
    excluded: bool = False
    batch_index: int = -1

    @property
    def is_latest(self) -> bool:
        return self.ledger_id == _LATEST and self.entry_id == _LATEST

    @property
    def is_earliest(self) -> bool:
        return self.ledger_id < 0 or self.entry_id < 0

    @property
    def stream_id(self) -> bytes:
        """The entry's stream id, as the scripts take it. They work out the ids next to it
        in Lua numbers (doubles: lib.lua's ``split_id``), exact below 2**53, and every
        stored id is far below that; a larger ledger or entry id, which any long of a
        ``ResetCursorData`` may be, is a position past every stored entry, and so is the
        largest exact id, which stands for it."""
        top = MAX_LEDGER_ID - 1
        return b"%d-%d" % (min(self.ledger_id, top), min(self.entry_id, top))


class SubscriptionAdmin:
    """The subscription admin operations, for any topic of the fleet."""

    def __init__(
        self,
        lane: Lane,
        topics: Topics,
        partitioned_topics: PartitionedTopics,
        detach_lost: Callable[[], Awaitable[None]],
    ) -> None:
        """``detach_lost`` closes this gateway's consumers that an operation detached in
        Redis (other gateways find out at their next renewal or dispatch)."""
        self._lane = lane
        self._topics = topics
        self._partitioned = partitioned_topics
        self._detach_lost = detach_lost

    # -- topics --------------------------------------------------------------------------

    async def partitions(self, topic: TopicName) -> list[Topic]:
        """The partitions a name stands for: every partition of a partitioned topic, else
        the topic itself."""
        count = await self._partitioned.partitions(topic)
        if count > 0:
            return [self._topics.get(topic.partition(i)) for i in range(count)]
        return [self._topics.get(topic)]

    async def _single(self, topic: TopicName, operation: str) -> Topic:
        """A persistent non-partitioned topic or partition, for the operations Pulsar
        refuses on partitioned and non-persistent topics (HTTP 405)."""
        if not topic.persistent:
            raise NotAllowed(f"{operation} on a non-persistent topic is not allowed")
        if await self._partitioned.partitions(topic) > 0:
            raise NotAllowed(f"{operation} on a partitioned topic is not allowed")
        return self._topics.get(topic)

    async def exists(self, topic: TopicName) -> bool:
        """Whether the topic exists: a partitioned topic, or a listed topic or partition."""
        if await self._partitioned.partitions(topic) > 0:
            return True
        return await self._partitioned.exists(topic)

    async def _not_found(self, topic: TopicName, subscription: str) -> Exception:
        # Pulsar answers "Topic not found" when the topic is missing, else names the
        # subscription.
        if not await self.exists(topic):
            return TopicNotFound(f"Topic {topic} not found")
        return SubscriptionNotFound("Subscription not found")

    # -- listing, create, delete --------------------------------------------------------

    async def subscriptions(self, topic: TopicName) -> list[str]:
        """The topic's subscriptions (for a partitioned topic, the union over partitions).

        Raises:
            TopicNotFound: no such topic.
        """
        if not await self.exists(topic):
            raise TopicNotFound(f"Topic {topic} not found")
        replies = await asyncio.gather(*(p.subscriptions() for p in await self.partitions(topic)))
        return sorted({name for reply in replies for name in reply})

    async def create(self, topic: TopicName, subscription: str, position: CursorPosition) -> None:
        """Create a subscription at ``position`` (Pulsar admin createSubscription): latest,
        earliest or an entry (delivery starts at it). On a partitioned topic, on every
        partition; a conflict only when every partition has it already.

        Raises:
            NotAllowed: non-persistent topic (Pulsar refuses it: clients create those).
            SubscriptionConflict: the subscription exists.
        """
        if not topic.persistent:
            raise NotAllowed(
                "Create subscription on non-persistent topic can only be done through client"
            )
        if position.is_latest:
            start = start_position(InitialPosition.LATEST, None)
        elif position.is_earliest:
            start = start_position(InitialPosition.EARLIEST, None)
        else:
            start = start_position(
                InitialPosition.LATEST, MessageId(position.ledger_id, position.entry_id)
            )
        handles = await self.partitions(topic)
        for handle in handles:
            await handle.register()
        created = await asyncio.gather(
            *(
                cursors.subscription_create(
                    self._lane,
                    h.keys.subscription(subscription),
                    subscription=subscription,
                    position=start,
                )
                for h in handles
            )
        )
        if not any(created):
            raise SubscriptionConflict("Subscription already exists for topic")

    async def delete(self, topic: TopicName, subscription: str, force: bool) -> int:
        """Delete a subscription (Pulsar admin deleteSubscription); returns the consumers
        disconnected. Without ``force`` nothing is deleted while any partition has a
        connected consumer; with it, every consumer of the fleet is disconnected.

        Raises:
            SubscriptionBusy: consumers are connected and ``force`` is False.
            SubscriptionNotFound / TopicNotFound: no partition has the subscription.
        """
        handles = await self.partitions(topic)
        if not force:
            checks = await asyncio.gather(
                *(self._delete(h, subscription, False, True) for h in handles)
            )
            if any(r.status is DeleteStatus.BUSY for r in checks):
                raise SubscriptionBusy("Subscription has active connected consumers")
        results = await asyncio.gather(
            *(self._delete(h, subscription, force, False) for h in handles)
        )
        if any(r.status is DeleteStatus.BUSY for r in results):
            raise SubscriptionBusy("Subscription has active connected consumers")
        if all(r.status is DeleteStatus.NOT_FOUND for r in results):
            raise await self._not_found(topic, subscription)
        detached = sum(r.consumers for r in results if r.status is DeleteStatus.DELETED)
        if detached:
            # Close this gateway's consumers now; the others find their leases gone on
            # their next renewal or dispatch.
            await self._detach_lost()
        return detached

    def _delete(
        self, handle: Topic, subscription: str, force: bool, dry_run: bool
    ) -> asyncio.Future[DeleteReply]:
        return cursors.subscription_delete(
            self._lane,
            handle.keys.subscription(subscription),
            subscription=subscription,
            force=force,
            dry_run=dry_run,
        )

    # -- properties (PIP-105) ------------------------------------------------------------

    async def properties(self, topic: TopicName, subscription: str) -> dict[str, str]:
        """The subscription's properties (a partitioned topic's: every partition's, merged,
        as Pulsar's ``getSubscriptionProperties`` answers).

        Raises:
            SubscriptionNotFound / TopicNotFound.
        """
        return await self._properties(topic, subscription, None)

    async def update_properties(
        self, topic: TopicName, subscription: str, properties: dict[str, str]
    ) -> None:
        """Replace the subscription's properties (on every partition); Pulsar's
        ``updateSubscriptionProperties``.

        Raises:
            SubscriptionNotFound / TopicNotFound.
        """
        await self._properties(topic, subscription, properties)

    async def _properties(
        self, topic: TopicName, subscription: str, replace: dict[str, str] | None
    ) -> dict[str, str]:
        handles = await self.partitions(topic)
        replies = await asyncio.gather(
            *(
                cursors.subscription_properties(
                    self._lane,
                    h.keys.subscription(subscription),
                    subscription=subscription,
                    replace=replace,
                )
                for h in handles
            )
        )
        found = [reply for reply in replies if reply is not None]
        if not found:
            raise await self._not_found(topic, subscription)
        merged: dict[str, str] = {}
        for reply in found:
            merged.update(reply)
        return merged

    # -- cursor moves --------------------------------------------------------------------

    async def skip(self, topic: TopicName, subscription: str, entries: int) -> int:
        """Skip the first ``entries`` entries of the subscription's backlog (Pulsar counts
        entries: a client batch is one). Returns how many were skipped.

        Raises:
            NotAllowed: a partitioned or non-persistent topic (Pulsar 405).
            SubscriptionNotFound / TopicNotFound.
        """
        handle = await self._single(topic, "Skip messages")
        if entries < 0:
            raise ValueError("the number of messages to skip must be >= 0")
        return await self._skip(topic, handle, subscription, entries)

    async def clear_backlog(self, topic: TopicName, subscription: str) -> None:
        """Acknowledge the whole backlog (Pulsar skip_all / clearBacklog), on every
        partition of a partitioned topic.

        Raises:
            NotAllowed: non-persistent topic. SubscriptionNotFound / TopicNotFound.
        """
        if not topic.persistent:
            raise NotAllowed("Skip all messages on a non-persistent topic is not allowed")
        handles = await self.partitions(topic)
        await asyncio.gather(*(self._skip(topic, h, subscription, None) for h in handles))

    async def _skip(
        self, topic: TopicName, handle: Topic, subscription: str, entries: int | None
    ) -> int:
        skipped = await cursors.subscription_skip(
            self._lane,
            handle.keys.subscription(subscription),
            subscription=subscription,
            entries=entries,
        )
        if skipped is None:
            raise await self._not_found(topic, subscription)
        handle.notify()
        return skipped

    async def expire_by_age(self, topic: TopicName, subscription: str, seconds: int) -> bool:
        """Acknowledge every message older than ``seconds`` (Pulsar expireMessages), on
        every partition of a partitioned topic. Returns False when Pulsar would not issue
        the expiry on some partition (empty or almost caught-up backlog: HTTP 409).

        Raises:
            NotAllowed: non-persistent topic. SubscriptionNotFound / TopicNotFound.
        """
        if not topic.persistent:
            raise NotAllowed("Expire messages on a non-persistent topic is not allowed")
        handles = await self.partitions(topic)
        results = await asyncio.gather(
            *(self._expire_by_age(h, subscription, seconds) for h in handles)
        )
        if any(r is ExpireOutcome.NOT_FOUND for r in results):
            raise await self._not_found(topic, subscription)
        return all(r is ExpireOutcome.ISSUED for r in results)

    async def expire_all(self, topic: TopicName, seconds: int) -> list[tuple[TopicName, str]]:
        """:meth:`expire_by_age` on every subscription of the topic (Pulsar
        expireMessagesForAllSubscriptions); one script per subscription and partition.
        Returns the (partition, subscription) pairs where the expiry was not issued."""
        if not topic.persistent:
            raise NotAllowed("Expire messages on a non-persistent topic is not allowed")
        if not await self.exists(topic):
            raise TopicNotFound(f"Topic {topic} not found")
        targets: list[tuple[Topic, str]] = []
        for handle in await self.partitions(topic):
            for name in await handle.subscriptions():
                targets.append((handle, name))
        results = await asyncio.gather(
            *(self._expire_by_age(handle, name, seconds) for handle, name in targets)
        )
        return [
            (h.name, name)
            for (h, name), r in zip(targets, results, strict=True)
            if r is ExpireOutcome.NOT_ISSUED
        ]

    async def expire_at(
        self, topic: TopicName, subscription: str, position: CursorPosition
    ) -> bool:
        """Acknowledge everything up to ``position`` (Pulsar expireMessages with a
        ResetCursorData). Returns False when the position is after the last entry (409).

        Raises:
            NotAllowed: a partitioned or non-persistent topic (405).
            ValueError: the position's partition is not the topic's (Pulsar 412).
            SubscriptionNotFound / TopicNotFound.
        """
        handle = await self._single(topic, "Expire message at position")
        if position.partition != topic.partition_index:
            raise ValueError(
                "Invalid parameter for expire message by position, partition index of "
                "message position passed in doesn't match partition index for the topic."
            )
        if position.is_earliest:
            # before the first entry: nothing to expire, but the subscription must exist
            if not await topic_store.subscription_exists(self._lane, handle.keys, subscription):
                raise await self._not_found(topic, subscription)
            return True
        done = await cursors.subscription_expire_at(
            self._lane,
            handle.keys.subscription(subscription),
            subscription=subscription,
            position=position.stream_id,
            excluded=position.excluded,
            batch_index=position.batch_index,
        )
        handle.notify()
        if done is ExpireOutcome.NOT_FOUND:
            raise await self._not_found(topic, subscription)
        return done is ExpireOutcome.ISSUED

    async def _expire_by_age(self, handle: Topic, subscription: str, seconds: int) -> ExpireOutcome:
        done = await cursors.subscription_expire_by_age(
            self._lane,
            handle.keys.subscription(subscription),
            subscription=subscription,
            seconds=seconds,
        )
        handle.notify()
        return done

    async def reset_by_time(self, topic: TopicName, subscription: str, timestamp: int) -> int:
        """Reset the cursor to the first entry published at or after ``timestamp`` (ms), on
        every partition of a partitioned topic; every consumer of the subscription is
        disconnected (Pulsar resetCursor). Returns the consumers disconnected.

        Raises:
            NotAllowed: non-persistent topic. SubscriptionNotFound / TopicNotFound.
        """
        if not topic.persistent:
            raise NotAllowed("Reset cursor on a non-persistent topic is not allowed")
        # Delivery restarts after the newest entry published before the time (Pulsar
        # PersistentSubscription.resetCursor(timestamp) with PersistentMessageFinder and
        # MessageImpl.isEntryPublishedEarlierThan): a message published in that very
        # millisecond is delivered again.
        start = time_position(timestamp)
        handles = await self.partitions(topic)
        results = await asyncio.gather(*(self._reset_to(h, subscription, start) for h in handles))
        return await self._after_reset(topic, subscription, results)

    async def reset_to(self, topic: TopicName, subscription: str, position: CursorPosition) -> int:
        """Reset the cursor to ``position`` (Pulsar resetCursor with a ResetCursorData):
        delivery restarts at the entry (after it when excluded; inside a batch, at the
        batch index). Returns the consumers disconnected.

        Raises:
            NotAllowed: a partitioned or non-persistent topic (405).
            SubscriptionNotFound / TopicNotFound.
        """
        handle = await self._single(topic, "Reset-cursor at position")
        keys = handle.keys.subscription(subscription)
        if position.is_latest or position.is_earliest:
            initial = InitialPosition.LATEST if position.is_latest else InitialPosition.EARLIEST
            result = await self._reset_to(handle, subscription, start_position(initial, None))
        else:
            result = await cursors.subscription_reset_at(
                self._lane,
                keys,
                subscription=subscription,
                position=position.stream_id,
                excluded=position.excluded,
                batch_index=position.batch_index,
            )
            handle.notify()
        return await self._after_reset(topic, subscription, [result])

    async def _reset_to(
        self, handle: Topic, subscription: str, group_position: bytes
    ) -> int | None:
        detached = await cursors.subscription_reset_to(
            self._lane,
            handle.keys.subscription(subscription),
            subscription=subscription,
            group_position=group_position,
        )
        handle.notify()
        return detached

    async def _after_reset(
        self, topic: TopicName, subscription: str, results: list[int | None]
    ) -> int:
        if any(r is None for r in results):
            raise await self._not_found(topic, subscription)
        detached = sum(r for r in results if r is not None)
        if detached:
            # This gateway's consumers close now (the client re-subscribes and reads from
            # the new position); other gateways find the leases gone on their next
            # renewal or dispatch, as after a SEEK.
            await self._detach_lost()
        return detached

    # -- reading entries -----------------------------------------------------------------

    async def peek(self, topic: TopicName, subscription: str, position: int) -> StoredEntry:
        """The ``position``-th entry (1-based) of the subscription's backlog (Pulsar
        peekNthMessage: acknowledged entries are not counted, a batch is one entry).

        Raises:
            NotAllowed: a partitioned or non-persistent topic (405).
            MessageNotFound: the backlog is shorter. SubscriptionNotFound / TopicNotFound.
        """
        handle = await self._single(topic, "Peek messages")
        if position < 1:
            raise MessageNotFound("Message not found")
        reply = await cursors.subscription_peek(
            self._lane,
            handle.keys.subscription(subscription),
            subscription=subscription,
            position=position,
            partition=handle.partition,
        )
        if reply.status is PeekStatus.NOT_FOUND:
            raise await self._not_found(topic, subscription)
        if reply.entry is None:
            raise MessageNotFound("Message not found")
        return reply.entry

    async def peek_many(self, topic: TopicName, subscription: str, count: int) -> list[StoredEntry]:
        """The first ``count`` entries of the subscription's backlog (fewer when it is
        shorter), as :meth:`peek` at positions 1 to ``count`` would give them: one
        ``subscription_peek.lua`` call each, queued together so they share a pipeline.

        Raises:
            NotAllowed: a partitioned or non-persistent topic (405).
            SubscriptionNotFound / TopicNotFound.
        """
        handle = await self._single(topic, "Peek messages")
        keys = handle.keys.subscription(subscription)
        replies = await asyncio.gather(
            *(
                cursors.subscription_peek(
                    self._lane,
                    keys,
                    subscription=subscription,
                    position=position,
                    partition=handle.partition,
                )
                for position in range(1, count + 1)
            )
        )
        out = []
        for reply in replies:
            if reply.status is PeekStatus.NOT_FOUND:
                raise await self._not_found(topic, subscription)
            if reply.entry is None:
                break  # the backlog ends here
            out.append(reply.entry)
        return out

    async def entry(self, topic: TopicName, ledger_id: int, entry_id: int) -> StoredEntry:
        """The entry ``ledger_id:entry_id`` of the topic (Pulsar getMessageById).

        Raises:
            NotAllowed: a partitioned or non-persistent topic (405). MessageNotFound.
        """
        handle = await self._single(topic, "Get message by id")
        if ledger_id < 0 or entry_id < 0:
            raise MessageNotFound(f"Message not found: {ledger_id}:{entry_id}")
        sid = b"%d-%d" % (ledger_id, entry_id)
        found = await topic_store.entries(self._lane, handle.keys.stream, sid, sid)
        if not found:
            if not await self.exists(topic):
                raise TopicNotFound(f"Topic {topic} not found")
            raise MessageNotFound(f"Message not found: {ledger_id}:{entry_id}")
        return StoredEntry.parse(found[0][0], found[0][1], handle.partition)

    async def examine(self, topic: TopicName, initial: str, position: int) -> StoredEntry:
        """The ``position``-th entry from the earliest or the latest end of the topic
        (Pulsar examineMessage; a position below 1 reads as 1).

        Raises:
            NotAllowed: a partitioned or non-persistent topic (405). MessageNotFound.
        """
        handle = await self._single(topic, "Examine messages")
        position = max(position, 1)
        if initial == "earliest":
            found = await topic_store.entries(self._lane, handle.keys.stream, "-", "+", position)
        else:
            found = await topic_store.entries_reversed(
                self._lane, handle.keys.stream, "+", "-", position
            )
        if len(found) < position:
            if not await self.exists(topic):
                raise TopicNotFound(f"Topic {topic} not found")
            raise MessageNotFound("Message not found")
        return StoredEntry.parse(found[-1][0], found[-1][1], handle.partition)

    async def backlog_size_after(self, topic: TopicName, position: MessageId) -> int:
        """The estimated size (bytes) of the entries after ``position`` (Pulsar's
        ``getBacklogSizeByMessageId``): the entries counted ledger by ledger, times the
        average entry size.

        Raises:
            NotAllowed: a partitioned or non-persistent topic (405). TopicNotFound.
        """
        handle = await self._single(topic, "Get backlog size by message id")
        if not await self.exists(topic):
            raise TopicNotFound(f"Topic {topic} not found")
        if position.ledger_id >= MAX_LEDGER_ID or position.entry_id >= MAX_LEDGER_ID:
            return 0  # past every stored entry (ledger ids are Redis ms times)
        return await topics.backlog_size_after(self._lane, handle.keys, position.stream_id)

    async def terminate(self, topic: TopicName) -> MessageId:
        """Terminate the topic (Pulsar's admin ``terminate``): nothing more can be published
        to it. Returns its last message id (``(-1, -1)`` when it has none); terminating it
        again answers the same.

        Raises:
            NotAllowed: a partitioned or non-persistent topic (405). TopicNotFound.
        """
        handle = await self._single(topic, "Termination")
        if not await self.exists(topic):
            raise TopicNotFound(f"Topic {topic} not found")
        last = await topics.topic_terminate(self._lane, handle.keys)
        handle.terminated = True
        if last is None:
            return MessageId(-1, -1, handle.partition)
        return MessageId.from_stream_id(last, handle.partition)

    async def truncate(self, topic: TopicName) -> None:
        """Truncate the topic (Pulsar's ``truncateTopic``), every partition of a
        partitioned one: every subscription's cursor moves to the end, then every entry but
        the last is deleted (the last keeps the topic's ids going on).

        Raises:
            NotAllowed: a non-persistent topic. TopicNotFound.
        """
        if not topic.persistent:
            raise NotAllowed("Truncate a non-persistent topic is not allowed")
        if not await self.exists(topic):
            raise TopicNotFound(f"Topic {topic} not found")
        for handle in await self.partitions(topic):
            for subscription in await handle.subscriptions():
                await self._skip(topic, handle, subscription, None)
            await topics.topic_truncate(self._lane, handle.keys)

    async def message_id_at(self, topic: TopicName, timestamp: int) -> MessageId:
        """The id of the first entry published at or after ``timestamp`` (ms): Pulsar's
        ``getMessageIdByTimestamp``, by the producers' publish times as seek is.

        Raises:
            NotAllowed: a partitioned or non-persistent topic (405). TopicNotFound.
            MessageNotFound: no entry is published at or after that time.
        """
        handle = await self._single(topic, "Get message ID by timestamp")
        if not await self.exists(topic):
            raise TopicNotFound(f"Topic {topic} not found")
        found = await subscriptions.message_id_at_time(self._lane, handle.keys.stream, timestamp)
        if found is None:
            raise MessageNotFound("Message ID not found")
        return MessageId.from_stream_id(found, handle.partition)

    async def last_message_id(self, topic: TopicName) -> tuple[MessageId, int]:
        """The topic's last entry and its batch size (0 when not a batch); ``(-1, -1)``
        when the topic has no entry (Pulsar answers the current ledger with entry -1).

        Raises:
            NotAllowed: a partitioned or non-persistent topic (405). TopicNotFound.
        """
        handle = await self._single(topic, "GetLastMessageId")
        last = (await subscriptions.last_message_id(self._lane, handle.keys.stream)).last
        if last is None:
            if not await self.exists(topic):
                raise TopicNotFound(f"Topic {topic} not found")
            return MessageId(-1, -1, handle.partition), 0
        message_id = MessageId(
            last.message_id.ledger_id, last.message_id.entry_id, handle.partition
        )
        return message_id, last.num_messages if last.is_batch else 0
