"""`POST /v1/chat/completions` and `POST /v1/responses` served before FastAPI's routing.

A streamed answer holds everything on its request's await chain for as long
as it streams. Under FastAPI that chain is long: the router, the route's
request-response wrapper with its two exit stacks, the exception wrapper, the
`Request` with the raw and the parsed body, the solved dependencies. Measured
with 200 streams open, that was about half of the memory per chat. These two
routes are the hot path of a relay, so this middleware (the innermost one:
request ids, body limits and CORS still wrap it) answers a valid request
itself, calling the very route functions FastAPI calls:

1. the body is read (through the body limit's reader, so 413/408 stay
   theirs) and must be a JSON object that passes the same checks
   `GuardedRoute` makes;
2. the caller is authenticated exactly as the `UserDep` dependency does;
3. the body must validate against the route's request model;
4. the route function runs and its response (`TurnStream` or JSON) is sent.

Whatever does not pass 1 or 3 is replayed to FastAPI, body included, so every
error keeps the shape, order and wording the documented API gives it; an
`APIError` of 2 or 4 is answered as FastAPI's handler answers it. Nothing of
the request but what the route function kept lives on while the answer streams.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

import orjson
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolrelay.server.auth import authenticate
from toolrelay.server.errors import APIError, error_response
from toolrelay.server.gate import gate
from toolrelay.server.guard import too_deep
from toolrelay.server.routes import openai, responses
from toolrelay.server.schemas import ChatCompletionRequest, ResponsesRequest
from toolrelay.server.services import Services
from toolrelay.server.streams import TurnStream

__all__ = ["V1Front"]

Handler = Callable[[Any, Services, Any], Awaitable[Response]]

FRONTS: Final[dict[str, tuple[type[BaseModel], Handler]]] = {
    "/v1/chat/completions": (ChatCompletionRequest, openai.chat_completions),
    "/v1/responses": (ResponsesRequest, responses.responses),
}


class V1Front:
    """ASGI middleware: the `/v1` POSTs answered here, the rest passed on (module doc)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        front = FRONTS.get(scope["path"]) if scope["type"] == "http" else None
        if front is None or scope["method"] != "POST" or not _json_type(scope):
            await self.app(scope, receive, send)
            return
        starting = gate()
        starting.enter()  # from its first byte on, streams already flowing give way to it
        handed = False
        try:
            response = await self._prepare(front, scope, receive, send)
            if isinstance(response, TurnStream):
                response.gate_entered = handed = True  # its sink leaves at the first token
        finally:
            if not handed:
                starting.leave()
        if response is not None:  # the request's locals are gone: the answer holds what it needs
            await response(scope, receive, send)

    async def _prepare(
        self, front: tuple[type[BaseModel], Handler], scope: Scope, receive: Receive, send: Send
    ) -> Response | None:
        """The response to send; None when FastAPI answered (replayed) or the client left."""
        body = await _read_body(receive)
        if body is None:
            return None  # the client left before its body was in: nobody to answer
        parsed = _parsed(body)
        if parsed is None:
            await self.app(scope, _replay(body, receive), send)
            return None
        svc: Services = scope["app"].state.services
        model, handler = front
        try:
            user = await authenticate(Request(scope), svc.keys, svc.session_secret)
            try:
                request = model.model_validate(parsed)
            except ValidationError:  # FastAPI words it (and finds the same user in the cache)
                await self.app(scope, _replay(body, receive), send)
                return None
            return await handler(request, svc, user)
        except APIError as exc:
            return error_response(exc)


def _json_type(scope: Scope) -> bool:
    """Whether FastAPI reads the body as JSON: a JSON content type (FastAPI's strict default
    reads a body without one as bytes, which the request model then refuses)."""
    for name, value in scope["headers"]:
        if name == b"content-type":
            kind: bytes = value.split(b";", 1)[0].strip().lower()
            return kind == b"application/json" or (
                kind.startswith(b"application/") and kind.endswith(b"+json")
            )
    return False


async def _read_body(receive: Receive) -> bytes | None:
    """The whole body; None if the client disconnected first."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _parsed(body: bytes) -> dict[str, Any] | None:
    """The body as a JSON object that `GuardedRoute` would pass; else None (FastAPI answers)."""
    try:
        parsed = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return None
    if not isinstance(parsed, dict) or too_deep(parsed):
        return None
    return parsed


def _replay(body: bytes, receive: Receive) -> Receive:
    """`receive` for FastAPI: the body already read, then the connection's own messages."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        return pending.pop() if pending else await receive()

    return replayed
