"""Output items back into provider messages (SPEC R13, R14; reference §10.2).

After a round of tool calls the engine resends the conversation. This module
turns the turn's output items into what the provider reads next: Chat
Completions messages (`to_chat_messages`) or Responses API input items
(`to_responses_input`). It also repairs client-supplied Chat Completions
histories (`repair_history`) so a provider never sees a dangling tool call.

Rules the Chat Completions form keeps, because providers reject anything else:

0. A call id used twice (a saved or imported chat, a provider that reuses
   ids) pairs the k-th output of the id with its k-th call, and the second
   and later pairs go back under a fresh id derived from the old one and k
   (`Pairing`; the same for Responses input, and across a saved chat's turns
   with `unique_call_ids`).
1. A call is replayed only when both its `function_call` item and a
   `function_call_output` item with the same `call_id` exist. Unanswered
   calls and orphan outputs are dropped.
2. Every assistant message carrying `tool_calls` is followed at once by one
   `tool` message per call, in call order, whatever order the outputs came in.
3. `tool` messages cannot carry images, so a multimodal result keeps its text
   in the tool message and its images move to ONE `user` message placed after
   the last tool message of that group (`TOOL_IMAGES_TEXT` opens it).
4. Text and reasoning before a group's first tool output share the assistant
   message with the group's calls; text after the outputs starts a new one.
   Separate message items are joined with a newline.
5. An assistant message with neither content nor tool calls is not emitted.

`code_interpreter` items are replayed as assistant text: the code inside
`<code_interpreter lang="…">` tags, then the output (a string, or a dict's
non-empty `stdout`, `stderr`, `result`) inside `<code_interpreter_output>`.
Images the cell showed (its output's `files` that still carry a base64 PNG,
JPEG, GIF or WebP data URI) follow in ONE `user` message opened by
`CODE_IMAGES_TEXT`, as a tool's images do (rule 3, SPEC R12).
An empty block (no code, no output) is not replayed. Reasoning text is the
item's `content` (`output_text` or `reasoning_text` parts), or its `summary`
when content is empty. OpenRouter `reasoning_details` kept on reasoning items
go back as the assistant message's `reasoning_details`, whatever the
reasoning mode (Gemini 3 and Anthropic tool loops need their signatures),
except Anthropic thinking text that has no signature (Anthropic refuses it).
"""

from __future__ import annotations

import copy
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from toolrelay.core.formats.call_ids import (
    INTERRUPTED_TOOL_RESULT,
    CallIdCounts,
    Pairing,
    repair_history,
    unique_call_ids,
    used_call_ids,
)
from toolrelay.core.items import is_call, is_call_output
from toolrelay.core.tools.results import is_model_image

__all__ = [
    "CODE_IMAGES_TEXT",
    "INTERRUPTED_TOOL_RESULT",
    "TOOL_IMAGES_TEXT",
    "ReasoningReplay",
    "repair_history",
    "to_chat_messages",
    "to_responses_input",
    "CallIdCounts",
    "unique_call_ids",
    "used_call_ids",
]

ReasoningReplay = Literal["none", "reasoning_content", "think_tags", "thinking"]
"""How reasoning goes back to the model: dropped, as a message field (`reasoning_content`,
or Ollama's `thinking`), or inline tags."""

TOOL_IMAGES_TEXT: Final = "Images returned by the tool call(s) above:"
CODE_IMAGES_TEXT: Final = "Images shown by the code above:"

_TEXT_PART_TYPES: Final = frozenset({"input_text", "output_text", "text"})
_SUMMARY_TYPES: Final = frozenset({"summary_text"})
_REASONING_PART_TYPES: Final = _TEXT_PART_TYPES | {"reasoning_text"}


def _call_id(item: Mapping[str, Any]) -> str | None:
    """An item's `call_id` when it is a usable one (hostile output may hold a dict)."""
    call_id = item.get("call_id")
    return call_id if isinstance(call_id, str) and call_id else None


def _answered_call_ids(output: Sequence[Mapping[str, Any]]) -> set[str]:
    """Call ids that have both a call and an output item (rule 1)."""
    calls = {_call_id(i) for i in output if is_call(i)}
    outputs = {_call_id(i) for i in output if is_call_output(i)}
    return {c for c in calls & outputs if c is not None}


def _parts_text(parts: object, types: frozenset[str] = _TEXT_PART_TYPES) -> str:
    if not isinstance(parts, list):
        return ""
    return "".join(
        p["text"]
        for p in parts
        if isinstance(p, dict) and _is_in(p.get("type"), types) and isinstance(p.get("text"), str)
    )


def _is_in(value: object, names: frozenset[str]) -> bool:
    return isinstance(value, str) and value in names


