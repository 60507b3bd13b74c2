"""OpenAPI 3.0/3.1 documents → tool operations, and arguments → HTTP requests (sans-IO).

Owns: one `Operation` per path + method (named by `operationId`, else
method + path), its path/query/header parameters and JSON body merged into one
JSON schema for the model with every local `$ref` resolved (a recursive one is
cut to `{}` rather than looping), and the reverse step: the model's arguments
split back into path, query, headers and body.

Body properties sit beside the parameters when the body is an object whose
property names do not clash with a parameter's; otherwise the whole body is
one `body` argument. Must not do I/O: the adapter fetches and sends.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

__all__ = ["HttpRequest", "Operation", "build_request", "operations"]

_METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]+")
_LOCATIONS = ("path", "query", "header")


@dataclass(frozen=True, slots=True)
class Operation:
    """One callable operation of the document."""

    name: str
    method: str
    path: str
    description: str
    parameters: dict[str, Any]
    """The merged JSON schema the model fills."""
    locations: dict[str, str] = field(default_factory=dict)
    """Argument name → `path`, `query`, `header` or `body` (a body property)."""
    body_whole: bool = False
    """The body is the single `body` argument, not spread over properties."""


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    path: str
    query: dict[str, Any]
    headers: dict[str, str]
    json: Any = None
    has_body: bool = False


def operations(
    document: Mapping[str, Any], *, skip_headers: frozenset[str] = frozenset()
) -> list[Operation]:
    """Every operation of an OpenAPI 3.x document, in document order.

    Header parameters named in `skip_headers` (lower case) are left out: the
    adapter sets them itself (auth), the model must not be asked for them.
    """
    resolver = _Resolver(document)
    found: list[Operation] = []
    for path, item in (document.get("paths") or {}).items():
        item = resolver.resolve(item)
        if not isinstance(item, Mapping):
            continue
        shared = item.get("parameters") or []
        for method in _METHODS:
            op = item.get(method)
            if isinstance(op, Mapping):
                found.append(_operation(str(path), method, op, shared, resolver, skip_headers))
    return found


def build_request(op: Operation, arguments: Mapping[str, Any]) -> HttpRequest:
    """Split arguments back into the request; unknown keys go to the body (or the query)."""
    path = op.path
    query: dict[str, Any] = {}
    headers: dict[str, str] = {}
    body: dict[str, Any] = {}
    whole: Any = None
    for key, value in arguments.items():
        where = op.locations.get(key, "body" if _takes_body(op) else "query")
        if where == "path":
            path = path.replace("{" + key + "}", quote(str(value), safe=""))
        elif where == "query":
            query[key] = _query_value(value)
        elif where == "header":
            headers[key] = str(value)
        elif op.body_whole and key == "body":
            whole = value
        else:
            body[key] = value
    has_body = _takes_body(op) and (whole is not None if op.body_whole else True)
    payload = whole if op.body_whole else body
    return HttpRequest(op.method.upper(), path, query, headers, payload, has_body)


def _takes_body(op: Operation) -> bool:
    return op.body_whole or "body" in op.locations.values()


def _query_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def _operation(
    path: str,
    method: str,
    op: Mapping[str, Any],
    shared: list[Any],
    resolver: _Resolver,
    skip_headers: frozenset[str],
) -> Operation:
    name = op.get("operationId") or f"{method}{path}"
    summary = str(op.get("summary") or "")
    details = str(op.get("description") or "")
    description = (
        summary if not details or details == summary else f"{summary}\n\n{details}".strip()
    )
    properties: dict[str, Any] = {}
    required: list[str] = []
    locations: dict[str, str] = {}
    for raw in [*shared, *(op.get("parameters") or [])]:  # the operation's own win
        param = resolver.resolve(raw)
        if not isinstance(param, Mapping) or param.get("in") not in _LOCATIONS:
            continue
        pname = str(param.get("name"))
        if param["in"] == "header" and pname.lower() in skip_headers:
            continue
        prop = dict(resolver.resolve(param.get("schema") or {}))
        if param.get("description") and "description" not in prop:
            prop["description"] = param["description"]
        properties[pname] = prop
        locations[pname] = str(param["in"])
        if (param.get("required") or param["in"] == "path") and pname not in required:
            required.append(pname)
    body_whole = _add_body(op, resolver, properties, required, locations)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return Operation(
        _tool_name(str(name)), method, path, description, schema, locations, body_whole
    )


def _add_body(
    op: Mapping[str, Any],
    resolver: _Resolver,
    properties: dict[str, Any],
    required: list[str],
    locations: dict[str, str],
) -> bool:
    """Merge a JSON request body into the schema; True when it stays one `body` argument."""
    body = resolver.resolve(op.get("requestBody"))
    if not isinstance(body, Mapping):
        return False
    content = body.get("content") or {}
    media = next((v for k, v in content.items() if "json" in k), None)
    if not isinstance(media, Mapping):
        media = next(iter(content.values()), None) if content else None
    schema = (
        resolver.resolve((media or {}).get("schema") or {}) if isinstance(media, Mapping) else {}
    )
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if isinstance(props, Mapping) and props and not set(props) & set(properties):
        for key, value in props.items():
            properties[key] = value
            locations[key] = "body"
        required.extend(k for k in schema.get("required") or [] if k not in required)
        return False
    properties["body"] = schema or {"type": "object"}
    locations["body"] = "body"
    if body.get("required"):
        required.append("body")
    return True


def _tool_name(name: str) -> str:
    return _BAD_NAME_CHARS.sub("_", name).strip("_")[:64] or "operation"


class _Resolver:
    """Inlines local `$ref`s (`#/components/...`); a ref inside itself becomes `{}`."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.document = document

    def resolve(self, node: Any, seen: frozenset[str] = frozenset()) -> Any:
        if isinstance(node, list):
            return [self.resolve(v, seen) for v in node]
        if not isinstance(node, Mapping):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in seen:
                return {"description": node.get("description", "")} if "description" in node else {}
            target = self.lookup(ref)
            rest = {k: v for k, v in node.items() if k != "$ref"}
            resolved = self.resolve(target, seen | {ref})
            return (
                {**resolved, **self.resolve(rest, seen)} if isinstance(resolved, dict) else resolved
            )
        return {k: self.resolve(v, seen) for k, v in node.items()}

    def lookup(self, ref: str) -> Any:
        if not ref.startswith("#/"):
            return {}  # remote refs are not fetched
        node: Any = self.document
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, Mapping) or part not in node:
                return {}
            node = node[part]
        return node
