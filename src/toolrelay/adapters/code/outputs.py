"""One cell's Jupyter messages → its output, and the live events the client sees.

`CellOutput.feed(msg)` takes the kernel's IOPub messages for one execution
(the Jupyter messaging spec: `stream`, `execute_result`, `display_data`,
`error`, `status`) and returns what to show live; `result()` is the output
as the `code_interpreter` item and the model read it. Pure: it writes no
files (the runner saves images and passes their names in).
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CellOutput", "Display", "strip_ansi"]

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
IMAGE_TYPES = {"image/png": "png", "image/svg+xml": "svg"}
MAX_TEXT = 100_000
"""Characters of stdout (and of stderr) kept per cell; the rest is cut with a note."""


def strip_ansi(text: str) -> str:
    """IPython colours its tracebacks; the model and the page want plain text."""
    return _ANSI.sub("", text)


@dataclass(slots=True)
class Display:
    """A rich output: an image (`data` are its bytes) or an HTML fragment."""

    mime: str
    data: bytes = b""
    html: str = ""
    name: str = ""
    """The file it was saved as, relative to the chat's directory (set by the runner)."""


@dataclass(slots=True)
class CellOutput:
    stdout: str = ""
    stderr: str = ""
    result: str | None = None
    error: str | None = None
    traceback: str = ""
    displays: list[Display] = field(default_factory=list)
    idle: bool = False
    cut: set[str] = field(default_factory=set)

    def feed(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        """Take one IOPub message of this cell; returns a live event's data, or None."""
        kind = msg.get("msg_type") or msg.get("header", {}).get("msg_type")
        content = msg.get("content") or {}
        if kind == "stream":
            name = "stderr" if content.get("name") == "stderr" else "stdout"
            text = str(content.get("text", ""))
            kept = self._append(name, text)
            return {"kind": name, "text": kept} if kept else None
        if kind in ("execute_result", "display_data"):
            return self._rich(kind, content.get("data") or {})
        if kind == "error":
            self.error = f"{content.get('ename', 'Error')}: {content.get('evalue', '')}".rstrip(
                ": "
            )
            self.traceback = strip_ansi("\n".join(content.get("traceback") or []))
            return {"kind": "error", "error": self.error, "traceback": self.traceback}
        if kind == "status" and content.get("execution_state") == "idle":
            self.idle = True
        return None

    def _append(self, name: str, text: str) -> str:
        """Add to stdout or stderr up to `MAX_TEXT`; returns what was kept (and shown live)."""
        now = getattr(self, name)
        kept = text[: max(0, MAX_TEXT - len(now))]
        if len(kept) < len(text):
            self.cut.add(name)
        setattr(self, name, now + kept)
        return kept

    def _rich(self, kind: str, data: dict[str, Any]) -> dict[str, Any] | None:
        for mime in IMAGE_TYPES:
            if mime in data:
                raw = data[mime]
                body = raw.encode() if mime == "image/svg+xml" else _b64(raw)
                self.displays.append(Display(mime, data=body))
                return {"kind": "display", "mime": mime, "index": len(self.displays) - 1}
        if "text/html" in data:
            html = _joined(data["text/html"])
            self.displays.append(Display("text/html", html=html))
            if kind == "execute_result":
                self.result = _joined(data.get("text/plain", ""))
            return {"kind": "display", "mime": "text/html", "html": html}
        text = _joined(data.get("text/plain", ""))
        if kind == "execute_result":
            self.result = text
            return {"kind": "result", "text": text}
        kept = self._append("stdout", text + "\n")
        return {"kind": "stdout", "text": kept} if kept else None

    def as_dict(self, *, note: str | None = None) -> dict[str, Any]:
        """The item's `output`: stdout, stderr, result, error, files, embeds (R16)."""
        stderr = self.stderr
        if self.traceback:
            stderr = f"{stderr}{self.traceback}\n" if stderr else self.traceback + "\n"
        for name in sorted(self.cut):
            stderr += f"[{name} cut at {MAX_TEXT} characters]\n"
        out: dict[str, Any] = {"stdout": self.stdout, "stderr": stderr, "result": self.result}
        if self.error:
            out["error"] = self.error
        if note:
            out["error"] = note if not self.error else f"{note} ({self.error})"
            out["stderr"] = f"{out['stderr']}{note}\n"
        files = [
            {"type": "image", "mime_type": d.mime, "name": d.name}
            for d in self.displays
            if d.mime in IMAGE_TYPES
        ]
        if files:
            out["files"] = files
        embeds = [d.html for d in self.displays if d.mime == "text/html"]
        if embeds:
            out["embeds"] = embeds
        return out


def _joined(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _b64(value: Any) -> bytes:
    try:
        return base64.b64decode(_joined(value))
    except ValueError:
        return b""
