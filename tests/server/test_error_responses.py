"""The error handlers: every failure, even an unexpected one, is an OpenAI-style error object."""

from __future__ import annotations

import httpx2
import pytest
from fastapi import FastAPI

from toolrelay.server.error_responses import APIError, install_error_handlers

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def client() -> httpx2.AsyncClient:
    transport = httpx2.ASGITransport(app=app(), raise_app_exceptions=False)
    return httpx2.AsyncClient(transport=transport, base_url="http://test")


def app() -> FastAPI:
    api = FastAPI()
    install_error_handlers(api)

    @api.get("/boom")
    async def boom() -> None:
        raise RuntimeError("disk full")

    @api.get("/gone")
    async def gone() -> None:
        raise APIError(404, "No such thing.", code="not_found", param="id")

    return api


async def test_unexpected_exceptions_become_500_without_leaking_details() -> None:
    async with client() as http:
        response = await http.get("/boom")
    assert response.status_code == 500
    assert response.json() == {
        "error": {
            "message": "Internal error (RuntimeError); the server log has the details.",
            "type": "server_error",
            "param": None,
            "code": "internal_error",
        }
    }
    assert "disk full" not in response.text


async def test_api_errors_and_unknown_routes() -> None:
    async with client() as http:
        gone = await http.get("/gone")
        missing = await http.get("/nowhere")
        wrong = await http.post("/gone")
    assert gone.status_code == 404
    assert gone.json()["error"] == {
        "message": "No such thing.",
        "type": "invalid_request_error",
        "param": "id",
        "code": "not_found",
    }
    assert missing.status_code == 404 and missing.json()["error"]["message"] == "No such endpoint."
    assert wrong.status_code == 405
    assert wrong.json()["error"]["message"] == "Method not allowed on this endpoint."
