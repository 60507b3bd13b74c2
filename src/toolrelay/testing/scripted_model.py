"""A scripted model and a replay model for tests (ours and users').

`ScriptedModel` answers each `open()` with the next scripted reply, rendered
in the exact Chat Completions SSE wire format, so the whole pipeline (framing,
translator, accumulator) runs as it does against a real server — only the
socket is missing. `ReplayModel` serves recorded bodies from files.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolrelay.core.formats.content import BodyFormat, detect_format
from toolrelay.engine.interfaces import ModelRequest, ModelStream
from toolrelay.errors import ProviderError
from toolrelay.testing.wire import ToolCallSpec, chat_chunks, render_sse


@dataclass(frozen=True, slots=True)
class Body:
    """A raw body to serve, in `piece`-byte reads; `fail_after` pieces then a dropped connection."""

    data: bytes
    format: BodyFormat = "sse"
    piece: int = 64
    fail_after: int | None = None
    stall_after: int | None = None
    """After this many pieces wait forever (until cancelled or closed)."""


@dataclass(frozen=True, slots=True)
class Refuse:
    """`open()` fails before any byte, like an HTTP error or a refused connection."""

    message: str
    status: int | None = None


ScriptItem = Body | Refuse | bytes | Callable[[ModelRequest], "Body | Refuse | bytes"]


def reply(
    text: str | Sequence[str] = (),
    *,
    reasoning: Sequence[str] = (),
    calls: Sequence[tuple[str, str | Mapping[str, Any]] | ToolCallSpec] = (),
    args_pieces: int = 1,
    usage: Mapping[str, Any] | None = None,
    finish_reason: str | None = None,
) -> bytes:
    """A Chat Completions SSE body: reasoning, text, then tool calls."""
    specs = [c if isinstance(c, ToolCallSpec) else ToolCallSpec(c[0], c[1]) for c in calls]
    chunks = chat_chunks(
        text=text,
        reasoning=reasoning,
        tool_calls=specs,
        args_pieces=args_pieces,
        usage=usage,
        finish_reason=finish_reason,
    )
    return render_sse(chunks)


class _Stream:
    def __init__(self, body: Body, model: ScriptedModel) -> None:
        self.format = body.format
        self._body = body
        self._model = model
        self.closed = False

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        body = self._body
        step = max(1, body.piece)
        for n, start in enumerate(range(0, len(body.data), step)):
            if self.closed:
                return
            if body.fail_after is not None and n >= body.fail_after:
                raise ProviderError("Connection to the model server was lost mid-response.")
            if body.stall_after is not None and n >= body.stall_after:
                await asyncio.Event().wait()
            await asyncio.sleep(0)
            yield body.data[start : start + step]

    async def aclose(self) -> None:
        if not self.closed:
            self.closed = True
            self._model.open_streams -= 1


@dataclass
class ScriptedModel:
    """A `ModelClient` that plays a script; records every request it gets."""

    script: list[ScriptItem] = field(default_factory=list)
    requests: list[ModelRequest] = field(default_factory=list)
    open_streams: int = 0
    """Streams opened and not yet closed: tests assert this is 0 (no leaks)."""

    def __init__(self, *script: ScriptItem) -> None:
        self.script = list(script)
        self.requests = []
        self.open_streams = 0

    def add(self, *script: ScriptItem) -> None:
        self.script.extend(script)

    async def open(self, request: ModelRequest) -> ModelStream:
        self.requests.append(request)
        if not self.script:
            raise ProviderError("ScriptedModel: no scripted reply left", status=500)
        item = self.script.pop(0)
        if callable(item):
            item = item(request)
        if isinstance(item, Refuse):
            raise ProviderError(item.message, status=item.status)
        body = item if isinstance(item, Body) else Body(item, detect_format(item))
        self.open_streams += 1
        return _Stream(body, self)

    async def aclose(self) -> None:
        self.script.clear()


class ReplayModel(ScriptedModel):
    """Serves recorded bodies (`.sse`, `.ndjson`, `.json` files) in order."""

    def __init__(self, *paths: str | Path, piece: int = 4096) -> None:
        bodies: list[ScriptItem] = []
        for path in paths:
            data = Path(path).read_bytes()
            bodies.append(Body(data, detect_format(data), piece=piece))
        super().__init__(*bodies)

    @classmethod
    def from_recording(cls, directory: str | Path, *, piece: int = 4096) -> ReplayModel:
        """A `--record DIR` recording (`testing.recorded`) replayed in order: each answer's
        body framed as its content type said, an error status refused with the message
        the model client would have made of it, an unanswered request refused."""
        from toolrelay.adapters.models.failures import error_from_response
        from toolrelay.testing.recorded import read_recording

        model = cls(piece=piece)
        for exchange in read_recording(directory):
            status = exchange.status
            if status is None:
                model.add(Refuse(f"Cannot connect to the model server: {exchange.error}"))
            elif not 200 <= status < 300:
                error = error_from_response(
                    status, exchange.body, exchange.content_type, exchange.reason
                )
                model.add(Refuse(error.message, status))
            else:
                framing = detect_format(exchange.body, exchange.content_type)
                model.add(Body(exchange.body, framing, piece=piece))
        return model
