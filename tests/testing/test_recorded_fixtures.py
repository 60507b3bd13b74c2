"""The project's fixtures recorded from the embedded model (`toolrelay serve --record`,
llama.cpp serving qwen2.5-coder 0.5B; `tests/fixtures/streams/llamacpp-embedded`), read
back through `toolrelay.testing.recorded` unchanged. Expected values are read off the raw
bodies by hand (the `content` deltas joined) and cross-checked by `test_fixture_truth`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolrelay.core.stream.reader import read_body
from toolrelay.testing import ReplayModel, read_recording

EMBEDDED = Path(__file__).parent.parent / "fixtures" / "streams" / "llamacpp-embedded"


def test_every_exchange_names_its_body_and_holds_no_credential() -> None:
    exchanges = read_recording(EMBEDDED)
    assert len(exchanges) == 4
    for exchange in exchanges:
        assert exchange.body_path is not None and exchange.body_path.exists()
        assert exchange.status == 200 and exchange.complete
        assert exchange.content_type == "text/event-stream"
        assert exchange.request["headers"]["authorization"] == "[scrubbed]"
        assert exchange.request["body"]["model"] == "qwen2.5-coder-0.5b-instruct-q4_k_m"


def test_a_recording_replays_its_bodies_unchanged() -> None:
    model = ReplayModel.from_recording(EMBEDDED)
    bodies = [item.data for item in model.script]  # type: ignore[union-attr]
    assert bodies == [e.body_path.read_bytes() for e in read_recording(EMBEDDED) if e.body_path]


def _content(raw: bytes) -> str:
    """The `content` deltas joined, by hand (stdlib json only)."""
    text = ""
    for line in raw.decode().splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:])["choices"]:
                text += choice["delta"].get("content") or ""
    return text


@pytest.mark.parametrize(
    "name", ["tool-call-json-fence.sse", "tool-call-bare-json-after-result.sse"]
)
def test_the_small_models_calls_written_as_text_become_calls(name: str) -> None:
    raw = (EMBEDDED / name).read_bytes()
    written = _content(raw).removeprefix("```json").removesuffix("```")
    expected = json.loads(written)
    assert expected == {"name": "get_weather", "arguments": {"city": "Paris"}}
    result, _ = read_body(raw, text_tools=("get_weather",))
    calls = [i for i in result.to_dict()["output"] if i["type"] == "function_call"]
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [
        ("get_weather", expected["arguments"])
    ]
