"""Admin REST v2: topic schemas and the schema policies, with Pulsar's paths and JSON.

Schemas (Pulsar's ``SchemasResource`` / ``SchemasResourceBase``), under
``/admin/v2/schemas/{tenant}/{namespace}/{topic}``; the topic is persistent and has no
domain in the path (``SchemasResourceBase.domain()``), and a partition's schema is its
partitioned topic's:

* ``GET .../schema``: the latest version, a ``GetSchemaResponse`` ``{"version", "type",
  "timestamp", "data", "properties"}``; 404 ``Schema not found`` without one (or after a
  deletion);
* ``GET .../schema/{version}``: that version, 404 when it is not there or was deleted;
* ``GET .../schemas``: ``GetAllVersionsSchemaResponse`` ``{"getSchemaResponses": [...]}``,
  the versions since the latest deletion;
* ``POST .../schema`` with a ``PostSchemaPayload`` ``{"type", "schema", "properties"}``:
  registers it under the effective compatibility strategy, even when
  ``isAllowAutoUpdateSchema`` is false (that flag is for producers); answers a
  ``PostSchemaResponse``, whose ``SchemaVersion`` Jackson writes as
  ``{"version": {"version": n}}``; 409 when incompatible, 422 for invalid schema data. A
  ``KEY_VALUE`` payload's ``schema`` is ``{"key": <definition>, "value": <definition>}``
  (``""`` for a primitive side) and its properties name the sides' types
  (``key.schema.type``, ``value.schema.type``, ``kv.encoding.type``); it is stored in the
  binary form KEY_VALUE producers send, and read back in the JSON form, as Pulsar's
  ``SchemaUtils`` converts both ways (:class:`~pulsar_gateway.core.SchemaData`);
* ``DELETE .../schema[?force=true]``: a ``DeleteSchemaResponse`` ``{"version": n}`` (see
  :mod:`pulsar_gateway.core.topics.schema_registry` for what a deletion does);
* ``POST .../compatibility`` with a payload: 202 and an ``IsCompatibilityResponse``
  ``{"compatibility", "schemaCompatibilityStrategy"}`` (Jackson names the Lombok boolean
  ``isCompatibility`` ``compatibility``; ``isCompatibility`` is sent too). Pulsar's broker
  fails the request with the incompatibility as an error; this answers ``false``;
* ``POST .../version`` with a payload: ``{"version": n}`` (``LongSchemaVersionResponse``),
  -1 when no version has that schema (``NO_SCHEMA_VERSION``), as Pulsar answers. ``PUT``
  is accepted on the same path too. Both read a KEY_VALUE payload as an upload does (Pulsar
  takes its JSON text as the data there, so it never finds an uploaded KEY_VALUE version).

The schema policies are :data:`SCHEMA_POLICIES` (``Namespaces`` / ``PersistentTopics``
paths and methods), served by :mod:`pulsar_gateway.adapters.http.admin.policies`; invalid values
are 412.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from pulsar_gateway.adapters.http.admin import policies
from pulsar_gateway.adapters.http.admin.policies import PolicySpec
from pulsar_gateway.adapters.http.described import BOOL, INT, STR, STR_MAP, Doc, obj
from pulsar_gateway.adapters.resource import fail, flag, handler, read_json
from pulsar_gateway.core import (
    ALLOW_AUTO_UPDATE_POLICY,
    AUTO_UPDATE_STRATEGIES,
    AUTO_UPDATE_STRATEGY_POLICY,
    COMPATIBILITY_STRATEGY_POLICY,
    DEFAULT_ALLOW_AUTO_UPDATE,
    DEFAULT_VALIDATION_ENFORCED,
    SCHEMA_STRATEGIES,
    SCHEMA_TYPES,
    VALIDATION_ENFORCED_POLICY,
    InvalidTopicName,
    SchemaData,
    Services,
    TopicName,
    parse_topic_name,
    schema_type_name,
)

__all__ = ["DOCS", "SCHEMA_POLICIES", "add_routes"]

BASE = "/admin/v2/schemas/{tenant}/{namespace}/{topic}"


def _topic(request: web.Request) -> TopicName:
    info = request.match_info
    try:
        topic = parse_topic_name(
            f"persistent://{info['tenant']}/{info['namespace']}/{info['topic']}"
        )
    except InvalidTopicName:
        raise fail(web.HTTPPreconditionFailed, "Topic name is not valid") from None
    return topic.partitioned_topic_name


async def _existing_topic(services: Services, request: web.Request) -> TopicName:
    """The path's topic, its namespace required to exist (404 otherwise)."""
    topic = _topic(request)
    await services.tenants.require_topic_namespace(topic.namespace)
    return topic


def _schema_name(topic: TopicName) -> str:
    # Pulsar's TopicName.getSchemaName: tenant/namespace/local name
    return f"{topic.namespace}/{topic.local_name}"


