"""The OpenAPI description at /admin/v2/openapi.json: valid OpenAPI 3, and every route the
gateway serves is in it (a route added without documentation fails here)."""

from __future__ import annotations

from openapi_spec_validator import validate

from pulsar_gateway.adapters.http.app import make_app
from pulsar_gateway.adapters.http.openapi import OPERATIONS, served_operations
from tests.adminhttp import admin
from tests.conftest import GatewayThread


def test_every_served_route_is_described(gateway: GatewayThread) -> None:
    status, spec = admin("GET", f"{gateway.http_url}/admin/v2/openapi.json")
    assert status == 200
    validate(spec)
    app = make_app(gateway.gateway.services)
    served = served_operations(app)
    assert len(served) >= 50
    missing = [
        f"{method} {path}"
        for method, path in served
        if method.lower() not in spec["paths"].get(path, {})
    ]
    assert missing == []
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            assert operation["summary"], f"{method} {path}"
            placeholders = {s[1:-1] for s in path.split("/") if s.startswith("{")}
            names = {p["name"] for p in operation["parameters"] if p["in"] == "path"}
            assert names == placeholders


def test_no_description_of_a_route_that_is_not_served(gateway: GatewayThread) -> None:
    served = set(served_operations(make_app(gateway.gateway.services)))
    assert [op for op in OPERATIONS if op not in served] == []


def test_described_shapes_match_what_is_served(
    gateway: GatewayThread, client_factory, topic: str
) -> None:
    """The documented fields of TopicStats and ProducerAcks are in real answers."""
    _, spec = admin("GET", f"{gateway.http_url}/admin/v2/openapi.json")
    schemas = spec["components"]["schemas"]
    status, acks = admin(
        "POST",
        f"{gateway.http_url}/topics/persistent/public/default/{topic}",
        {"messages": [{"payload": "x"}]},
    )
    assert status == 200
    assert set(schemas["ProducerAcks"]["properties"]) <= set(acks)
    client_factory(gateway.url).subscribe(topic, "s")
    status, stats = admin(
        "GET", f"{gateway.http_url}/admin/v2/persistent/public/default/{topic}/stats"
    )
    assert status == 200
    assert set(schemas["TopicStats"]["properties"]) <= set(stats)
    sub = stats["subscriptions"]["s"]
    assert set(schemas["SubscriptionStats"]["properties"]) <= set(sub)
    assert set(schemas["ConsumerStats"]["properties"]) <= set(sub["consumers"][0])
