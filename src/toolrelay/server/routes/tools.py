"""`GET /api/tools`: every tool the server can offer, with its source and status."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from toolrelay.errors import ConfigError
from toolrelay.server.error_responses import APIError
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


def _valved(svc: Any, server: str) -> Any:
    source = svc.registry.sources.get(server)
    if source is None or not callable(getattr(source, "check_user_valves", None)):
        raise APIError(404, f"No tool file with user valves named '{server}'.", code="not_found")
    return source


@router.get("/api/tools/{server}/user-valves")
async def get_user_valves(server: str, svc: ServicesDep, user: UserDep) -> dict[str, Any]:
    """The caller's own `UserValves` values for an Open WebUI tool file ({} when unset)."""
    _valved(svc, server)
    values = await svc.store.get_user_valves(user.id, server)
    return {"server": server, "valves": values or {}}


@router.put("/api/tools/{server}/user-valves")
async def set_user_valves(
    server: str, values: dict[str, Any], svc: ServicesDep, user: UserDep
) -> dict[str, Any]:
    """The caller's own `UserValves` for an Open WebUI tool file: checked against the
    file's `UserValves` now (400 names the fields, never the values), stored per user
    and tool, read by every worker at each call."""
    source = _valved(svc, server)
    try:
        source.check_user_valves(values)
    except ConfigError as exc:
        raise APIError(400, str(exc), code="invalid_valves") from None
    await svc.store.set_user_valves(user.id, server, values)
    return {"server": server, "valves": values}
