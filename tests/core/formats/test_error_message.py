"""One error-message reader for in-stream errors and HTTP error bodies."""

from __future__ import annotations

from typing import Any

import pytest

from toolrelay.adapters.models.failures import error_from_response
from toolrelay.core.formats.chat_completions.parse import error_from_payload
from toolrelay.core.formats.error_message import error_message
from toolrelay.core.formats.sse import dumps


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({"error": {"message": " Incorrect key ", "type": "auth"}}, "Incorrect key"),
        ({"error": "model not found"}, "model not found"),
        ({"detail": "Not Found"}, "Not Found"),
        ({"msg": "bad"}, "bad"),
        ({"message": "direct"}, "direct"),
        ({"error": {"error": {"message": "nested"}}}, "nested"),
        ({"error": {"type": "overloaded_error"}}, "overloaded_error"),
        ({"error": {"code": "rate_limited"}}, "rate_limited"),
        ({"type": "error"}, None),
        ({"error": {"code": 502}}, None),
        ("  plain  ", "plain"),
        (None, None),
        ([1], None),
    ],
)
def test_error_message(payload: Any, expected: str | None) -> None:
    assert error_message(payload) == expected


@pytest.mark.parametrize(
    "payload",
    [
        {"error": {"message": "Incorrect key", "type": "auth"}},
        {"error": {"type": "overloaded_error"}},
        {"error": {"detail": "too long"}},
        {"error": "gone"},
        {"detail": "Not Found"},
        {"msg": "bad"},
    ],
)
def test_a_stream_error_and_an_http_error_read_the_same_message(payload: Any) -> None:
    in_stream = error_from_payload(payload).message
    http = error_from_response(500, dumps(payload), "application/json").message
    assert http == f"Model server returned 500: {in_stream}"
