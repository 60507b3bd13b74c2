"""Ctrl-C in a terminal keeps what the turn had shown: the live area is not just erased.

The console writes to a string as a terminal would be written to (rich's live view:
cursor up, erase line), and `screen` plays those bytes back the way a terminal does:
what is left on it is what the user sees after the interrupt.
"""

from __future__ import annotations

import io
import os
import re
import sys
from pathlib import Path

from rich.console import Console

from tests.cli.terminal import Terminal
from toolrelay.cli.outputs import RichOutput
from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.testing import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks

_CONTROL = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])|([\r\n])|([^\x1b\r\n]+)")


def screen(written: str) -> list[str]:
    """The terminal's lines after `written` (CR, LF, cursor up, erase line; others ignored)."""
    lines = [""]
    row = col = 0
    for match in _CONTROL.finditer(written):
        arg, command, newline, text = match.groups()
        if text:
            line = lines[row].ljust(col)
            lines[row] = line[:col] + text + line[col + len(text) :]
            col += len(text)
        elif newline == "\r":
            col = 0
        elif newline == "\n":
            row, col = row + 1, 0
            if row == len(lines):
                lines.append("")
        elif command == "A":
            row = max(0, row - int(arg or 1))
        elif command == "K" and arg == "2":
            lines[row] = ""
    return [line.rstrip() for line in lines if line.strip()]


def _message(delta: str) -> list[Event]:
    item = {"type": "message", "id": "m1", "role": "assistant", "status": "in_progress"}
    return [
        Event(ev.OUTPUT_ITEM_ADDED, {"output_index": 0, "item": {**item, "content": []}}),
        Event(ev.OUTPUT_TEXT_DELTA, {"output_index": 0, "item_id": "m1", "delta": delta}),
    ]


def test_an_interrupted_answer_stays_on_screen_whole() -> None:
    written = io.StringIO()
    console = Console(file=written, force_terminal=True, width=60, color_system=None)
    output = RichOutput(console, live=True)
    try:
        with output:
            for event in _message("First line.\n\nSecond line.\n\nThird, cut he"):
                output.feed(event)
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert screen(written.getvalue()) == ["First line.", "Second line.", "Third, cut he"]


def test_an_ended_answer_is_printed_once() -> None:
    written = io.StringIO()
    console = Console(file=written, force_terminal=True, width=60, color_system=None)
    output = RichOutput(console, live=True)
    with output:
        for event in _message("Only line."):
            output.feed(event)
        output.feed(Event(ev.CHAT_COMPLETION, {"done": True, "status": "completed"}))
    shown = screen(written.getvalue())
    assert shown.count("Only line.") == 1 and shown[-1].startswith("tokens: in 0")


def test_ctrl_c_in_a_terminal_leaves_the_partial_answer_on_screen(data_dir: Path) -> None:
    """The real `toolrelay chat` on a pty: Ctrl-C while the model is mid-answer."""
    text = ["First line.\n\n", "Second line.\n\n", "Third, cut", " never sent"]
    with FakeModelServer() as server:
        server.script(SSEReply(chat_chunks(text=text), stall_after=4))
        env = {**os.environ, "COLUMNS": "120", "TERM": "xterm", "PYTHONUNBUFFERED": "1"}
        cli = [sys.executable, "-m", "toolrelay.cli.main", "chat", "tell me"]
        term = Terminal([*cli, "--base-url", server.base_url, "--model", "m"], env)
        try:
            term.expect("Third, cut")
            term.type("\x03")
            assert term.wait() == 130, term.output
            shown = screen(term.raw)
        finally:
            term.close()
    assert shown[:3] == ["First line.", "Second line.", "Third, cut"], shown
    assert shown[-1] == "cancelled"