def _reasoning_text(item: Mapping[str, Any]) -> str:
    return _parts_text(item.get("content"), _REASONING_PART_TYPES) or _parts_text(
        item.get("summary"), _SUMMARY_TYPES
    )


def _reasoning_details(item: Mapping[str, Any]) -> list[dict[str, Any]]:
    """OpenRouter `reasoning_details` kept on a reasoning item, copied for the request.

    An Anthropic thinking text without its signature is left out: Anthropic rejects
    a thinking block whose signature is missing ("Invalid signature in thinking
    block"), as Open WebUI and OpenRouter's SDK know; encrypted entries go back.
    """
    details = item.get("details")
    if not isinstance(details, list):
        return []
    return [copy.deepcopy(d) for d in details if isinstance(d, dict) and not _unsigned(d)]


def _unsigned(detail: Mapping[str, Any]) -> bool:
    """An Anthropic `reasoning.text` detail with no (non-empty string) `signature`."""
    form = detail.get("format")
    signature = detail.get("signature")
    return (
        isinstance(form, str)
        and form.startswith("anthropic-claude")
        and detail.get("type") == "reasoning.text"
        and not (isinstance(signature, str) and signature)
    )


def _empty_code(item: Mapping[str, Any]) -> bool:
    """A code-interpreter block with no code and no output says nothing: not replayed."""
    code = item.get("code")
    return not (isinstance(code, str) and code.strip()) and item.get("output") in (None, "", {})


def _image_url(part: Mapping[str, Any]) -> str | None:
    """`input_image` parts carry a url string, or Chat-style `{"url": …}`."""
    url = part.get("image_url")
    if isinstance(url, Mapping):
        url = url.get("url")
    return url if isinstance(url, str) and url else None


def _split_output(value: object) -> tuple[str, list[str]]:
    """A tool result as (text, image urls); text parts are joined with newlines."""
    parts = _responses_output(value)
    if isinstance(parts, str):
        return parts, []
    texts = [p["text"] for p in parts if p["type"] == "input_text"]
    images = [p["image_url"] for p in parts if p["type"] == "input_image"]
    return "\n".join(texts), images


def _code_images(item: Mapping[str, Any]) -> list[str]:
    """The data URIs of the images a code block showed that a model can read."""
    output = item.get("output")
    files = output.get("files") if isinstance(output, Mapping) else None
    if not isinstance(files, list):
        return []
    urls = (f.get("url") for f in files if isinstance(f, Mapping))
    return [u for u in urls if isinstance(u, str) and is_model_image(u)]


def _code_interpreter_text(item: Mapping[str, Any]) -> str:
    attrs = {"lang": str(item.get("lang") or "python")}
    extra = item.get("attributes")
    if isinstance(extra, Mapping):
        attrs.update({str(k): str(v) for k, v in extra.items() if k != "lang"})
    rendered = "".join(f' {k}="{html.escape(v, quote=True)}"' for k, v in attrs.items())
    text = f"<code_interpreter{rendered}>\n{item.get('code') or ''}\n</code_interpreter>"
    result = item.get("output")
    if isinstance(result, Mapping):
        keys = ("stdout", "stderr", "result")
        result = "\n".join(str(result[k]) for k in keys if result.get(k))
    elif result is not None:
        result = str(result)
    if result:
        text += f"\n<code_interpreter_output>\n{result}\n</code_interpreter_output>"
    return text


