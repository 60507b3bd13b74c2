"""What `import toolrelay` offers: enough to write a ModelClient, one result name, nothing dead."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import toolrelay
from toolrelay import ModelRequest, ModelStream, Relay, RunResult
from toolrelay.core.formats.content import BodyFormat

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_every_exported_name_resolves() -> None:
    for name in toolrelay.__all__:
        assert getattr(toolrelay, name) is not None, name


def test_one_name_for_the_run_result_and_no_dead_errors() -> None:
    assert "RunResult" in toolrelay.__all__
    assert "TurnResult" not in toolrelay.__all__
    assert "ProtocolError" not in toolrelay.__all__
    with pytest.raises(AttributeError):
        _ = toolrelay.ProtocolError


class OneChunk:
    """A `ModelStream`: one Chat Completions SSE body."""

    format: BodyFormat = "sse"

    def __init__(self, text: str) -> None:
        self.body = (
            b'data: {"choices":[{"index":0,"delta":{"content":"' + text.encode() + b'"}}]}\n\n'
            b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
            b"data: [DONE]\n\n"
        )

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.body

    async def aclose(self) -> None:
        return None


class EchoClient:
    """A `ModelClient` written from the public names only: echoes the last user message."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def open(self, request: ModelRequest) -> ModelStream:
        self.requests.append(request)
        return OneChunk(f"echo: {request.messages[-1]['content']}")

    async def aclose(self) -> None:
        return None


async def test_a_model_client_from_the_public_names_runs_a_turn() -> None:
    client = EchoClient()
    async with Relay(client) as relay:
        result = await relay.run("hello")
    assert isinstance(result, RunResult)
    assert (result.status, result.text) == ("completed", "echo: hello")
    assert isinstance(client.requests[0], ModelRequest)


def test_the_version_is_written_once() -> None:
    """`toolrelay/__init__.py` holds it; the package metadata and pyproject read it from there."""
    import importlib.metadata
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert importlib.metadata.version("toolrelay") == toolrelay.__version__


async def test_relay_takes_plain_functions_and_tool_file_paths(tmp_path: Path) -> None:
    """Issue 10's `Relay(model, tools=[fn, …, "owui_tools.py"])`, from the public API only."""
    from toolrelay.testing import ScriptedModel

    def shout(text: str) -> str:
        """Say it loudly.

        Args:
            text: What to say.
        """
        return text.upper()

    plain_file = tmp_path / "plain_tools.py"
    plain_file.write_text(
        "from toolrelay import tool\n\n@tool\ndef whisper(text: str) -> str:\n"
        '    """Say it softly."""\n    return text.lower()\n'
    )
    owui = Path(__file__).parent / "adapters" / "tools" / "owui_files" / "weather_tool.py"
    async with Relay(ScriptedModel(), [shout, str(plain_file), owui]) as relay:
        assert relay.tools["shout"].spec.description.startswith("Say it loudly")
        kinds = sorted(type(source).__name__ for source in relay.toolbox.sources)
        assert kinds == ["OpenWebUITools", "ToolFile"]
        listed = await relay.toolbox.tools()
        assert {"shout", "whisper"} <= set(listed)
        assert len(listed) > 2  # the Open WebUI file's methods too
        assert await listed["shout"].call({"text": "hi"}, None) == "HI"  # type: ignore[arg-type]
