"""What tools and filters get as `__request__` and `__model__` on this server.

Open WebUI hands its tools the Starlette request itself; a tool file reads
its headers (`__request__.headers.get("x-…")`), its user or its base URL.
Here a tool gets a small copy made when the turn starts: the turn outlives
the HTTP request (chat turns run in the background), and a tool must not see
the caller's credentials. So the copy keeps the method, the path (no query:
keys travel there too), the base URL, the client address, the user
(`state.user`, `user`) and the headers without any that carry a secret
(`authorization`, `cookie`, `x-api-key`, and any whose name says token,
secret, password, key or session).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from types import SimpleNamespace
from typing import Any, Final

from starlette.requests import Request

from toolrelay.config.settings import ModelRoute

__all__ = ["ADMITTED", "RequestInfo", "model_info"]

ADMITTED: ContextVar[Request | None] = ContextVar("toolrelay_admitted_request", default=None)
"""The request a lean `/v1` route is answering (`server.v1_front` sets it around the call:
those routes take no `Request` parameter)."""

_SECRET_HEADERS: Final = frozenset(
    {"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key"}
)
_SECRET_WORDS: Final = ("token", "secret", "password", "passwd", "key", "session", "auth")


def _secret(name: str) -> bool:
    return name in _SECRET_HEADERS or any(word in name for word in _SECRET_WORDS)


class Headers(dict[str, str]):
    """Header names in lower case; `get` and `[]` take any case, as Starlette's do."""

    def __getitem__(self, name: str) -> str:
        return super().__getitem__(name.lower())

    def get(self, name: str, default: Any = None) -> Any:
        return super().get(name.lower(), default)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and super().__contains__(name.lower())


class RequestInfo:
    """A request-like object without secrets (module doc)."""

    def __init__(
        self,
        *,
        method: str,
        path: str,
        base_url: str,
        headers: Mapping[str, str],
        client: str | None,
        user: Mapping[str, Any] | None,
    ) -> None:
        self.method = method
        self.path = path
        self.url = base_url.rstrip("/") + path
        self.base_url = base_url
        self.headers = Headers({k.lower(): v for k, v in headers.items() if not _secret(k.lower())})
        self.client = SimpleNamespace(host=client)
        self.user = dict(user) if user is not None else None
        self.state = SimpleNamespace(user=self.user)

    @classmethod
    def of(cls, request: Request, user: Mapping[str, Any] | None) -> RequestInfo:
        return cls(
            method=request.method,
            path=request.url.path,
            base_url=str(request.base_url),
            headers=dict(request.headers.items()),
            client=request.client.host if request.client is not None else None,
            user=user,
        )

    def __repr__(self) -> str:
        return f"RequestInfo({self.method} {self.path})"


def model_info(route: ModelRoute) -> dict[str, Any]:
    """`__model__` (and `__metadata__["model"]`): the route as Open WebUI describes a
    model, without its address or key."""
    return {
        "id": route.name,
        "name": route.name,
        "owned_by": "toolrelay",
        "info": {"meta": {"kind": route.kind, "upstream_model": route.model}},
    }
