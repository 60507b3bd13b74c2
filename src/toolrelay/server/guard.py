"""The one gate every API request passes: its JSON body, its caller, its request model.

Every route of the API is admitted by `admit` (the `/v1` POSTs that
`server/v1_front.py` answers before FastAPI's router, and FastAPI's routes
through `GuardedRoute`), in this order; each failure is an `APIError` in
OpenAI's shape, so a change to any step is made, and tested, here once:

1. The body, for a route that takes one, is read whole (through `BodyLimit`'s
   reader: its 413 and 408 stay its own) and, unless its content type is
   another than JSON, parsed once with orjson: not JSON is a 400
   `invalid_json`, nesting deeper than `MAX_JSON_DEPTH` a 400
   `too_deeply_nested`. The standard library accepts lone surrogates
   (`"\\ud800"`) and nesting as deep as the stack, which orjson (everything
   downstream encodes with it) refuses, so such a body once crashed the turn
   or the error page. A body with another content type, or none, is not taken
   as JSON (FastAPI's strict content type): the model refuses it.
2. The caller is authenticated (`auth.authenticate`: API key or session
   cookie) when the route takes a `UserDep`, and must be an admin for an
   `AdminDep`: 401, 403.
3. The body is validated against the route's body type as FastAPI validates
   it, errors worded by `errors.invalid_request`: 400 `invalid_value`.

What a route needs is read off its function's signature, the one declaration
FastAPI also documents (`Admission.of`). FastAPI's handler is then given an
`AdmittedRequest`: its `json()` is the validated body (FastAPI passes a model
instance on without validating it again), its `user` what `UserDep` and
`AdminDep` return. Reading the body before FastAPI does, outside its catch-all
around body parsing, also keeps the 413 of a chunked body over the limit
(FastAPI would answer 400 "There was an error parsing the body").
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Final, get_args, get_origin, get_type_hints

import orjson
from fastapi import Depends, Request, Response
from fastapi.params import Depends as DependsMarker
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.types import Receive, Scope

from toolrelay.adapters.stores import User
from toolrelay.server.auth import authenticate
from toolrelay.server.error_responses import APIError, invalid_request
from toolrelay.server.services import Services, services

__all__ = [
    "MAX_JSON_DEPTH",
    "AdminDep",
    "Admission",
    "AdmittedRequest",
    "GuardedRoute",
    "UserDep",
    "admit",
    "too_deep",
]

MAX_JSON_DEPTH: Final = 64
"""Nested arrays/objects a request body may have; far below orjson's 254, which the upstream
request (several levels more) must also fit under."""


class _Missing(enum.Enum):
    BODY = "no body"


MISSING: Final = _Missing.BODY
"""An empty body (FastAPI: the body is a required field that is missing)."""


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


def json_type(content_type: str | None) -> bool | None:
    """True for a JSON content type (`application/json`, `application/*+json`), False for
    another, None for none."""
    if content_type is None:
        return None
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind == "application/json" or (
        kind.startswith("application/") and kind.endswith("+json")
    )


async def read_json(request: Request) -> tuple[bytes, Any]:
    """Step 1: the body's bytes, and its parsed value (the bytes when it is not declared
    JSON, `MISSING` when empty)."""
    body = await request.body()
    if not body:
        return body, MISSING
    declared = json_type(request.headers.get("content-type"))
    if declared is False:
        return body, body
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
    return body, parsed if declared else body  # no content type: checked, not taken as JSON


def validate(adapter: TypeAdapter[Any], value: Any) -> Any:
    """Step 3: the body as the route's type, validated as FastAPI validates a body."""
    if value is MISSING:
        raise invalid_request([{"type": "missing", "loc": ("body",), "msg": "Field required"}])
    try:
        return adapter.validate_python(value, from_attributes=True)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        raise invalid_request([{**e, "loc": ("body", *e["loc"])} for e in errors]) from None


class Auth(enum.Enum):
    NONE = "none"
    USER = "user"
    ADMIN = "admin"


@dataclass(frozen=True, slots=True)
class Admitted:
    raw: bytes
    body: Any
    user: User | None


