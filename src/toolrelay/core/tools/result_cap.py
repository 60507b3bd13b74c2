"""The cap on what the model reads of one tool result (issue 31): cut, and say so.

A `function_call_output` whose text is longer than the cap (UTF-8 bytes) keeps its
first `cap` bytes (cut at a character boundary) and a note telling the model how
much it sees of how much; the item records it as `cut: {"bytes", "sent"}`. The whole
text goes back to the caller beside the item, never in it: items travel in events,
saved turns and every later model request, and the whole text is for the user
(stored once, served on demand). Images (`input_image` parts) are not counted:
they are the model's to see, and a provider bounds them itself.

Pure: no I/O; the runner calls `cap_output` on every result it makes, client-side
tools' and MCP servers' (their resources included) alike.
"""

from __future__ import annotations

from typing import Any, Final

from toolrelay.core.items import FunctionCallOutputItem

__all__ = ["DEFAULT_CAP", "cap_output", "cut_text"]

DEFAULT_CAP: Final = 100_000
"""Bytes of one result the model reads, unless configured (`tool_result_max_bytes`)."""


def cut_text(text: str, cap: int) -> tuple[str, int, int] | None:
    """`(what the model reads, total bytes, bytes kept)` for a text over `cap` bytes, else
    None. The kept part ends on a whole character; the note follows it."""
    if cap <= 0 or len(text) <= cap // 4:  # at most 4 bytes a character: surely within
        return None
    raw = text.encode("utf-8", errors="surrogatepass")
    if len(raw) <= cap:
        return None
    kept = raw[:cap].decode("utf-8", errors="ignore")
    sent = len(kept.encode("utf-8", errors="surrogatepass"))
    note = (
        f"\n\n[Cut: this tool result is {len(raw):,} bytes; you see its first {sent:,}. "
        "The user has the whole result.]"
    )
    return kept + note, len(raw), sent


def cap_output(item: FunctionCallOutputItem, cap: int) -> tuple[FunctionCallOutputItem, str | None]:
    """The item as the model may read it, and the whole text when it was cut (else None)."""
    output: Any = item.get("output")
    if isinstance(output, str):
        cut = cut_text(output, cap)
        if cut is None:
            return item, None
        shown, total, sent = cut
        return {**item, "output": shown, "cut": {"bytes": total, "sent": sent}}, output
    if not isinstance(output, list):
        return item, None
    for index, part in enumerate(output):
        if not isinstance(part, dict) or part.get("type") != "input_text":
            continue
        text = part.get("text")
        if not isinstance(text, str):
            continue
        cut = cut_text(text, cap)
        if cut is None:
            return item, None
        shown, total, sent = cut
        parts = [*output[:index], {**part, "text": shown}, *output[index + 1 :]]
        return {**item, "output": parts, "cut": {"bytes": total, "sent": sent}}, text
    return item, None
