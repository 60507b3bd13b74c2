"""Admin endpoints (API keys); the health checks are in `health.py`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from toolrelay.adapters.stores import ApiKey
from toolrelay.server.errors import APIError
from toolrelay.server.guard import AdminDep, GuardedRoute
from toolrelay.server.openapi import KeyCreated, KeyList, doc
from toolrelay.server.schemas import KeyCreate
from toolrelay.server.services import ServicesDep

router = APIRouter(route_class=GuardedRoute)


def key_json(key: ApiKey) -> dict[str, Any]:
    return {
        "id": key.id,
        "user_id": key.user_id,
        "name": key.name,
        "prefix": key.prefix,
        "created_at": key.created_at.isoformat(),
        "revoked_at": key.revoked_at.isoformat() if key.revoked_at else None,
    }


@router.post(
    "/api/admin/keys", status_code=201, response_model=None, responses=doc(KeyCreated, 201)
)
async def create_key(body: KeyCreate, svc: ServicesDep, admin: AdminDep) -> dict[str, Any]:
    user_id = admin.id
    if body.user:
        user = await svc.store.user_named(body.user)
        if user is None or user.is_admin != body.admin:  # never hand out more, or less, power
            user = await svc.store.create_user(body.user, is_admin=body.admin)
        user_id = user.id
    record, plaintext = await svc.store.create_api_key(user_id, name=body.name)
    return {**key_json(record), "key": plaintext}


@router.get("/api/admin/keys", response_model=None, responses=doc(KeyList))
async def list_keys(svc: ServicesDep, _: AdminDep) -> dict[str, Any]:
    return {"data": [key_json(k) for k in await svc.store.list_api_keys()]}


@router.delete("/api/admin/keys/{key_id}", status_code=204)
async def revoke_key(key_id: str, svc: ServicesDep, _: AdminDep) -> None:
    if not await svc.store.revoke_api_key(key_id):
        raise APIError(404, f"No active key '{key_id}'.", code="key_not_found")
    svc.keys.clear()
