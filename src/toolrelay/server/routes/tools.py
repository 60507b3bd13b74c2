"""`GET /api/tools`: every tool the server can offer, with its source and status."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from toolrelay.server.services import ServicesDep, UserDep

router = APIRouter()


@router.get("/api/tools")
async def list_tools(svc: ServicesDep, _: UserDep) -> dict[str, Any]:
    """Lists (and so starts) every tool server; one that cannot start shows its error."""
    registry = svc.registry
    infos = await registry.toolbox.describe()
    servers = [
        {"name": s.name, "state": s.state, "error": s.error} for s in registry.toolbox.status()
    ]
    tools = [
        {"name": i.name, "description": i.description, "source": i.source, "status": i.status}
        for i in infos
        if i.name
    ]
    return {"data": tools, "servers": servers}
