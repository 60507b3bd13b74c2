"""Rendering a turn's events for `toolrelay chat`: a small state machine, no I/O.

`Renderer.feed(event)` updates a model of the turn: one block per output item,
in output order, plus error blocks. Blocks leave the model exactly once, in
order, through `take_finished()` as soon as they and every block before them
are complete; the caller prints them (above a `rich.live.Live` area, or as
plain lines when stdout is not a terminal). `render()` draws the rest, the part
still running: reasoning collapsed to its last lines, tool calls with a
spinner, the answer as it streams. After the final `chat:completion` event the
last `take_finished()` also yields the usage line.

Nothing here reads a clock except through the injected `clock`. Each handler
reads its event through the payload's TypedDict (`core.events.PAYLOADS`), so mypy
checks every key read here against the protocol.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import orjson
from rich.console import Group, RenderableType
from rich.markdown import Markdown
from rich.spinner import Spinner
from rich.text import Text

from toolrelay.core import events as ev
from toolrelay.core.events import (
    ArgumentsDoneData,
    CodeOutputData,
    CompletionData,
    DeltaData,
    Event,
    ItemData,
    MessageErrorData,
    ToolProgressData,
)

__all__ = [
    "Block",
    "ErrorBlock",
    "ReasoningBlock",
    "Renderer",
    "TextBlock",
    "ToolBlock",
    "parts_text",
]

ToolState = Literal["streaming", "running", "done", "failed", "skipped"]


@dataclass(slots=True)
class ReasoningBlock:
    key: str
    text: str = ""
    finished: bool = False


@dataclass(slots=True)
class TextBlock:
    key: str
    text: str = ""
    finished: bool = False


@dataclass(slots=True)
class ToolBlock:
    """A function call and, once it ran, its result (matched by `call_id`)."""

    key: str
    name: str
    call_id: str
    arguments: str = ""
    state: ToolState = "streaming"
    result: str = ""
    progress: str = ""
    """The latest `tool:progress` of a running call (`2/5 copying`)."""

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed", "skipped")


@dataclass(slots=True)
class ErrorBlock:
    message: str
    finished: bool = True


Block: TypeAlias = ReasoningBlock | TextBlock | ToolBlock | ErrorBlock


class Renderer:
    """The live model of one turn; see the module doc for the protocol."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        reasoning_lines: int = 3,
        preview_chars: int = 80,
        args_chars: int = 60,
        show_text: bool = True,
    ) -> None:
        self.show_text = show_text
        """False leaves the answer's text out (`RawOutput` prints it itself)."""
        self.blocks: list[Block] = []
        self.usage: dict[str, Any] = {}
        self.status: str | None = None
        """The final event's status (`completed`, `capped`, `failed`, `cancelled`)."""
        self.elapsed: float | None = None
        self._clock = clock
        self._start = clock()
        self._items: dict[str, Block] = {}
        self._calls: dict[str, ToolBlock] = {}
        self._taken = 0
        self._summary_taken = False
        self._reasoning_lines = reasoning_lines
        self._preview_chars = preview_chars
        self._args_chars = args_chars

    @property
    def done(self) -> bool:
        return self.status is not None

    @property
    def tool_calls(self) -> int:
        return sum(isinstance(b, ToolBlock) for b in self.blocks)

    # ------------------------------------------------------------------ feeding

    def feed(self, event: Event) -> None:
        """Update the model; events of unknown types are ignored, and so is one without
        a key its payload requires (a tool's own event may reuse a known type)."""
        handler = _HANDLERS.get(event.type)
        if handler is not None:
            with contextlib.suppress(KeyError):
                handler(self, event.data)

    def _on_added(self, data: ItemData) -> None:
        item = data["item"]
        if isinstance(item, Mapping):
            self._item(item, done=False)

    def _on_done(self, data: ItemData) -> None:
        """A `done` with `from_deltas` (a chat stream's) has no text: the deltas' stays."""
        item = data["item"]
        if isinstance(item, Mapping):
            self._item(item, done=True)

    def _item(self, item: Mapping[str, Any], *, done: bool) -> None:
        kind = item.get("type")
        if kind == "function_call_output":
            self._tool_output(item)
            return
        key = str(item.get("id", ""))
        block = self._items.get(key)
        if block is None:
            if kind == "message" and not self.show_text:
                return
            block = _new_block(kind, key, item)
            if block is None:
                return
            self._add(block)
        if done:
            _complete(block, item)

    def _add(self, block: Block) -> None:
        self.blocks.append(block)
        if isinstance(block, ToolBlock):
            self._calls[block.call_id] = block
            self._items[block.key] = block
        elif not isinstance(block, ErrorBlock):
            self._items[block.key] = block

    def _on_progress(self, data: ToolProgressData) -> None:
        block = self._calls.get(str(data["call_id"]))
        if block is None:
            return
        done, total, message = data["progress"], data.get("total"), data.get("message")
        amount = f"{done:g}/{total:g}" if isinstance(total, int | float) else f"{done}"
        block.progress = f"{amount} {message}" if message else amount

    def _on_code_output(self, data: CodeOutputData) -> None:
        """Running `execute_code`: its last line of output shows beside the call."""
        block = self._calls.get(str(data["call_id"]))
        text = data.get("text")
        if block is not None and isinstance(text, str) and text.strip():
            block.progress = text.strip().splitlines()[-1]

    def _tool_output(self, item: Mapping[str, Any]) -> None:
        call_id = str(item.get("call_id", ""))
        block = self._calls.get(call_id)
        if block is None:
            block = ToolBlock(key=call_id, name="?", call_id=call_id)
            self._add(block)
        block.result = _preview(item.get("output"), self._preview_chars)
        block.state = "failed" if item.get("status") == "failed" else "done"

    def _on_text_delta(self, data: DeltaData) -> None:
        if self.show_text:
            self._append(data, TextBlock)

    def _on_reasoning_delta(self, data: DeltaData) -> None:
        self._append(data, ReasoningBlock)

    def _append(self, data: DeltaData, kind: type[TextBlock | ReasoningBlock]) -> None:
        key = str(data["item_id"])
        block = self._items.get(key)
        if block is None:
            block = kind(key=key)
            self._add(block)
        if isinstance(block, TextBlock | ReasoningBlock):
            block.text += str(data["delta"])

    def _on_args_delta(self, data: DeltaData) -> None:
        block = self._items.get(str(data["item_id"]))
        if isinstance(block, ToolBlock):
            block.arguments += str(data["delta"])

    def _on_args_done(self, data: ArgumentsDoneData) -> None:
        block = self._items.get(str(data["item_id"]))
        arguments = data["arguments"]
        if isinstance(block, ToolBlock) and isinstance(arguments, str):
            block.arguments = arguments
            block.state = "running"

    def _on_error(self, data: MessageErrorData) -> None:
        self._error(_error_text(data["error"]))

    def _error(self, message: str) -> None:
        if message and all(
            not (isinstance(b, ErrorBlock) and b.message == message) for b in self.blocks
        ):
            self._add(ErrorBlock(message))

    def _on_completion(self, data: CompletionData) -> None:
        usage = data.get("usage")
        if not data.get("done"):
            return
        self.usage = dict(usage) if isinstance(usage, Mapping) else {}
        self.status = str(data.get("status", "completed"))
        self.elapsed = self._clock() - self._start
        error = _error_text(data.get("error"))
        if not error and self.status not in ("completed", "cancelled"):
            error = f"turn {self.status}"
        self._error(error)
        for block in self.blocks:
            _close(block)

    # ---------------------------------------------------------------- rendering

    def take_finished(self) -> list[RenderableType]:
        """Complete blocks not yet taken, in order; after the end, the usage line too."""
        out: list[RenderableType] = []
        while self._taken < len(self.blocks) and self.blocks[self._taken].finished:
            out.append(self._view(self.blocks[self._taken], live=False))
            self._taken += 1
        if self.done and self._taken == len(self.blocks) and not self._summary_taken:
            self._summary_taken = True
            out.append(self.summary())
        return out

    def take_rest(self) -> list[RenderableType]:
        """The blocks not yet taken, as they were last shown, for good: a turn cut short
        (Ctrl-C) keeps on screen what it had shown in the live area, which then goes."""
        rest: list[RenderableType] = []
        for block in self.blocks[self._taken :]:
            if isinstance(block, ToolBlock) and not block.finished:
                rest.append(Text(f"{block.name}(…)  stopped", style="dim"))
            elif isinstance(block, TextBlock) and not block.text.strip():
                continue
            else:
                rest.append(self._view(block, live=False))
        self._taken = len(self.blocks)
        return rest

    def render(self) -> RenderableType:
        """The blocks not yet taken, as they look now (for `Live`)."""
        pending = self.blocks[self._taken :]
        if not pending and not self.done:
            return Spinner("dots", Text("waiting for the model…", style="dim"))
        return Group(*(self._view(b, live=True) for b in pending))

    def summary(self) -> Text:
        """`tokens: in N · out M · K tool calls · X.Xs`."""
        tokens_in = _count(self.usage, "input_tokens", "prompt_tokens")
        tokens_out = _count(self.usage, "output_tokens", "completion_tokens")
        calls = self.tool_calls
        seconds = self.elapsed if self.elapsed is not None else self._clock() - self._start
        plural = "" if calls == 1 else "s"
        return Text(
            f"tokens: in {tokens_in} · out {tokens_out} · {calls} tool call{plural} · "
            f"{seconds:.1f}s",
            style="dim",
        )

    def _view(self, block: Block, *, live: bool) -> RenderableType:
        match block:
            case ReasoningBlock():
                return self._reasoning_view(block, live=live)
            case TextBlock():
                return Markdown(block.text)
            case ToolBlock():
                return self._tool_view(block)
            case ErrorBlock():
                return Text(f"error: {block.message}", style="bold red")

    def _reasoning_view(self, block: ReasoningBlock, *, live: bool) -> Text:
        text = block.text.strip()
        if not live or block.finished:
            return Text(f"thinking: {text}", style="dim italic")
        lines = text.splitlines()
        shown = lines[-self._reasoning_lines :]
        head = "thinking… (…)\n" if len(lines) > len(shown) else "thinking…\n"
        return Text(head + "\n".join(shown), style="dim italic")

    def _tool_view(self, block: ToolBlock) -> RenderableType:
        call = Text(f"{block.name}({_call_args(block.arguments, self._args_chars)})")
        if not block.finished:
            if block.progress:
                call = Text.assemble(call, Text(f"  {block.progress}", style="dim"))
            return Spinner("dots", call)
        if block.state == "done":
            mark, style = Text("✓ ", style="green"), "dim"
        else:
            mark, style = Text("✗ ", style="red"), "red"
        return Text.assemble(mark, call, Text(f" → {block.result}", style=style))


