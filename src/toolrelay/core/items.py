"""Output items (SPEC R1): one assistant turn is an ordered list of these.

Items are plain JSON-ready dicts shaped like the OpenAI Responses API
`output` array, so a Responses client reads them directly and nothing is
converted on the hot path; their types are TypedDicts with a literal `type`
that mypy checks. `Item` is the closed union of the kinds we build and read,
plus `ProviderItem` for any other kind a provider sends (a web search call,
say), which is kept and replayed as it came but never looked into.

Narrow an `Item` with the `is_*` guards: `item["type"] == "message"` cannot
narrow it, because a `ProviderItem`'s `type` is any string. Code that builds
items from the wire (`core.formats.responses.parse`, stores) works on plain
dicts and says once, at its edge, that the result is an `Item`
(`as_items`): the reducer keeps each known kind in its shape.

The accumulator owns and mutates the items it is building; everything it
hands out is a copy (`snapshot`). Helpers here never do I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict, TypeVar, cast

from toolrelay.core.ids import new_id

if TYPE_CHECKING:
    from typing_extensions import TypeIs

Status = Literal["in_progress", "completed", "incomplete", "failed"]


class MessageItem(TypedDict):
    type: Literal["message"]
    id: str
    role: Literal["assistant"]
    status: str
    content: list[dict[str, Any]]
    attributes: NotRequired[dict[str, str]]
    """The attributes of the inline tag that opened it (`<solution lang=...>`)."""


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
    attributes: NotRequired[dict[str, str]]


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
    cut: NotRequired[dict[str, int]]
    """Set when `output` was cut to the cap (`core.tools.result_cap`): `{bytes, sent}`."""


class CodeInterpreterItem(TypedDict):
    type: Literal["code_interpreter"]
    id: str
    status: str
    code: str
    lang: str
    output: Any
    attributes: NotRequired[dict[str, str]]


class ProviderItem(TypedDict):
    """An item of a kind we do not build (`web_search_call`, …): kept and replayed as is."""

    type: str
    id: NotRequired[str]
    status: NotRequired[str]


TextItem = MessageItem | ReasoningItem
"""The items streamed text goes into."""

Item = (
    MessageItem
    | ReasoningItem
    | FunctionCallItem
    | FunctionCallOutputItem
    | CodeInterpreterItem
    | ProviderItem
)
"""Any output item (module doc: narrow with the `is_*` guards)."""


def is_message(item: Mapping[str, Any]) -> TypeIs[MessageItem]:
    return item.get("type") == "message"


def is_reasoning(item: Mapping[str, Any]) -> TypeIs[ReasoningItem]:
    return item.get("type") == "reasoning"


def is_call(item: Mapping[str, Any]) -> TypeIs[FunctionCallItem]:
    return item.get("type") == "function_call"


def is_call_output(item: Mapping[str, Any]) -> TypeIs[FunctionCallOutputItem]:
    return item.get("type") == "function_call_output"


def is_code(item: Mapping[str, Any]) -> TypeIs[CodeInterpreterItem]:
    return item.get("type") == "code_interpreter"


_I = TypeVar("_I", bound=Item)


def updated(item: _I, /, **fields: Any) -> _I:
    """A shallow copy of `item` with `fields` replaced (`status`, `arguments`, …): the
    same kind of item, which mypy cannot see through `{**item, ...}` on its own."""
    return cast("_I", {**item, **fields})


def as_item(raw: Mapping[str, Any]) -> Item:
    """The wire edge: a dict built by a reader that keeps each known kind in its shape."""
    return cast("Item", raw)


def as_items(raw: Sequence[Mapping[str, Any]]) -> list[Item]:
    """`as_item` for a list (the same list, no copy)."""
    return cast("list[Item]", raw)


def raw_items(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The other way: items as plain dicts, for code that reshapes any kind alike."""
    return cast("list[dict[str, Any]]", items)


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


def item_text(item: Mapping[str, Any]) -> str:
    """All text parts of a message or reasoning item, joined."""
    parts = item.get("content")
    if not isinstance(parts, list):
        return ""
    texts = (p.get("text") for p in parts if isinstance(p, dict))
    return "".join(t for t in texts if isinstance(t, str))


def output_text(output: Sequence[Item]) -> str:
    """The visible text of a turn: its message items' text, in order, a blank line between
    two (text before and after a tool call or a think block would run together otherwise)."""
    texts = (item_text(i) for i in output if is_message(i))
    return "\n\n".join(t for t in texts if t)


def copy_item(item: Item) -> Item:
    """A copy safe to hand out: the lists we later append to are copied too."""
    copy: dict[str, Any] = dict(item)
    for key in ("content", "summary", "details"):
        value = copy.get(key)
        if value.__class__ is list:
            copy[key] = [dict(p) if p.__class__ is dict else p for p in value]
    return as_item(copy)


def new_text_item(kind: Literal["message", "reasoning"]) -> TextItem:
    """An empty in-progress `message` or `reasoning` item."""
    return message_item() if kind == "message" else reasoning_item()


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
