"""Tool calls a model wrote as text in its content, recognised (issue 14).

Small local models (Qwen2.5-Coder through llama.cpp, among others) are offered
tools but answer with the call written out as content instead of a native
`tool_calls` field. This module decides whether a response's whole content is
such a call, and which calls it makes. It owns only that decision: no items,
no events, no I/O (`core.text_calls.stage` turns calls into the same
deltas, or events, a provider would send).

What counts (after leading whitespace; only whitespace between and after):

- a call object `{"name": X, "arguments": {...}}` — `"parameters"` instead of
  `"arguments"`, arguments as a JSON string holding an object, missing
  arguments (`{}`) and `"type": "function"` are accepted; no other key is;
- a JSON list of call objects, or several call objects one after the other;
- any of those inside a Markdown fence (```` ``` ````, ```` ```json ````,
  ```` ```tool_call ````) or between `<tool_call>` and `</tool_call>` tags
  (a closing fence or tag may be missing at the very end);
- `functions.X:{...}` (Kimi's form; an index such as `functions.X:0` may
  stand before the arguments object);
- X must be the name of a tool offered in this request (`ANY_NAME` instead of
  the offered names accepts any name: how `core.text_calls.recogniser` tells a
  call to a made-up tool from text).

Anything else is text: prose around JSON, JSON that is not a call, a call to
a tool nobody offered. A leading reasoning block (`<think>…</think>`, the
configured tags) is passed through and the rule applies to what follows.

`parse_text_calls` decides on whole content; `core.text_calls.recogniser` holds
back, while the content streams, only what could still become a call.
"""

from __future__ import annotations

import json
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "ANY_NAME",
    "FENCE_LANGS",
    "MAX_CALL_CHARS",
    "AnyName",
    "TextCall",
    "callable_names",
    "parse_text_calls",
]

MAX_CALL_CHARS = 256 * 1024
"""Longer content is text: holding it back any longer would stall a real answer."""

FENCE_LANGS = frozenset({"", "json", "tool_call", "tool_calls"})
"""Fence info strings (lower-cased) a call may be fenced with."""

# The grammar's pieces, shared with the streaming check (`core.text_calls.recogniser`).
CALL_KEYS = frozenset({"name", "arguments", "parameters", "type"})
FENCE = "```"
TAG_OPEN, TAG_CLOSE = "<tool_call>", "</tool_call>"
FUNCTIONS = "functions."
WS = frozenset(" \t\r\n")
LANG_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
NAME_CHARS = LANG_CHARS | frozenset("0123456789-.")
DIGITS = frozenset("0123456789")


class AnyName:
    """Stands for the offered names where any name counts: any string with a character
    other than whitespace (the 0.5B made up `say_hi`, `say_hello` and `cat joke`)."""

    __slots__ = ()

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and bool(name.strip())

    def could_start(self, prefix: str) -> bool:
        """Some name starts with `prefix` (the streaming check): every prefix."""
        return True


ANY_NAME: Final = AnyName()


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)


@dataclass(frozen=True, slots=True)
class TextCall:
    """One call recognised in text; `arguments` is a JSON object as compact text."""

    name: str
    arguments: str


# ------------------------------------------------------------------ the decision


def callable_names(tools: Iterable[str], tool_choice: object = None) -> frozenset[str]:
    """The tools a call written as text may name, given the request's `tool_choice`.

    `"none"`: none (the client said no calls); one named function (Chat
    Completions `{"type": "function", "function": {"name": …}}` or the flat
    Responses form): that one, if offered; anything else: every offered tool.
    """
    offered = frozenset(tools)
    if tool_choice == "none":
        return frozenset()
    if isinstance(tool_choice, Mapping) and tool_choice.get("type") == "function":
        inner = tool_choice.get("function")
        name = inner.get("name") if isinstance(inner, Mapping) else tool_choice.get("name")
        return offered & {name} if isinstance(name, str) else offered
    return offered