async def current_user(request: Request) -> User:
    """`UserDep`: the caller `admit` authenticated for this request."""
    if isinstance(request, AdmittedRequest) and request.user is not None:
        return request.user
    raise RuntimeError(f"{request.url.path}: a route taking UserDep must be a GuardedRoute")


async def admin_user(request: Request) -> User:
    """`AdminDep`: the caller, whom `admit` found to be an admin."""
    return await current_user(request)


UserDep = Annotated[User, Depends(current_user)]
AdminDep = Annotated[User, Depends(admin_user)]
_AUTH: Final = {current_user: Auth.USER, admin_user: Auth.ADMIN}


@dataclass(frozen=True, slots=True)
class Admission:
    """What a route's function needs admitted, and the names it takes it by."""

    auth: Auth = Auth.NONE
    body: TypeAdapter[Any] | None = None
    body_name: str | None = None
    user_name: str | None = None
    services_name: str | None = None
    lean: bool = True
    """Whether the function takes nothing else, so it can be called without FastAPI."""

    @classmethod
    def of(cls, endpoint: Callable[..., Any]) -> Admission:
        """Read off the signature: a `UserDep`/`AdminDep` parameter is the caller, one typed
        as a pydantic model or a dict is the JSON body (as FastAPI reads it)."""
        hints = get_type_hints(endpoint, include_extras=True)
        found: dict[str, Any] = {"lean": True}
        for name in inspect.signature(endpoint).parameters:
            hint: Any = hints.get(name)
            dependency = _dependency(hint)
            if dependency in _AUTH:
                found.update(auth=_AUTH[dependency], user_name=name)
            elif dependency is services:
                found["services_name"] = name
            elif _is_body(hint):
                if "body" in found:
                    raise TypeError(f"{endpoint.__name__}: one body parameter, not several")
                found.update(body=TypeAdapter(hint), body_name=name)
            else:
                found["lean"] = False
        return cls(**found)

    def arguments(self, admitted: Admitted, svc: Services) -> dict[str, Any]:
        """The keyword arguments of a lean route's function."""
        given = {self.body_name: admitted.body, self.user_name: admitted.user}
        given[self.services_name] = svc
        return {name: value for name, value in given.items() if name is not None}


def _dependency(hint: Any) -> Any:
    if get_origin(hint) is not Annotated:
        return None
    marks = [m for m in get_args(hint)[1:] if isinstance(m, DependsMarker)]
    return marks[0].dependency if marks else None


def _is_body(hint: Any) -> bool:
    return get_origin(hint) is dict or (isinstance(hint, type) and issubclass(hint, BaseModel))


async def admit(request: Request, admission: Admission) -> Admitted:
    """Parse, authenticate, validate (module doc): what the route's function is given."""
    raw, value = await read_json(request) if admission.body is not None else (b"", MISSING)
    user = None
    if admission.auth is not Auth.NONE:
        svc: Services = request.app.state.services
        user = await authenticate(request, svc.keys, svc.session_secret, svc.failures)
        if admission.auth is Auth.ADMIN and not user.is_admin:
            raise APIError(403, "This endpoint needs an admin API key.", code="not_admin")
    body = validate(admission.body, value) if admission.body is not None else None
    return Admitted(raw, body, user)


class AdmittedRequest(Request):
    """The request FastAPI's handler is given once admitted: the body already read and
    validated, the caller known."""

    def __init__(self, scope: Scope, receive: Receive, admitted: Admitted) -> None:
        super().__init__(scope, receive)
        self.admitted = admitted

    @property
    def user(self) -> User | None:
        return self.admitted.user

    async def body(self) -> bytes:
        return self.admitted.raw or await super().body()

    async def json(self) -> Any:
        return self.admitted.body


class GuardedRoute(APIRoute):
    """An APIRoute whose requests pass `admit` before FastAPI's handler sees them."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        self.admission = Admission.of(endpoint)  # before FastAPI builds the handler with it
        super().__init__(path, endpoint, **kwargs)
        if (self.admission.body is None) != (self.body_field is None):
            raise TypeError(f"{path}: FastAPI and the gate disagree on whether it takes a body")

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        admission = self.admission

        async def guarded(request: Request) -> Response:
            admitted = await admit(request, admission)
            return await handler(AdmittedRequest(request.scope, request.receive, admitted))

        return guarded
