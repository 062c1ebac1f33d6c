"""No 5xx for bad input, by schemathesis against the gateway's own OpenAPI description:
every documented operation gets a bounded number of generated requests (hostile names,
wrong JSON types, huge numbers, bodies that are not JSON or not UTF-8), once with the
generated path parameters and once with them pinned to a tenant, namespace, topic and
subscription that exist, so the requests reach past the "not found" answers. Every answer
must be below 500, and every 4xx must carry Pulsar's ``{"reason": ...}`` JSON body.

Both of schemathesis's generation modes run: positive (what the description allows, which
still holds hostile names and huge numbers) and negative (what it refuses: wrong types,
missing fields, bodies that are not JSON). ``PGW_FUZZ_EXAMPLES`` raises the examples per
operation and combination (default 8) for a longer campaign.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from pulsar_gateway.adapters.http.openapi import OPERATIONS
from tests.adminhttp import admin
from tests.conftest import GatewayThread

EXAMPLES = int(os.environ.get("PGW_FUZZ_EXAMPLES", "8"))

#: Path parameters of resources the test creates (the cluster is the fleet's).
EXISTING = {
    "tenant": "fz",
    "namespace": "ns",
    "cluster": "standalone",
    "domain": "persistent",
    "topic": "t",
    "subscription": "s",
}

#: Deletes run last in a module's order, so earlier operations find the resources.
OPERATION_IDS = sorted(
    (f"{method} {path}" for method, path in OPERATIONS), key=lambda op: op.startswith("DELETE")
)


@functools.cache
def _schema(spec_text: str) -> Any:
    return schemathesis.openapi.from_dict(json.loads(spec_text))


def _create_resources(base: str) -> None:
    info = {"adminRoles": [], "allowedClusters": ["standalone"]}
    calls: list[tuple[str, str, Any]] = [
        ("PUT", "/admin/v2/tenants/fz", info),
        ("PUT", "/admin/v2/namespaces/fz/ns", None),
        ("PUT", "/admin/v2/persistent/fz/ns/t", None),
        ("PUT", "/admin/v2/persistent/fz/ns/t/subscription/s", None),
        ("PUT", "/admin/v2/persistent/fz/ns/p/partitions", 2),
        ("POST", "/topics/persistent/fz/ns/t", {"messages": [{"payload": "aGk="}]}),
    ]
    for method, path, body in calls:
        status, answer = admin(method, base + path, body)
        assert status in (200, 204), (method, path, status, answer)


def _check(case: Any, response: Any, unavailable: bool = False) -> None:
    where = f"{case.method} {case.formatted_path} -> {response.status_code}"
    # 501 only where the description says the operation does not apply here
    allowed = response.status_code < 500 or (unavailable and response.status_code == 501)
    assert allowed, f"{where}: {response.text[:300]}"
    if response.status_code >= 400:
        try:
            body = response.json()
        except ValueError:
            pytest.fail(f"{where}: a 4xx without a JSON body: {response.text[:200]!r}")
        assert isinstance(body, dict) and isinstance(body.get("reason"), str), where


@pytest.mark.timeout(300)
@pytest.mark.parametrize("operation", OPERATION_IDS)
def test_no_server_error_for_generated_requests(gateway: GatewayThread, operation: str) -> None:
    base = gateway.http_url
    _create_resources(base)
    status, spec = admin("GET", f"{base}/admin/v2/openapi.json")
    assert status == 200
    method, path = operation.split(" ", 1)
    api = _schema(json.dumps(spec, sort_keys=True))[path][method]
    unavailable = "501" in spec["paths"][path][method.lower()]["responses"]

    def call(case: Any) -> None:
        response = case.call(base_url=base, timeout=30)
        _check(case, response, unavailable)

    pinned = {
        p["name"]: EXISTING[p["name"]]
        for p in spec["paths"][path][method.lower()]["parameters"]
        if p["in"] == "path" and p["name"] in EXISTING
    }
    common = settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
        # negative: data the description refuses (wrong types, missing fields, bad bytes)
        for parameters in ({}, pinned):
            strategy = api.as_strategy(mode, path_parameters=parameters or None)

            @common
            @given(case=strategy)
            def run(case: Any) -> None:
                call(case)

            try:
                run()
            except Unsatisfiable:
                # negative mode with every parameter pinned: nothing left to make invalid
                if mode is GenerationMode.POSITIVE:
                    raise


# -- what the fuzzer found, pinned down ---------------------------------------------------


NOT_UTF8 = b'{"adminRoles": ["\xff\xfe"], "allowedClusters": ["standalone"]}'


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("PUT", "/admin/v2/tenants/fz2"),
        ("POST", "/admin/v2/tenants/fz"),
        ("PUT", "/admin/v2/namespaces/fz/other"),
        ("POST", "/admin/v2/namespaces/fz/ns/messageTTL"),
        ("POST", "/admin/v2/namespaces/fz/ns/permissions/role"),
        ("PUT", "/admin/v2/persistent/fz/ns/q/partitions"),
        ("PUT", "/admin/v2/persistent/fz/ns/t/subscription/s2"),
        ("POST", "/topics/persistent/fz/ns/t"),
    ],
)
def test_a_body_that_is_not_utf8_is_a_400(gateway: GatewayThread, method: str, path: str) -> None:
    _create_resources(gateway.http_url)
    status, body = admin(method, gateway.http_url + path, raw=NOT_UTF8)
    assert status == 400 and isinstance(body, dict) and "reason" in body, (status, body)
    # nothing was created by it
    assert admin("GET", f"{gateway.http_url}/admin/v2/tenants/fz2")[0] == 404


def test_a_reason_with_a_carriage_return_is_still_json(gateway: GatewayThread) -> None:
    # the unknown listener's name is echoed in the reason
    url = f"{gateway.http_url}/lookup/v2/topic/persistent/public/default/t?listenerName=a%0Db"
    status, body = admin("GET", url)
    assert status == 400 and body == {"reason": "the broker do not have a b listener"}


def test_a_scheduled_page_beyond_a_redis_index_is_a_400(gateway: GatewayThread) -> None:
    _create_resources(gateway.http_url)
    base = f"{gateway.http_url}/admin/v2/persistent/fz/ns/t/subscription/s/scheduled"
    status, body = admin("GET", f"{base}?offset={10**30}")
    assert status == 400 and "offset must be within" in body["reason"]
    assert admin("GET", f"{base}?offset=0")[0] == 200
