"""Authorization: which role may produce, consume and administer what.

The rules of Pulsar's ``PulsarAuthorizationProvider`` (with ``authorizationEnabled=true``):

* a **superuser** (``superUserRoles``) may do anything;
* a **tenant admin** (a role in the tenant's ``TenantInfo.adminRoles``) may administer the
  tenant's namespaces and topics, and produce and consume on them
  (``allowTopicOperationAsync`` checks ``validateTenantAdminAccess`` first);
* any other role needs a **namespace permission**: the namespace's ``auth_policies``
  map role -> set of ``AuthAction`` (``produce``, ``consume``, ...), granted with
  ``POST /admin/v2/namespaces/{tenant}/{ns}/permissions/{role}``. A lookup (LOOKUP,
  PARTITIONED_METADATA, HTTP lookup) needs produce *or* consume (``canLookupAsync``).

Not carried over: topic-level permissions, subscription permissions and
``subscriptionAuthMode``, wildcard role matching (``authorizationAllowWildcardsMatching``,
off by default in Pulsar), proxy roles.

Storage: tenants are the ``KeySchema.tenants`` hash (tenant -> TenantInfo JSON, written by
:mod:`gateway.tenants`; only read here); permissions are one hash per namespace,
``KeySchema.namespace_permissions(ns)``: role -> JSON list of actions.

Checks run on PRODUCER, SUBSCRIBE, lookups and HTTP requests only, never per message; each
gateway caches what it read for :data:`CACHE_SECONDS`, and drops the cache whenever
:mod:`gateway.policies` hears the fleet-wide policies channel. Permission changes publish on
that channel, so a grant or revoke is seen by every gateway at once (a lost notification
within the cache lifetime).
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Iterable
from typing import Any

from gateway.config import GatewayConfig
from gateway.keys import KeySchema
from gateway.policies import Policies
from gateway.storage import Storage
from gateway.topic_name import TopicName

__all__ = ["CACHE_SECONDS", "AuthAction", "AuthorizationService", "parse_actions"]

#: Longest time a cached tenant or permission read is trusted without a notification.
CACHE_SECONDS = 5.0


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
        self, storage: Storage, schema: KeySchema, policies: Policies, config: GatewayConfig
    ) -> None:
        self._storage = storage
        self._schema = schema
        #: Authorization needs roles, so it is only on with authentication (as in Pulsar,
        #: where ``authorizationEnabled`` without authentication leaves every role empty).
        self.enabled = config.authentication_enabled and config.authorization_enabled
        self.superuser_roles = frozenset(config.superuser_roles)
        self._cache: dict[tuple[str, str], tuple[float, Any]] = {}
        #: Bumped when the cache is dropped, so a read that started before a change does not
        #: put the old value back.
        self._generation = 0
        policies.on_change(self.drop_cache)

    def drop_cache(self) -> None:
        self._cache.clear()
        self._generation += 1

    async def _cached(self, kind: str, name: str, key: str) -> Any:
        now = time.monotonic()
        hit = self._cache.get((kind, name))
        if hit is not None and hit[0] > now:
            return hit[1]
        generation = self._generation
        if kind == "tenant":
            value: Any = _admin_roles(await self._storage.call("HGET", key, name))
        else:
            value = _permissions(await self._storage.call("HGETALL", key))
        if generation == self._generation:
            self._cache[(kind, name)] = (now + CACHE_SECONDS, value)
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
        admins: frozenset[str] = await self._cached("tenant", tenant, self._schema.tenants)
        return role in admins

    async def namespace_actions(self, namespace: str, role: str) -> frozenset[str]:
        """The actions granted to ``role`` on ``namespace`` (cached)."""
        key = self._schema.namespace_permissions(namespace)
        permissions: dict[str, frozenset[str]] = await self._cached("ns", namespace, key)
        return permissions.get(role, frozenset())

    async def allows(self, tenant: str, namespace: str, role: str | None, *actions: str) -> bool:
        """Whether ``role`` may do any of ``actions`` in ``namespace`` (of ``tenant``):
        always when authorization is off; superusers and tenant admins always."""
        if not self.enabled:
            return True
        if role is None:
            return False
        if await self.is_tenant_admin(tenant, role):
            return True
        granted = await self.namespace_actions(namespace, role)
        return any(action in granted for action in actions)

    async def can_produce(self, topic: TopicName, role: str | None) -> bool:
        return await self.allows(topic.tenant, topic.namespace, role, AuthAction.PRODUCE)

    async def can_consume(self, topic: TopicName, role: str | None) -> bool:
        return await self.allows(topic.tenant, topic.namespace, role, AuthAction.CONSUME)

    async def can_lookup(self, topic: TopicName, role: str | None) -> bool:
        """Produce or consume (``canLookupAsync``)."""
        return await self.allows(
            topic.tenant, topic.namespace, role, AuthAction.PRODUCE, AuthAction.CONSUME
        )

    async def can_administer(self, tenant: str, role: str | None) -> bool:
        """Tenant admin or superuser; always when authorization is off."""
        return not self.enabled or await self.is_tenant_admin(tenant, role)

    def can_administer_cluster(self, role: str | None) -> bool:
        """Superuser only (tenants, clusters, brokers); always when authorization is off."""
        return not self.enabled or self.is_superuser(role)

    # -- namespace permissions (admin API) -----------------------------------------------

    async def get_permissions(self, namespace: str) -> dict[str, list[str]]:
        """The namespace's grants, read fresh: role -> sorted actions."""
        raw = await self._storage.call("HGETALL", self._schema.namespace_permissions(namespace))
        return {role: sorted(actions) for role, actions in sorted(_permissions(raw).items())}

    async def grant_permission(self, namespace: str, role: str, actions: Iterable[str]) -> None:
        """Set ``role``'s actions on ``namespace``, replacing earlier ones (Pulsar puts the
        new set into ``auth_policies.namespace_auth``)."""
        value = json.dumps(sorted(set(actions)))
        await self._write("HSET", self._schema.namespace_permissions(namespace), role, value)

    async def revoke_permission(self, namespace: str, role: str) -> None:
        """Remove every action of ``role`` on ``namespace`` (no error when it had none)."""
        await self._write("HDEL", self._schema.namespace_permissions(namespace), role)

    async def _write(self, command: str, key: str, *args: Any) -> None:
        await self._storage.call(command, key, *args)
        self.drop_cache()
        # The policies channel: every gateway's Policies drops its cache and tells us.
        self._storage.notify(self._schema.policies_channel)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


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


def _permissions(raw: list[bytes | str]) -> dict[str, frozenset[str]]:
    """A permissions hash (``HGETALL`` reply) as role -> actions; bad values grant nothing."""
    out: dict[str, frozenset[str]] = {}
    for i in range(0, len(raw) - 1, 2):
        try:
            actions = json.loads(raw[i + 1])
        except ValueError:
            continue
        if isinstance(actions, list):
            out[_text(raw[i])] = frozenset(a for a in actions if isinstance(a, str))
    return out
