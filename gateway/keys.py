"""The Redis key schema: the only module that knows how keys are spelled.

Strategy: every key of one topic partition carries the same Redis Cluster hash tag, so each
Lua script's ``KEYS`` stay in one slot. The tag is the full topic name with ``%``, ``{`` and
``}`` percent-escaped: any legal topic name (which may contain ``{``, ``}``, ``:`` or ``/``)
gives a tag that Redis reads whole, and the tag stays human-readable in ``redis-cli``.
Variable parts (subscription names) always come last, so two different names never spell
the same key. Namespace-wide keys carry the namespace as their tag (``{tenant/ns}``: a
namespace name has no braces), so a script can change a namespace's topic list and its
partitioned-topic metadata together.

======================================  ======  ============================================
key (``P`` = prefix, ``{T}`` = tag)     type    contents; written by
======================================  ======  ============================================
``P:{T}:stream``                        stream  one entry per Pulsar entry (fields below);
                                                consumer group per subscription.
                                                ``XADD`` by the producer path; groups by
                                                ``subscribe.lua`` / ``unsubscribe.lua``
``P:{T}:subs``                          hash    subscription name -> subscription type
                                                (0 Exclusive, 1 Shared, 2 Failover,
                                                3 Key_Shared); ``subscribe.lua``,
                                                ``unsubscribe.lua``; non-persistent
                                                subscriptions while they have consumers
                                                (``np_subscribe.lua``, ``np_release.lua``)
``P:{T}:consumers:<sub>``               zset    consumer uid -> lease expiry (ms since
                                                epoch); ``subscribe.lua`` adds, gateways
                                                renew (``renew_leases.lua``, ``dispatch.lua``),
                                                ``release_consumer.lua``, ``reap_consumers.lua``
                                                and ``unsubscribe.lua`` remove
``P:{T}:consumer-info:<sub>``           hash    consumer uid -> "<priority level> <join seq>
                                                <durable 1|0> <consumer name>" (Failover
                                                picks the active consumer from it); same
                                                writers
``P:{T}:ks-ranges:<sub>``               hash    Key_Shared: consumer uid -> its hash ranges
                                                "start-end,..." (inclusive, 0..65535); field
                                                ``~mode`` = 0 AUTO_SPLIT / 1 STICKY;
                                                ``subscribe.lua`` and every consumer release
``P:{T}:ks-joined:<sub>``               hash    Key_Shared: uid of a recently joined consumer
                                                -> the cursor when it joined (ordering guard);
                                                ``subscribe.lua``, dispatch clears it
``P:{T}:acksets:<sub>``                 hash    stream id of a partly acknowledged batch ->
                                                its unacked indexes as "0"/"1" chars ("1" =
                                                not acked); ``ack_batch_index.lua``, cleared
                                                by acks, cumulative acks, seek
``P:{T}:delayed:<sub>``                 zset    Shared/Key_Shared: the subscription's
                                                scheduled messages, stream id packed as two
                                                big-endian uint64 (ms, seq: equal times sort
                                                in stream order) -> deliver-at (ms since
                                                epoch); the entries are pending
                                                at the reserved consumer ``~delayed``.
                                                Dispatch adds (reading an entry with a
                                                future ``d``) and promotes due ones; the
                                                admin scheduled-message scripts cancel and
                                                reschedule; seek, unsubscribe and a switch
                                                to Exclusive/Failover clear it
``P:{T}:notify``                        pubsub  channel, not a key: "new work on this topic"
                                                (``PUBLISH`` after appends and redeliveries)
``P:{T}:maintenance``                   string  retention/TTL round lock: the gateway id
                                                that owns this topic's round; PX = the
                                                round interval; ``topic_maintenance.lua``
``P:{T}:compacted``                     stream  the compacted view (same ids as the topic;
                                                fields ``m``, ``n``, ``a`` below); renamed
                                                into place by ``compaction.lua`` commit
``P:{T}:compacting``                    stream  the view being built; written by the
                                                compactor (``XADD`` with explicit ids),
                                                deleted by ``compaction.lua`` begin/fail
``P:{T}:compaction``                    hash    compaction state: ``status``,
                                                ``lastError``, ``horizon`` (last id the view
                                                covers), ``run`` (token of the running
                                                compactor), ``lease`` (ms);
                                                ``compaction.lua``
``P:{T}:np``                            pubsub  channel, not a key: a non-persistent
                                                topic's messages (entry blob + batch size);
                                                :mod:`gateway.non_persistent`
``P:{T}:np-consumers:<sub>``            zset    non-persistent Shared subscription: consumer
                                                uid -> lease expiry (ms, Redis clock);
                                                :mod:`gateway.non_persistent`
``P:ns:{<tenant/ns>}:topics``           set     full names of the namespace's topics and
                                                partitions (GET_TOPICS_OF_NAMESPACE, admin
                                                getList); every producer/subscribe, admin
                                                create; admin delete removes
``P:ns:{<tenant/ns>}:partitioned``      hash    full partitioned topic name -> partition
                                                count; admin API
                                                (:mod:`gateway.partitioned_topics`)
``P:{T}:producers``                     zset    producer name -> lease expiry (ms, Redis
                                                clock) of the topic's connected producers,
                                                fleet-wide; ``add_producer.lua`` adds,
                                                ``renew_producer_leases.lua`` renews,
                                                ``release_producer.lua`` removes, expired
                                                ones are reaped by ``add_producer.lua``
``P:{T}:producer-owners``               hash    producer name -> ``<access mode>:<epoch>:
                                                <owner uid>``; same writers
``P:{T}:producer-waiters``              zset    uid of a WaitForExclusive producer queued
                                                for the topic -> lease expiry; same writers
``P:{T}:topic-epoch``                   string  Pulsar's topic epoch, bumped when an
                                                exclusive producer takes the topic;
                                                ``add_producer.lua``; read by
                                                ``publish_checked.lua`` (fencing)
``P:{T}:producer-events``               pubsub  channel: "the topic's producers changed"
                                                (released, fenced, superseded); gateways
                                                with producers on the topic listen
``P:{T}:last-sequence-ids``             hash    producer name -> highest sequence id
                                                stored (deduplication);
                                                ``publish_checked.lua``
``P:{B}:schemas``                       list    schema versions of base topic ``B`` (a
                                                partitioned topic's partitions share it):
                                                index = version, item = JSON
                                                ``{"type","name","data" (base64),
                                                "properties"}``; ``register_schema.lua``
``P:policies:ns:<tenant/ns>``           hash    namespace policy name -> JSON value;
                                                :mod:`gateway.policies` (admin API)
``P:policies:topic:<topic>``            hash    topic policy name -> JSON value (the
                                                partitioned topic's name for partitions);
                                                :mod:`gateway.policies`
``P:policies:changed``                  pubsub  channel: "some policy changed" (cache
                                                invalidation); :mod:`gateway.policies`
``P:tenants``                            hash    tenant name -> TenantInfo JSON
                                                ``{"adminRoles": [...], "allowedClusters":
                                                [...]}``; :mod:`gateway.tenants` (admin API)
``P:tenant-namespaces:<tenant>``        set     the tenant's namespaces ("tenant/ns");
                                                :mod:`gateway.tenants` (admin create,
                                                delete; topic registration adds)
``P:gateways``                           zset    gateway id -> lease expiry (ms, Redis clock)
                                                of every live gateway; each renews its own
                                                (``gateway_heartbeat.lua``); topic metrics
                                                ownership (:mod:`gateway.fleet`)
``P:permissions:ns:<tenant/ns>``        hash    role -> JSON list of actions ("produce",
                                                "consume"); :mod:`gateway.authorization`
``P:{T}:gateway-stats``                 hash    gateway id -> JSON of that gateway's rates
                                                and clients on the topic, rewritten every
                                                few seconds, stale ones ignored (fleet-wide
                                                topic stats); :mod:`gateway.topic_stats`
======================================  ======  ============================================

Stream entry fields (see :mod:`gateway.producer`): ``m`` the stored blob (magic, CRC32C,
metadata, payload, exactly as the producer sent it), ``n`` the number of messages when the
entry is a client batch of more than one (absent otherwise), ``h`` the Key_Shared sticky-key
hash (0..65535) when the entry has a key, ``u`` ``"<chunk id>:<uuid>"`` for a chunk of a
chunked message, ``d`` the deliver-at time (ms since epoch) of a delayed message, after the
topic's delayed-delivery policy (:mod:`gateway.delayed_delivery`). Compacted-view entries
(``P:{T}:compacted``) may carry ``a``: the ack set of a client batch some of whose messages
were compacted out, one "0"/"1" char per message ("1" = delivered), absent when the whole
entry is kept.

Within a consumer group, the pending-entries list is the subscription's unacked set. The
reserved consumer name :data:`PARKED_CONSUMER` owns entries waiting for redelivery (nacked,
or held by a consumer that left); dispatch hands them out first, in id order. On Key_Shared
subscriptions, reserved consumers ``~w:<uid>`` hold entries read for consumer ``<uid>`` but
not yet sent to it, and ``~w:~none`` entries whose hash no consumer covers (STICKY gaps).
On Shared and Key_Shared subscriptions the reserved consumer :data:`DELAYED_CONSUMER` owns
the scheduled messages indexed in ``P:{T}:delayed:<sub>`` until they are due.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.topic_name import TopicName

__all__ = [
    "DELAYED_CONSUMER",
    "PARKED_CONSUMER",
    "KeySchema",
    "TopicKeys",
    "hash_tag",
]

#: Consumer name in every consumer group that holds entries awaiting redelivery. Consumer
#: uids are ``<gateway id>-<n>``, so they never collide with it.
PARKED_CONSUMER = b"~parked"
#: Consumer name that holds a Shared/Key_Shared subscription's scheduled (delayed) messages
#: until they are due; spelled in ``lua/lib.lua`` as ``DELAYED``.
DELAYED_CONSUMER = b"~delayed"


def hash_tag(topic: str) -> str:
    """The Redis Cluster hash tag of ``topic``, braces included."""
    escaped = topic.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")
    return "{" + escaped + "}"


@dataclass(frozen=True, slots=True)
class TopicKeys:
    """Every key of one topic (partition), built once and kept by the topic object."""

    prefix: str
    topic: str

    @property
    def _base(self) -> str:
        return f"{self.prefix}:{hash_tag(self.topic)}"

    @property
    def stream(self) -> str:
        return f"{self._base}:stream"

    @property
    def subscriptions(self) -> str:
        return f"{self._base}:subs"

    @property
    def notify_channel(self) -> str:
        return f"{self._base}:notify"

    def consumers(self, subscription: str) -> str:
        return f"{self._base}:consumers:{subscription}"

    def consumer_info(self, subscription: str) -> str:
        return f"{self._base}:consumer-info:{subscription}"

    def key_shared_ranges(self, subscription: str) -> str:
        return f"{self._base}:ks-ranges:{subscription}"

    def key_shared_joined(self, subscription: str) -> str:
        return f"{self._base}:ks-joined:{subscription}"

    def ack_sets(self, subscription: str) -> str:
        return f"{self._base}:acksets:{subscription}"

    def delayed(self, subscription: str) -> str:
        return f"{self._base}:delayed:{subscription}"

    def subscription_keys(self, subscription: str) -> list[str]:
        """Every key of one subscription, in the order of ``lua/lib.lua``'s ``sub_keys()``
        (the KEYS of every subscription script): stream, subscriptions, consumers, consumer
        info, Key_Shared ranges, Key_Shared join positions, ack sets, the non-persistent
        consumers zset, then the scheduled-message index. Topic deletion deletes them all."""
        return [
            self.stream,
            self.subscriptions,
            self.consumers(subscription),
            self.consumer_info(subscription),
            self.key_shared_ranges(subscription),
            self.key_shared_joined(subscription),
            self.ack_sets(subscription),
            self.non_persistent_consumers(subscription),
            self.delayed(subscription),
        ]

    @property
    def non_persistent_channel(self) -> str:
        return f"{self._base}:np"

    def non_persistent_consumers(self, subscription: str) -> str:
        return f"{self._base}:np-consumers:{subscription}"

    @property
    def producers(self) -> str:
        return f"{self._base}:producers"

    @property
    def producer_owners(self) -> str:
        return f"{self._base}:producer-owners"

    @property
    def producer_waiters(self) -> str:
        return f"{self._base}:producer-waiters"

    @property
    def topic_epoch(self) -> str:
        return f"{self._base}:topic-epoch"

    @property
    def producer_channel(self) -> str:
        return f"{self._base}:producer-events"

    @property
    def last_sequence_ids(self) -> str:
        return f"{self._base}:last-sequence-ids"

    @property
    def schemas(self) -> str:
        """Only meaningful on a base (non-partition) topic's keys."""
        return f"{self._base}:schemas"

    # -- topic lifecycle (docs/lifecycle.md) -------------------------------------------

    @property
    def maintenance_lock(self) -> str:
        return f"{self._base}:maintenance"

    @property
    def compacted(self) -> str:
        return f"{self._base}:compacted"

    @property
    def compacting(self) -> str:
        return f"{self._base}:compacting"

    @property
    def compaction(self) -> str:
        return f"{self._base}:compaction"

    @property
    def gateway_stats(self) -> str:
        return f"{self._base}:gateway-stats"


