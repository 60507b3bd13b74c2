"""Output items (SPEC R1): one assistant turn is an ordered list of these.

Items are plain JSON-ready dicts typed as TypedDicts, shaped like the OpenAI
Responses API `output` array so a Responses client can read them directly.
The accumulator owns and mutates the items it is building; everything it hands
out is a copy (`snapshot`). Helpers here never do I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, NotRequired, TypedDict

from toolrelay.core.ids import new_id

Status = Literal["in_progress", "completed", "incomplete", "failed"]


class MessageItem(TypedDict):
    type: Literal["message"]
    id: str
    role: Literal["assistant"]
    status: str
    content: list[dict[str, Any]]


class ReasoningItem(TypedDict):
    type: Literal["reasoning"]
    id: str
    status: str
    content: list[dict[str, Any]]
    summary: list[dict[str, Any]]
    duration: NotRequired[float]
    started_at: NotRequired[float]
    ended_at: NotRequired[float]
    details: NotRequired[list[dict[str, Any]]]
    encrypted_content: NotRequired[str]


class FunctionCallItem(TypedDict):
    type: Literal["function_call"]
    id: str
    call_id: str
    name: str
    arguments: str
    status: str


class FunctionCallOutputItem(TypedDict):
    type: Literal["function_call_output"]
    id: str
    call_id: str
    output: str | list[dict[str, Any]]
    status: str
    files: NotRequired[list[dict[str, Any]]]
    embeds: NotRequired[list[Any]]


class CodeInterpreterItem(TypedDict):
    type: Literal["code_interpreter"]
    id: str
    status: str
    code: str
    lang: str
    output: Any
    attributes: NotRequired[dict[str, str]]


Item = dict[str, Any]
"""Any output item; unknown item types from a provider are kept as they came."""


def message_item(text: str = "", *, status: str = "in_progress") -> MessageItem:
    return {
        "type": "message",
        "id": new_id("msg"),
        "role": "assistant",
        "status": status,
        "content": [{"type": "output_text", "text": text}],
    }


def reasoning_item(text: str = "", *, status: str = "in_progress") -> ReasoningItem:
    return {
        "type": "reasoning",
        "id": new_id("rs"),
        "status": status,
        "content": [{"type": "output_text", "text": text}],
        "summary": [],
    }


def function_call_item(
    call_id: str, name: str, arguments: str = "", *, status: str = "in_progress"
) -> FunctionCallItem:
    return {
        "type": "function_call",
        "id": new_id("fc"),
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }


def function_call_output_item(
    call_id: str, output: str | list[dict[str, Any]], *, status: str = "completed"
) -> FunctionCallOutputItem:
    return {
        "type": "function_call_output",
        "id": new_id("fco"),
        "call_id": call_id,
        "output": output,
        "status": status,
    }


def code_interpreter_item(
    code: str = "", *, lang: str = "python", attributes: dict[str, str] | None = None
) -> CodeInterpreterItem:
    item: CodeInterpreterItem = {
        "type": "code_interpreter",
        "id": new_id("ci"),
        "status": "in_progress",
        "code": code,
        "lang": lang,
        "output": None,
    }
    if attributes:
        item["attributes"] = attributes
    return item


def item_text(item: Item) -> str:
    """All text parts of a message or reasoning item, joined."""
    parts = item.get("content")
    if not isinstance(parts, list):
        return ""
    texts = (p.get("text") for p in parts if isinstance(p, dict))
    return "".join(t for t in texts if isinstance(t, str))


def output_text(output: list[Item]) -> str:
    """The visible text of a turn: its message items' text, in order, a blank line between
    two (text before and after a tool call or a think block would run together otherwise)."""
    texts = (item_text(i) for i in output if i.get("type") == "message")
    return "\n\n".join(t for t in texts if t)


def copy_item(item: Item) -> Item:
    """A copy safe to hand out: the lists we later append to are copied too."""
    copy = dict(item)
    for key in ("content", "summary", "details"):
        value = copy.get(key)
        if isinstance(value, list):
            copy[key] = [dict(p) if isinstance(p, dict) else p for p in value]
    return copy


def new_text_item(kind: str) -> Item:
    """An empty in-progress `message` or `reasoning` item, as a plain dict."""
    return dict(message_item() if kind == "message" else reasoning_item())


def merge_reasoning_details(into: list[dict[str, Any]], details: Iterable[dict[str, Any]]) -> None:
    """OpenRouter reasoning_details: merge by `index`, concatenating text fields."""
    for detail in details:
        index = detail.get("index")
        target = next((d for d in into if index is not None and d.get("index") == index), None)
        if target is None:
            into.append(dict(detail))
            continue
        for key, value in detail.items():
            old = target.get(key)
            if key in ("text", "summary") and isinstance(old, str) and isinstance(value, str):
                target[key] = old + value
            else:
                target[key] = value