def _images_message(text: str, urls: Sequence[str]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    parts += [{"type": "image_url", "image_url": {"url": url}} for url in urls]
    return {"role": "user", "content": parts}


@dataclass(slots=True)
class _ChatBuilder:
    """Buffers one assistant message's parts until its tool results arrive."""

    reasoning: ReasoningReplay
    outputs: dict[str, Mapping[str, Any]]
    messages: list[dict[str, Any]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    thoughts: list[str] = field(default_factory=list)
    details: list[dict[str, Any]] = field(default_factory=list)
    calls: list[Mapping[str, Any]] = field(default_factory=list)

    def add(self, item: Mapping[str, Any], answered: set[str]) -> None:
        kind = item.get("type")
        if kind == "message":
            text = _parts_text(item.get("content"))
            if text:
                self.texts.append(text)
        elif kind == "reasoning":
            text = _reasoning_text(item)
            if text:
                self.thoughts.append(text)
            self.details += _reasoning_details(item)
        elif kind == "code_interpreter" and not _empty_code(item):
            self.texts.append(_code_interpreter_text(item))
            images = _code_images(item)
            if images:  # the model reads them after the block, as it reads a tool's
                self.flush()
                self.messages.append(_images_message(CODE_IMAGES_TEXT, images))
        elif kind == "function_call" and _call_id(item) in answered:
            self.calls.append(item)
        elif kind == "function_call_output" and self.calls:
            self.flush()

    def flush(self) -> None:
        """Emit the buffered assistant message, then its tool results and images."""
        assistant = self._assistant()
        if assistant is not None:
            self.messages.append(assistant)
        images: list[str] = []
        for call in self.calls:
            text, urls = _split_output(self.outputs[call["call_id"]].get("output"))
            self.messages.append({"role": "tool", "tool_call_id": call["call_id"], "content": text})
            images.extend(urls)
        if images:
            self.messages.append(_images_message(TOOL_IMAGES_TEXT, images))
        self.texts, self.thoughts, self.details, self.calls = [], [], [], []

    def _assistant(self) -> dict[str, Any] | None:
        text = "\n".join(self.texts)
        thought = "\n".join(self.thoughts)
        if self.reasoning == "think_tags" and thought:
            text = f"<think>{thought}</think>\n{text}"
        if not text and not self.calls:
            return None
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": call["call_id"],
                    "type": "function",
                    "function": {
                        "name": str(call.get("name") or ""),
                        "arguments": str(call.get("arguments") or "{}"),
                    },
                }
                for call in self.calls
            ]
        if self.reasoning == "reasoning_content" and (self.calls or thought):
            message["reasoning_content"] = thought
        elif self.reasoning == "thinking" and thought:
            message["thinking"] = thought
        if self.details:  # whatever the mode: only a provider that sent them reads them
            message["reasoning_details"] = self.details
        return message


def to_chat_messages(
    output: Sequence[Mapping[str, Any]], *, reasoning: ReasoningReplay = "none"
) -> list[dict[str, Any]]:
    """Chat Completions messages to append after the history for this turn's items."""
    pairing = Pairing()
    output = [pairing.feed(item) for item in output]
    answered = _answered_call_ids(output)
    outputs: dict[str, Mapping[str, Any]] = {
        i["call_id"]: i for i in output if is_call_output(i) and _call_id(i) in answered
    }
    builder = _ChatBuilder(reasoning=reasoning, outputs=outputs)
    for item in output:
        builder.add(item, answered)
    builder.flush()
    return builder.messages


class ChatReplay:
    """`to_chat_messages` for one turn's growing output, converting only what is new.

    A turn asks the model again after every tool round with all its items so
    far; converting them all each time costs rounds². This keeps the messages
    of the longest prefix whose conversion later items cannot change: one that
    ended with nothing buffered (its last group flushed), reused only when

    1. the reasoning mode is the same and the prefix's items are the same
       objects (items are values: a changed item is a new object, `updated`);
    2. no newer item is an output for a call of the prefix (it could answer
       an unanswered call, or replace a result: rule 1);
    3. the prefix holds the output of each call of it that it shows answered (a
       result read from a later item could be replaced or gone by the next call).

    Otherwise everything is converted again. The result equals
    `to_chat_messages(output, reasoning=…)` for any output (tested against it).
    """

    __slots__ = (
        "_call_ids",
        "_items",
        "_messages",
        "_outputs",
        "_pairing",
        "_raw_ids",
        "_reasoning",
    )

    def __init__(self) -> None:
        self._reasoning: ReasoningReplay | None = None
        self._items: list[Mapping[str, Any]] = []
        self._messages: list[dict[str, Any]] = []
        self._raw_ids: set[str | None] = set()
        """Call ids of the prefix's `function_call` items, as the items hold them."""
        self._call_ids: set[str | None] = set()
        """The same once paired (`Pairing`: a reused id made unique)."""
        self._outputs: dict[str, Mapping[str, Any]] = {}
        """The prefix's paired `function_call_output` items by call id."""
        self._pairing = Pairing()
        """The pairing's counts after the prefix."""

    def messages(
        self, output: Sequence[Mapping[str, Any]], *, reasoning: ReasoningReplay = "none"
    ) -> list[dict[str, Any]]:
        if not self._reusable(output, reasoning):
            self._reasoning = reasoning
            self._items, self._messages, self._outputs = [], [], {}
            self._raw_ids, self._call_ids, self._pairing = set(), set(), Pairing()
        start = len(self._items)
        raw = output[start:]
        pairing = self._pairing.copy()
        new = [pairing.feed(item) for item in raw]
        outputs = dict(self._outputs)
        for item in new:
            if is_call_output(item) and (call_id := _call_id(item)) is not None:
                outputs.setdefault(call_id, item)
        calls = self._call_ids | {_call_id(i) for i in new if is_call(i)}
        answered = {c for c in calls if c is not None and c in outputs}
        builder = _ChatBuilder(
            reasoning=reasoning,
            outputs={c: o for c, o in outputs.items() if c in answered},
            messages=list(self._messages),
        )
        kept, kept_messages = 0, len(builder.messages)
        waiting: set[str] = set()  # answered calls whose output is not in the prefix yet
        for index, item in enumerate(new, 1):
            builder.add(item, answered)
            call_id = _call_id(item)
            if is_call(item) and call_id in answered:
                waiting.add(call_id)
            elif is_call_output(item) and call_id is not None:
                waiting.discard(call_id)
            buffered = builder.texts or builder.thoughts or builder.details or builder.calls
            if not buffered and not waiting:  # waiting: rule 3
                kept, kept_messages = index, len(builder.messages)
        self._remember(raw[:kept], new[:kept], builder.messages[:kept_messages])
        builder.flush()
        return builder.messages

    def _reusable(self, output: Sequence[Mapping[str, Any]], reasoning: ReasoningReplay) -> bool:
        items = self._items
        if reasoning != self._reasoning or len(output) < len(items):
            return False
        if any(a is not b for a, b in zip(items, output, strict=False)):
            return False
        seen = self._raw_ids
        return not any(is_call_output(i) and _call_id(i) in seen for i in output[len(items) :])

    def _remember(
        self,
        raw: Sequence[Mapping[str, Any]],
        paired: Sequence[Mapping[str, Any]],
        messages: list[dict[str, Any]],
    ) -> None:
        self._items.extend(raw)
        self._messages = messages
        for original, item in zip(raw, paired, strict=True):
            self._pairing.feed(original)
            if is_call(item):
                self._raw_ids.add(_call_id(original))
                self._call_ids.add(_call_id(item))
            elif is_call_output(item) and (call_id := _call_id(item)) is not None:
                self._outputs.setdefault(call_id, item)


