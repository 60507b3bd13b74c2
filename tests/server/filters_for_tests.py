"""Filters the server tests configure (loaded from this file by path, `file.py:attr`)."""

from __future__ import annotations

from typing import Any


class Upper:
    """Open WebUI style outlet: shout the last assistant message."""

    def outlet(self, body: dict[str, Any]) -> dict[str, Any]:
        last = body["messages"][-1]
        if last.get("role") == "assistant" and isinstance(last.get("content"), str):
            last["content"] = last["content"].upper()
        return body
