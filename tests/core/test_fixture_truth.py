"""The `.expected.json` files checked against their raw bodies, independently of the core.

The expected files were first written from the parser's own output, so
comparing the parser with them proves only that it did not change. This test
reads each raw body with a separate, deliberately naive reader (stdlib `json`,
line splitting, string concatenation; nothing from `toolrelay`) and checks the
facts a reader of the body can see by hand: the visible and reasoning text,
each call's name and its arguments as one string, how the body ended (finish
reason, or an error when it was cut or reported one) and the token total.
The rules it encodes are SPEC's: a frame that is not JSON or a body cut short
is an error with the partial output kept (R22); Ollama's `stop` after a call
is `tool_calls`; R6 splits one call's concatenated objects (so the calls'
arguments, joined, are what the body said).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

STREAMS = Path(__file__).parent.parent / "fixtures" / "streams"
BODIES = sorted(
    p
    for p in STREAMS.rglob("*")
    if p.suffix in (".sse", ".ndjson", ".json")
    and not p.name.endswith((".expected.json", ".exchange.json"))
    and p.parent.name != "openai-responses"  # Responses events: described in their own README
)
TAGS = re.compile(r"</?think>")


@dataclass
class Facts:
    text: str = ""
    reasoning: str = ""
    calls: dict[str, list[str]] = field(default_factory=dict)  # key -> [name, arguments]
    finish: str | None = None
    total: int | None = None
    error: bool = False
    ended: bool = False


def _call(facts: Facts, key: str, name: Any, arguments: Any) -> None:
    entry = facts.calls.setdefault(key, ["", ""])
    if isinstance(name, str) and name:
        entry[0] = name
    if isinstance(arguments, str):
        entry[1] += arguments
    elif arguments is not None:
        entry[1] += json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)


def _chat_choice(
    facts: Facts, choice: dict[str, Any], last_key: list[str], whole: bool = False
) -> None:
    # a whole body's answer is its message, whatever `delta` sits beside it (Perplexity)
    delta = (whole and choice.get("message")) or choice.get("delta") or choice.get("message") or {}
    content = delta.get("content")
    if isinstance(content, str):
        facts.text += content
    elif isinstance(content, dict):  # an answer that is a JSON object is its JSON text
        facts.text += json.dumps(content, separators=(",", ":"), ensure_ascii=False)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                facts.text += part
            elif part.get("type") == "thinking":
                facts.reasoning += "".join(p.get("text", "") for p in part["thinking"])
            else:
                facts.text += part.get("text") or ""
    thought = delta.get("reasoning_content") or delta.get("reasoning") or delta.get("thinking")
    if isinstance(thought, str):
        facts.reasoning += thought
    for n, call in enumerate(delta.get("tool_calls") or []):
        # a non-empty id names a call; else its index (whole calls in one message: position)
        key = call.get("id") or (f"#{call['index']}" if "index" in call else last_key[0] or f"#{n}")
        if "index" in call and call.get("id"):
            last_key[0] = key
        if not call.get("id") and "index" in call:
            key = next((k for k, v in facts.calls.items() if v[2:] == [call["index"]]), key)
        _call(
            facts,
            key,
            call.get("function", {}).get("name"),
            call.get("function", {}).get("arguments"),
        )
        if "index" in call and len(facts.calls[key]) == 2:
            facts.calls[key].append(call["index"])
    if choice.get("finish_reason"):
        facts.finish = choice["finish_reason"]


def _chat_payload(
    facts: Facts, obj: dict[str, Any], last_key: list[str], whole: bool = False
) -> None:
    for choice in obj.get("choices") or []:
        if choice.get("index", 0) == 0:
            _chat_choice(facts, choice, last_key, whole)
    if obj.get("error"):
        facts.error = True
    usage = obj.get("usage") or (obj.get("x_groq") or {}).get("usage")
    if usage:
        facts.total = usage.get("total_tokens")


def read_sse(body: str) -> Facts:
    facts, last_key = Facts(), [""]
    for line in body.splitlines():
        if line.startswith("error:"):  # a server's bare last words (llama.cpp)
            facts.error = True
            break
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            facts.ended = True
            break
        try:
            obj = json.loads(payload)
        except ValueError:
            facts.error = True  # R22: an unreadable frame ends the read with an error
            break
        _chat_payload(facts, obj, last_key)
    return facts


def read_ollama(lines: list[str]) -> Facts:
    facts = Facts()
    for line in lines:
        try:
            obj = json.loads(line)
        except ValueError:
            facts.error = True
            break
        message = obj.get("message") or {}
        facts.text += message.get("content") or ""
        facts.reasoning += message.get("thinking") or ""
        for call in message.get("tool_calls") or []:
            function = call["function"]
            _call(facts, f"#{len(facts.calls)}", function.get("name"), function.get("arguments"))
        if obj.get("error"):
            facts.error = True
        if obj.get("done"):
            facts.ended = True
            facts.finish = "tool_calls" if facts.calls else obj.get("done_reason") or "stop"
            facts.total = obj.get("prompt_eval_count", 0) + obj.get("eval_count", 0)
    return facts


def read_raw(path: Path) -> Facts:
    body = path.read_bytes().decode("utf-8", "replace")
    if path.suffix == ".sse":
        return read_sse(body)
    if path.suffix == ".ndjson":
        return read_ollama([line for line in body.split("\n") if line.strip()])
    obj = json.loads(body)
    if "choices" in obj:
        facts = Facts(ended=True)
        _chat_payload(facts, obj, [""], whole=True)
        return facts
    return read_ollama([body])


def words(text: str) -> list[str]:
    """Text compared word by word: where whitespace sits between items is the parser's choice."""
    return TAGS.sub(" ", text).split()


@pytest.mark.parametrize("path", BODIES, ids=lambda p: str(p.relative_to(STREAMS)))
def test_expected_file_agrees_with_the_raw_body(path: Path) -> None:
    raw = read_raw(path)
    expected = json.loads(path.with_suffix(".expected.json").read_text())
    items = expected["output"]

    def texts(kind: str) -> str:
        return " ".join(p["text"] for i in items if i["type"] == kind for p in i["content"])

    assert words(texts("reasoning") + " " + texts("message")) == words(
        raw.reasoning + " " + raw.text
    )
    calls = [i for i in items if i["type"] == "function_call"]
    assert {c["name"] for c in calls} == {v[0] for v in raw.calls.values()}
    assert "".join(c["arguments"] for c in calls) == "".join(v[1] for v in raw.calls.values())
    cut = not raw.ended and raw.finish is None
    assert (expected["error"] is not None) == (raw.error or cut)
    if raw.error or cut:
        assert expected["finish_reason"] == "error"
    else:
        assert expected["finish_reason"] == (raw.finish or ("tool_calls" if calls else "stop"))
    total = (expected["usage"] or {}).get("total_tokens")
    assert total == raw.total
