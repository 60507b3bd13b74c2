"""A whole answer in one call: for the clients that want a body, not a stream.

OpenAPI tool calls and pipeline outlets send a request and use the answer
once it is all there. `fetch` does that over any `Transport`, within a size
limit (the caller bounds the time), and always closes what it opened; `url_with_query`
encodes query parameters the way OpenAPI servers read them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlencode

from toolrelay.adapters.http.seam import BodyError, Request, Transport

__all__ = ["MAX_ANSWER_BYTES", "Answer", "fetch", "url_with_query"]

MAX_ANSWER_BYTES: Final = 32 << 20


@dataclass(frozen=True, slots=True)
class Answer:
    """A status, the headers and the whole body."""

    status: int
    reason: str
    headers: Mapping[str, str]
    body: bytes

    @property
    def text(self) -> str:
        """The body decoded with the charset the content type names (else UTF-8)."""
        charset = "utf-8"
        for part in self.headers.get("content-type", "").split(";")[1:]:
            key, _, value = part.strip().partition("=")
            if key.lower() == "charset" and value:
                charset = value.strip('"')
        try:
            return self.body.decode(charset, "replace")
        except LookupError:  # a charset Python does not know
            return self.body.decode("utf-8", "replace")

    def header_dict(self) -> dict[str, str]:
        """The headers with lower-case names, a repeated one's values joined by ", "."""
        out: dict[str, str] = {}
        for key, value in self.headers.items():
            name = key.lower()
            out[name] = f"{out[name]}, {value}" if name in out else value
        return out


async def fetch(
    transport: Transport,
    request: Request,
    *,
    max_bytes: int = MAX_ANSWER_BYTES,
) -> Answer:
    """Send and read the whole answer; the seam's errors (`BodyError` for a body over
    `max_bytes`)."""
    response = await transport.send(request)
    try:
        parts: list[bytes] = []
        size = 0
        async for chunk in response.chunks():
            size += len(chunk)
            if size > max_bytes:
                raise BodyError(f"the answer is over {max_bytes} bytes")
            parts.append(chunk)
    finally:
        await response.aclose()
    return Answer(response.status, response.reason, response.headers, b"".join(parts))


def url_with_query(url: str, query: Mapping[str, Any] | None) -> str:
    """`url?k=v&…`: a list repeats its key, `True`/`False` are `true`/`false`, None is empty."""
    if not query:
        return url
    pairs: list[tuple[str, str]] = []
    for key, value in query.items():
        for item in value if isinstance(value, list | tuple) else [value]:
            pairs.append((key, _plain(item)))
    return f"{url}{'&' if '?' in url else '?'}{urlencode(pairs)}"


def _plain(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