def _responses_output(value: object) -> str | list[dict[str, Any]]:
    """A tool result as Responses input: a string, or `input_text`/`input_image` parts."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return "" if value is None else str(value)
    parts: list[dict[str, Any]] = []
    for part in value:
        if not isinstance(part, Mapping):
            continue
        if part.get("type") == "input_image":
            url = _image_url(part)
            if url is not None:
                parts.append({"type": "input_image", "image_url": url})
        elif _is_in(part.get("type"), _TEXT_PART_TYPES) and isinstance(part.get("text"), str):
            parts.append({"type": "input_text", "text": part["text"]})
    return parts


def _assistant_text_item(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


def _responses_item(item: Mapping[str, Any], answered: set[str]) -> dict[str, Any] | None:
    """One output item as a Responses input item; None when it is not replayed."""
    kind = item.get("type")
    if kind == "message":
        text = _parts_text(item.get("content"))
        return _assistant_text_item(text) if text else None
    if kind == "code_interpreter":
        return None if _empty_code(item) else _assistant_text_item(_code_interpreter_text(item))
    if kind == "reasoning" and isinstance(item.get("encrypted_content"), str):
        summary = [
            {"type": "summary_text", "text": p["text"]}
            for p in item.get("summary") or []
            if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        ]
        return {
            "type": "reasoning",
            "summary": summary,
            "encrypted_content": item["encrypted_content"],
        }
    if _call_id(item) not in answered:
        return None
    if kind == "function_call":
        return {
            "type": "function_call",
            "call_id": item["call_id"],
            "name": str(item.get("name") or ""),
            "arguments": str(item.get("arguments") or "{}"),
        }
    if kind == "function_call_output":
        return {
            "type": "function_call_output",
            "call_id": item["call_id"],
            "output": _responses_output(item.get("output")),
        }
    return None


def to_responses_input(
    output: Sequence[Mapping[str, Any]], *, context: Sequence[Mapping[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Responses API input items for this turn's items, in item order.

    Our item ids are minted locally, so ids and statuses are dropped. Reasoning
    is replayed only when it carries `encrypted_content` (stateless reasoning
    continuation); plain reasoning text cannot be sent back on this API.
    `context` is the whole turn when `output` is only its newest part (stateful
    continuation, R14: the calls live in the previous response, and their
    outputs are sent alone); the orphan rule is judged over it.
    """
    if context is None:  # stateful: the calls live upstream under the ids they were sent with
        pairing = Pairing()
        output = [pairing.feed(item) for item in output]
    answered = _answered_call_ids(output if context is None else context)
    converted: list[dict[str, Any]] = []
    for item in output:
        found = _responses_item(item, answered)
        if found is None:
            continue
        converted.append(found)
        if item.get("type") == "code_interpreter":
            images = _code_images(item)
            if images:  # after the block, as a user turn (module doc)
                parts = [{"type": "input_text", "text": CODE_IMAGES_TEXT}]
                parts += [{"type": "input_image", "image_url": url} for url in images]
                converted.append({"type": "message", "role": "user", "content": parts})
    return converted
