"""`GET /api/tools`: every tool the server can offer, with its source and status."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from toolrelay.errors import ConfigError
from toolrelay.server.errors import APIError
from toolrelay.server.guard import GuardedRoute, UserDep
from toolrelay.server.services import ServicesDep

router = APIRouter(route_class=GuardedRoute)


@router.get("/api/tools")
async def list_tools(svc: ServicesDep, _: UserDep) -> dict[str, Any]:
    """Lists (and so starts) every tool server; one that cannot start shows its error."""
    registry = svc.registry
    infos = await registry.describe_tools()
    servers = [
        {"name": s.name, "state": s.state, "error": s.error} for s in registry.toolbox.status()
    ]
    tools = [
        {"name": i.name, "description": i.description, "source": i.source, "status": i.status}
        for i in infos
        if i.name
    ]
    return {"data": tools, "servers": servers}


@router.put("/api/tools/{server}/user-valves")
async def set_user_valves(
    server: str, values: dict[str, Any], svc: ServicesDep, user: UserDep
) -> dict[str, Any]:
    """The caller's own `UserValves` for an Open WebUI tool file (checked now, used per call)."""
    source = svc.registry.sources.get(server)
    setter = getattr(source, "set_user_valves", None)
    if source is None or not callable(setter):
        raise APIError(404, f"No tool file with user valves named '{server}'.", code="not_found")
    try:
        setter(user.id, values)
    except ConfigError as exc:
        raise APIError(400, str(exc), code="invalid_valves") from None
    return {"server": server, "valves": values}
