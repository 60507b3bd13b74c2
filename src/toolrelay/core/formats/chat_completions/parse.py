"""Chat Completions chunks -> normalised deltas, with every provider quirk in one place.

Owns: reading one already-parsed `chat.completion.chunk` (or a whole
non-streaming `chat.completion`) and translating it into `core.stream.deltas`
values. SSE framing, `[DONE]`, and turning deltas into items live elsewhere.

Rules this module keeps (SPEC R3; quirks seen from OpenAI, DeepSeek,
OpenRouter, Mistral, Gemini's OpenAI compatibility layer, Groq, vLLM and
llama.cpp):

1. Only the choice with index 0 is read; other choices are ignored.
2. Reasoning text is the first truthy of `reasoning_content`, `reasoning`,
   `thinking`; OpenRouter `reasoning_details` ride along on the same delta.
3. Tool-call fragments are resolved to *slots* (see `ToolCallDelta`): a known
   provider id wins, then the provider `index`, and a new non-empty id at an
   index that already holds a different id opens a new slot (Gemini sends
   every parallel call at index 0). Without an index, an unknown id opens a
   slot and no id continues the last one. A known id at a new index, when
   its call came with another index, is a second call reusing the id (Kimi):
   a new slot, whose duplicate id the accumulator replaces. A slot without a
   provider id gets a minted `call_<24 hex>` id, announced once on its
   introducing delta.
4. Content that is a JSON object (Cloudflare Workers AI's answer to a JSON
   prompt) is text: its compact JSON.
5. Nothing here raises on odd input: whatever cannot be read is skipped.

The common case, a text-only delta, costs a handful of dict lookups: no
pydantic, no exceptions, no copies.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from toolrelay.core.formats.error_message import error_message
from toolrelay.core.ids import new_id
from toolrelay.core.stream.deltas import (
    DELTA_LIST,
    CitationDelta,
    Delta,
    DeltaSink,
    ErrorDelta,
    FinishDelta,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    UsageDelta,
)

__all__ = [
    "ChatCompletionsDecoder",
    "arguments_text",
    "completion_to_deltas",
    "error_from_payload",
]

_EMPTY: dict[str, Any] = {}
_TEXT_PART_TYPES = frozenset({"text", "output_text"})
_FALLBACK_ERROR = "the provider reported an error"


class _Slot:
    """What the decoder remembers about one tool call of this response."""

    __slots__ = ("call_id", "index", "named", "provider_id")

    def __init__(self, call_id: str, provider_id: str | None, index: int | None) -> None:
        self.call_id = call_id
        self.provider_id = provider_id
        self.index = index
        self.named = False


class ChatCompletionsDecoder:
    """Stateful translator for one streamed response: chunk dict -> list[Delta].

    State is only what tool-call slot resolution needs, so one decoder serves
    exactly one model response.
    """

    __slots__ = ("_by_id", "_by_index", "_slots")

    def __init__(self) -> None:
        self._slots: list[_Slot] = []
        self._by_index: dict[int, int] = {}
        self._by_id: dict[str, int] = {}

    def feed(self, chunk: dict[str, Any]) -> list[Delta]:
        """Translate one parsed chunk; anything unreadable yields no deltas."""
        out: list[Delta] = []
        self.feed_into(chunk, DELTA_LIST, out)
        return out

    def feed_into(self, chunk: dict[str, Any], sink: DeltaSink, out: list[Any]) -> None:
        """Translate one parsed chunk into `sink` (`core.stream.deltas.DeltaSink`), which adds
        what it makes of it to `out`.

        The common chunk — one choice, a one-key text, reasoning or arguments delta,
        nothing else to report — goes to the sink's lane for it without a delta being
        built. It is recognised with subscripts inside one `try`, as this runs once
        per chunk: any shape it does not expect raises, and the full path takes over
        (the sink is called after the `try`, so its own errors are never swallowed).
        """
        lane = 0  # 1: text, 2: reasoning (a number: a bound method would be built per chunk)
        slot = -1
        try:
            (choice,) = chunk["choices"]
            delta = choice["delta"]
            if (
                choice["finish_reason"] is None
                and len(delta) == 1
                and not choice["index"]
                and not chunk.get("usage")
                and "error" not in chunk
                and "x_groq" not in chunk
                and "timings" not in chunk
            ):
                text = delta.get("content")
                if text.__class__ is str:
                    lane = 1
                else:
                    text = delta.get("reasoning_content")
                    if text.__class__ is str:
                        lane = 2
                    else:
                        slot, text = _more_arguments(delta, self._by_index)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):
            lane, slot = 0, -1
        if lane == 1:
            if text:
                sink.text(text, out)
        elif lane:
            if text:
                sink.reasoning(text, out)
        elif slot >= 0:
            if text:
                sink.arguments(slot, text, out)
        else:
            for part in self._full(chunk):
                sink.feed_into(part, out)

    def _full(self, chunk: dict[str, Any]) -> list[Delta]:
        """Any chunk: choices, errors, the finish reason and usage, in that order."""
        if chunk.__class__ is not dict:
            return []
        out: list[Delta] = []
        finish: str | None = None
        choices = chunk.get("choices")
        if choices.__class__ is list and choices:
            choice = choices[0]
            if choice.__class__ is not dict or choice.get("index"):
                choice = _first_choice(choices)
            if choice is not None:
                finish = self._choice(choice, out)
        if chunk.get("error"):
            out.append(error_from_payload(chunk))
        if finish is not None:
            out.append(FinishDelta(finish))
        if chunk.get("usage") or "x_groq" in chunk or "timings" in chunk:
            usage = _usage(chunk)
            if usage is not None:
                out.append(usage)
        return out

    def _choice(self, choice: dict[str, Any], out: list[Delta]) -> str | None:
        """Read one choice's delta (or whole message) into `out`; return its finish reason."""
        delta = choice.get("delta")
        if delta.__class__ is not dict:
            message = choice.get("message")
            delta = _message_as_delta(message) if message.__class__ is dict else None
        if delta:
            content = delta.get("content")
            if len(delta) == 1 and content.__class__ is str:
                if content:  # the hot path: a text-only delta
                    out.append(TextDelta(content))
            elif len(delta) == 1 and (thought := delta.get("reasoning_content")).__class__ is str:
                if thought:  # the other hot path: a reasoning-only delta
                    out.append(ReasoningDelta(thought))
            else:
                self._delta(delta, content, out)
        reason = choice.get("finish_reason")
        return reason if reason.__class__ is str and reason else None

    def _delta(self, delta: dict[str, Any], content: Any, out: list[Delta]) -> None:
        """Reasoning first, then text, tool calls and citations: the order a reader expects."""
        _reasoning(delta, out)
        if content:
            if content.__class__ is str:
                out.append(TextDelta(content))
            elif content.__class__ is list:
                _content_parts(content, out)
            elif content.__class__ is dict:  # Workers AI: a JSON answer as an object
                out.append(TextDelta(_compact(content)))
        calls = delta.get("tool_calls")
        if calls and calls.__class__ is list:
            for call in calls:
                if call.__class__ is dict:
                    self._tool_call(call, out)
        annotations = delta.get("annotations")
        if annotations and annotations.__class__ is list:
            _citations(annotations, out)

    def _tool_call(self, call: dict[str, Any], out: list[Delta]) -> None:
        """Emit one fragment: the introducing delta carries the id, later ones only news."""
        function = call.get("function")
        if function.__class__ is not dict:
            function = _EMPTY
        name = function.get("name")
        if name.__class__ is not str or not name:
            name = None
        arguments = arguments_text(function.get("arguments"))
        number, fresh = self._resolve(call)
        slot = self._slots[number]
        if fresh:
            slot.named = name is not None
            out.append(ToolCallDelta(number, slot.call_id, name, arguments))
            return
        if name is not None and not slot.named:
            slot.named = True
        else:
            name = None
        if name is not None or arguments:
            out.append(ToolCallDelta(number, None, name, arguments))

    def _resolve(self, call: dict[str, Any]) -> tuple[int, bool]:
        """Find the slot a fragment belongs to; True when it opens a new one."""
        index = call.get("index")
        if index.__class__ is not int:
            index = None
        provider_id = call.get("id")
        if provider_id.__class__ is not str or not provider_id:
            provider_id = None
        else:
            known = self._by_id.get(provider_id)
            if known is not None and index is not None:
                at = self._by_index.get(index)
                if at is not None and self._slots[at].provider_id == provider_id:
                    known = at  # of two calls sharing the id, the one at this index
            if known is not None and not self._reused(known, index):
                if index is not None:
                    self._by_index[index] = known
                return known, False
        if index is not None:
            current = self._by_index.get(index)
            if current is not None:
                slot = self._slots[current]
                if provider_id is None:
                    return current, False
                if slot.provider_id is None:
                    # A late id for a call we already minted one for: same call.
                    slot.provider_id = provider_id
                    self._by_id[provider_id] = current
                    return current, False
        elif provider_id is None and self._slots:
            return len(self._slots) - 1, False
        return self._open(index, provider_id), True

    def _reused(self, known: int, index: int | None) -> bool:
        """A known id at an index never seen, while its call has another: a second call
        reusing the id (Kimi), not more of the first (its fresh id comes later)."""
        slot_index = self._slots[known].index
        return (
            index is not None
            and slot_index is not None
            and index != slot_index
            and index not in self._by_index
        )

    def _open(self, index: int | None, provider_id: str | None) -> int:
        """Start a new slot, minting an id when the provider sent none."""
        number = len(self._slots)
        self._slots.append(_Slot(provider_id or new_id("call"), provider_id, index))
        if index is not None:
            self._by_index[index] = number
        if provider_id is not None:
            self._by_id[provider_id] = number
        return number


