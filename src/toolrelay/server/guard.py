"""Request bodies checked before FastAPI sees them: valid JSON, sane depth, no lone surrogates.

FastAPI parses bodies with the standard library, which accepts lone
surrogates (`"\\ud800"`) and nesting as deep as the interpreter's stack;
orjson, which everything downstream encodes with, refuses both (surrogates
always, nesting past 254 levels), so such a body used to be accepted and then
crash the turn or the error page. Here every JSON body is parsed once with
orjson (the result is handed on, not parsed again) and refused with a 400
when it is not valid JSON or nests deeper than `MAX_JSON_DEPTH`.

Reading the body here, outside FastAPI's catch-all around body parsing, also
lets the body-size limit answer 413 for a chunked body instead of FastAPI's
400 "There was an error parsing the body".
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Final

import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute

from toolrelay.server.errors import APIError

MAX_JSON_DEPTH: Final = 64
"""Nested arrays/objects a request body may have; far below orjson's 254, which the upstream
request (several levels more) must also fit under."""

_BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH"})


def too_deep(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether parsed JSON nests containers deeper than `limit` (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        node, depth = stack.pop()
        children: Iterable[Any] = node.values() if isinstance(node, dict) else node
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _is_json(request: Request) -> bool:
    ctype = request.headers.get("content-type")
    if ctype is None:
        return True  # FastAPI reads a body without a content type as JSON
    kind = ctype.split(";", 1)[0].strip().lower()
    return kind == "application/json" or (
        kind.startswith("application/") and kind.endswith("+json")
    )


async def check_body(request: Request) -> None:
    """Parse and check a JSON body; FastAPI then uses the parsed value as is."""
    if request.method not in _BODY_METHODS or not _is_json(request):
        return
    body = await request.body()
    if not body:
        return
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise APIError(
            400, f"The request body is not valid JSON: {exc}.", code="invalid_json"
        ) from None
    if too_deep(parsed):
        raise APIError(
            400,
            f"The request body nests deeper than {MAX_JSON_DEPTH} levels.",
            code="too_deeply_nested",
        )
    request._json = parsed  # Starlette's cache of `await request.json()`: parsed once


class GuardedRoute(APIRoute):
    """An APIRoute whose body is checked by `check_body` before FastAPI parses it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            await check_body(request)
            return await handler(request)

        return guarded
