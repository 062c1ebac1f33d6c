"""Authorization: which role may produce, consume and administer what.

The rules of Pulsar's ``PulsarAuthorizationProvider`` (with ``authorizationEnabled=true``):

* a **superuser** (``superUserRoles``) may do anything;
* a **tenant admin** (a role in the tenant's ``TenantInfo.adminRoles``) may administer the
  tenant's namespaces and topics, and produce and consume on them
  (``allowTopicOperationAsync`` checks ``validateTenantAdminAccess`` first);
* any other role needs a **namespace permission** or a **topic permission**: the
  namespace's ``auth_policies`` map role -> set of ``AuthAction`` (``produce``,
  ``consume``, ...), granted with ``POST /admin/v2/namespaces/{tenant}/{ns}/permissions/
  {role}``, and its ``destination_auth`` map topic -> role -> actions, granted with ``POST
  /admin/v2/{domain}/{tenant}/{ns}/{topic}/permissions/{role}`` (a partitioned topic's grant
  covers its partitions). A lookup (LOOKUP, PARTITIONED_METADATA, HTTP lookup) needs produce
  *or* consume (``canLookupAsync``);
* a consumer (binary SUBSCRIBE, WebSocket consumer) names a subscription, which
  ``PulsarAuthorizationProvider.canConsumeAsync`` checks before the consume grant: when the
  namespace's ``auth_policies.subscription_auth_roles`` lists roles for that subscription
  (``POST /admin/v2/namespaces/{tenant}/{ns}/permissions/subscription/{subscription}``), a
  role not among them is refused; with the namespace's ``subscriptionAuthMode`` ``Prefix``,
  a subscription whose name does not start with the role is refused with Pulsar's
  "Failed to create consumer - The subscription name needs to be prefixed by the
  authentication role, like <role>-xxxx for topic: <topic>" (:class:`AuthorizationError`).
  Superusers and tenant admins skip both (``allowTopicOperationAsync`` checks
  ``validateTenantAdminAccess`` first). Lookups name no subscription (``canLookupAsync``
  passes none), nor does a WebSocket reader (the gateway names its subscription; Pulsar's
  ``ReaderHandler`` asks ``allowTopicOperation`` without one); a binary reader's
  ``reader-...`` subscription is checked like any other, as ``ServerCnx`` checks it.

Not carried over: wildcard role matching (``authorizationAllowWildcardsMatching``, off by
default in Pulsar), proxy roles.

Lane: tenants are the ``KeySchema.tenants`` hash (tenant -> TenantInfo JSON, written by
:mod:`pulsar_gateway.core.topics.tenants`; only read here); permissions are one hash per namespace,
``KeySchema.namespace_permissions(ns)``: role -> JSON list of actions, one hash of topic
grants per namespace, ``KeySchema.topic_permissions(ns)``: topic -> JSON {role: actions}, and
one of subscription roles per namespace, ``KeySchema.subscription_permissions(ns)``:
subscription -> JSON list of roles. ``subscriptionAuthMode`` is a namespace policy, read
through :class:`~pulsar_gateway.core.policies.policies.Policies`.

Checks run on PRODUCER, SUBSCRIBE, lookups and HTTP requests only, never per message; each gateway
caches what it read for :data:`CACHE_SECONDS`, and drops the cache whenever
:mod:`pulsar_gateway.core.policies.policies` hears the fleet-wide policies channel. Permission
changes publish on that channel, so a grant or revoke is seen by every gateway at once (a lost
notification within the cache lifetime).
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Iterable
from typing import Any

from pulsar_gateway.core.errors import AuthorizationError, SubscriptionNotFound
from pulsar_gateway.core.model.topic_name import TopicName
from pulsar_gateway.core.policies.policies import Policies
from pulsar_gateway.core.storage import policy_store
from pulsar_gateway.core.storage.keys import KeySchema
from pulsar_gateway.core.storage.lane import Lane

__all__ = [
    "CACHE_SECONDS",
    "PREFIX_AUTH_MODE",
    "SUBSCRIPTION_AUTH_MODE_POLICY",
    "AuthAction",
    "AuthorizationService",
    "parse_actions",
]

#: Longest time a cached tenant or permission read is trusted without a notification.
CACHE_SECONDS = 5.0

#: The namespace policy (stored name) holding Pulsar's ``SubscriptionAuthMode``: ``"None"``
#: (or unset) or :data:`PREFIX_AUTH_MODE`.
SUBSCRIPTION_AUTH_MODE_POLICY = "subscriptionAuthMode"
#: ``SubscriptionAuthMode.Prefix``: a role's subscriptions must start with the role's name.
PREFIX_AUTH_MODE = "Prefix"


class AuthAction(enum.StrEnum):
    """Pulsar's ``AuthAction`` (its JSON names). Only produce and consume are enforced."""

    PRODUCE = "produce"
    CONSUME = "consume"
    FUNCTIONS = "functions"
    SOURCES = "sources"
    SINKS = "sinks"
    PACKAGES = "packages"


