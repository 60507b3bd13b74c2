"""Files sent with a message, as the model and the tools see them (issue 29 item 1).

- A text file becomes a retrieved source `{source, document, metadata}`: its
  text goes into the prompt once per model call through the pre-RAG snapshot
  (R15, `core.prompt.rag`), and the client gets it as a `source` event.
- An image goes into the user message as an image part when the model reads
  images (`vision`); otherwise the message says an image was attached.
- Every file is listed in `__files__` and `__metadata__["files"]`.

Pure functions over plain values: the server reads the bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["file_source", "is_text", "with_images"]

_TEXT_TYPES = frozenset({"application/json", "application/xml", "application/x-yaml"})


def is_text(mime: str) -> bool:
    return mime.startswith("text/") or mime in _TEXT_TYPES


def file_source(file: Mapping[str, Any], text: str, limit: int) -> dict[str, Any]:
    """A text file as a source; text past `limit` characters is cut, and the cut said."""
    body = text if len(text) <= limit else text[:limit] + f"\n[… cut at {limit:,} characters]"
    name = str(file.get("name") or "file")
    return {
        "source": {"id": file.get("id"), "name": name, "type": "file"},
        "document": [body],
        "metadata": [{"source": name, "name": name, "file_id": file.get("id")}],
    }


def with_images(
    message: Mapping[str, Any], images: Sequence[tuple[str, str]], *, vision: bool
) -> dict[str, Any]:
    """The user message with its images: `(name, data_url)` pairs as `image_url` parts
    after its text, or (a model without vision) a line naming each."""
    if not images:
        return dict(message)
    content = message.get("content")
    parts: list[dict[str, Any]] = (
        [dict(p) for p in content if isinstance(p, Mapping)]
        if isinstance(content, list)
        else [{"type": "text", "text": str(content or "")}]
    )
    if vision:
        parts += [{"type": "image_url", "image_url": {"url": url}} for _, url in images]
    else:
        names = ", ".join(name for name, _ in images)
        parts.append(
            {"type": "text", "text": f"[Attached image(s), not shown to this model: {names}]"}
        )
    return {**message, "content": parts}