def _new_block(kind: Any, key: str, item: Mapping[str, Any]) -> Block | None:
    if kind == "reasoning":
        return ReasoningBlock(key=key)
    if kind == "message":
        return TextBlock(key=key)
    if kind == "function_call":
        return ToolBlock(
            key=key,
            name=str(item.get("name", "?")),
            call_id=str(item.get("call_id", key)),
            arguments=str(item.get("arguments") or ""),
        )
    return None


def _complete(block: Block, item: Mapping[str, Any]) -> None:
    """An item's `done` event carries the whole item: it wins over the deltas."""
    match block:
        case ReasoningBlock() | TextBlock():
            text = parts_text(item.get("content")) or parts_text(item.get("summary"))
            block.text = text or block.text
            block.finished = True
        case ToolBlock():
            if isinstance(item.get("arguments"), str):
                block.arguments = item["arguments"]
            if block.state == "streaming":
                block.state = "running"
        case ErrorBlock():
            pass


def _close(block: Block) -> None:
    """At the end of the turn nothing is still running: a call without a result was not run."""
    match block:
        case ReasoningBlock() | TextBlock():
            block.finished = True
        case ToolBlock():
            if not block.finished:
                block.state = "skipped"
                block.result = "not run"
        case ErrorBlock():
            pass


