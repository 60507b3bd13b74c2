"""Pre-RAG snapshot and context re-injection (SPEC R15; reference §11).

Retrieved context is injected into the prompt before the first request. The
tool loop then resends the conversation every round, and tools may add new
citation sources; if each round injected into the already-injected prompt,
the context block would stack up (Open WebUI #21663, #21780, #22271).

So the original prompt is saved once (`take_snapshot`) and every round is
rebuilt from it (`inject`):

1. The context goes into the **user prompt message** (Open WebUI's default):
   it keeps the system message and the earlier history byte-identical across
   rounds, which provider prompt caches reward. That message's text is reset
   to the snapshot, then the block is prepended (`block + "\\n\\n" + prompt`).
   Image parts of a list-content message are kept, in place.
2. The user prompt message is the last `user` message that is not the tool
   images message `core.formats.transcript` emits (`TOOL_IMAGES_TEXT`).
3. With no user prompt (no such message, or none in the snapshot) the block
   goes into the first system message instead, whose text becomes the
   snapshot's system prompt plus the block; one is inserted if absent.
4. When the snapshot has a system prompt, the first system message is reset
   to it too, so nothing an earlier round did there survives.
5. File sources go in with their text; tool sources only as citation markers
   (name and url, no body: their content is already in the tool messages).
   Sources are numbered by first appearance of their id, shared across both.

Because of 1–4 `inject(inject(m, s), s) == inject(m, s)`: there is never more
than one block. Everything here is pure and returns fresh lists and dicts.
"""

from __future__ import annotations

import copy
import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from toolrelay.core.formats.transcript import TOOL_IMAGES_TEXT

__all__ = ["DEFAULT_TEMPLATE", "RagSnapshot", "inject", "render_sources", "take_snapshot"]

DEFAULT_TEMPLATE: Final = (
    "Use the context below when it helps to answer the user. Cite a source as [id] "
    "when you use it. Sources without a body are results of tool calls shown above.\n"
    "<context>\n{{CONTEXT}}\n</context>"
)
"""`{{CONTEXT}}` becomes the source tags; `{{QUERY}}`, if present, the user prompt."""

_PLACEHOLDER: Final = re.compile(r"\{\{(CONTEXT|QUERY)\}\}")
_TEXT_TYPES: Final = frozenset({"text", "input_text"})


@dataclass(frozen=True, slots=True)
class RagSnapshot:
    """The prompt as the client sent it, before any context was injected."""

    system: str | None
    user: str | None
    sources: tuple[dict[str, Any], ...]


def _text(content: object) -> str:
    """A message's text: the string, or its text parts joined with newlines."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(
        p["text"]
        for p in content
        if isinstance(p, Mapping)
        and p.get("type") in _TEXT_TYPES
        and isinstance(p.get("text"), str)
    )


def _is_tool_images(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    if not isinstance(content, list) or not content:
        return False
    first = content[0]
    return isinstance(first, Mapping) and first.get("text") == TOOL_IMAGES_TEXT


def _prompt_index(messages: Sequence[Mapping[str, Any]]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "user" and not _is_tool_images(message):
            return index
    return None


def _system_index(messages: Sequence[Mapping[str, Any]]) -> int | None:
    return next((i for i, m in enumerate(messages) if m.get("role") == "system"), None)


def take_snapshot(
    messages: Sequence[Mapping[str, Any]], sources: Sequence[Mapping[str, Any]]
) -> RagSnapshot:
    """Save the system prompt, user prompt and sources before the first injection."""
    system = _system_index(messages)
    prompt = _prompt_index(messages)
    return RagSnapshot(
        system=None if system is None else _text(messages[system].get("content")),
        user=None if prompt is None else _text(messages[prompt].get("content")),
        sources=tuple(copy.deepcopy(dict(s)) for s in sources),
    )


def _with_text(message: Mapping[str, Any], text: str) -> dict[str, Any]:
    """`message` with its text replaced; non-text parts of list content stay in place."""
    updated = dict(message)
    content = message.get("content")
    if not isinstance(content, list):
        updated["content"] = text
        return updated
    parts: list[Any] = []
    placed = False
    for part in content:
        if isinstance(part, Mapping) and part.get("type") in _TEXT_TYPES:
            if not placed:
                parts.append({"type": "text", "text": text})
                placed = True
        else:
            parts.append(copy.deepcopy(part))
    if not placed:
        parts.insert(0, {"type": "text", "text": text})
    updated["content"] = parts
    return updated


def _source_pairs(source: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(document, metadata) pairs; a source without documents still gets one marker."""
    documents = source.get("document")
    metadata = source.get("metadata")
    metadata = metadata if isinstance(metadata, list) else []
    docs = [str(d) for d in documents] if isinstance(documents, list) else []
    metas = [m if isinstance(m, Mapping) else {} for m in metadata]
    if not docs:
        return [("", metas[0] if metas else {})]
    return [(doc, metas[i] if i < len(metas) else {}) for i, doc in enumerate(docs)]


