"""`toolrelay replay` on the recorded provider bodies: --json, --events, readable, failures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner, Result

from tests.core.test_replay_fixtures import STREAMS, mask
from toolrelay.cli.main import app

WIDE = {"COLUMNS": "400"}  # rich wraps at the terminal width; keep every message on one line
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x06\x00\x00\x00"


def invoke(*args: str, stdin: bytes | None = None) -> Result:
    return CliRunner().invoke(app, ["replay", *args], input=stdin, env=WIDE, catch_exceptions=False)


def expected(case: str) -> dict[str, Any]:
    body = (STREAMS / case).with_suffix(".expected.json").read_bytes()
    return dict(orjson.loads(body))


def fixture(case: str) -> str:
    return str(STREAMS / case)


def message_text(result: dict[str, Any]) -> str:
    return "".join(
        part["text"]
        for item in result["output"]
        if item["type"] == "message"
        for part in item["content"]
    )


FORMATS = [
    ("openai/text.sse", "chat"),
    ("deepseek/reasoning-tool-call.sse", "chat"),
    ("gemini/parallel-calls-index0.sse", "chat"),
    ("openai-responses/reasoning-summary-then-text.sse", "responses"),
    ("openai-responses/reasoning-parallel-function-calls.sse", "responses"),
    ("ollama/thinking-text.ndjson", "ollama"),
    ("ollama/tool-calls.ndjson", "ollama"),
    ("openai/tool-calls.json", "json"),
    ("ollama/chat.json", "json"),
    ("openai-responses/response-object-function-calls.json", "json"),
]


@pytest.mark.parametrize("fmt_choice", ["auto", "explicit"])
@pytest.mark.parametrize(("case", "fmt"), FORMATS, ids=[c for c, _ in FORMATS])
def test_json_prints_exactly_one_object_equal_to_expected(
    case: str, fmt: str, fmt_choice: str
) -> None:
    result = invoke(
        fixture(case), "--json", "--format", fmt if fmt_choice == "explicit" else "auto"
    )
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1
    got = orjson.loads(lines[0])
    assert list(got) == ["output", "usage", "finish_reason", "error"]
    assert mask(got) == expected(case)
    assert result.stderr == ""


def test_short_format_flag_is_the_same_option() -> None:
    result = invoke(fixture("ollama/thinking-text.ndjson"), "--json", "-f", "ollama")
    assert result.exit_code == 0
    assert mask(orjson.loads(result.stdout)) == expected("ollama/thinking-text.ndjson")


def test_unknown_format_is_a_usage_error() -> None:
    result = invoke(fixture("openai/text.sse"), "--format", "xml")
    assert result.exit_code == 2
    assert "xml" in result.stderr


def _check_sequence(events: list[dict[str, Any]]) -> None:
    """Every added item is done later, once; deltas only touch items that are open."""
    open_items: set[int] = set()
    closed: set[int] = set()
    for event in events:
        kind, data = event["type"], event["data"]
        index = data.get("output_index")
        if kind == "response.output_item.added":
            assert index not in open_items and index not in closed, event
            open_items.add(index)
        elif kind == "response.output_item.done":
            assert index in open_items, event
            open_items.remove(index)
            closed.add(index)
        elif kind.endswith(".delta"):
            assert index in open_items, event
    assert open_items == set()


@pytest.mark.parametrize(
    "case",
    [
        "openai/text.sse",
        "deepseek/reasoning-tool-call.sse",
        "openai-responses/reasoning-summary-then-text.sse",
        "ollama/thinking-text.ndjson",
        "openrouter/reasoning-details.sse",
        "mistral/thinking-parts.sse",
    ],
)
def test_events_are_a_valid_sequence_whose_deltas_make_the_text(case: str) -> None:
    result = invoke(fixture(case), "--events")
    assert result.exit_code == 0, result.stderr
    events = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert all(set(e) == {"type", "data"} for e in events)
    _check_sequence(events)
    added = [e for e in events if e["type"] == "response.output_item.added"]
    assert len(added) == len(expected(case)["output"])
    deltas = "".join(
        e["data"]["delta"] for e in events if e["type"] == "response.output_text.delta"
    )
    want = message_text(expected(case))
    assert want != ""
    assert deltas == want


def test_events_and_json_together_end_with_the_result() -> None:
    result = invoke(fixture("deepseek/reasoning-tool-call.sse"), "--events", "--json")
    lines = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert all("type" in e for e in lines[:-1])
    assert mask(lines[-1]) == expected("deepseek/reasoning-tool-call.sse")


def test_readable_rendering_shows_reasoning_call_and_text() -> None:
    result = invoke(fixture("deepseek/reasoning-tool-call.sse"))
    assert result.exit_code == 0
    out = result.stdout
    assert "thinking: The user asks for the weather in Berlin. I should call get_weather." in out
    assert "Let me check the weather for you." in out
    assert "call get_weather (call_0_5b8e2c1d-7f4a-4e9b-b3c6-1a2d3e4f5a6b)" in out
    assert '{"city": "Berlin"}' in out
    assert "finish: tool_calls · tokens in 96 out 64" in out
    assert "error:" not in out
    # the order a reader expects: thinking, then the words, then the call
    positions = [out.index(s) for s in ("thinking:", "Let me check", "call get_weather (")]
    assert positions == sorted(positions)


def test_readable_rendering_of_responses_reasoning_summary() -> None:
    result = invoke(fixture("openai-responses/reasoning-summary-then-text.sse"))
    assert result.exit_code == 0
    assert "thinking: **Computing the sum**" in result.stdout
    assert "17 + 25 = 42." in result.stdout  # markdown: the bold markers are rendered away
    assert "finish: stop" in result.stdout


@pytest.mark.parametrize(
    ("case", "text", "error"),
    [
        (
            "ollama/error.ndjson",
            "Once upon a time",
            "an error was encountered while running the model: unexpected EOF",
        ),
        (
            "openrouter/error-midstream.sse",
            "The first three primes are 2, 3",
            "Provider disconnected unexpectedly",
        ),
    ],
)
def test_in_stream_error_exits_0_and_shows_the_error(case: str, text: str, error: str) -> None:
    readable = invoke(fixture(case))
    assert readable.exit_code == 0
    assert text in readable.stdout
    assert f"error: {error}" in readable.stdout
    assert "finish: error" in readable.stdout
    as_json = invoke(fixture(case), "--json")
    assert as_json.exit_code == 0
    got = orjson.loads(as_json.stdout)
    assert (got["error"], got["finish_reason"]) == (error, "error")


def test_missing_file_exits_2_naming_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "body.sse"
    result = invoke(str(missing), "--json")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert f"error: cannot read {missing}: No such file or directory" in result.stderr


def test_binary_file_exits_2_with_a_clear_message(tmp_path: Path) -> None:
    picture = tmp_path / "picture.png"
    picture.write_bytes(PNG)
    result = invoke(str(picture), "--json")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert f"error: {picture} is not a model response body (json)" in result.stderr
    assert "Malformed chunk from the model server" in result.stderr


@pytest.mark.parametrize("fmt", ["chat", "ollama"])
def test_garbage_in_a_streaming_format_exits_2(tmp_path: Path, fmt: str) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(PNG + b"\n" + PNG)
    result = invoke(str(junk), "--format", fmt)
    assert result.exit_code == 2
    assert f"{junk} is not a model response body" in result.stderr


def test_empty_file_exits_2(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    result = invoke(str(empty))
    assert result.exit_code == 2
    assert "The model server sent an empty body." in result.stderr


@pytest.mark.parametrize(
    "case", ["openai/parallel-tool-calls.sse", "ollama/tool-calls.ndjson", "openai/tool-calls.json"]
)
def test_stdin_dash_reads_the_body(case: str) -> None:
    body = (STREAMS / case).read_bytes()
    result = invoke("-", "--json", stdin=body)
    assert result.exit_code == 0, result.stderr
    assert mask(orjson.loads(result.stdout)) == expected(case)
