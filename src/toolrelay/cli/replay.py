"""`toolrelay replay`: run a recorded model body through the core and show the result."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.markdown import Markdown
from rich.panel import Panel
from rich.text import Text

from toolrelay.adapters.http.record import EXCHANGE_SUFFIX
from toolrelay.core.formats.content import BodyFormat, detect_format
from toolrelay.core.stream.reader import BodyReader, ReadResult


class ReplayFormat(StrEnum):
    auto = "auto"
    chat = "chat"
    responses = "responses"
    ollama = "ollama"
    json = "json"


_FRAMING: dict[ReplayFormat, BodyFormat] = {
    ReplayFormat.chat: "sse",
    ReplayFormat.responses: "sse",
    ReplayFormat.ollama: "ndjson",
    ReplayFormat.json: "json",
}


def replay(
    path: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            help="A recorded body: .sse, .ndjson or .json ('-': stdin), or a recording's "
            ".exchange.json (--record DIR).",
        ),
    ],
    format: Annotated[
        ReplayFormat,
        typer.Option("--format", "-f", help="The body's wire format (auto: from its bytes)."),
    ] = ReplayFormat.auto,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    events: Annotated[bool, typer.Option("--events", help="Print events as JSON lines.")] = False,
) -> None:
    """Read a recorded model response body and print its output items."""
    err = Console(stderr=True)
    try:
        body = sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()
        content_type = None
        if path.name.endswith(EXCHANGE_SUFFIX):  # the body it names, framed as it was sent
            from toolrelay.testing.recorded import read_exchange

            exchange = read_exchange(path)
            body, content_type = exchange.body, exchange.content_type
    except (OSError, ValueError) as exc:
        err.print(f"[red]error:[/] cannot read {path}: {getattr(exc, 'strerror', None) or exc}")
        raise typer.Exit(2) from None
    framing = _FRAMING.get(format) or detect_format(body, content_type)
    reader = BodyReader(framing)  # no clock: a replay's timings are meaningless
    evs = reader.feed(body)
    evs.extend(reader.finish())
    if reader.frames == 0:
        err.print(
            f"[red]error:[/] {path} is not a model response body ({framing}): {reader.acc.error}"
        )
        raise typer.Exit(2)
    result = reader.result()
    out = sys.stdout.buffer
    if events:
        for event in evs:
            out.write(orjson.dumps(event.to_dict()) + b"\n")
    if as_json:
        out.write(orjson.dumps(result.to_dict()) + b"\n")
    if not (events or as_json):
        render(result, Console())
    out.flush()


def render(result: ReadResult, console: Console) -> None:
    """A readable rendering: reasoning dimmed, calls as panels, text as markdown."""
    for item in result.output:
        kind = item.get("type")
        if kind == "reasoning":
            text = _text(item.get("content")) or _text(item.get("summary"))
            console.print(Text(f"thinking: {text}", style="dim italic"))
        elif kind == "message":
            console.print(Markdown(_text(item.get("content"))))
        elif kind == "function_call":
            body = Text(str(item.get("arguments", "")))
            title = f"call {item.get('name')} ({item.get('call_id')})"
            console.print(Panel(body, title=title, title_align="left", border_style="cyan"))
        elif kind == "code_interpreter":
            console.print(
                Panel(Text(str(item.get("code", ""))), title="code", border_style="magenta")
            )
        else:
            console.print(Text(orjson.dumps(item).decode(), style="dim"))
    usage = result.usage or {}
    summary = f"finish: {result.finish_reason}"
    if usage:
        summary += (
            f" · tokens in {usage.get('input_tokens', 0)} out {usage.get('output_tokens', 0)}"
        )
    console.print(Text(summary, style="bold"))
    if result.error:
        console.print(Text(f"error: {result.error}", style="bold red"))


def _text(parts: Any) -> str:
    if not isinstance(parts, list):
        return ""
    return "".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))
