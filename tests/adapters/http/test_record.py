"""Recording upstream exchanges (`adapters.http.record`, issue 30 item 8): a real model
client against a fake server on a real socket writes fixtures that read back unchanged
(`ReplayModel.from_recording`, `recorded_replies` on a `FakeModelServer`, `toolrelay
replay`), and no written byte holds a secret."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from toolrelay import Relay, tool
from toolrelay.adapters.http.record import SCRUBBED, Recorder
from toolrelay.adapters.models import HTTPOptions, OpenAIChat, Retry
from toolrelay.cli.main import app
from toolrelay.config import build_registry
from toolrelay.config.settings import ModelRoute, Settings
from toolrelay.core.stream.reader import read_body
from toolrelay.testing import FakeModelServer, ReplayModel
from toolrelay.testing.fake_server import BodyReply, JSONReply
from toolrelay.testing.recorded import read_recording, recorded_replies
from toolrelay.testing.wire import ToolCallSpec, chat_chunks, render_sse

pytestmark = pytest.mark.anyio

KEY = "sk-test-9f8e7d6c5b4a39281706f5e4"
COOKIE = "session=c0ffee-d00d-4242-cafe-123456"
TOKEN = "hunter2-private-field"

CALL = render_sse(chat_chunks(tool_calls=[ToolCallSpec("weather", {"city": "Oslo"}, id="call_A1")]))
ANSWER = render_sse(chat_chunks(text=["Sunny ", "in Oslo."], usage={"total_tokens": 30}))
REFUSAL = orjson.dumps(
    {"error": {"message": f"Incorrect API key provided: {KEY}.", "code": "invalid_api_key"}}
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as srv:
        yield srv


@tool
def weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


def client(server: FakeModelServer, directory: Path) -> OpenAIChat:
    recorder = Recorder(directory, secrets=[KEY], secret_fields=["private_hint"])
    http = HTTPOptions(
        headers={"Cookie": COOKIE, "X-Trace": "t-1", "X-Api-Key": "k1"},
        retry=Retry(attempts=1),
        record=recorder,
    )
    return OpenAIChat(
        base_url=server.base_url,
        model="m",
        api_key=KEY,
        params={"private_hint": TOKEN, "temperature": 0.5, "max_tokens": 64},
        http=http,
    )


def serve_a_tool_turn(server: FakeModelServer) -> None:
    headers = {"Set-Cookie": COOKIE, "X-Request-Id": "req-1"}
    server.script(
        BodyReply(CALL, chunk_size=40, headers=headers),
        BodyReply(ANSWER, chunk_size=7),
    )


async def test_a_turn_is_recorded_exactly_and_replays_the_same(
    server: FakeModelServer, tmp_path: Path
) -> None:
    serve_a_tool_turn(server)
    model = client(server, tmp_path / "rec")
    first = await Relay(model, [weather]).run("Weather in Oslo?")
    await model.aclose()
    assert first.text == "Sunny in Oslo."

    exchanges = read_recording(tmp_path / "rec")
    assert [e.body for e in exchanges] == [CALL, ANSWER]  # the bytes as sent, framing and all
    assert [e.status for e in exchanges] == [200, 200]
    assert all(e.complete and e.body_path and e.body_path.suffix == ".sse" for e in exchanges)
    assert exchanges[0].headers == {"content-type": "text/event-stream", "x-request-id": "req-1"}
    sent = exchanges[1].request
    assert sent["method"] == "POST" and sent["url"].endswith("/v1/chat/completions")
    assert sent["headers"]["authorization"] == SCRUBBED
    assert sent["headers"]["cookie"] == SCRUBBED
    assert sent["headers"]["x-trace"] == "t-1"
    assert sent["headers"]["x-api-key"] == SCRUBBED  # by its name: too short to look for
    assert sent["body"]["private_hint"] == SCRUBBED
    assert (sent["body"]["temperature"], sent["body"]["max_tokens"]) == (0.5, 64)
    roles = [m["role"] for m in sent["body"]["messages"]]
    assert roles == ["user", "assistant", "tool"]
    assert sent["body"]["messages"][2]["content"] == "sunny in Oslo"

    # ReplayModel: the engine reads the recording as it read the server
    replayed = await Relay(ReplayModel.from_recording(tmp_path / "rec"), [weather]).run(
        "Weather in Oslo?"
    )
    assert replayed.text == first.text
    assert [i["type"] for i in replayed.output] == [i["type"] for i in first.output]
    # ReplayModel of the body files alone: they are plain recorded bodies
    bodies = [e.body_path for e in exchanges if e.body_path is not None]
    alone = await Relay(ReplayModel(*bodies), [weather]).run("Weather in Oslo?")
    assert alone.text == first.text

    # FakeModelServer: the same status, headers and bytes on a socket
    with FakeModelServer() as again:
        again.script(*recorded_replies(tmp_path / "rec"))
        model = OpenAIChat(base_url=again.base_url, model="m")
        over_socket = await Relay(model, [weather]).run("Weather in Oslo?")
        await model.aclose()
    assert over_socket.text == first.text


async def test_no_written_file_holds_a_secret(server: FakeModelServer, tmp_path: Path) -> None:
    """The key in the Authorization header and echoed in an error body, the cookie, and a
    configured secret body field: grep every byte written."""
    server.script(JSONReply(REFUSAL, status=401))
    model = client(server, tmp_path / "rec")
    result = await Relay(model, [weather]).run("hi")
    await model.aclose()
    assert result.status == "failed"
    serve_a_tool_turn(server)
    model = client(server, tmp_path / "rec")
    await Relay(model, [weather]).run("Weather in Oslo?")
    await model.aclose()
    files = sorted((tmp_path / "rec").iterdir())
    assert len(files) == 6  # three exchanges, two files each
    for path in files:
        data = path.read_bytes()
        for secret in (KEY, COOKIE, "c0ffee-d00d-4242-cafe-123456", TOKEN):
            assert secret.encode() not in data, (path.name, secret)
    refused = read_recording(tmp_path / "rec")[0]
    assert refused.status == 401 and refused.body_path and refused.body_path.suffix == ".json"
    assert (
        orjson.loads(refused.body)["error"]["message"] == f"Incorrect API key provided: {SCRUBBED}."
    )
    replayed = await Relay(ReplayModel.from_recording(tmp_path / "rec"), [weather]).run("hi")
    assert replayed.status == "failed"
    assert replayed.error is not None and "401" in replayed.error


async def test_an_unanswered_request_and_a_cut_body_are_recorded(tmp_path: Path) -> None:
    with FakeModelServer() as server:
        server.script(BodyReply(CALL, chunk_size=30, headers={}, status=200))
        base = server.base_url
    # the server is gone: the request gets no answer
    model = client_at(base, tmp_path / "rec")
    result = await Relay(model, [weather]).run("hi")
    await model.aclose()
    assert result.status == "failed"
    (exchange,) = read_recording(tmp_path / "rec")
    assert exchange.status is None and exchange.error and not exchange.complete
    assert exchange.body_path is None


def client_at(base_url: str, directory: Path) -> OpenAIChat:
    http = HTTPOptions(retry=Retry(attempts=1), record=Recorder(directory))
    return OpenAIChat(base_url=base_url, model="m", api_key=KEY, http=http)


def test_replay_reads_an_exchange_file_as_its_body(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path)
    from toolrelay.adapters.http.seam import Request

    class Answer:
        status, reason = 200, "OK"
        headers = {"content-type": "text/event-stream"}

    body = recorder.write(
        Request("POST", "http://h/v1/chat/completions", {}, b"{}"),
        response=Answer(),  # type: ignore[arg-type]
        body=ANSWER,
        complete=True,
    )
    assert body is not None and body.read_bytes() == ANSWER
    (exchange,) = tmp_path.glob("*.exchange.json")
    out = CliRunner().invoke(app, ["replay", str(exchange), "--json"], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    expected, _ = read_body(ANSWER)
    assert (
        orjson.loads(out.stdout)["output"][0]["content"]
        == expected.to_dict()["output"][0]["content"]
    )


def route(server: FakeModelServer, **extra: Any) -> ModelRoute:
    return ModelRoute(name="r", base_url=server.base_url, model="r", api_key=KEY, **extra)


async def test_the_route_option_and_the_settings_default_record(
    server: FakeModelServer, tmp_path: Path
) -> None:
    own, default = tmp_path / "own", tmp_path / "default"
    settings = Settings(
        models=[route(server, record=own, record_scrub=["private_hint"])],
        record=default,
        local=False,
    )
    registry = build_registry(settings, env={})
    server.script(BodyReply(ANSWER))
    await Relay(registry.client_for("r")).run("hi")
    registry.add_route(ModelRoute(name="later", base_url=server.base_url, model="later"))
    server.script(BodyReply(ANSWER))
    await Relay(registry.client_for("later")).run("hi")
    await registry.aclose()
    assert [e.body for e in read_recording(own)] == [ANSWER]
    assert [e.body for e in read_recording(default)] == [ANSWER]
    for path in own.iterdir():
        assert KEY.encode() not in path.read_bytes()


def test_chat_record_flag_writes_the_exchanges(server: FakeModelServer, tmp_path: Path) -> None:
    server.script(BodyReply(ANSWER))
    out = CliRunner().invoke(
        app,
        ["chat", "hi", "--base-url", server.base_url, "--model", "m", "--api-key", KEY]
        + ["--record", str(tmp_path / "rec"), "--no-save", "--raw"],
        catch_exceptions=False,
    )
    assert out.exit_code == 0, out.output
    (exchange,) = read_recording(tmp_path / "rec")
    assert exchange.body == ANSWER
    assert exchange.request["body"]["messages"][-1] == {"role": "user", "content": "hi"}
    for path in (tmp_path / "rec").iterdir():
        assert KEY.encode() not in path.read_bytes()


def test_serve_record_flag_becomes_the_settings_record(tmp_path: Path) -> None:
    from toolrelay.cli.serve import _with_flags

    settings = _with_flags(Settings(local=False), None, None, None, None, tmp_path / "rec")
    assert settings.record == tmp_path / "rec"
    assert build_registry(settings, env={}).record == tmp_path / "rec"
