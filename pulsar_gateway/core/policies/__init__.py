"""Namespace and topic policies (deduplication, delayed delivery, backlog quotas, retention
and TTL, unacked limits, rates), authentication and authorization."""

from __future__ import annotations

from pulsar_gateway.core.policies.authentication import AuthenticatedRole, AuthenticationService
from pulsar_gateway.core.policies.authorization import AuthAction, AuthorizationService
from pulsar_gateway.core.policies.backlog_quota import BacklogQuotas
from pulsar_gateway.core.policies.backlog_quota_monitor import BacklogQuotaMonitor
from pulsar_gateway.core.policies.policies import Policies
from pulsar_gateway.core.policies.rate_limits import RateLimits
from pulsar_gateway.core.policies.unacked_limits import UnackedLimits

__all__ = [
    "AuthAction",
    "AuthenticatedRole",
    "AuthenticationService",
    "AuthorizationService",
    "BacklogQuotaMonitor",
    "BacklogQuotas",
    "Policies",
    "RateLimits",
    "UnackedLimits",
]