async def _payload(request: web.Request, topic: TopicName) -> SchemaData:
    """The ``PostSchemaPayload`` of the body, as the schema the registry stores."""
    body = await read_json(request)
    if not isinstance(body, dict):
        raise fail(web.HTTPBadRequest, 'Expected a PostSchemaPayload {"type", "schema", ...}')
    type_name = body.get("type")
    if not isinstance(type_name, str) or type_name not in SCHEMA_TYPES:
        raise fail(web.HTTPUnprocessableEntity, f"Invalid schema type: {str(type_name)[:100]}")
    definition = body.get("schema")
    if definition is None:
        definition = ""
    if not isinstance(definition, str):
        raise fail(web.HTTPBadRequest, "schema must be a string")
    properties = body.get("properties") or {}
    if not isinstance(properties, dict) or not all(isinstance(v, str) for v in properties.values()):
        raise fail(web.HTTPBadRequest, "properties must be an object of strings")
    try:
        # AVRO/JSON/PROTOBUF must be JSON (StructSchemaDataValidator); KEY_VALUE is
        # converted to its binary form (convertKeyValueDataStringToSchemaInfoSchema)
        return SchemaData.from_definition(
            SCHEMA_TYPES[type_name],
            _schema_name(topic),
            definition,
            tuple(sorted((str(k), v) for k, v in properties.items())),
        )
    except ValueError as exc:
        raise fail(
            web.HTTPUnprocessableEntity, f"Invalid {type_name} schema definition: {exc}"
        ) from None


def _get_schema_response(version: int, schema: SchemaData) -> dict[str, Any]:
    # GetSchemaResponse; the data as text, as Pulsar's new String(data, UTF_8), a
    # KEY_VALUE schema's as {"key", "value"} (convertSchemaAndMetadataToGetSchemaResponse)
    return {
        "version": version,
        "type": schema_type_name(schema.type),
        "timestamp": schema.timestamp,
        "data": schema.definition_text(),
        "properties": dict(schema.properties),
    }


async def get_latest(services: Services, request: web.Request) -> dict[str, Any]:
    topic = await _existing_topic(services, request)
    try:
        version, schema = await services.schemas.get(topic)
    except LookupError as exc:
        raise fail(web.HTTPNotFound, str(exc)) from None
    return _get_schema_response(version, schema)


async def get_version(services: Services, request: web.Request) -> dict[str, Any]:
    topic = await _existing_topic(services, request)
    raw = request.match_info["version"]
    try:
        number = int(raw)
    except ValueError:
        raise fail(web.HTTPBadRequest, f"Invalid schema version: {raw[:100]}") from None
    try:
        version, schema = await services.schemas.get(topic, number)
    except LookupError as exc:
        raise fail(web.HTTPNotFound, str(exc)) from None
    return _get_schema_response(version, schema)


async def get_all(services: Services, request: web.Request) -> dict[str, Any]:
    topic = await _existing_topic(services, request)
    versions = await services.schemas.versions(topic)
    return {"getSchemaResponses": [_get_schema_response(v, s) for v, s in versions]}


async def post_schema(services: Services, request: web.Request) -> dict[str, Any]:
    topic = await _existing_topic(services, request)
    schema = await _payload(request, topic)
    version = await services.schemas.upload(topic, schema)  # IncompatibleSchema: 409
    return {"version": {"version": version}}


async def delete_schema(services: Services, request: web.Request) -> dict[str, Any]:
    topic = await _existing_topic(services, request)
    return {"version": await services.schemas.delete(topic, force=flag(request, "force"))}


async def compatibility(services: Services, request: web.Request) -> web.Response:
    topic = await _existing_topic(services, request)
    schema = await _payload(request, topic)
    compatible, strategy, _ = await services.schemas.is_compatible(topic, schema)
    body = {
        "compatibility": compatible,
        "isCompatibility": compatible,
        "schemaCompatibilityStrategy": strategy,
    }
    return web.json_response(body, status=202)


async def version_of(services: Services, request: web.Request) -> dict[str, Any]:
    topic = await _existing_topic(services, request)
    version = await services.schemas.find_version(topic, await _payload(request, topic))
    return {"version": -1 if version is None else version}


# -- schema policies ------------------------------------------------------------------------


def _strategy(value: Any) -> str:
    if not isinstance(value, str) or value not in SCHEMA_STRATEGIES:
        raise ValueError(f"expected one of {', '.join(SCHEMA_STRATEGIES)}")
    return str(value)


def _auto_update_strategy(value: Any) -> str:
    if not isinstance(value, str) or value not in AUTO_UPDATE_STRATEGIES:
        raise ValueError(f"expected one of {', '.join(AUTO_UPDATE_STRATEGIES)}")
    return str(value)


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("expected true or false")
    return value


_STRATEGY_SCHEMA = {"type": "string", "enum": list(SCHEMA_STRATEGIES)}

