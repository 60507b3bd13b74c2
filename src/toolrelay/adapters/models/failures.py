"""Model-server failures as `ProviderError`s with a sentence a user can act on."""

from __future__ import annotations

import html
import re
from typing import Any, Final

import orjson

from toolrelay.core.formats.error_message import error_message
from toolrelay.errors import ProviderError

_SNIPPET: Final = 200
_HTML_SKIP = re.compile(r"<(script|style)\b.*?</\1\s*>", re.I | re.S)
_HTML_TAG = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")


def seconds_text(value: float) -> str:
    return f"{value:g}"


def describe(exc: BaseException) -> str:
    """Some errors have an empty str(); the class name still says something."""
    return str(exc) or type(exc).__name__


def _html_text(text: str) -> str:
    text = _HTML_TAG.sub(" ", _HTML_SKIP.sub(" ", text))
    return _SPACE.sub(" ", html.unescape(text)).strip()


def error_from_response(
    status: int, body: bytes, content_type: str | None = None, reason: str = ""
) -> ProviderError:
    """`ProviderError("Model server returned 401: Incorrect API key provided", …)`."""
    text = body.decode("utf-8", "replace")
    parsed: Any = text
    message: str | None = None
    try:
        parsed = orjson.loads(body)
        message = error_message(parsed) if isinstance(parsed, dict) else None
    except orjson.JSONDecodeError:
        pass
    if message is None:
        is_html = "html" in (content_type or "").lower() or text.lstrip().startswith("<")
        message = (_html_text(text) if is_html else text.strip())[:_SNIPPET]
    message = message or reason or "no details"
    return ProviderError(f"Model server returned {status}: {message}", status=status, body=parsed)


def timeout_error(seconds: float, *, total: bool) -> ProviderError:
    if total:
        return ProviderError(
            f"Model server timed out: no complete response within {seconds_text(seconds)} s"
        )
    return ProviderError(f"Model server timed out: no data for {seconds_text(seconds)} s")


def lost_connection(exc: BaseException) -> ProviderError:
    return ProviderError(f"Connection to the model server was lost mid-response: {describe(exc)}")


def too_large(limit: int) -> ProviderError:
    return ProviderError(
        f"Model server response too large: over {size_text(limit)}, the route's "
        "max_response_bytes; the rest was not read"
    )


def size_text(size: int) -> str:
    """`32 MiB`, `512 KiB`, `100 bytes`: a cap as an operator wrote it, near enough."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} bytes"