def parse_text_calls(text: str, tools: Container[str]) -> list[TextCall] | None:
    """The calls `text` consists of (module doc), or None when it is text."""
    if len(text) > MAX_CALL_CHARS:
        return None
    calls: list[TextCall] = []
    i = _skip_ws(text, 0)
    if i == len(text):
        return None
    while i < len(text):
        i = _block(text, i, tools, calls)
        if i < 0:
            return None
        i = _skip_ws(text, i)
    return calls


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in WS:
        i += 1
    return i


def _block(text: str, i: int, tools: Container[str], calls: list[TextCall]) -> int:
    """One block at `text[i]`; the index after it, or -1 when it is not a call block."""
    if text.startswith(FENCE, i):
        j = i + len(FENCE)
        k = j
        while k < len(text) and text[k] in LANG_CHARS:
            k += 1
        if text[j:k].lower() not in FENCE_LANGS:
            return -1
        return _wrapped(text, k, FENCE, tools, calls)
    if text.startswith(TAG_OPEN, i):
        return _wrapped(text, i + len(TAG_OPEN), TAG_CLOSE, tools, calls)
    if text.startswith(FUNCTIONS, i):
        return _function(text, i + len(FUNCTIONS), tools, calls)
    return _values(text, i, tools, calls)


def _wrapped(text: str, i: int, closer: str, tools: Container[str], calls: list[TextCall]) -> int:
    """Call values up to `closer` (or to the end of the text)."""
    i = _skip_ws(text, i)
    found = False
    while i < len(text) and not text.startswith(closer, i):
        i = _values(text, i, tools, calls)
        if i < 0:
            return -1
        found = True
        i = _skip_ws(text, i)
    if not found:
        return -1
    return i + len(closer) if i < len(text) else i


def _values(text: str, i: int, tools: Container[str], calls: list[TextCall]) -> int:
    """A call object or a non-empty list of them at `text[i]`."""
    if i >= len(text) or text[i] not in "{[":
        return -1
    try:
        value, end = _DECODER.raw_decode(text, i)
    except (ValueError, RecursionError):
        return -1
    found = value if isinstance(value, list) else [value]
    if not found:
        return -1
    for entry in found:
        call = _call(entry, tools)
        if call is None:
            return -1
        calls.append(call)
    return int(end)


def _call(value: object, tools: Container[str]) -> TextCall | None:
    """A call object's name and arguments, when it is one to an offered tool."""
    if not isinstance(value, dict) or not value.keys() <= CALL_KEYS:
        return None
    name = value.get("name")
    if not isinstance(name, str) or name not in tools:
        return None
    if value.get("type", "function") != "function":
        return None
    if "arguments" in value and "parameters" in value:
        return None
    arguments = _arguments(value.get("arguments", value.get("parameters", {})))
    return None if arguments is None else TextCall(name, arguments)


def _arguments(value: object) -> str | None:
    """Arguments as compact JSON text: an object, or a string holding one."""
    if isinstance(value, str):
        try:
            value = _DECODER.decode(value)
        except (ValueError, RecursionError):
            return None
    if not isinstance(value, dict):
        return None
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _function(text: str, i: int, tools: Container[str], calls: list[TextCall]) -> int:
    """`functions.NAME:` [index] then an arguments object."""
    j = i
    while j < len(text) and text[j] in NAME_CHARS:
        j += 1
    name = text[i:j]
    if name not in tools or not text.startswith(":", j):
        return -1
    j += 1
    while j < len(text) and text[j] in DIGITS:
        j += 1
    j = _skip_ws(text, j)
    if not text.startswith("{", j):
        return -1
    try:
        value, end = _DECODER.raw_decode(text, j)
    except (ValueError, RecursionError):
        return -1
    arguments = _arguments(value)
    if arguments is None:
        return -1
    calls.append(TextCall(name, arguments))
    return int(end)