def parse_actions(value: Any) -> list[str]:
    """Validate a grant body (``["produce", "consume"]``, a JSON ``Set<AuthAction>``).

    Returns:
        The distinct action names, sorted.

    Raises:
        ValueError: Not a list of known action names.
    """
    if not isinstance(value, list):
        raise ValueError('expected a JSON list of actions, e.g. ["produce", "consume"]')
    actions: set[str] = set()
    for item in value:
        if not isinstance(item, str) or item not in AuthAction.__members__.values():
            known = ", ".join(a.value for a in AuthAction)
            raise ValueError(f"unknown action {item!r} (one of {known})")
        actions.add(item)
    return sorted(actions)


class AuthorizationService:
    """Pulsar's ``AuthorizationService`` over Redis, with a short per-gateway cache."""

    def __init__(
        self,
        lane: Lane,
        keys: KeySchema,
        policies: Policies,
        *,
        enabled: bool,
        superuser_roles: Iterable[str] = (),
    ) -> None:
        """``enabled``: Pulsar's ``authorizationEnabled``, which needs authentication (as in
        Pulsar, where it leaves every role empty without); ``policies``: where the
        namespace's ``subscriptionAuthMode`` is read (cached there, dropped on the same
        channel); the composition root calls :meth:`drop_cache` whenever a policy
        changes."""
        self._lane = lane
        self._keys = keys
        self._policies = policies
        self.enabled = enabled
        self.superuser_roles = frozenset(superuser_roles)
        self._cache: dict[tuple[str, str, str], tuple[float, Any]] = {}
        #: Bumped when the cache is dropped, so a read that started before a change does not
        #: put the old value back.
        self._generation = 0

    def drop_cache(self) -> None:
        self._cache.clear()
        self._generation += 1

    async def _cached(self, kind: str, name: str, key: str) -> Any:
        """What ``key`` holds for ``name`` (a hash field; a namespace's whole hash for
        "ns"), parsed, cached under ``(kind, key, name)``."""
        now = time.monotonic()
        hit = self._cache.get((kind, key, name))
        if hit is not None and hit[0] > now:
            return hit[1]
        generation = self._generation
        lane = self._lane
        if kind == "tenant":
            value: Any = _admin_roles(await policy_store.stored_value(lane, key, name))
        elif kind == "topic":
            value = _topic_grants(await policy_store.stored_value(lane, key, name))
        elif kind == "subscription":
            value = _roles(await policy_store.stored_value(lane, key, name))
        else:
            value = _permissions(await policy_store.stored_values(lane, key))
        if generation == self._generation:
            self._cache[(kind, key, name)] = (now + CACHE_SECONDS, value)
        return value

    # -- checks --------------------------------------------------------------------------

    def is_superuser(self, role: str | None) -> bool:
        return role is not None and role in self.superuser_roles

    async def is_tenant_admin(self, tenant: str, role: str | None) -> bool:
        """Superuser, or one of the tenant's ``adminRoles`` (``validateTenantAdminAccess``)."""
        if role is None:
            return False
        if self.is_superuser(role):
            return True
        admins: frozenset[str] = await self._cached("tenant", tenant, self._keys.tenants)
        return role in admins

    async def namespace_actions(self, namespace: str, role: str) -> frozenset[str]:
        """The actions granted to ``role`` on ``namespace`` (cached)."""
        key = self._keys.namespace_permissions(namespace)
        permissions: dict[str, frozenset[str]] = await self._cached("ns", namespace, key)
        return permissions.get(role, frozenset())

    async def topic_actions(self, topic: TopicName, role: str) -> frozenset[str]:
        """The actions granted to ``role`` on ``topic`` itself (its partitioned topic's
        grants for a partition; cached)."""
        name = str(topic.partitioned_topic_name)
        key = self._keys.topic_permissions(topic.namespace)
        grants: dict[str, frozenset[str]] = await self._cached("topic", name, key)
        return grants.get(role, frozenset())

    async def allows(
        self,
        tenant: str,
        namespace: str,
        role: str | None,
        *actions: str,
        topic: TopicName | None = None,
        subscription: str | None = None,
    ) -> bool:
        """Whether ``role`` may do any of ``actions`` in ``namespace`` (of ``tenant``), or on
        ``topic`` by a grant on the topic itself: always when authorization is off;
        superusers and tenant admins always. A consumer's ``subscription`` must also pass
        :meth:`may_use_subscription` first, as ``canConsumeAsync`` checks it first.

        Raises:
            AuthorizationError: ``subscriptionAuthMode`` Prefix refuses the subscription.
        """
        if not self.enabled:
            return True
        if role is None:
            return False
        if await self.is_tenant_admin(tenant, role):
            return True
        if subscription is not None and not await self.may_use_subscription(
            namespace, role, subscription, topic
        ):
            return False
        granted = await self.namespace_actions(namespace, role)
        if topic is not None:
            granted = granted | await self.topic_actions(topic, role)
        return any(action in granted for action in actions)

    async def can_produce(self, topic: TopicName, role: str | None) -> bool:
        return await self.allows(
            topic.tenant, topic.namespace, role, AuthAction.PRODUCE, topic=topic
        )

    async def can_consume(
        self, topic: TopicName, role: str | None, subscription: str | None = None
    ) -> bool:
        """Consume on ``topic`` (through ``subscription`` when the client chose one).

        Raises:
            AuthorizationError: ``subscriptionAuthMode`` Prefix refuses the subscription.
        """
        return await self.allows(
            topic.tenant,
            topic.namespace,
            role,
            AuthAction.CONSUME,
            topic=topic,
            subscription=subscription,
        )

    async def may_use_subscription(
        self, namespace: str, role: str, subscription: str, topic: TopicName | None = None
    ) -> bool:
        """The subscription part of ``PulsarAuthorizationProvider.canConsumeAsync``, for a
        role that is neither superuser nor tenant admin: False when the subscription has
        roles listed (``subscription_auth_roles``, a non-empty list) and ``role`` is not one
        of them. A blank name is not checked (Pulsar's ``isNotBlank``).

        Raises:
            AuthorizationError: the namespace's ``subscriptionAuthMode`` is Prefix and the
                name does not start with ``role`` (Pulsar checks ``startsWith(role)``; its
                message suggests ``<role>-``).
        """
        if not subscription.strip():
            return True
        key = self._keys.subscription_permissions(namespace)
        roles: frozenset[str] = await self._cached("subscription", subscription, key)
        if roles and role not in roles:
            return False
        mode = await self._policies.get_namespace(namespace, SUBSCRIPTION_AUTH_MODE_POLICY)
        if mode == PREFIX_AUTH_MODE and not subscription.startswith(role):
            where = str(topic) if topic is not None else namespace
            raise AuthorizationError(
                "Failed to create consumer - The subscription name needs to be prefixed by"
                f" the authentication role, like {role}-xxxx for topic: {where}"
            )
        return True

    async def can_lookup(self, topic: TopicName, role: str | None) -> bool:
        """Produce or consume (``canLookupAsync``)."""
        return await self.allows(
            topic.tenant,
            topic.namespace,
            role,
            AuthAction.PRODUCE,
            AuthAction.CONSUME,
            topic=topic,
        )

    async def can_administer(self, tenant: str, role: str | None) -> bool:
        """Tenant admin or superuser; always when authorization is off."""
        return not self.enabled or await self.is_tenant_admin(tenant, role)

    def can_administer_cluster(self, role: str | None) -> bool:
        """Superuser only (tenants, clusters, brokers); always when authorization is off."""
        return not self.enabled or self.is_superuser(role)

    # -- namespace permissions (admin API) -----------------------------------------------

    async def get_permissions(self, namespace: str) -> dict[str, list[str]]:
        """The namespace's grants, read fresh: role -> actions as stored (grants store
        them sorted); Pulsar's ``auth_policies.namespace_auth``."""
        key = self._keys.namespace_permissions(namespace)
        raw = await policy_store.stored_values(self._lane, key)
        return dict(sorted(_grants(raw).items()))

    async def grant_permission(self, namespace: str, role: str, actions: Iterable[str]) -> None:
        """Set ``role``'s actions on ``namespace``, replacing earlier ones (Pulsar puts the
        new set into ``auth_policies.namespace_auth``)."""
        value = json.dumps(sorted(set(actions)))
        await self._set(self._keys.namespace_permissions(namespace), role, value)

    async def revoke_permission(self, namespace: str, role: str) -> None:
        """Remove every action of ``role`` on ``namespace`` (no error when it had none)."""
        await self._unset(self._keys.namespace_permissions(namespace), role)

    # -- topic permissions (admin API) ---------------------------------------------------

    async def get_topic_permissions(self, topic: TopicName) -> dict[str, list[str]]:
        """The grants that apply to ``topic``, read fresh: its namespace's, with the topic's
        own added (Pulsar's ``getPermissionsOnTopic`` answers both)."""
        out = {
            role: set(actions)
            for role, actions in (await self.get_permissions(topic.namespace)).items()
        }
        for role, actions in (await self._topic_grants(topic)).items():
            out.setdefault(role, set()).update(actions)
        return {role: sorted(actions) for role, actions in sorted(out.items())}

    async def _topic_grants(self, topic: TopicName) -> dict[str, list[str]]:
        key = self._keys.topic_permissions(topic.namespace)
        raw = await policy_store.stored_value(self._lane, key, str(topic.partitioned_topic_name))
        return {role: sorted(actions) for role, actions in _topic_grants(raw).items()}

    async def grant_topic_permission(
        self, topic: TopicName, role: str, actions: Iterable[str]
    ) -> None:
        """Set ``role``'s actions on ``topic`` (its partitions too), replacing earlier ones."""
        grants = await self._topic_grants(topic)
        grants[role] = sorted(set(actions))
        await self._write_topic(topic, grants)

    async def revoke_topic_permission(self, topic: TopicName, role: str) -> None:
        """Remove ``role``'s grant on ``topic`` (no error when it had none)."""
        grants = await self._topic_grants(topic)
        if grants.pop(role, None) is not None:
            await self._write_topic(topic, grants)

    async def _write_topic(self, topic: TopicName, grants: dict[str, list[str]]) -> None:
        key = self._keys.topic_permissions(topic.namespace)
        name = str(topic.partitioned_topic_name)
        if grants:
            await self._set(key, name, json.dumps(grants, sort_keys=True))
        else:
            await self._unset(key, name)

    # -- subscription permissions (admin API) --------------------------------------------

    async def get_subscription_permissions(self, namespace: str) -> dict[str, list[str]]:
        """The namespace's subscription roles, read fresh: subscription -> roles (sorted);
        Pulsar's ``auth_policies.subscription_auth_roles``. A subscription whose last role
        was revoked stays listed with none, as in Pulsar, and restricts nothing."""
        key = self._keys.subscription_permissions(namespace)
        raw = await policy_store.stored_values(self._lane, key)
        return {sub: sorted(set(roles)) for sub, roles in sorted(_grants(raw).items())}

    async def grant_subscription_permission(
        self, namespace: str, subscription: str, roles: Iterable[str]
    ) -> None:
        """Let only ``roles`` (and superusers, tenant admins) consume ``subscription``
        anywhere in ``namespace``, replacing its earlier list, as Pulsar's
        ``grantSubscriptionPermissionAsync`` puts the new set."""
        value = json.dumps(sorted(set(roles)))
        await self._set(self._keys.subscription_permissions(namespace), subscription, value)

    async def revoke_subscription_permission(
        self, namespace: str, subscription: str, role: str
    ) -> None:
        """Remove ``role`` from ``subscription``'s roles (read, then written: two admins
        changing one subscription at once may lose one change, where Pulsar's versioned
        write answers 409 to the second).

        Raises:
            SubscriptionNotFound: the subscription has no roles listed (Pulsar's "couldn't
                find subscription").
        """
        key = self._keys.subscription_permissions(namespace)
        raw = await policy_store.stored_value(self._lane, key, subscription)
        if raw is None:
            raise SubscriptionNotFound("couldn't find subscription")
        roles = _roles(raw) - {role}
        await self._set(key, subscription, json.dumps(sorted(roles)))

    async def _set(self, key: str, name: str, value: str) -> None:
        await policy_store.set_value(self._lane, key, name, value)
        self._written()

    async def _unset(self, key: str, name: str) -> None:
        await policy_store.delete_value(self._lane, key, name)
        self._written()

    def _written(self) -> None:
        self.drop_cache()
        # The policies channel: every gateway's Policies drops its cache and tells us.
        self._lane.notify(self._keys.policies_channel)


