"""The real embedded model: weights assembled and checked, llama.cpp loaded, turns run.

One model per test process (`embedded`, tests/embedded.py; its GGUF assembled
once per run).
These assert the loop's structure — deltas streamed, a final message, usage,
the answer over the OpenAI API — never the model's words. Without the
`[local]` extra they fail saying which extra to install.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx2
import orjson
import pytest
from benchmarks.harness import ADMIN_KEY as HARNESS_KEY
from benchmarks.harness import ServerProcess

from tests.embedded import Embedded
from tests.server.conftest import ADMIN_KEY, ServerThread
from toolrelay.adapters.tools import tool
from toolrelay.config import build_registry
from toolrelay.config.local import KEY_ENV
from toolrelay.core.events import Event
from toolrelay.core.items import raw_items
from toolrelay.engine.interfaces import ModelClient, ModelRequest, ModelStream
from toolrelay.engine.relay import Relay

pytestmark = [pytest.mark.local_model, pytest.mark.anyio]

SHORT = {"max_tokens": 24, "temperature": 0, "seed": 7}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_plain_chat_streams_through_the_loop(embedded: Embedded) -> None:
    registry = build_registry(embedded.settings)
    try:
        async with Relay(registry.client_for("local"), []) as relay:
            events: list[Event] = [
                e async for e in relay.stream("Say hello to Paris in one sentence.", params=SHORT)
            ]
    finally:
        await registry.aclose()
    deltas = [e.data["delta"] for e in events if e.type == "response.output_text.delta"]
    done = [e for e in events if e.type == "chat:completion" and e.data.get("done")]
    assert len(deltas) >= 2, "the answer arrived in one piece: not streamed"
    assert len(done) == 1 and events.index(done[0]) > events.index(
        next(e for e in events if e.type == "response.output_text.delta")
    )
    final = done[0].data
    assert final["content"] == "".join(deltas) and final["content"].strip()
    assert [item["type"] for item in final["output"]] == ["message"]
    assert 0 < final["usage"]["completion_tokens"] <= SHORT["max_tokens"]


def test_the_private_server_wants_its_key(embedded: Embedded) -> None:
    url = embedded.model.server.base_url + "/models"
    assert url.startswith("http://127.0.0.1:")
    assert httpx2.get(url, timeout=10).status_code == 401
    key = embedded.model.server.api_key
    assert httpx2.get(url, headers={"Authorization": f"Bearer {key}"}).status_code == 200
    assert os.environ[KEY_ENV] == key  # what the route (and worker processes) read


def test_chat_completions_through_the_server(embedded: Embedded) -> None:
    with (
        ServerThread(embedded.settings) as base_url,
        httpx2.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=60
        ) as client,
    ):
        assert [m["id"] for m in client.get("/v1/models").json()["data"]] == ["local"]
        body = {
            "model": "local",
            "messages": [{"role": "user", "content": "Describe the sea in two sentences."}],
            "stream": True,
            "stream_options": {"include_usage": True},
            **SHORT,
        }
        with client.stream("POST", "/v1/chat/completions", json=body) as response:
            assert response.status_code == 200
            lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    chunks = [orjson.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    text = [c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]]
    assert sum(1 for t in text if t) >= 2 and "".join(text).strip()
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] in ("stop", "length") and all(f is None for f in finishes[:-1])
    usage = [c["usage"] for c in chunks if c.get("usage")]
    assert usage and usage[-1]["completion_tokens"] > 0


class Recorded:
    """The route's client, keeping every request the loop sends (what the model saw)."""

    def __init__(self, client: ModelClient) -> None:
        self.client = client
        self.requests: list[ModelRequest] = []

    async def open(self, request: ModelRequest) -> ModelStream:
        self.requests.append(request)
        return await self.client.open(request)

    async def aclose(self) -> None:
        await self.client.aclose()


