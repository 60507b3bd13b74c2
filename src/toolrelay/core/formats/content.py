"""A response body's framing, decided one way: its content type, else its first bytes.

Used by the HTTP model clients on a live response (`adapters.models.http`)
and by whatever reads a recorded body (`core.stream.reader.read_body`, the CLI's
`replay`, the test doubles). `text/event-stream` is SSE; the NDJSON types are
NDJSON; `application/json` is one JSON document. Any other or no content
type (a proxy's `text/plain`, a recording on disk) is sniffed: SSE field
names or a comment first mean SSE, several lines each opening an object mean
NDJSON, anything else is read as JSON.
"""

from __future__ import annotations

from typing import Final, Literal

__all__ = ["BodyFormat", "detect_format"]

BodyFormat = Literal["sse", "ndjson", "json"]

_BY_TYPE: Final[dict[str, BodyFormat]] = {
    "text/event-stream": "sse",
    "application/x-ndjson": "ndjson",
    "application/ndjson": "ndjson",
    "application/jsonl": "ndjson",
    "application/json": "json",
}
_SSE_STARTS: Final = (b"data:", b"event:", b":", b"id:", b"retry:")


def detect_format(head: bytes = b"", content_type: str | None = None) -> BodyFormat:
    """The framing of a body whose first bytes are `head` (module doc)."""
    if content_type:
        known = _BY_TYPE.get(content_type.split(";")[0].strip().lower())
        if known is not None:
            return known
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if start.startswith(_SSE_STARTS):
        return "sse"
    if start.startswith(b"{") and b"\n{" in start.rstrip():
        return "ndjson"
    return "json"
