"""Admin endpoints (API keys); the health checks are in `health.py`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from toolrelay.adapters.stores import ApiKey
from toolrelay.server.auth import request_key
from toolrelay.server.error_responses import APIError
from toolrelay.server.guard import AdminDep, GuardedRoute
from toolrelay.server.openapi import KeyCreated, KeyList, doc
from toolrelay.server.schemas import KeyCreate
from toolrelay.server.services import Services, ServicesDep
from toolrelay.server.session import COOKIE, verify

router = APIRouter(route_class=GuardedRoute)


def key_json(key: ApiKey) -> dict[str, Any]:
    return {
        "id": key.id,
        "user_id": key.user_id,
        "name": key.name,
        "prefix": key.prefix,
        "tail": key.tail,
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


async def _caller_key_id(request: Request, svc: Services) -> str | None:
    """The id of the key this request came with (its own, or its session's)."""
    key = request_key(request)
    if key is not None:
        record = await svc.store.find_api_key(key)
        return record.id if record is not None else None
    token = request.cookies.get(COOKIE)
    session = verify(svc.session_secret, token) if token and svc.session_secret else None
    return session.key_id if session is not None else None


@router.delete("/api/admin/keys/{key_id}", status_code=204)
async def revoke_key(
    key_id: str, request: Request, svc: ServicesDep, _: AdminDep, confirm: bool = False
) -> None:
    """Revoke a key. The last active admin key is never revoked (no one could make keys
    through the API again); the caller's own key only with `?confirm=true`."""
    keys = await svc.store.list_api_keys()
    target = next((k for k in keys if k.id == key_id and k.revoked_at is None), None)
    if target is None:
        raise APIError(404, f"No active key '{key_id}'.", code="key_not_found")
    admins = {u.id for u in await svc.store.list_users() if u.is_admin}
    if target.user_id in admins and not any(
        k.revoked_at is None and k.user_id in admins and k.id != key_id for k in keys
    ):
        raise APIError(
            409,
            "This is the last active admin key: make another admin key first "
            "(POST /api/admin/keys with admin: true, or toolrelay keys create --admin).",
            code="last_admin_key",
        )
    if not confirm and await _caller_key_id(request, svc) == key_id:
        raise APIError(
            409,
            "This is the key you are using: this request and every later one with it would "
            "be refused. Add ?confirm=true to revoke it anyway.",
            code="own_key",
        )
    if not await svc.store.revoke_api_key(key_id):
        raise APIError(404, f"No active key '{key_id}'.", code="key_not_found")
    svc.keys.clear()