def _more_arguments(delta: dict[str, Any], by_index: dict[int, int]) -> tuple[int, Any]:
    """(slot, fragment) when `delta` holds only more arguments for a call already open
    at its index (no id, no name), the commonest tool-call fragment; (-1, None) or an
    exception for anything else."""
    (call,) = delta["tool_calls"]
    function = call["function"]
    fragment = function["arguments"]
    slot = by_index.get(call["index"])
    if len(call) == 2 and len(function) == 1 and fragment.__class__ is str and slot is not None:
        return slot, fragment
    return -1, None


def completion_to_deltas(body: dict[str, Any]) -> list[Delta]:
    """Translate a whole non-streaming `chat.completion` body.

    A whole body's answer is its choice's `message`: Perplexity sends an empty
    `delta` beside it, which a stream's reading would take instead (and lose
    the answer), so a choice holding a `message` is read without its `delta`.
    """
    choices = body.get("choices") if body.__class__ is dict else None
    if choices.__class__ is list and any(_message_beside_delta(c) for c in choices):
        whole = [
            {k: v for k, v in c.items() if k != "delta"} if _message_beside_delta(c) else c
            for c in choices
        ]
        body = {**body, "choices": whole}
    return ChatCompletionsDecoder().feed(body)


def _message_beside_delta(choice: Any) -> bool:
    return (
        choice.__class__ is dict and "delta" in choice and choice.get("message").__class__ is dict
    )