WEATHER = "14 °C, light rain (station PAR-7391)"
calls: list[str] = []


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city name, e.g. "London".
    """
    calls.append(city)
    return WEATHER


async def test_a_tool_turn_end_to_end(embedded: Embedded) -> None:
    """A call written as text is recovered, run, its result goes back, and the answer uses
    it. The route's rules (`engine.text_call_rounds`: the result as a user message, a
    repeated call answered from the earlier result, then a round without tools) make this
    model answer in prose; the check is that a fact only the tool knew is in the answer."""
    registry = build_registry(embedded.settings)
    route = registry.routes["local"]
    assert route.text_tool_calls
    model = Recorded(registry.client_for("local"))
    calls.clear()
    try:
        async with Relay(model, [get_weather], text_tool_calls=route.text_tool_calls) as relay:
            result = await relay.run(
                "What's the weather in Paris?", params={"temperature": 0, "max_tokens": 64}
            )
    finally:
        await registry.aclose()
    output = raw_items(result.output)
    kinds = [item["type"] for item in output]
    assert result.status == "completed", result.error
    assert kinds[:2] == ["function_call", "function_call_output"], kinds
    assert output[0]["name"] == "get_weather"
    assert "paris" in orjson.loads(output[0]["arguments"])["city"].lower()
    assert calls and "paris" in calls[0].lower()  # the tool really ran
    assert kinds[-1] == "message" and result.text.strip()
    assert calls == [calls[0]]  # run once: a repeat is answered from the first result
    assert len(model.requests) >= 2
    sent_back = orjson.dumps(list(model.requests[1].messages)).decode()
    assert "PAR-7391" in sent_back  # the tool's result reached the model
    assert '"name"' not in result.text, result.text  # prose, not the call again
    assert any(fact in result.text for fact in ("PAR-7391", "14")), result.text


def test_serve_with_no_model_serves_it(embedded: Embedded, tmp_path: Path) -> None:
    """`make run`'s command: no model configured, the checked weights load, route `local`."""
    models = tmp_path / "data" / "models"
    models.mkdir(parents=True)
    linked = models / embedded.model.path.name
    os.link(embedded.model.path, linked)  # assembled: no copy
    config = tmp_path / "toolrelay.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\nadmin_key = "{HARNESS_KEY}"\n')
    log = tmp_path / "serve.log"
    server = ServerProcess(config, log)
    server.start(timeout=120)
    try:
        with server.client(timeout=120) as client:
            assert [m["id"] for m in client.get("/v1/models").json()["data"]] == ["local"]
            body = {"model": "local", "messages": [{"role": "user", "content": "Hi"}]}
            answer = client.post("/v1/chat/completions", json={**body, **SHORT})
            assert answer.status_code == 200, answer.text
            assert answer.json()["choices"][0]["message"]["content"].strip()
    finally:
        server.stop()
        linked.unlink()  # a second name keeps the 491 MB alive in pytest's temp dirs
    text = log.read_text()
    assert "serving the embedded model" in text and "as route 'local'" in text
    assert f"weights checked (sha256) {linked}" in text
    assert "Traceback" not in text and "Application shutdown complete" in text
    assert server.process is not None  # uvicorn re-raises the SIGTERM it handled
    assert server.process.returncode in (0, -signal.SIGTERM)


def test_chat_with_no_model_runs_it_in_process(embedded: Embedded, tmp_path: Path) -> None:
    """`toolrelay chat` with nothing configured and no server up: the model in its process."""
    import subprocess
    import sys

    models = tmp_path / "data" / "models"
    models.mkdir(parents=True)
    linked = models / embedded.model.path.name
    os.link(embedded.model.path, linked)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLRELAY_", "OPENAI_"))}
    env.update({"TOOLRELAY_DATA_DIR": str(tmp_path / "data"), "TOOLRELAY_LOCAL_CTX": "2048"})
    code = "from toolrelay.cli.main import app; app(prog_name='toolrelay')"
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, "chat", "Say hi.", "--no-save", "--raw"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=600,
        )
    finally:
        linked.unlink()
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), done.stderr
    assert "running the embedded model qwen2.5-coder-0.5b" in done.stderr
    assert "in this process" in done.stderr
