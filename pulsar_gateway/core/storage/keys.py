"""The Redis key schema: the only module that knows how keys are spelled.

Strategy: every key of one topic partition carries the same Redis Cluster hash tag, so each
Lua script's ``KEYS`` stay in one slot. The tag is the full topic name with ``%``, ``{`` and
``}`` percent-escaped: any legal topic name (which may contain ``{``, ``}``, ``:`` or ``/``)
gives a tag that Redis reads whole, and the tag stays human-readable in ``redis-cli``.
Variable parts (subscription names) always come last, so two different names never spell
the same key. Namespace-wide keys carry the namespace as their tag (``{tenant/ns}``: a
namespace name has no braces), so a script can change a namespace's topic list and its
partitioned-topic metadata together.

Every key, its Redis type, contents and writers are listed in :data:`KEY_SPECS` (rendered
into ``docs/architecture.md``; a test keeps the two, and the builders below, in step).
What a stream entry holds is :mod:`pulsar_gateway.core.model.entry`'s.

Within a consumer group the pending-entries list is the subscription's unacked set, and a
few consumer names are reserved (they start with ``~``; consumer uids are ``<gateway
id>-<n>``): :data:`PARKED_CONSUMER` owns entries waiting for redelivery (nacked, or held by a
consumer that left), dispatch hands them out first, in id order; on Key_Shared subscriptions
``~w:<uid>`` holds entries read for consumer ``<uid>`` and not sent yet, and ``~w:~none``
entries whose hash no consumer covers (STICKY gaps); on Shared and Key_Shared subscriptions
:data:`DELAYED_CONSUMER` owns the scheduled messages until they are due. The Lua scripts get
these names from Python (:mod:`pulsar_gateway.core.storage.scripts`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from pulsar_gateway.core.model.topic_name import TopicName

__all__ = [
    "DELAYED_CONSUMER",
    "KEY_SHARED_MODE_FIELD",
    "KEY_SPECS",
    "LAST_ACTIVE_FIELD",
    "NO_OWNER_CONSUMER",
    "PARKED_CONSUMER",
    "RESERVED",
    "RESERVED_MARK",
    "WAITING_CONSUMER_PREFIX",
    "KeySchema",
    "KeySpec",
    "SubscriptionKeys",
    "TopicKeys",
    "hash_tag",
    "render_key_table",
]

# Reserved consumer names in a subscription's consumer group. Consumer uids are
# ``<gateway id>-<n>``, so they never collide with these.

#: Holds entries awaiting redelivery (nacked, or held by a consumer that left).
PARKED_CONSUMER: Final = b"~parked"
#: Holds a Shared/Key_Shared subscription's scheduled (delayed) messages until they are due.
DELAYED_CONSUMER: Final = b"~delayed"
#: Key_Shared: ``~w:<uid>`` holds entries read for consumer ``<uid>`` not yet sent to it.
WAITING_CONSUMER_PREFIX: Final = b"~w:"
#: Key_Shared: holds entries whose hash no consumer covers (STICKY gaps).
NO_OWNER_CONSUMER: Final = b"~w:~none"
#: Field of the ``ks-ranges`` hash holding the Key_Shared mode (0 AUTO_SPLIT, 1 STICKY).
KEY_SHARED_MODE_FIELD: Final = b"~mode"
#: Field of the ``consumer-info`` hash holding when the subscription was last seen with a
#: consumer (ms, Redis clock; ``inactive_subscriptions.lua``): every deletion of the
#: subscription deletes the hash, so a subscription made again starts afresh.
LAST_ACTIVE_FIELD: Final = b"~active"

#: Every reserved name starts with it (a consumer uid never does).
RESERVED_MARK: Final = b"~"

#: The reserved names by the name the Lua prelude gives them (``scripts/__init__.py``).
RESERVED: Final[Mapping[str, bytes]] = {
    "RESERVED_MARK": RESERVED_MARK,
    "PARKED": PARKED_CONSUMER,
    "DELAYED": DELAYED_CONSUMER,
    "WAITING": WAITING_CONSUMER_PREFIX,
    "NO_OWNER": NO_OWNER_CONSUMER,
    "KS_MODE": KEY_SHARED_MODE_FIELD,
    "LAST_ACTIVE": LAST_ACTIVE_FIELD,
}


@dataclass(frozen=True, slots=True)
class KeySpec:
    """One key (or pub/sub channel) of the schema.

    ``key`` spells it with ``P`` for the prefix, ``{T}`` for a topic partition's hash tag,
    ``{B}`` for a partitioned topic's base name's and ``<...>`` for variable parts;
    ``builder`` names the method that builds it.
    """

    key: str
    type: str
    contents: str
    writers: str
    builder: str


#: Every key and channel, in the order of ``docs/architecture.md``'s table.
KEY_SPECS: Final[tuple[KeySpec, ...]] = (
    KeySpec(
        "P:{T}:stream",
        "stream",
        "one entry per Pulsar entry (fields: ``model/entry.py``); one consumer group per "
        "subscription: its pending entries are the unacked set, its last-delivered id the "
        "cursor",
        "``append_entries.lua`` (every append: ids ``<ledger>-<entry>``); groups by "
        "``subscribe.lua``, ``unsubscribe.lua``, ``seek.lua``; ``XACK`` by consumers; moves "
        "by the dispatch, redeliver, release and reap scripts; a lone consumer's new entries "
        "by a native ``XREADGROUP`` and ``settle_read.lua``",
        "TopicKeys.stream",
    ),
    KeySpec(
        "P:{T}:subs",
        "hash",
        "subscription name -> type (0 Exclusive, 1 Shared, 2 Failover, 3 Key_Shared); a "
        "non-persistent subscription while it has consumers",
        "``subscribe.lua``, ``unsubscribe.lua``, ``subscription_create.lua``, "
        "``subscription_delete.lua``, ``np_subscribe.lua``, ``np_release.lua``",
        "TopicKeys.subscriptions",
    ),
    KeySpec(
        "P:{T}:consumers:<sub>",
        "zset",
        "consumer uid -> lease expiry (ms, Redis clock)",
        "added by ``subscribe.lua``; renewed by ``renew_leases.lua`` and the dispatch "
        "scripts; removed by ``release_consumer.lua``, ``reap_consumers.lua``, "
        "``unsubscribe.lua``, ``seek.lua``",
        "TopicKeys.consumers",
    ),
    KeySpec(
        "P:{T}:consumer-info:<sub>",
        "hash",
        "consumer uid -> ``<priority level> <join time us> <durable 1|0> <consumer name>`` "
        "(Failover picks the active consumer from it); field ``~active``: when the "
        "subscription was last seen with a consumer (ms, Redis clock: subscription expiry)",
        "as the consumers zset; ``~active`` by ``inactive_subscriptions.lua``, and by every "
        "consumer release once it is there",
        "TopicKeys.consumer_info",
    ),
    KeySpec(
        "P:{T}:ks-ranges:<sub>",
        "hash",
        'Key_Shared: consumer uid -> its hash ranges "start-end,..." (inclusive, 0..65535); '
        "field ``~mode``: 0 AUTO_SPLIT, 1 STICKY",
        "``subscribe.lua``; every consumer release (release, reap, unsubscribe, seek)",
        "TopicKeys.key_shared_ranges",
    ),
    KeySpec(
        "P:{T}:ks-joined:<sub>",
        "hash",
        "Key_Shared: uid of a recently joined consumer -> the cursor when it joined "
        "(ordering guard)",
        "``subscribe.lua``; ``dispatch_key_shared.lua`` clears it once everything before "
        "is acknowledged",
        "TopicKeys.key_shared_joined",
    ),
    KeySpec(
        "P:{T}:acksets:<sub>",
        "hash",
        'stream id of a partly acknowledged batch -> its unacked messages, "0"/"1" per '
        'message ("1" = not acknowledged)',
        "``ack_batch_index.lua``; cleared by whole acks, ``cumulative_ack.lua``, seeks and "
        "cursor resets",
        "TopicKeys.ack_sets",
    ),
    KeySpec(
        "P:{T}:delayed:<sub>",
        "zset",
        "Shared/Key_Shared: scheduled messages, member = stream id packed as two big-endian "
        "uint64 (ms, seq), score = deliver-at (ms); the entries are pending at ``~delayed``",
        "the dispatch scripts and ``settle_read.lua`` (schedule when read, remove when due); "
        "``scheduled_cancel.lua``, ``scheduled_reschedule.lua``; deleted by seeks, "
        "unsubscribe and a switch to Exclusive/Failover",
        "TopicKeys.delayed",
    ),
    KeySpec(
        "P:{T}:sub-props:<sub>",
        "hash",
        "a subscription's properties (PIP-105): name -> value",
        "``subscription_properties.lua`` (admin update); deleted with the subscription",
        "TopicKeys.subscription_properties",
    ),
    KeySpec(
        "P:{T}:np-consumers:<sub>",
        "zset",
        "``<type>|<consumer name>|<uid>`` of a non-persistent subscription's consumers -> "
        "lease expiry (ms, Redis clock)",
        "``np_subscribe.lua``, ``np_refresh.lua``, ``np_release.lua``",
        "TopicKeys.non_persistent_consumers",
    ),
    KeySpec(
        "P:{T}:producers",
        "zset",
        "producer name -> lease expiry (ms, Redis clock) of the topic's connected producers",
        "``add_producer.lua`` (adds, reaps expired), ``renew_producer_leases.lua``, "
        "``release_producer.lua``",
        "TopicKeys.producers",
    ),
    KeySpec(
        "P:{T}:producer-owners",
        "hash",
        "producer name -> ``<access mode>:<producer epoch>:<owner uid>``",
        "as the producers zset",
        "TopicKeys.producer_owners",
    ),
    KeySpec(
        "P:{T}:producer-waiters",
        "zset",
        "uid of a queued WaitForExclusive producer -> lease expiry",
        "as the producers zset",
        "TopicKeys.producer_waiters",
    ),
    KeySpec(
        "P:{T}:topic-epoch",
        "string",
        "Pulsar's topic epoch, bumped when an exclusive producer takes the topic",
        "``add_producer.lua``; read by ``append_entries.lua`` (fencing)",
        "TopicKeys.topic_epoch",
    ),
    KeySpec(
        "P:{T}:last-sequence-ids",
        "hash",
        "producer name -> highest stored sequence id (deduplication)",
        "``append_entries.lua``; read by ``add_producer.lua``",
        "TopicKeys.last_sequence_ids",
    ),
    KeySpec(
        "P:{T}:ledger",
        "hash",
        "the current ledger (``model/ledger.py``): ``id`` (its ledger id, the ms Redis "
        "opened it), ``e`` entries and ``b`` blob bytes in it, ``t`` the last broker "
        "timestamp stored; ``x`` once the topic is terminated: its last entry's id (``-`` "
        "when it had none); ``a`` when the topic was last seen active (ms: inactive topic "
        "deletion)",
        "``append_entries.lua`` (every append; a new ``id`` when the ledger is full; nothing "
        "once ``x`` is set); ``x`` by ``topic_terminate.lua``; ``a`` by "
        "``inactive_topic.lua``; read by ``internal_stats.lua`` and ``topic_counts.lua``",
        "TopicKeys.ledger",
    ),
    KeySpec(
        "P:{B}:schemas",
        "list",
        "schema versions of a base topic (shared by its partitions), index = version, item "
        '= JSON {"type", "name", "data" (base64), "properties", "timestamp" (ms)}; a '
        'deletion marker is an item with ``"deleted": true`` (it takes a version; the '
        "versions before the latest one no longer count)",
        "``register_schema.lua`` (compare and append); ``RPUSH`` of a deletion marker, "
        "``DEL`` for a forced deletion (``schema_registry.py``)",
        "TopicKeys.schemas",
    ),
    KeySpec(
        "P:{T}:maintenance",
        "string",
        "the gateway id owning this topic's retention/TTL round; PX = the round interval",
        "``topic_maintenance.lua``",
        "TopicKeys.maintenance_lock",
    ),
    KeySpec(
        "P:{T}:compaction",
        "hash",
        "compaction state: ``status``, ``lastError``, ``horizon`` (last id the view "
        "covers), ``run`` (token of the running compactor), ``lease`` (ms)",
        "``compaction.lua`` (begin, renew, commit, fail)",
        "TopicKeys.compaction",
    ),
    KeySpec(
        "P:{T}:compacted",
        "stream",
        "the compacted view: the topic's ids, fields ``m``, ``n`` and, for a partly "
        "compacted batch, ``a``",
        "renamed into place by ``compaction.lua`` commit",
        "TopicKeys.compacted",
    ),
    KeySpec(
        "P:{T}:compacting",
        "stream",
        "the compacted view being built",
        "the compactor (``XADD`` with explicit ids); deleted by ``compaction.lua``",
        "TopicKeys.compacting",
    ),
    KeySpec(
        "P:{T}:gateway-stats",
        "hash",
        "gateway id -> JSON report of that gateway's rates, counters, producers and "
        "consumers on the topic; expires after three stats intervals",
        "every gateway's rate reporter (``fleet/rates.py``); read by ``topic_stats.lua``",
        "TopicKeys.gateway_stats",
    ),
    KeySpec(
        "P:{T}:notify",
        "channel",
        '"new work on this topic" (the message: the publishing gateway\'s hint token, so '
        "that gateway drops its own)",
        "the lane after appends (once per topic per pipeline), redeliveries, releases, "
        "membership changes, seeks and cursor moves",
        "TopicKeys.notify_channel",
    ),
    KeySpec(
        "P:{T}:np",
        "channel",
        "a non-persistent topic's messages (ids, message count, the stored blob)",
        "non-persistent producers (``producing/non_persistent.py``)",
        "TopicKeys.non_persistent_channel",
    ),
    KeySpec(
        "P:{T}:producer-events",
        "channel",
        '"the topic\'s producers changed" (released with waiters, fenced, superseded)',
        "the producer registry after those scripts",
        "TopicKeys.producer_channel",
    ),
    KeySpec(
        "P:ns:{<tenant/ns>}:topics",
        "set",
        "full names of the namespace's topics and partitions",
        "every producer and subscribe (``topic_register.lua``: known, or created when the "
        "auto-creation rules and ``maxTopicsPerNamespace`` allow); ``partitioned_metadata.lua``; "
        "``SREM`` by an admin delete",
        "KeySchema.namespace_topics",
    ),
    KeySpec(
        "P:ns:{<tenant/ns>}:partitioned",
        "hash",
        "full partitioned topic name -> partition count",
        "``partitioned_metadata.lua``",
        "KeySchema.namespace_partitioned",
    ),
    KeySpec(
        "P:policies:ns:<tenant/ns>",
        "hash",
        "namespace policy name -> JSON value (``deduplication``, ``messageTTL``, "
        "``retention``, ``delayedDelivery``, ``backlogQuota`` ...)",
        "``policies/policies.py`` (admin API); ``policy_cas.lua`` for ``backlogQuota``",
        "KeySchema.namespace_policies",
    ),
    KeySpec(
        "P:policies:topic:<topic>",
        "hash",
        "topic policy name -> JSON value (partitions use their partitioned topic's)",
        "as the namespace policies",
        "KeySchema.topic_policies",
    ),
    KeySpec(
        "P:policies:changed",
        "channel",
        '"some policy changed": every gateway drops its policy and permission caches',
        "policy, permission and namespace writes",
        "KeySchema.policies_channel",
    ),
    KeySpec(
        "P:unloads",
        "stream",
        "one entry per unload (field ``scope``: a topic, partitioned topic or "
        '"tenant/namespace"), capped near 1000 entries',
        "``admin/unload.py`` (admin unload of a topic, namespace or bundle); every gateway "
        "reads the entries after the last one it applied",
        "KeySchema.unloads",
    ),
    KeySpec(
        "P:unloads:added",
        "channel",
        '"an unload was requested": every gateway reads ``P:unloads``',
        "``admin/unload.py``",
        "KeySchema.unloads_channel",
    ),
    KeySpec(
        "P:tenants",
        "hash",
        'tenant name -> TenantInfo JSON {"adminRoles": [...], "allowedClusters": [...]}',
        "``topics/tenants.py`` (admin create ``HSETNX``, start-up defaults); "
        "``tenant_update.lua``; ``HDEL`` on delete",
        "KeySchema.tenants",
    ),
    KeySpec(
        "P:tenant-namespaces:<tenant>",
        "set",
        'the tenant\'s namespaces ("tenant/ns", or a legacy "tenant/cluster/ns")',
        "``topics/tenants.py`` (admin create, start-up defaults; every attach checks it); "
        "``SREM``/``DEL`` on delete",
        "KeySchema.tenant_namespaces",
    ),
    KeySpec(
        "P:permissions:ns:<tenant/ns>",
        "hash",
        'role -> JSON list of actions (["consume", "produce"])',
        "``policies/authorization.py`` (admin grant ``HSET``, revoke ``HDEL``)",
        "KeySchema.namespace_permissions",
    ),
    KeySpec(
        "P:permissions:topics:<tenant/ns>",
        "hash",
        "topic (a partitioned topic's name for its partitions) -> JSON object role -> list "
        "of actions: grants on single topics",
        "``policies/authorization.py`` (admin topic grant and revoke)",
        "KeySchema.topic_permissions",
    ),
    KeySpec(
        "P:permissions:subscriptions:<tenant/ns>",
        "hash",
        'subscription -> JSON list of the roles allowed to consume it (["app"]; an empty '
        "list restricts nothing): Pulsar's ``auth_policies.subscription_auth_roles``",
        "``policies/authorization.py`` (admin subscription grant replaces the list, revoke "
        "removes one role)",
        "KeySchema.subscription_permissions",
    ),
    KeySpec(
        "P:gateways",
        "zset",
        "gateway id -> lease expiry (ms, Redis clock) of every live gateway",
        "``gateway_heartbeat.lua`` (renew, leave; drops expired members)",
        "KeySchema.gateways",
    ),
    KeySpec(
        "P:gateways:info",
        "hash",
        "gateway id -> JSON of the gateway's broker id (advertised ``host:httpPort``), URLs, "
        "start time (ms), host name and pid: the admin API's brokers list, leader and fleet "
        "overview",
        "``fleet/membership.py`` (``HSET`` with every lease renewal once the ports are "
        "bound; ``HDEL`` on leave and of gateways whose lease expired)",
        "KeySchema.gateway_info",
    ),
    KeySpec(
        "P:gateways:stats",
        "hash",
        "gateway id -> JSON summary of that gateway (client connections, producers, "
        "consumers, topics served, message rates and throughputs in and out, report time "
        '``"t"`` in ms): the admin API\'s fleet overview',
        "every gateway's rate reporter (``fleet/rates.py``, ``HSET`` with every report; "
        "``HDEL`` at shutdown); ``fleet/membership.py`` drops the entries of gateways whose "
        "lease expired",
        "KeySchema.gateway_stats",
    ),
)


def render_key_table() -> str:
    """:data:`KEY_SPECS` as the Markdown table ``docs/architecture.md`` carries."""

    def cell(text: str) -> str:
        return text.replace("``", "`").replace("|", "\\|")

    lines = ["| key | type | contents | written by |", "|---|---|---|---|"]
    for spec in KEY_SPECS:
        lines.append(
            f"| `{cell(spec.key)}` | {spec.type} | {cell(spec.contents)} | {cell(spec.writers)} |"
        )
    return "\n".join(lines) + "\n"


def hash_tag(topic: str) -> str:
    """The Redis Cluster hash tag of ``topic``, braces included."""
    escaped = topic.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")
    return "{" + escaped + "}"


@dataclass(frozen=True, slots=True)
class TopicKeys:
    """Every key of one topic (partition), built once and kept by the topic object."""

    prefix: str
    topic: str
    #: ``<prefix>:{<tag>}``, escaped once: producers spell the notify channel per append
    _base: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_base", f"{self.prefix}:{hash_tag(self.topic)}")

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

    def subscription_properties(self, subscription: str) -> str:
        return f"{self._base}:sub-props:{subscription}"

    def subscription(self, subscription: str) -> SubscriptionKeys:
        """The keys of one subscription, by name."""
        return SubscriptionKeys(
            self.stream,
            self.subscriptions,
            self.consumers(subscription),
            self.consumer_info(subscription),
            self.key_shared_ranges(subscription),
            self.key_shared_joined(subscription),
            self.ack_sets(subscription),
            self.non_persistent_consumers(subscription),
            self.delayed(subscription),
            self.subscription_properties(subscription),
        )

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
    def ledger(self) -> str:
        return f"{self._base}:ledger"

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
class SubscriptionKeys:
    """Every key of one subscription: the KEYS of every subscription script, in the order of
    ``lua/lib.lua``'s ``sub_keys()`` (:attr:`all`)."""

    stream: str
    subscriptions: str
    consumers: str
    consumer_info: str
    key_shared_ranges: str
    key_shared_joined: str
    ack_sets: str
    non_persistent_consumers: str
    delayed: str
    properties: str

    @property
    def all(self) -> list[str]:
        return [
            self.stream,
            self.subscriptions,
            self.consumers,
            self.consumer_info,
            self.key_shared_ranges,
            self.key_shared_joined,
            self.ack_sets,
            self.non_persistent_consumers,
            self.delayed,
            self.properties,
        ]


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

    def namespace_policies(self, namespace: str) -> str:
        return f"{self.prefix}:policies:ns:{namespace}"

    def topic_policies(self, topic: TopicName | str) -> str:
        return f"{self.prefix}:policies:topic:{topic}"

    @property
    def policies_channel(self) -> str:
        return f"{self.prefix}:policies:changed"

    @property
    def unloads(self) -> str:
        return f"{self.prefix}:unloads"

    @property
    def unloads_channel(self) -> str:
        return f"{self.prefix}:unloads:added"

    # -- tenants, namespaces, authorization (admin API) --------------------------------

    @property
    def tenants(self) -> str:
        return f"{self.prefix}:tenants"

    def tenant_namespaces(self, tenant: str) -> str:
        return f"{self.prefix}:tenant-namespaces:{tenant}"

    def namespace_permissions(self, namespace: str) -> str:
        return f"{self.prefix}:permissions:ns:{namespace}"

    def topic_permissions(self, namespace: str) -> str:
        return f"{self.prefix}:permissions:topics:{namespace}"

    def subscription_permissions(self, namespace: str) -> str:
        return f"{self.prefix}:permissions:subscriptions:{namespace}"

    @property
    def gateways(self) -> str:
        return f"{self.prefix}:gateways"

    @property
    def gateway_info(self) -> str:
        return f"{self.prefix}:gateways:info"

    @property
    def gateway_stats(self) -> str:
        return f"{self.prefix}:gateways:stats"
