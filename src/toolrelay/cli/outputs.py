"""Where `toolrelay chat` writes a turn: JSON lines, a rich view, or raw text for pipes.

Owns the choice of stream per kind of output, so that `toolrelay chat … | cmd`
gives `cmd` the model's words and nothing else:

- `JSONOutput` (`--json`): every event as one line on stdout.
- `RichOutput`: the `Renderer`'s blocks on one console, with a `Live` spinner
  area when that console is a terminal.
- `RawOutput` (stdout not a terminal, or `--raw`): the answer's text, as it
  streams and unrendered, on stdout; tool lines, reasoning, errors, spinners
  and the usage line on stderr (a `RichOutput` whose renderer leaves text out).

The drawing is `cli.render.Renderer`; nothing here knows the loop.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Protocol, TextIO

import orjson
from rich.console import Console
from rich.live import Live

from toolrelay.cli.render import Renderer, parts_text
from toolrelay.core import events as ev
from toolrelay.core.events import Event

__all__ = ["JSONOutput", "Output", "RawOutput", "RichOutput"]

_LINE_ENDERS = frozenset(
    {
        ev.OUTPUT_ITEM_ADDED,
        ev.OUTPUT_ITEM_DONE,
        ev.CHAT_MESSAGE_ERROR,
        ev.TOOL_APPROVAL,
        ev.CHAT_COMPLETION,
    }
)
"""Events after which the side may print a line: the text's line ends first on a shared
terminal (and at the end in any case)."""


class Output(Protocol):
    """Where events go: a context manager that is fed every event."""

    def __enter__(self) -> Output: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    def feed(self, event: Event) -> None: ...


class JSONOutput:
    """`--json`: each event as one `{"type", "data"}` line on stdout, nothing else."""

    def __enter__(self) -> JSONOutput:
        return self

    def __exit__(self, *exc: object) -> None:
        sys.stdout.flush()

    def feed(self, event: Event) -> None:
        out = sys.stdout.buffer
        out.write(orjson.dumps(event.to_dict(), default=str) + b"\n")
        out.flush()


class RichOutput:
    """A `Live` view on a terminal; elsewhere each block is printed once it is complete."""

    def __init__(
        self, console: Console, renderer: Renderer | None = None, *, live: bool | None = None
    ) -> None:
        self.console = console
        self.renderer = renderer or Renderer()
        self.use_live = console.is_terminal if live is None else live
        self.live: Live | None = None

    def __enter__(self) -> RichOutput:
        if self.use_live:
            self.live = Live(
                self.renderer.render(),
                console=self.console,
                refresh_per_second=12,
                transient=True,
            )
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)  # transient: the live area is erased
            self.live = None
        self._print_finished()
        for renderable in self.renderer.take_rest():  # a turn cut short: what it showed stays
            self.console.print(renderable)

    def feed(self, event: Event) -> None:
        self.renderer.feed(event)
        self._print_finished()
        if self.live is not None:
            self.live.update(self.renderer.render())

    def _print_finished(self) -> None:
        console = self.live.console if self.live is not None else self.console
        for renderable in self.renderer.take_finished():
            console.print(renderable)


class RawOutput:
    """The answer's text on `out` as it arrives; the rest of the turn on `err`.

    Message items are separated by a blank line and the output ends with a
    newline. The spinner is drawn only when `err` is a terminal and `out` is
    not (a forced `--raw` on a terminal would interleave the two).
    """

    def __init__(self, err: Console, out: TextIO | None = None) -> None:
        self.out = out if out is not None else sys.stdout
        self._shared = self.out.isatty()
        """stdout is the terminal too: stderr's lines must not start mid-line."""
        live = err.is_terminal and not self._shared
        self.side = RichOutput(err, Renderer(show_text=False), live=live)
        self._written: dict[str, str] = {}
        self._last: str | None = None
        self._tail = ""

    def __enter__(self) -> RawOutput:
        self.side.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._end_line()
        self.side.__exit__(*exc)

    def feed(self, event: Event) -> None:
        if event.type == ev.OUTPUT_TEXT_DELTA:
            self._text(str(event.data.get("item_id", "")), str(event.data.get("delta", "")))
        else:
            if event.type == ev.OUTPUT_ITEM_DONE:
                self._done(event.data.get("item"))
            final = event.type == ev.CHAT_COMPLETION and event.data.get("done")
            if final or (self._shared and event.type in _LINE_ENDERS):
                self._end_line()
        self.side.feed(event)

    def _end_line(self) -> None:
        if self._tail and not self._tail.endswith("\n"):
            self._write("\n")

    def _done(self, item: Any) -> None:
        """An item's whole text may hold more than its deltas did (a non-streamed body)."""
        if not isinstance(item, Mapping) or item.get("type") != "message":
            return
        key = str(item.get("id", ""))
        whole = parts_text(item.get("content"))
        seen = self._written.get(key, "")
        if whole.startswith(seen):
            self._text(key, whole[len(seen) :])

    def _text(self, key: str, delta: str) -> None:
        if not delta:
            return
        if key != self._last and self._tail:
            self._write("\n" if self._tail.endswith("\n") else "\n\n")
        self._last = key
        self._written[key] = self._written.get(key, "") + delta
        self._write(delta)

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
        self._tail = text
