"""`POST /v1/chat/completions` and `POST /v1/responses` served before FastAPI's router.

A streamed answer holds everything on its request's await chain for as long
as it streams. Under FastAPI that chain is long: the router, the route's
request-response wrapper with its two exit stacks, the exception wrapper, the
`Request` with the raw and the parsed body, the solved dependencies. Measured
with 200 streams open, that was about half of the memory per chat. These two
routes are the hot path of a relay, so this middleware (the innermost one:
request ids, body limits and CORS still wrap it) serves them itself.

It is not a second front door: the routes are FastAPI's own (`GuardedRoute`,
whose declaration is also the OpenAPI document), admitted by the same
`guard.admit` (body, caller, request model, and every error of them), and
their function is called with what FastAPI's dependencies would give it. All
this middleware leaves out is FastAPI's machinery around the call; nothing of
the request but what the route function kept lives on while the answer streams.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from toolrelay.server.error_responses import APIError, error_response
from toolrelay.server.gate import gate
from toolrelay.server.guard import GuardedRoute, admit
from toolrelay.server.request_info import ADMITTED
from toolrelay.server.services import Services
from toolrelay.server.streams import TurnStream

__all__ = ["LEAN_PATHS", "V1Front", "lean_routes"]

LEAN_PATHS: Final = ("/v1/chat/completions", "/v1/responses")


def lean_routes(
    routes: Iterable[BaseRoute], paths: Iterable[str] = LEAN_PATHS
) -> dict[str, GuardedRoute]:
    """The app's POST routes of `paths`, each of which must be callable without FastAPI."""
    found = {
        route.path: route
        for route in routes
        if isinstance(route, GuardedRoute)
        and "POST" in (route.methods or ())
        and route.path in paths
    }
    for path in paths:
        route = found.get(path)
        if route is None or not route.admission.lean:
            raise ValueError(f"POST {path}: not a route that takes only its body, caller, services")
    return found


class V1Front:
    """ASGI middleware: the POSTs of `routes` answered here, the rest passed on (module doc)."""

    def __init__(self, app: ASGIApp, routes: Mapping[str, GuardedRoute]) -> None:
        self.app = app
        self.routes = dict(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self.routes.get(scope["path"]) if scope["type"] == "http" else None
        if route is None or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        starting = gate()
        starting.enter()  # from its first byte on, streams already flowing give way to it
        handed = False
        try:
            response = await _prepare(route, scope, receive)
            if isinstance(response, TurnStream):
                response.gate_entered = handed = True  # its sink leaves at the first token
        finally:
            if not handed:
                starting.leave()
        if response is not None:  # the request's locals are gone: the answer holds what it needs
            await response(scope, receive, send)


async def _prepare(route: GuardedRoute, scope: Scope, receive: Receive) -> Response | None:
    """The response to send; None when the client left before its body was in."""
    request = Request(scope, receive)
    svc: Services = request.app.state.services
    try:
        admitted = await admit(request, route.admission)
        token = ADMITTED.set(request)
        try:
            response: Response = await route.endpoint(**route.admission.arguments(admitted, svc))
        finally:
            ADMITTED.reset(token)
    except APIError as exc:
        return error_response(exc)
    except ClientDisconnect:
        return None  # nobody to answer
    return response
