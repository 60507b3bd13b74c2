"""`reads_as_error`: the text rules Open WebUI uses to mark a tool result `failed` (reference §7)."""

from __future__ import annotations

import orjson
import pytest

from toolrelay.core.tools.result_status import reads_as_error


@pytest.mark.parametrize(
    "text",
    [
        "Error: no such file",
        "  error: lower case, indented",
        "Exception: boom",
        "Traceback (most recent call last):\n  ...",
        "HTTP Error! 503",
        '{"error": "quota exceeded"}',
        '{"error": {"code": 7}}',
        '{"error": ["a"]}',
        '{"status": "failed"}',
        '{"status": "ERROR", "data": 1}',
        '{"success": false, "message": "denied"}',
        '{"ok": false, "message": "nope"}',
        orjson.dumps(orjson.dumps({"error": "twice encoded"}).decode()).decode(),
    ],
)
def test_errors(text: str) -> None:
    assert reads_as_error(text)


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "Errors are rare here.",
        "error handling is easy",  # no colon: a sentence about errors
        "HTTP Error 503",  # Open WebUI's prefix has the `!`
        '{"error": ""}',
        '{"error": null, "result": 3}',
        '{"status": "ok"}',
        '{"success": false}',  # no message
        '{"ok": true, "message": "fine"}',
        "[1, 2]",
        "{not json",
        '"just a string"',
    ],
)
def test_not_errors(text: str | None) -> None:
    assert not reads_as_error(text)