@dataclass(frozen=True, slots=True)
class KeySchema:
    """Key builder bound to one prefix (``--key-prefix``, default ``pgw``)."""

    prefix: str = "pgw"

    def topic(self, topic: TopicName | str) -> TopicKeys:
        return TopicKeys(self.prefix, str(topic))

    def namespace_topics(self, namespace: str) -> str:
        return f"{self.prefix}:ns:{{{namespace}}}:topics"

    def namespace_partitioned(self, namespace: str) -> str:
        return f"{self.prefix}:ns:{{{namespace}}}:partitioned"

    def namespace_topics_pattern(self) -> str:
        """``SCAN MATCH`` glob of every namespace topic set (the prefix glob-escaped)."""
        prefix = "".join("\\" + ch if ch in "*?[]\\" else ch for ch in self.prefix)
        return f"{prefix}:ns:*:topics"

    def namespace_policies(self, namespace: str) -> str:
        return f"{self.prefix}:policies:ns:{namespace}"

    def topic_policies(self, topic: TopicName | str) -> str:
        return f"{self.prefix}:policies:topic:{topic}"

    @property
    def policies_channel(self) -> str:
        return f"{self.prefix}:policies:changed"

    # -- tenants, namespaces, authorization (admin API) --------------------------------

    @property
    def tenants(self) -> str:
        return f"{self.prefix}:tenants"

    def tenant_namespaces(self, tenant: str) -> str:
        return f"{self.prefix}:tenant-namespaces:{tenant}"

    def namespace_permissions(self, namespace: str) -> str:
        return f"{self.prefix}:permissions:ns:{namespace}"

    @property
    def gateways(self) -> str:
        return f"{self.prefix}:gateways"
