"""The OpenAPI schema tells the truth: response bodies, OpenAI-style errors, SSE streams.

FastAPI's generated schema said every 200 body was a string and every
invalid request a 422 `HTTPValidationError`; clients generated from it (and
schemathesis) were misled. Handlers return plain dicts rendered by orjson,
so the models here document the bodies without validating them at run
time (`response_model=None`, `responses=...` on each route), and
`fix_openapi` replaces the 422s with the 400 this server answers and adds
the error body as every operation's `default` response.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, ConfigDict


class _Doc(BaseModel):
    model_config = ConfigDict(extra="allow")


class ErrorDetail(_Doc):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorBody(_Doc):
    error: ErrorDetail


class ModelCard(_Doc):
    id: str
    object: str
    created: int
    owned_by: str


class ModelList(_Doc):
    object: str
    data: list[ModelCard]


class ChatOut(_Doc):
    id: str
    title: str | None
    tags: list[str]
    model: str | None
    created_at: str
    updated_at: str


class MessageOut(_Doc):
    id: str
    role: str
    content: Any = None
    output: list[dict[str, Any]] | None = None
    usage: dict[str, Any] | None = None
    status: str | None = None
    error: Any = None
    timings: dict[str, Any] | None = None
    model: str | None = None
    follow_ups: list[str] | None = None
    created_at: str


class ChatDetail(ChatOut):
    messages: list[MessageOut]
    more: bool
    """Earlier messages exist: ask again with `before` set to the first message's id."""


class ChatList(_Doc):
    data: list[ChatOut]
    total: int
    total_capped: bool
    """True: a search matched too many chats to count; `total` is then at least the
    chats up to this page, and one more when `next_cursor` is set."""
    limit: int
    offset: int
    next_cursor: str | None
    """Pass as `cursor` for the next page; null when this page is the last."""


class TurnStarted(_Doc):
    chat_id: str
    message_id: str
    user_message_id: str


class BranchShown(_Doc):
    chat_id: str
    current_id: str


class Accepted(_Doc):
    accepted: bool


class Cancelled(_Doc):
    cancelled: bool


class KeyOut(_Doc):
    id: str
    user_id: str
    name: str
    prefix: str
    """`tr-` for generated keys: no character of the secret."""
    tail: str
    """The key's last 4 characters (none for older keys and short ones): tells keys apart."""
    created_at: str
    revoked_at: str | None


class KeyCreated(KeyOut):
    key: str
    """The plaintext key, shown this once."""


class KeyList(_Doc):
    data: list[KeyOut]


class Health(_Doc):
    status: str


class OpenAIObject(_Doc):
    """A `chat.completion` or `response` object, as OpenAI documents it."""

    id: str
    object: str


SSE = {"text/event-stream": {"schema": {"type": "string"}}}


def doc(model: type[BaseModel], status: int = 200, *, stream: bool = False) -> dict[int | str, Any]:
    """`responses=` for a route: its body model (and an SSE alternative)."""
    entry: dict[str, Any] = {"model": model}
    if stream:
        entry["content"] = SSE
    return {status: entry}


def fix_openapi(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """`app.openapi` replaced: 422 → 400 with the error body, which is also every `default`."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
            _fix(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    return openapi


def _fix(schema: dict[str, Any]) -> None:
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["ErrorBody"] = ErrorBody.model_json_schema(
        ref_template="#/components/schemas/{model}"
    )
    for name, sub in components["ErrorBody"].pop("$defs", {}).items():
        components[name] = sub
    error = {
        "description": "An OpenAI-style error",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
    }
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            responses.pop("422", None)
            responses["default"] = error
            for response in responses.values():
                body = response.get("content", {}).get("application/json")
                if body is not None:  # FastAPI's "string" for our response class is wrong
                    shape = body.get("schema", {})
                    if shape.get("type") == "string":
                        shape.pop("type")
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)
