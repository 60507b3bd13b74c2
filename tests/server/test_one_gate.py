"""Every API route admits its requests through one gate (`server.guard.admit`).

The routes are taken from the app's own list (`app.ROUTERS`, which must be
the OpenAPI document's operations), not written here, so a new route is
covered as soon as it exists. Each bad request gets the same answer,
byte for byte, from every route it applies to: the `/v1` POSTs that
`V1Front` serves before the router and FastAPI's routes alike. The answer is
also checked against the documented error, so "identical" cannot mean
"identically wrong".
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import pytest
from fastapi import FastAPI

from tests.server.conftest import ADMIN_KEY, ServerThread, make_settings
from toolrelay.server.app import ROUTERS
from toolrelay.server.guard import Auth, GuardedRoute
from toolrelay.server.v1_front import LEAN_PATHS
from toolrelay.testing.fake_server import FakeModelServer

LIMIT = 50_000
JSON = {"content-type": "application/json"}
BAD_KEY = "tr-not-a-key-0123456789"
OR_OBJECT = " or object to extract fields from"
T = TypeVar("T")


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    route: GuardedRoute

    @property
    def url(self) -> str:
        return re.sub(r"\{[^}]+\}", "none", self.path)

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


def operations() -> list[Operation]:
    found: list[Operation] = []
    for router in ROUTERS:
        for route in router.routes:
            assert isinstance(route, GuardedRoute), f"{route}: not admitted by the gate"
            found.extend(
                Operation(m, route.path, route) for m in sorted((route.methods or set()) - {"HEAD"})
            )
    return found


OPERATIONS = operations()
WITH_AUTH = [op for op in OPERATIONS if op.route.admission.auth is not Auth.NONE]
WITH_BODY = [op for op in OPERATIONS if op.route.admission.body is not None]
WITH_BOTH = [op for op in WITH_AUTH if op in WITH_BODY]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, FastAPI]]:
    tmp = Path(tmp_path_factory.mktemp("gate"))
    with FakeModelServer() as upstream:
        # every route is tried with a bad key: no failure limit (tests/security tests it)
        settings = make_settings(tmp, upstream, max_body_bytes=LIMIT, auth={"max_failures": 0})
        thread = ServerThread(settings)
        app = thread.server.config.app
        assert isinstance(app, FastAPI)
        with thread as base_url:
            yield base_url, app


def answers(
    base_url: str, ops: list[Operation], content: bytes | None, headers: dict[str, str]
) -> dict[str, tuple[int, Any, str | None]]:
    """Each operation's (status, JSON body, WWW-Authenticate) for one request."""
    found = {}
    with httpx2.Client(base_url=base_url, timeout=30) as client:
        for op in ops:
            sent = content if op.route.admission.body is not None else None
            answer = client.request(op.method, op.url, content=sent, headers=headers)
            found[str(op)] = (
                answer.status_code,
                answer.json(),
                answer.headers.get("www-authenticate"),
            )
    return found


def the_one(found: dict[str, T]) -> T:
    """The answer every operation gave (the test fails naming those that differ)."""
    first = next(iter(found.values()))
    assert {op: a for op, a in found.items() if a != first} == {}, f"differs from {first}"
    return first


def error(message: str, code: str | None, param: str | None = None) -> dict[str, Any]:
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    }


def test_the_routes_are_the_documented_ones_and_both_doors_are_covered(
    server: tuple[str, FastAPI],
) -> None:
    _, app = server
    documented = {
        f"{method.upper()} {path}"
        for path, item in app.openapi()["paths"].items()
        for method in item
    }
    ours = {
        re.sub(r"\{(\w+):\w+\}", r"{\1}", str(op))  # `{name:path}` is documented `{name}`
        for op in OPERATIONS
        if op.route.include_in_schema
    }
    assert ours == documented
    assert {f"POST {path}" for path in LEAN_PATHS} <= {str(op) for op in WITH_BOTH}
    assert len(WITH_AUTH) > 10 and len(WITH_BODY) > 5


@pytest.mark.parametrize("key", [None, BAD_KEY])
def test_a_missing_or_bad_key_is_the_same_401_everywhere(
    server: tuple[str, FastAPI], key: str | None
) -> None:
    headers = {**JSON, **({"authorization": f"Bearer {key}"} if key else {})}
    status, body, challenge = the_one(answers(server[0], WITH_AUTH, b"{}", headers))
    assert (status, challenge) == (401, "Bearer")
    if key is None:
        assert body == error(
            "Missing API key: send it as 'Authorization: Bearer <key>'.", "missing_api_key"
        )
    else:
        assert body == error("Invalid or revoked API key.", "invalid_api_key")


def test_a_bad_key_is_answered_before_an_invalid_body(server: tuple[str, FastAPI]) -> None:
    headers = {**JSON, "authorization": f"Bearer {BAD_KEY}"}
    status, body, _ = the_one(answers(server[0], WITH_BOTH, b"[1]", headers))
    assert (status, body["error"]["code"]) == (401, "invalid_api_key")


BODY_CASES = {
    "malformed": (b'{"model": tru', JSON, 400, "The request body is not valid JSON: ", "invalid_json"),
    "too deep": (b"[" * 65 + b"]" * 65, JSON, 400, "The request body nests deeper than 64 levels.", "too_deeply_nested"),
    "lone surrogate": (b'{"a": "\\ud800"}', JSON, 400, "The request body is not valid JSON: ", "invalid_json"),
    "too large": (b'{"a": "' + b"x" * LIMIT + b'"}', JSON, 413, f"Request body too large: the limit is {LIMIT} bytes.", "body_too_large"),
    "empty": (b"", JSON, 400, "Invalid request: body: Field required", "invalid_value"),
}  # fmt: skip


@pytest.mark.parametrize("case", BODY_CASES)
def test_a_bad_body_is_the_same_error_everywhere(server: tuple[str, FastAPI], case: str) -> None:
    """Parsing comes first: the same answer with a bad key as with a good one."""
    content, headers, status, message, code = BODY_CASES[case]
    found = {}
    for key in (ADMIN_KEY, BAD_KEY):
        sent = {**headers, "authorization": f"Bearer {key}"}
        found.update(
            {f"{op} ({key})": a for op, a in answers(server[0], WITH_BODY, content, sent).items()}
        )
    if case == "empty":  # no parsing: the caller comes first, then the missing body
        found = {op: a for op, a in found.items() if BAD_KEY not in op}
    got_status, body, _ = the_one(found)
    assert got_status == status
    assert body["error"]["message"].startswith(message), body
    param = "body" if code == "invalid_value" else None
    assert body == error(body["error"]["message"], code, param)


@pytest.mark.parametrize("content_type", ["text/plain", None, "application/x-www-form-urlencoded"])
def test_a_body_not_declared_json_is_refused_alike(
    server: tuple[str, FastAPI], content_type: str | None
) -> None:
    """FastAPI's strict content type: the model refuses bytes (pydantic words it for a model
    as for a dict, plus "or object to extract fields from")."""
    headers = {"authorization": f"Bearer {ADMIN_KEY}"}
    if content_type:
        headers["content-type"] = content_type
    found = answers(server[0], WITH_BODY, b'{"model": "fake"}', headers)
    shapes = {
        op: (
            status,
            body["error"]["code"],
            body["error"]["param"],
            body["error"]["message"].removesuffix(OR_OBJECT),
        )
        for op, (status, body, _) in found.items()
    }
    assert the_one(shapes) == (
        400,
        "invalid_value",
        "body",
        "Invalid request: body: Input should be a valid dictionary",
    )