def error_from_payload(obj: Any) -> ErrorDelta:
    """An ErrorDelta from any error shape: `{"error": {...}}`, `{"error": "..."}`, a string, junk."""
    data = obj
    if obj.__class__ is dict:
        inner = obj.get("error")
        if inner:
            data = inner
    message = error_message(obj) or _compact(data) or _FALLBACK_ERROR
    return ErrorDelta(message, data)


def _first_choice(choices: list[Any]) -> dict[str, Any] | None:
    """The choice with index 0 (or no usable index); other candidates are ignored."""
    first = choices[0]
    if first.__class__ is dict:
        index = first.get("index")
        if index.__class__ is not int or index == 0:
            return first
    for choice in choices[1:]:
        if choice.__class__ is dict and choice.get("index") == 0:
            return choice
    return None


def _message_as_delta(message: dict[str, Any]) -> dict[str, Any]:
    """A non-streaming message read as one big delta; each listed call is its own slot."""
    calls = message.get("tool_calls")
    if calls.__class__ is not list:
        return message
    numbered = [
        {**call, "index": position} if call.__class__ is dict else call
        for position, call in enumerate(calls)
    ]
    return {**message, "tool_calls": numbered}


def _reasoning(delta: dict[str, Any], out: list[Delta]) -> None:
    """Reasoning text fields and OpenRouter `reasoning_details`, as at most one delta."""
    text = delta.get("reasoning_content") or delta.get("reasoning") or delta.get("thinking")
    text = _text_of(text) if text else ""
    raw = delta.get("reasoning_details")
    details: tuple[dict[str, Any], ...] = ()
    if raw and raw.__class__ is list:
        details = tuple(item for item in raw if item.__class__ is dict)
        if not text:
            text = "".join(_detail_text(item) for item in details)
    if text or details:
        out.append(ReasoningDelta(text, details))


