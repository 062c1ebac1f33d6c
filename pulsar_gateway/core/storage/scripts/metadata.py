"""Typed calls of the fleet-wide metadata scripts: ``gateway_heartbeat`` (fleet
membership), ``tenant_update`` and ``policy_cas``."""

from __future__ import annotations

import asyncio
from typing import Any

from pulsar_gateway.core.storage.scripts import SCRIPTS, ScriptRunner, texts

__all__ = ["gateway_heartbeat", "policy_cas", "tenant_update"]


def _members(reply: list[Any]) -> list[str]:
    return sorted(texts(reply))


def gateway_heartbeat(
    lane: ScriptRunner, gateways: str, *, gateway_id: str, lease_ms: int
) -> asyncio.Future[list[str]]:
    """Renew ``gateway_id``'s lease in the ``gateways`` zset (0 = leave the fleet) and
    resolve with the live members, sorted."""
    return lane.eval(SCRIPTS["gateway_heartbeat"], [gateways], [gateway_id, lease_ms], _members)


def tenant_update(
    lane: ScriptRunner, tenants: str, *, tenant: str, info: str
) -> asyncio.Future[bool]:
    """Replace ``tenant``'s TenantInfo JSON in the ``tenants`` hash if the tenant exists;
    resolves False when it does not."""
    return lane.eval(SCRIPTS["tenant_update"], [tenants], [tenant, info], bool)


def policy_cas(
    lane: ScriptRunner, policies: str, *, name: str, expected: str, value: str
) -> asyncio.Future[bool]:
    """Set policy ``name`` in the ``policies`` hash to ``value`` (``""`` deletes it) if it
    still holds ``expected`` (``""``: absent); resolves False when it changed meanwhile."""
    return lane.eval(SCRIPTS["policy_cas"], [policies], [name, expected, value], bool)
