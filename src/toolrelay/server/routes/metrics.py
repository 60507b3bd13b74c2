"""`GET /metrics`: the Prometheus text format, for admin keys (`server.metrics` has the list).

With `metrics_port` set the numbers are served there instead, without a key,
and this endpoint is a 404, so they are never on the public port unguarded.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from toolrelay.server.error_responses import APIError
from toolrelay.server.guard import AdminDep, GuardedRoute
from toolrelay.server.metrics import CONTENT_TYPE, Metrics
from toolrelay.server.services import ServicesDep

router = APIRouter(route_class=GuardedRoute)


@router.get("/metrics", response_class=Response, responses={200: {"content": {CONTENT_TYPE: {}}}})
async def metrics(request: Request, svc: ServicesDep, _: AdminDep) -> Response:
    if svc.settings.metrics_port is not None:
        raise APIError(404, "Metrics are served on their own port (metrics_port).")
    found: Metrics = request.app.state.metrics
    return Response(found.render(), media_type=CONTENT_TYPE)