def _topic_grants(raw: bytes | str | None) -> dict[str, frozenset[str]]:
    """A stored topic grant (JSON role -> actions), none when absent or bad."""
    if raw is None:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {
        str(role): frozenset(str(a) for a in actions)
        for role, actions in value.items()
        if isinstance(actions, list)
    }


def _roles(raw: bytes | str | None) -> frozenset[str]:
    """A stored JSON list of roles (none when absent or bad)."""
    if raw is None:
        return frozenset()
    try:
        value = json.loads(raw)
    except ValueError:
        return frozenset()
    if not isinstance(value, list):
        return frozenset()
    return frozenset(r for r in value if isinstance(r, str))


def _admin_roles(raw: bytes | str | None) -> frozenset[str]:
    """``TenantInfo.adminRoles`` of a stored TenantInfo JSON (none when absent or bad)."""
    if raw is None:
        return frozenset()
    try:
        info = json.loads(raw)
    except ValueError:
        return frozenset()
    roles = info.get("adminRoles") if isinstance(info, dict) else None
    if not isinstance(roles, list):
        return frozenset()
    return frozenset(r for r in roles if isinstance(r, str))


def _grants(raw: dict[str, bytes]) -> dict[str, list[str]]:
    """A permissions hash (role -> stored JSON) as role -> actions in stored order; a value
    that is not JSON is left out, one that is not a list of actions grants nothing."""
    out: dict[str, list[str]] = {}
    for role, stored in raw.items():
        try:
            actions = json.loads(stored)
        except ValueError:
            continue
        listed = actions if isinstance(actions, list) else []
        out[role] = [a for a in listed if isinstance(a, str)]
    return out


def _permissions(raw: dict[str, bytes]) -> dict[str, frozenset[str]]:
    """A permissions hash as role -> actions, for the checks."""
    return {role: frozenset(actions) for role, actions in _grants(raw).items()}
