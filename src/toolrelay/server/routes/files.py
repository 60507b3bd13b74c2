"""Uploaded files: `POST /api/files`, listing, reading and deleting one's own.

The upload is the request body itself (no multipart): its `Content-Type` is
the file's type and `?name=` its name. It must be an accepted type
(`[files] types`), at most `[files] max_bytes`, and fit in the user's
`[files] max_user_bytes`. Files are sent with a message by id (`files` in
`POST /api/chats/{id}/messages`, or in a `/v1` body) and go when that chat is
deleted, or when their owner deletes them (`DELETE /api/files/{id}`).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from toolrelay.adapters.files import FileStore, FileTooBig, NoSuchFile
from toolrelay.server.error_responses import APIError
from toolrelay.server.guard import GuardedRoute, UserDep
from toolrelay.server.services import Services, ServicesDep

router = APIRouter(prefix="/api/files", route_class=GuardedRoute)

_INLINE = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; sandbox",
    "Cache-Control": "private, no-cache",
}


def _files(svc: Services) -> FileStore:
    return svc.files


@router.post("", status_code=201, response_model=None)
async def upload(
    request: Request,
    svc: ServicesDep,
    user: UserDep,
    name: str = Query(default="file", max_length=200),
) -> dict[str, Any]:
    config = svc.settings.files
    mime = (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
    if not mime or not config.accepts(mime):
        raise APIError(
            415,
            f"Files of type '{mime or 'unknown'}' are not accepted here; accepted: "
            + ", ".join(config.types)
            + ".",
            code="unsupported_file_type",
        )
    data = await request.body()
    if len(data) > config.max_bytes:
        raise APIError(
            413,
            f"The file has {len(data):,} bytes; the limit is {config.max_bytes:,}.",
            code="file_too_large",
        )
    if not data:
        raise APIError(400, "The file is empty: send its bytes as the body.", code="empty_file")
    try:
        record = await _files(svc).put(user.id, name, mime, data, user_limit=config.max_user_bytes)
    except FileTooBig as exc:
        raise APIError(413, str(exc), code="user_quota") from None
    return record.json()


@router.get("", response_model=None)
async def list_files(svc: ServicesDep, user: UserDep) -> dict[str, Any]:
    return {"object": "list", "data": [r.json() for r in await _files(svc).owned(user.id)]}


@router.get("/{file_id}", response_model=None)
async def file_info(file_id: str, svc: ServicesDep, user: UserDep) -> dict[str, Any]:
    try:
        return (await _files(svc).get(user.id, file_id)).json()
    except NoSuchFile:
        raise APIError(404, f"No file '{file_id}'.", code="file_not_found") from None


@router.get("/{file_id}/content", response_model=None)
async def file_content(file_id: str, svc: ServicesDep, user: UserDep) -> Response:
    files = _files(svc)
    try:
        record = await files.get(user.id, file_id)
        data = await files.read(user.id, file_id)
    except NoSuchFile:
        raise APIError(404, f"No file '{file_id}'.", code="file_not_found") from None
    shown = "inline" if record.mime in _INLINE else "attachment"
    safe = record.name.replace('"', "'")
    headers = {**_HEADERS, "Content-Disposition": f'{shown}; filename="{safe}"'}
    return Response(data, media_type=record.mime, headers=headers)


@router.delete("/{file_id}", status_code=204)
async def delete_file(file_id: str, svc: ServicesDep, user: UserDep) -> None:
    if not await _files(svc).delete(user.id, file_id):
        raise APIError(404, f"No file '{file_id}'.", code="file_not_found")