#: Pulsar's schema policies: at namespace level ``Namespaces`` has no DELETE for them and
#: sets the strategies with PUT; at topic level ``PersistentTopics`` has
#: ``schemaCompatibilityStrategy`` (PUT) and ``schemaValidationEnforced`` (POST), both with
#: DELETE. One stored name serves both levels, so the effective value is the topic's, else
#: the namespace's.
SCHEMA_POLICIES: tuple[PolicySpec, ...] = (
    PolicySpec(
        COMPATIBILITY_STRATEGY_POLICY,
        "schemaCompatibilityStrategy",
        None,
        _strategy,
        namespace_default=lambda _: "UNDEFINED",  # Policies.schema_compatibility_strategy
        schema=_STRATEGY_SCHEMA,
        set_methods=("PUT",),
        removable=False,
    ),
    PolicySpec(
        COMPATIBILITY_STRATEGY_POLICY,
        None,
        "schemaCompatibilityStrategy",
        _strategy,
        schema=_STRATEGY_SCHEMA,
        set_methods=("PUT",),
    ),
    PolicySpec(
        AUTO_UPDATE_STRATEGY_POLICY,
        "schemaAutoUpdateCompatibilityStrategy",
        None,
        _auto_update_strategy,
        schema={"type": "string", "enum": list(AUTO_UPDATE_STRATEGIES)},
        set_methods=("PUT",),
        removable=False,
    ),
    PolicySpec(
        VALIDATION_ENFORCED_POLICY,
        "schemaValidationEnforced",
        None,
        _bool,
        namespace_default=lambda _: DEFAULT_VALIDATION_ENFORCED,
        schema=BOOL,
        removable=False,
    ),
    PolicySpec(VALIDATION_ENFORCED_POLICY, None, "schemaValidationEnforced", _bool, schema=BOOL),
    PolicySpec(
        ALLOW_AUTO_UPDATE_POLICY,
        "isAllowAutoUpdateSchema",
        None,
        _bool,
        namespace_default=lambda _: DEFAULT_ALLOW_AUTO_UPDATE,
        schema=BOOL,
        removable=False,
    ),
)


# -- OpenAPI ------------------------------------------------------------------------------

_TAG = "schemas"
_AUTHORITATIVE = (("authoritative", "boolean"),)
_PAYLOAD = obj(type={"type": "string", "enum": list(SCHEMA_TYPES)}, schema=STR, properties=STR_MAP)
_GET_SCHEMA = obj(version=INT, type=STR, timestamp=INT, data=STR, properties=STR_MAP)
_VERSION = obj(version=INT)

DOCS: dict[tuple[str, str], Doc] = {
    ("GET", f"{BASE}/schema"): Doc(
        _TAG,
        "The topic's latest schema (GetSchemaResponse)",
        response=_GET_SCHEMA,
        query=_AUTHORITATIVE,
    ),
    ("GET", f"{BASE}/schema/{{version}}"): Doc(
        _TAG, "A version of the topic's schema", response=_GET_SCHEMA, query=_AUTHORITATIVE
    ),
    ("GET", f"{BASE}/schemas"): Doc(
        _TAG,
        "Every version of the topic's schema since its latest deletion",
        response=obj(getSchemaResponses={"type": "array", "items": _GET_SCHEMA}),
        query=_AUTHORITATIVE,
    ),
    ("POST", f"{BASE}/schema"): Doc(
        _TAG,
        "Upload a schema (PostSchemaPayload) under the effective compatibility strategy",
        body=_PAYLOAD,
        response=obj(version=_VERSION),
        query=_AUTHORITATIVE,
    ),
    ("DELETE", f"{BASE}/schema"): Doc(
        _TAG,
        "Delete the topic's schema (force: erase its history)",
        response=_VERSION,
        query=(*_AUTHORITATIVE, ("force", "boolean")),
    ),
    ("POST", f"{BASE}/compatibility"): Doc(
        _TAG,
        "Whether a schema could be uploaded (IsCompatibilityResponse)",
        body=_PAYLOAD,
        response=obj(compatibility=BOOL, isCompatibility=BOOL, schemaCompatibilityStrategy=STR),
        query=_AUTHORITATIVE,
        ok=202,
    ),
    ("POST", f"{BASE}/version"): Doc(
        _TAG,
        "The version of a schema on the topic, -1 when none",
        body=_PAYLOAD,
        response=_VERSION,
        query=_AUTHORITATIVE,
    ),
    ("PUT", f"{BASE}/version"): Doc(
        _TAG,
        "The version of a schema on the topic, -1 when none (as POST)",
        body=_PAYLOAD,
        response=_VERSION,
        query=_AUTHORITATIVE,
    ),
}


def add_routes(app: web.Application) -> None:
    """Register the schema routes and the schema policies' routes."""
    app.router.add_get(f"{BASE}/schema", handler(get_latest))
    app.router.add_get(f"{BASE}/schema/{{version}}", handler(get_version))
    app.router.add_get(f"{BASE}/schemas", handler(get_all))
    app.router.add_post(f"{BASE}/schema", handler(post_schema))
    app.router.add_delete(f"{BASE}/schema", handler(delete_schema))
    app.router.add_post(f"{BASE}/compatibility", handler(compatibility))
    app.router.add_post(f"{BASE}/version", handler(version_of))
    app.router.add_put(f"{BASE}/version", handler(version_of))
    policies.add_routes(app, SCHEMA_POLICIES)
