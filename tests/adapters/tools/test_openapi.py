"""OpenAPI tool servers: a FastAPI server on a real port, and the pure document conversion."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from fastapi import Depends, FastAPI, Header, HTTPException, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field

from tests.adapters.tools.conftest import free_port
from toolrelay import Relay, RunLimits
from toolrelay.adapters.tools.openapi import OpenAPIServer
from toolrelay.core.items import is_call_output, raw_items
from toolrelay.core.tools.openapi_operations import build_request, operations
from toolrelay.engine.interfaces import ToolContext
from toolrelay.errors import ConfigError, ToolError
from toolrelay.testing.scripted_model import ScriptedModel, reply

pytestmark = pytest.mark.anyio

TOKEN = "open-sesame"


class Address(BaseModel):
    street: str
    city: str


class Person(BaseModel):
    name: str = Field(description="Full name")
    home: Address
    friends: list[Address] = []


class Team(BaseModel):
    lead: Person
    members: list[Person]


def _auth(authorization: str = Header(default="")) -> None:
    if authorization != f"Bearer {TOKEN}":
        raise HTTPException(401, "bad token")


state: dict[str, Any] = {"disconnected": 0}
app = FastAPI(dependencies=[Depends(_auth)])


@app.get("/items/{item_id}", operation_id="get_item", summary="Read one item")
def get_item(
    item_id: int, verbose: bool = False, x_trace: str = Header(default="")
) -> dict[str, Any]:
    return {"id": item_id, "verbose": verbose, "trace": x_trace}


@app.post("/teams", operation_id="create_team", summary="Create a team")
def create_team(team: Team, dry_run: bool = False) -> dict[str, Any]:
    return {"lead": team.lead.home.city, "size": len(team.members), "dry_run": dry_run}


@app.get("/fail")
def fail() -> None:
    raise HTTPException(418, "I am a teapot")


@app.get("/slow", operation_id="slow")
async def slow(request: Request) -> str:
    while not await request.is_disconnected():  # noqa: ASYNC110 - Starlette offers only a poll
        await asyncio.sleep(0.01)
    state["disconnected"] += 1
    return "never read"


@app.get("/disconnected", operation_id="disconnected")
def disconnected() -> int:
    return int(state["disconnected"])


@app.get("/card", operation_id="card", response_class=HTMLResponse)
def card() -> HTMLResponse:
    return HTMLResponse("<b>card</b>", headers={"Content-Disposition": "inline"})


@pytest.fixture(scope="module")
def api_url() -> Iterator[str]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(6000):  # waits for a condition; the bound only stops a hang
        if server.started:
            break
        threading.Event().wait(0.01)
    assert server.started, "the FastAPI tool server did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("TOOL_TOKEN", TOKEN)
    return "TOOL_TOKEN"


async def test_operations_become_tools_with_refs_resolved(api_url: str, token: str) -> None:
    server = OpenAPIServer(api_url, bearer_token_env=token)
    try:
        tools = {t.spec.name: t for t in await server.list()}
        assert {"get_item", "create_team", "fail_fail_get", "slow", "card"} <= set(tools)
        item = tools["get_item"].spec
        assert item.description == "Read one item"
        assert item.parameters["required"] == ["item_id"]
        assert set(item.parameters["properties"]) == {"item_id", "verbose", "x-trace"}
        team = tools["create_team"].spec.parameters
        assert "$ref" not in repr(team)  # every $ref inlined
        lead = team["properties"]["lead"]
        assert lead["properties"]["home"]["properties"]["city"]["type"] == "string"
        assert lead["properties"]["name"]["description"] == "Full name"
        assert set(team["required"]) == {"lead", "members"}
    finally:
        await server.aclose()


async def test_calls_send_path_query_header_and_body(api_url: str, token: str) -> None:
    server = OpenAPIServer(api_url, bearer_token_env=token)
    try:
        await server.list()
        context = ToolContext()
        got = await server.call(
            "get_item", {"item_id": 7, "verbose": True, "x-trace": "t1"}, context
        )
        assert got == {"id": 7, "verbose": True, "trace": "t1"}
        person = {"name": "Ada", "home": {"street": "1 Main", "city": "Oslo"}}
        team = {"lead": person, "members": [person, person]}
        got = await server.call("create_team", {**team, "dry_run": True}, context)
        assert got == {"lead": "Oslo", "size": 2, "dry_run": True}
    finally:
        await server.aclose()


async def test_errors_html_and_auth_through_the_loop(api_url: str, token: str) -> None:
    model = ScriptedModel(
        reply(calls=[("fail_fail_get", {}), ("card", {}), ("get_item", {"item_id": "x"})]),
        reply("ok"),
    )
    async with Relay(model, [OpenAPIServer(api_url, bearer_token_env=token)]) as relay:
        result = await relay.run("go")
    failed, card, invalid = [i for i in result.output if is_call_output(i)]
    assert failed["status"] == "failed"
    assert failed["output"] == 'Error: HTTP 418: {"detail":"I am a teapot"}'
    assert card["embeds"] == ["<b>card</b>"]
    assert invalid["status"] == "failed"  # checked against the schema before any request


async def test_without_the_token_calls_fail_with_the_status(
    api_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOL_TOKEN", "wrong")
    server = OpenAPIServer(api_url, bearer_token_env="TOOL_TOKEN", spec_path="/openapi.json")
    try:
        await server.list()  # the document itself is public
        with pytest.raises(ToolError, match=r"HTTP 401: .*bad token"):
            await server.call("get_item", {"item_id": 1}, ToolContext())
    finally:
        await server.aclose()


def test_a_missing_token_env_var_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="NO_SUCH_TOKEN_VAR"):
        OpenAPIServer("http://127.0.0.1:9", bearer_token_env="NO_SUCH_TOKEN_VAR")


async def test_a_timed_out_call_closes_its_request(api_url: str, token: str) -> None:
    server = OpenAPIServer(api_url, bearer_token_env=token, timeout=0.2)
    model = ScriptedModel(reply(calls=[("slow", {})]), reply("gave up"))
    async with Relay(model, [server], limits=RunLimits(tool_timeout=0.2)) as relay:
        result = await relay.run("go")
        assert raw_items(result.output)[1]["output"] == "Error: Tool `slow` timed out after 0.2 s."
        for _ in range(3000):
            if await server.call("disconnected", {}, ToolContext()) >= 1:
                break
            await asyncio.sleep(0.01)
        assert await server.call("disconnected", {}, ToolContext()) >= 1


# ------------------------------------------------------------------ pure conversion

DOC_30: dict[str, Any] = {
    "openapi": "3.0.3",
    "paths": {
        "/pets/{petId}": {
            "parameters": [{"$ref": "#/components/parameters/PetId"}],
            "get": {"summary": "Get a pet", "description": "By id."},
            "put": {
                "operationId": "updatePet",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}
                    },
                },
            },
        },
        "/pets": {
            "post": {
                "operationId": "addPets",
                "requestBody": {
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "array",
                                "items": {"$ref": "#/components/schemas/Pet"},
                            }
                        }
                    }
                },
            }
        },
    },
    "components": {
        "parameters": {"PetId": {"name": "petId", "in": "path", "schema": {"type": "integer"}}},
        "schemas": {
            "Pet": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "nullable": True},
                    "parent": {"$ref": "#/components/schemas/Pet"},
                },
            }
        },
    },
}


def test_openapi_30_document_with_shared_and_recursive_refs() -> None:
    ops = {op.name: op for op in operations(DOC_30)}
    assert set(ops) == {"get_pets_petId", "updatePet", "addPets"}
    get = ops["get_pets_petId"]
    assert get.description == "Get a pet\n\nBy id."
    assert get.parameters["required"] == ["petId"]
    update = ops["updatePet"].parameters
    assert update["properties"]["name"] == {"type": "string", "nullable": True}
    assert update["properties"]["parent"] == {}  # a Pet inside a Pet: the cycle is cut
    assert update["required"] == ["petId", "name"]
    add = ops["addPets"]
    assert add.body_whole and add.parameters["properties"]["body"]["type"] == "array"
    request = build_request(add, {"body": [{"name": "Rex"}]})
    assert (request.method, request.path, request.json) == ("POST", "/pets", [{"name": "Rex"}])
    request = build_request(ops["updatePet"], {"petId": "a/b", "name": "Rex"})
    assert (request.path, request.json) == ("/pets/a%2Fb", {"name": "Rex"})