def _detail_text(detail: dict[str, Any]) -> str:
    """Readable text of one reasoning detail (`reasoning.text` / `reasoning.summary`)."""
    text = detail.get("text")
    if text.__class__ is str:
        return str(text)
    summary = detail.get("summary")
    return str(summary) if summary.__class__ is str else ""


def _text_of(value: Any) -> str:
    """A string, or the joined `text` of a list of text parts (Mistral thinking)."""
    if value.__class__ is str:
        return str(value)
    if value.__class__ is not list:
        return ""
    pieces: list[str] = []
    for part in value:
        if part.__class__ is str:
            pieces.append(part)
        elif part.__class__ is dict:
            text = part.get("text")
            if text.__class__ is str:
                pieces.append(text)
    return "".join(pieces)


def _content_parts(parts: list[Any], out: list[Delta]) -> None:
    """Typed content parts: text parts become text, Mistral thinking parts reasoning."""
    for part in parts:
        if part.__class__ is str:
            if part:
                out.append(TextDelta(part))
            continue
        if part.__class__ is not dict:
            continue
        kind = part.get("type")
        if kind == "thinking":
            thought = _text_of(part.get("thinking"))
            if thought:
                out.append(ReasoningDelta(thought))
        elif kind is None or (kind.__class__ is str and kind in _TEXT_PART_TYPES):
            text = part.get("text")
            if text and text.__class__ is str:
                out.append(TextDelta(text))


def _citations(annotations: list[Any], out: list[Delta]) -> None:
    """`url_citation` annotations, nested (OpenAI, OpenRouter) or flat."""
    for annotation in annotations:
        if annotation.__class__ is not dict:
            continue
        kind = annotation.get("type")
        if kind is not None and kind != "url_citation":
            continue
        source = annotation.get("url_citation")
        if source.__class__ is not dict:
            source = annotation
        url = source.get("url")
        if url and url.__class__ is str:
            title = source.get("title")
            out.append(CitationDelta(url, title if title.__class__ is str else None))


def arguments_text(value: Any) -> str:
    """Arguments as a string fragment: strings as is, objects as compact JSON, null as ''."""
    if value.__class__ is str:
        return str(value)
    if value is None:
        return ""
    return _compact(value)


def _compact(value: Any) -> str:
    """Compact JSON for a parsed value; '' when it cannot be written (never raises)."""
    if value is None or value == "":
        return ""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # orjson refuses ints beyond 64 bits, deep nesting, odd keys
        pass
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return ""


def _usage(chunk: dict[str, Any]) -> UsageDelta | None:
    """Usage anywhere in the chunk (top level or Groq's `x_groq`), plus llama.cpp `timings`."""
    usage = chunk.get("usage")
    if usage.__class__ is not dict or not usage:
        groq = chunk.get("x_groq")
        usage = groq.get("usage") if groq.__class__ is dict else None
        if usage.__class__ is not dict or not usage:
            usage = None
    timings = chunk.get("timings")
    if timings and timings.__class__ is dict:
        usage = {**(usage or _EMPTY), "timings": timings}
    return UsageDelta(usage) if usage is not None else None