def _attrs(**values: object) -> str:
    return "".join(f' {k}="{html.escape(str(v), quote=True)}"' for k, v in values.items() if v)


def render_sources(
    sources: Sequence[Mapping[str, Any]],
    *,
    include_content: bool = True,
    numbering: dict[str, int] | None = None,
) -> str:
    """`<source id="N" name="…" url="…">BODY</source>` lines; N shared via `numbering`.

    Without content each marker appears once, however many chunks the source had.
    """
    ids = {} if numbering is None else numbering
    lines: list[str] = []
    for source in sources:
        info = source.get("source")
        info = info if isinstance(info, Mapping) else {}
        for document, meta in _source_pairs(source):
            key = str(meta.get("source") or info.get("id") or info.get("name") or "N/A")
            number = ids.setdefault(key, len(ids) + 1)
            name = meta.get("name") or info.get("name")
            url = meta.get("url") or info.get("url")
            body = document if include_content else ""
            line = f"<source{_attrs(id=number, name=name, url=url)}>{body}</source>"
            if include_content or line not in lines:
                lines.append(line)
    return "\n".join(lines)


def _render_block(
    snapshot: RagSnapshot, tool_sources: Sequence[Mapping[str, Any]], template: str
) -> str:
    numbering: dict[str, int] = {}
    context = "\n".join(
        part
        for part in (
            render_sources(snapshot.sources, numbering=numbering),
            render_sources(tool_sources, include_content=False, numbering=numbering),
        )
        if part
    )
    if not context:
        return ""
    values = {"CONTEXT": context, "QUERY": snapshot.user or ""}
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def inject(
    messages: Sequence[Mapping[str, Any]],
    snapshot: RagSnapshot,
    *,
    tool_sources: Sequence[Mapping[str, Any]] = (),
    template: str = DEFAULT_TEMPLATE,
) -> list[dict[str, Any]]:
    """The messages rebuilt from `snapshot` with exactly one context block (none if no sources)."""
    rebuilt = [dict(m) for m in messages]
    block = _render_block(snapshot, tool_sources, template)
    system = _system_index(rebuilt)
    if snapshot.system is not None and system is not None:
        rebuilt[system] = _with_text(rebuilt[system], snapshot.system)
    prompt = _prompt_index(rebuilt)
    if snapshot.user is not None and prompt is not None:
        text = f"{block}\n\n{snapshot.user}" if block else snapshot.user
        rebuilt[prompt] = _with_text(rebuilt[prompt], text)
        return rebuilt
    if not block:
        return rebuilt
    text = f"{snapshot.system}\n\n{block}" if snapshot.system else block
    if system is None:
        rebuilt.insert(0, {"role": "system", "content": text})
    else:
        rebuilt[system] = _with_text(rebuilt[system], text)
    return rebuilt
