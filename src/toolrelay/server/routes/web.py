"""The web page (`/`, `/static/…`) and its sign-in: an API key in, a session cookie out.

The page is static files shipped in the wheel (`toolrelay/web/static`); it
talks to the chat API like any client, authenticated by the session cookie
`POST /api/session` sets (`server.session`). Every page response carries a
Content-Security-Policy that allows scripts from this origin only.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Any, Final

from fastapi import APIRouter, Request, Response

from toolrelay import __version__
from toolrelay.adapters.stores import User
from toolrelay.config.registry import setup_hint
from toolrelay.server.auth import client_address
from toolrelay.server.error_responses import APIError, JSONBody
from toolrelay.server.guard import GuardedRoute, UserDep
from toolrelay.server.schemas import SessionCreate
from toolrelay.server.services import Services, ServicesDep
from toolrelay.server.session import COOKIE, SESSION_TTL_S, csrf_token, issue, verify

router = APIRouter(route_class=GuardedRoute)


def csp(image_hosts: Sequence[str] = ()) -> str:
    """The page's Content-Security-Policy. Images load from this origin (and `data:`,
    `blob:` for attachments) and the deployment's `[web] image_hosts` only: a Markdown
    image from anywhere else would load as soon as a model wrote it, its URL able to
    carry the chat away; the page shows such an image as a link instead."""
    return "; ".join(
        [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self' 'unsafe-inline'",  # embeds' own styles; the page sets none inline
            " ".join(["img-src 'self' data: blob:", *image_hosts]),
            "connect-src 'self'",
            "frame-src 'self' https:",
            "font-src 'self'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
            "object-src 'none'",
        ]
    )


def page_headers(image_hosts: Sequence[str] = ()) -> dict[str, str]:
    return {
        "Content-Security-Policy": csp(image_hosts),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
        "Cache-Control": "no-cache",
    }


_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".txt": "text/plain; charset=utf-8",
}


@cache
def _static(name: str) -> tuple[bytes, str] | None:
    """A shipped file by name (no folders: nothing outside the static folder is reachable)."""
    suffix = name[name.rfind(".") :] if "." in name else ""
    if "/" in name or "\\" in name or name.startswith(".") or suffix not in _TYPES:
        return None
    path = resources.files("toolrelay.web").joinpath("static", name)
    if not path.is_file():
        return None
    return path.read_bytes(), _TYPES[suffix]


def _file(name: str, svc: Services) -> Response:
    found = _static(name)
    if found is None:
        raise APIError(404, f"No file '{name}'.", code="not_found")
    body, media_type = found
    headers = page_headers(svc.settings.web.image_hosts)
    return Response(body, media_type=media_type, headers=headers)


@router.get("/", include_in_schema=False)
async def page(svc: ServicesDep) -> Response:
    return _file("index.html", svc)


@router.get("/static/{name}", include_in_schema=False)
async def static(name: str, svc: ServicesDep) -> Response:
    return _file(name, svc)


@router.get("/api/info", response_model=None)
async def info(svc: ServicesDep) -> dict[str, Any]:
    """What the sign-in screen shows: the version, the models, how to add one if none;
    and the hosts Markdown images may load from (`[web] image_hosts`)."""
    routes = sorted(svc.registry.routes)
    return {
        "version": __version__,
        "models": routes,
        "setup_hint": None if routes else setup_hint(),
        "image_hosts": list(svc.settings.web.image_hosts),
    }


def _user_json(user: User) -> dict[str, Any]:
    return {"id": user.id, "name": user.name, "is_admin": user.is_admin}


@router.post("/api/session", response_model=None)
async def sign_in(body: SessionCreate, request: Request, svc: ServicesDep) -> JSONBody:
    """Trade an API key for a session cookie (the page never stores the key); wrong keys
    count against the failure limit (`server.throttle`)."""
    address = client_address(request)
    if svc.failures is not None:
        svc.failures.check(address, body.key)
    record = await svc.store.find_api_key(body.key)
    user = await svc.keys.user(body.key) if record is not None else None
    if record is None or user is None or svc.session_secret is None:
        if svc.failures is not None:
            svc.failures.failed(address, body.key)
        raise APIError(401, "Invalid or revoked API key.", code="invalid_api_key")
    token = issue(svc.session_secret, record.id, user.id)
    response = JSONBody(
        {"user": _user_json(user), "csrf": csrf_token(svc.session_secret, token)},
        headers={"Cache-Control": "no-store"},
    )
    response.set_cookie(
        COOKIE,
        token,
        max_age=SESSION_TTL_S,
        path="/",
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="strict",
    )
    return response


@router.get("/api/session", response_model=None)
async def whoami(request: Request, svc: ServicesDep, user: UserDep) -> JSONBody:
    """The signed-in user, and the CSRF token a reloaded page needs for its writes."""
    token = request.cookies.get(COOKIE)
    csrf = csrf_token(svc.session_secret, token) if token and svc.session_secret else None
    return JSONBody({"user": _user_json(user), "csrf": csrf}, headers={"Cache-Control": "no-store"})


@router.delete("/api/session", status_code=204)
async def sign_out(request: Request, svc: ServicesDep) -> Response:
    """End the session server-side (a copy of the cookie is refused from now on) and
    forget the cookie (a same-site page only: the cookie is `SameSite=Strict`)."""
    token = request.cookies.get(COOKIE)
    session = verify(svc.session_secret, token) if token and svc.session_secret else None
    if session is not None:
        await svc.store.revoke_session(session.id, datetime.fromtimestamp(session.expires, UTC))
        svc.keys.clear()
    response = Response(status_code=204)
    response.delete_cookie(
        COOKIE, path="/", secure=request.url.scheme == "https", httponly=True, samesite="strict"
    )
    return response
