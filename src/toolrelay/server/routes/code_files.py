"""Files a chat's code wrote: `GET /api/chats/{id}/files` and `…/files/{path}`.

The code interpreter gives each chat a directory (`JupyterRunner.workdir`);
cells write there and the images they show are saved there (`outputs/1.png`,
the `name` in the item's `files` and in `code_interpreter:output` events).
Only the chat's owner reads them. The directory is written by sandboxed code,
so a path is opened without following a final symlink and the opened file's
real path must lie inside the directory; hidden entries (`.ipython`) are not
served. SVGs and HTML are served under a sandboxing CSP.
"""

from __future__ import annotations

import asyncio
import mimetypes
import os
import stat
from pathlib import Path
from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response

from toolrelay.server.error_responses import APIError
from toolrelay.server.guard import GuardedRoute, UserDep
from toolrelay.server.routes.chats import _owned
from toolrelay.server.services import Services, ServicesDep

router = APIRouter(prefix="/api/chats", route_class=GuardedRoute)

MAX_LISTED = 1000
_INLINE = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml"})
_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; sandbox",
    "Cache-Control": "private, no-cache",
}


def _workdir(svc: Services, chat_id: str) -> Path:
    runner = svc.registry.code_runner
    if runner is None:
        raise APIError(404, "The code interpreter is off on this server.", code="code_off")
    path: Path = runner.workdir(chat_id)
    return path


@router.get("/{chat_id}/files", response_model=None)
async def list_files(chat_id: str, svc: ServicesDep, user: UserDep) -> dict[str, Any]:
    await _owned(svc, chat_id, user.id)
    found = await asyncio.to_thread(_listing, _workdir(svc, chat_id))
    return {"object": "list", "data": found}


@router.get("/{chat_id}/files/{name:path}", response_model=None)
async def get_file(chat_id: str, name: str, svc: ServicesDep, user: UserDep) -> Response:
    await _owned(svc, chat_id, user.id)
    parts = Path(name).parts
    data = None
    if parts and not any(p.startswith(".") or p in ("/", "..") for p in parts):
        data = await asyncio.to_thread(_read, _workdir(svc, chat_id), parts)
    if data is None:
        raise APIError(404, f"No file '{name}' in this chat.", code="file_not_found")
    mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
    shown = "inline" if mime in _INLINE else "attachment"
    headers = {**_HEADERS, "Content-Disposition": f'{shown}; filename="{Path(name).name}"'}
    return Response(data, media_type=mime, headers=headers)


def _listing(root: Path) -> list[dict[str, Any]]:
    """Regular files under `root` by name; no symlinks followed, hidden entries skipped."""
    found: list[dict[str, Any]] = []
    for base, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            path = Path(base, name)
            if name.startswith(".") or path.is_symlink() or len(found) >= MAX_LISTED:
                continue
            found.append({"name": str(path.relative_to(root)), "size": path.stat().st_size})
    return sorted(found, key=lambda f: str(f["name"]))


def _read(workdir: Path, parts: tuple[str, ...]) -> bytes | None:
    """The file's bytes, if what was opened really is a regular file inside `workdir`."""
    root = workdir.resolve()
    try:
        fd = os.open(root.joinpath(*parts), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        real = Path(os.readlink(f"/proc/self/fd/{fd}"))
        if not real.is_relative_to(root) or not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(fd)