def parts_text(parts: Any) -> str:
    """The text of an item's content (or summary) parts, joined."""
    if not isinstance(parts, list):
        return ""
    return "".join(str(p.get("text", "")) for p in parts if isinstance(p, Mapping) and "text" in p)


def _error_text(error: Any) -> str:
    if isinstance(error, Mapping):
        return str(error.get("content") or error.get("message") or "")
    return str(error) if error else ""


def _count(usage: Mapping[str, Any], *keys: str) -> int:
    for key in keys:
        value = usage.get(key)
        if isinstance(value, int):
            return value
    return 0


def _shorten(text: str, limit: int) -> str:
    """One line, at most `limit` characters (an ellipsis marks a cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(0, limit - 1)] + "…"


def _call_args(arguments: str, limit: int) -> str:
    """`{"city": "Paris"}` reads as `city="Paris"`; anything else is shown as it came."""
    try:
        parsed = orjson.loads(arguments) if arguments.strip() else {}
    except orjson.JSONDecodeError:
        return _shorten(arguments, limit)
    if not isinstance(parsed, dict):
        return _shorten(arguments, limit)
    shown = ", ".join(f"{k}={orjson.dumps(v).decode()}" for k, v in parsed.items())
    return _shorten(shown, limit)


def _preview(output: Any, limit: int) -> str:
    """A tool result on one line: text parts joined, images as `[image]`."""
    if isinstance(output, str):
        return _shorten(output, limit)
    if isinstance(output, list):
        parts = [
            str(p.get("text", "")) if p.get("type") in ("text", "input_text") else "[image]"
            for p in output
            if isinstance(p, Mapping)
        ]
        return _shorten(" ".join(parts), limit)
    return _shorten(orjson.dumps(output, default=str).decode(), limit)


_HANDLERS: dict[str, Callable[[Renderer, Any], None]] = {
    # each takes its type's payload (`PAYLOADS`); `Any` here: an event's data is a dict
    ev.OUTPUT_ITEM_ADDED: Renderer._on_added,
    ev.OUTPUT_ITEM_DONE: Renderer._on_done,
    ev.OUTPUT_TEXT_DELTA: Renderer._on_text_delta,
    ev.REASONING_TEXT_DELTA: Renderer._on_reasoning_delta,
    ev.FUNCTION_CALL_ARGUMENTS_DELTA: Renderer._on_args_delta,
    ev.FUNCTION_CALL_ARGUMENTS_DONE: Renderer._on_args_done,
    ev.CHAT_MESSAGE_ERROR: Renderer._on_error,
    ev.TOOL_PROGRESS: Renderer._on_progress,
    ev.CODE_OUTPUT: Renderer._on_code_output,
    ev.CHAT_COMPLETION: Renderer._on_completion,
}
