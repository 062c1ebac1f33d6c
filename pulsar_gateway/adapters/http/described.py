"""How an HTTP operation is described in the OpenAPI document (``openapi.py``): the
:class:`Doc` each route module gives its routes, and the JSON schema pieces they share.

A route module that serves operations exports ``DOCS: dict[(method, canonical path), Doc]``
and ``openapi.py`` merges them, so a route and its description are written side by side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["BOOL", "INT", "NUM", "STR", "STR_MAP", "TOPIC", "Doc", "obj"]

#: The topic path every topic-level operation starts with.
TOPIC = "/admin/v2/{domain}/{tenant}/{namespace}/{topic}"


@dataclass(frozen=True, slots=True)
class Doc:
    """One operation: its tag, summary, JSON request and response components (names in
    ``openapi.SCHEMAS``, or a literal JSON schema), query parameters and success status."""

    tag: str
    summary: str
    body: str | dict[str, Any] | None = None
    response: str | dict[str, Any] | None = None
    query: tuple[tuple[str, str], ...] = ()
    ok: int = 200
    content_type: str = "application/json"


def obj(**properties: Any) -> dict[str, Any]:
    """An object schema with these properties, open to more (Pulsar's objects have more)."""
    return {"type": "object", "properties": properties, "additionalProperties": True}


STR = {"type": "string"}
INT = {"type": "integer", "format": "int64"}
NUM = {"type": "number"}
BOOL = {"type": "boolean"}
STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
