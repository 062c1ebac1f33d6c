"""Which operations of Pulsar's admin REST API v2 a gateway routes.

``operations.tsv`` lists every operation of Pulsar's published admin v2 description
(apache/pulsar-site ``static/swagger/master/swagger.json``): ``method, path, operationId,
tag`` per line, paths relative to ``/admin/v2``. :func:`probe` sends each of them to a live
gateway, path parameters filled with a tenant, namespace, topics and a subscription it
creates first, and sorts the answers: an operation is *routed* unless the answer is the
router's own 404 or 405 (no route for that path and method), whatever the handler then
decides (a 404 for a missing schema, a 412 for a bad body, a 501 for what cannot mean
anything over Redis).

Run it against a gateway (``python -m tests.admin_coverage --url http://127.0.0.1:8080``) or
let it start one (``--start``); it prints the routed count per group and, with
``--missing``, every operation still unrouted.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

__all__ = ["Answer", "Operation", "coverage_table", "load_operations", "probe"]

OPERATIONS_FILE = Path(__file__).with_name("operations.tsv")

TENANT = "coverage"
NAMESPACE = "ns"
TOPIC = "t"
PARTITIONED = "pt"
SUBSCRIPTION = "sub"


@dataclass(frozen=True, slots=True)
class Operation:
    method: str
    path: str
    operation_id: str
    group: str


@dataclass(frozen=True, slots=True)
class Answer:
    operation: Operation
    status: int
    reason: str

    @property
    def routed(self) -> bool:
        return not is_router_miss(self.status, self.reason)


def is_router_miss(status: int, reason: str) -> bool:
    """The router's own answer for a path or method it has no route for: aiohttp's default
    reasons, which no handler of the gateway uses (they always say what was not found)."""
    return (status, reason) in {(404, "Not Found"), (405, "Method Not Allowed")}


def load_operations(path: Path = OPERATIONS_FILE) -> list[Operation]:
    operations = []
    for line in path.read_text().splitlines():
        if line.strip():
            method, op_path, operation_id, group = line.split("\t")
            operations.append(Operation(method.upper(), op_path, operation_id, group))
    return operations


_VALUES = {
    "tenant": TENANT,
    "namespace": NAMESPACE,
    "topic": TOPIC,
    "subName": SUBSCRIPTION,
    "subscriptionName": SUBSCRIPTION,
    "subscription": SUBSCRIPTION,
    "bundle": "0x00000000_0xffffffff",
    "timestamp": "0",
    "messagePosition": "1",
    "numMessages": "1",
    "expireTimeInSeconds": "60",
    "ledgerId": "0",
    "entryId": "0",
    "role": "someone",
    "property": "key",
    "key": "key",
    "value": "value",
    "version": "0",
}


def concrete_path(operation: Operation, cluster: str, broker: str) -> str:
    """The operation's path with every parameter filled in."""
    values = {**_VALUES, "cluster": cluster, "clusterName": cluster, "broker": broker}

    def fill(match: re.Match[str]) -> str:
        return values.get(match.group(1), match.group(1))

    return "/admin/v2" + re.sub(r"{([^}]+)}", fill, operation.path)


def _order(operation: Operation) -> tuple[int, int]:
    """Everything but DELETE first, then the deepest DELETE first, so the tenant, the
    namespace and the topics last until the operations under them have been sent."""
    if operation.method != "DELETE":
        return (0, 0)
    return (1, -operation.path.count("/"))


async def _setup(session: aiohttp.ClientSession, base: str) -> tuple[str, str]:
    """Create the tenant, namespace, topics and subscription; answer (cluster, broker)."""
    async with session.get(f"{base}/admin/v2/clusters") as resp:
        clusters = await resp.json()
    cluster = clusters[0] if clusters else "standalone"
    async with session.get(f"{base}/admin/v2/brokers/{cluster}") as resp:
        brokers = await resp.json() if resp.status == 200 else []
    broker = brokers[0] if brokers else "localhost:8080"
    ns = f"{TENANT}/{NAMESPACE}"
    steps: list[tuple[str, str, Any]] = [
        ("PUT", f"/admin/v2/tenants/{TENANT}", {"allowedClusters": [cluster]}),
        ("PUT", f"/admin/v2/namespaces/{ns}", None),
        ("PUT", f"/admin/v2/persistent/{ns}/{TOPIC}", None),
        ("PUT", f"/admin/v2/non-persistent/{ns}/{TOPIC}", None),
        ("PUT", f"/admin/v2/persistent/{ns}/{PARTITIONED}/partitions", 2),
        ("PUT", f"/admin/v2/persistent/{ns}/{TOPIC}/subscription/{SUBSCRIPTION}", None),
    ]
    for method, path, body in steps:
        data = None if body is None else json.dumps(body)
        async with session.request(method, base + path, data=data) as resp:
            if resp.status >= 300 and resp.status != 409:
                raise RuntimeError(f"{method} {path}: {resp.status} {await resp.text()}")
    return cluster, broker


async def probe(base: str, operations: list[Operation] | None = None) -> list[Answer]:
    """Send every operation to the gateway at ``base`` (``http://host:port``)."""
    operations = load_operations() if operations is None else operations
    headers = {"Content-Type": "application/json"}
    timeout = aiohttp.ClientTimeout(total=30)
    answers = []
    async with aiohttp.ClientSession(headers=headers, timeout=timeout) as session:
        cluster, broker = await _setup(session, base)
        for operation in sorted(operations, key=_order):
            url = base + concrete_path(operation, cluster, broker)
            data = "{}" if operation.method in ("POST", "PUT") else None
            async with session.request(operation.method, url, data=data) as resp:
                text = await resp.text()
            try:
                body = json.loads(text)
                reason = str(body.get("reason", "")) if isinstance(body, dict) else ""
            except ValueError:
                reason = text
            answers.append(Answer(operation, resp.status, reason))
    return answers


def coverage_table(answers: list[Answer]) -> str:
    """A Markdown table: routed / all, per group and in all."""
    total: Counter[str] = Counter(a.operation.group for a in answers)
    routed: Counter[str] = Counter(a.operation.group for a in answers if a.routed)
    lines = ["| group | routed | operations |", "|---|---|---|"]
    for group in sorted(total, key=lambda g: -total[g]):
        lines.append(f"| {group} | {routed[group]} | {total[group]} |")
    lines.append(f"| **all** | **{sum(routed.values())}** | **{sum(total.values())}** |")
    return "\n".join(lines)


def run(base: str) -> list[Answer]:
    return asyncio.run(probe(base))
