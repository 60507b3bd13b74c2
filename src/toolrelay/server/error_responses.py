"""OpenAI-style error objects for every 4xx/5xx, and the handlers that produce them.

Clients written for the OpenAI API read `{"error": {"message", "type", "param",
"code"}}`; we answer every failure in that shape, with a message that says
what to fix.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolrelay.server.logs import REQUEST_ID

log = logging.getLogger("toolrelay.server")

_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    409: "conflict_error",
    408: "invalid_request_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


class JSONBody(Response):
    """JSON rendered with orjson (FastAPI's own JSONBody is deprecated)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


class APIError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        type: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.headers = dict(headers or {})
        """Sent with the error (`Retry-After` on a 429)."""
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.type = type or _TYPES.get(
            status, "server_error" if status >= 500 else "invalid_request_error"
        )


def error_body(
    message: str,
    *,
    type: str = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def error_response(exc: APIError) -> JSONBody:
    """The error as OpenAI shapes it; a 5xx names the request id, which the log lines carry."""
    message = exc.message
    request_id = REQUEST_ID.get()
    if exc.status >= 500 and request_id:
        message = f"{message} (request id {request_id})"
    body = error_body(message, type=exc.type, code=exc.code, param=exc.param)
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else {}
    return JSONBody(body, status_code=exc.status, headers={**headers, **exc.headers})


def _location(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body",)]
    return ".".join(parts) or "body"


def invalid_request(errors: Sequence[Mapping[str, Any]]) -> APIError:
    """Validation errors (pydantic's, located from `body` on) in the words every route answers
    them with: the gate's (`server.guard`) and FastAPI's for path, query and header values."""
    first = errors[0] if errors else {}
    if first.get("type") == "json_invalid":
        return APIError(400, "The request body is not valid JSON.", code="invalid_json")
    problems = "; ".join(
        f"{_location(tuple(e.get('loc', ())))}: {e.get('msg')}" for e in errors[:5]
    )
    param = _location(tuple(first.get("loc", ()))) if first else None
    return APIError(400, f"Invalid request: {problems}", param=param, code="invalid_value")


async def _validation(_: Request, exc: Exception) -> JSONBody:
    assert isinstance(exc, RequestValidationError)
    return error_response(invalid_request(exc.errors()))


async def _api_error(_: Request, exc: Exception) -> JSONBody:
    assert isinstance(exc, APIError)
    return error_response(exc)


async def _http_error(_: Request, exc: Exception) -> JSONBody:
    assert isinstance(exc, StarletteHTTPException)
    message = exc.detail if isinstance(exc.detail, str) else "Request failed."
    if exc.status_code == 404 and message == "Not Found":
        message = "No such endpoint."
    if exc.status_code == 405:
        message = "Method not allowed on this endpoint."
    return error_response(APIError(exc.status_code, message))


async def _unexpected(_: Request, exc: Exception) -> JSONBody:
    log.exception("unhandled error", exc_info=exc)
    message = f"Internal error ({type(exc).__name__}); the server log has the details."
    return error_response(APIError(500, message, type="server_error", code="internal_error"))


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(APIError, _api_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)


class _TooLarge(Exception):
    pass


class _TooSlow(Exception):
    pass


async def _within(receive: Receive, stall_s: float) -> Message:
    """`receive()`, or `_TooSlow` when nothing came for `stall_s` seconds.

    The read is a task of its own, looked at once the timer has fired: bytes handled
    in the same loop iteration as the expired timer (a loop paused by a loaded
    machine) count as arrived. A timeout that cancelled the waiting task itself
    would win that race and answer 408 to a body that is there.
    """
    read = asyncio.ensure_future(receive())
    try:
        done, _ = await asyncio.wait({read}, timeout=stall_s)
    finally:
        if not read.done():
            read.cancel()
    if not done:
        raise _TooSlow
    return read.result()


class BodyLimit:
    """Request bodies: over `limit` bytes → 413 before they are read whole; a body that stops
    arriving for `timeout` seconds → 408, so a short body cannot hold a connection forever.

    Both hold whether the client sent a Content-Length or a chunked body: the
    checks run on every read of the body, wherever in the app it happens.
    """

    def __init__(self, app: ASGIApp, limit: int, timeout: float = 30.0) -> None:
        self.app = app
        self.limit = limit
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                await self._reject(send, 413)
                return
        seen = 0
        done = False
        started = False

        async def counted() -> Message:
            nonlocal seen, done
            if done:  # the body is in: what is left is waiting for the disconnect
                return await receive()
            message = await _within(receive, self.timeout)
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                done = not message.get("more_body", False)
                if seen > self.limit:
                    raise _TooLarge
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except (_TooLarge, _TooSlow) as exc:
            if not started:
                await self._reject(send, 413 if isinstance(exc, _TooLarge) else 408)

    async def _reject(self, send: Send, status: int) -> None:
        if status == 413:
            error = APIError(
                413,
                f"Request body too large: the limit is {self.limit} bytes.",
                code="body_too_large",
            )
        else:
            error = APIError(
                408,
                f"The request body stopped arriving for {self.timeout:g} s.",
                code="body_timeout",
            )
        response = error_response(error)
        if status == 408:
            response.headers["connection"] = "close"
        await response({"type": "http"}, _empty_receive, send)


async def _empty_receive() -> Message:
    return {"type": "http.disconnect"}
