"""Tool results as citation sources, and file/terminal tools as `terminal:*` events (SPEC R11).

Owns: reading the text of `search_web`, `fetch_url`, `view_file`,
`view_knowledge_file` and `query_knowledge_files` results into sources shaped
`{"source": {...}, "document": [str, ...], "metadata": [{...}, ...]}` (one
document per metadata entry), a fallback source for any other tool, and the
event a file/terminal tool triggers so a client can refresh its file view.

Must not: raise on odd result text (not JSON, wrong shapes fall back), decide
whether citations are on (the caller does), or emit anything itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from toolrelay.core.events import (
    TERMINAL_DISPLAY_FILE,
    TERMINAL_RUN_COMMAND,
    TERMINAL_WRITE_FILE,
    Event,
)

__all__ = [
    "CITATION_TOOLS",
    "FETCH_SNIPPET_CHARS",
    "TERMINAL_TOOLS",
    "citation_sources",
    "looks_like_error",
    "saved_sources",
    "terminal_event",
]

CITATION_TOOLS: Final = frozenset(
    {"search_web", "fetch_url", "view_file", "view_knowledge_file", "query_knowledge_files"}
)
FETCH_SNIPPET_CHARS: Final = 500
"""A fetched page is cited by its first this-many characters."""

TERMINAL_TOOLS: Final[Mapping[str, str]] = {
    "display_file": TERMINAL_DISPLAY_FILE,
    "write_file": TERMINAL_WRITE_FILE,
    "replace_file_content": TERMINAL_WRITE_FILE,
    "edit_file": TERMINAL_WRITE_FILE,
    "run_command": TERMINAL_RUN_COMMAND,
}

_PATH_KEYS: Final = ("path", "file_path", "filepath", "filename", "file_name", "name")
_FILE_ID_KEYS: Final = ("file_id", "id")

Source = dict[str, Any]


def citation_sources(
    tool_name: str, arguments: Mapping[str, Any], text: str | None, *, tool_id: str | None = None
) -> list[Source]:
    """The citation sources one tool result gives; `[]` when there is nothing to cite.

    An error is never a source: a text that reads as one (`Error: …`, a
    traceback, a JSON object with an `error`) cites nothing.
    """
    if not text or looks_like_error(text):
        return []
    builder = _BUILDERS.get(tool_name)
    sources = builder(arguments, text) if builder is not None else None
    if sources is None:
        return [_fallback(tool_name, text, tool_id)]
    return sources


def saved_sources(output: Sequence[Mapping[str, Any]]) -> list[Source]:
    """The citation sources of a saved turn, as its `source` events gave them live.

    Sources are events, not stored items; a client that loads a saved chat (the web
    page after a reload) gets them from the turn's completed tool calls again, and
    the ones a tool emitted itself from its output item's `sources`, in call order.
    """
    outputs = {
        item.get("call_id"): item for item in output if item.get("type") == "function_call_output"
    }
    sources: list[Source] = []
    for item in output:
        result = outputs.get(item.get("call_id"))
        if item.get("type") != "function_call" or result is None:
            continue
        emitted = result.get("sources")
        if isinstance(emitted, list):
            sources += [dict(s) for s in emitted if isinstance(s, Mapping)]
        name = item.get("name")
        if name not in CITATION_TOOLS or result.get("status", "completed") != "completed":
            continue
        arguments = _loads(str(item.get("arguments") or "{}"))
        sources += citation_sources(
            str(name), arguments if isinstance(arguments, Mapping) else {}, _output_text(result)
        )
    return sources


def _output_text(item: Mapping[str, Any]) -> str:
    output = item.get("output")
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        texts = (p.get("text") for p in output if isinstance(p, Mapping))
        return "".join(t for t in texts if isinstance(t, str))
    return ""


_ERROR_PREFIXES: Final = ("error:", "error ", "exception:", "traceback", "http error")


def looks_like_error(text: str) -> bool:
    """True for a result that reports a failure rather than content."""
    if text.lstrip()[:16].lower().startswith(_ERROR_PREFIXES):
        return True
    decoded = _loads(text) if text.lstrip().startswith("{") else None
    return isinstance(decoded, Mapping) and bool(decoded.get("error"))


def _fallback(tool_name: str, text: str, tool_id: str | None) -> Source:
    source: dict[str, Any] = {"name": tool_name}
    if tool_id:
        source["id"] = tool_id
    return {"source": source, "document": [text], "metadata": [{"source": tool_name}]}


def _loads(text: str) -> Any:
    """The JSON value of `text`, or None when it is not JSON."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def _results_list(value: Any) -> list[Any] | None:
    """A list of results, also when wrapped as `{"results": [...]}`."""
    if isinstance(value, Mapping):
        value = value.get("results")
    return value if isinstance(value, list) else None


def _first_str(mapping: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = mapping.get(key)
        if isinstance(value, str) and value:
            return value
    return None


# ---------------------------------------------------------------- per tool


def _search_web(arguments: Mapping[str, Any], text: str) -> list[Source] | None:
    """One source for the search; a document (the snippet) per result."""
    results = _results_list(_loads(text))
    if results is None or not all(isinstance(r, Mapping) for r in results):
        return None
    if not results:
        return []
    documents: list[str] = []
    metadata: list[dict[str, Any]] = []
    for result in results:
        link = _first_str(result, ("link", "url"))
        title = _first_str(result, ("title",))
        documents.append(_first_str(result, ("snippet", "content", "description")) or "")
        meta: dict[str, Any] = {"source": link or title or "search_web"}
        if title:
            meta["name"] = title
        if link:
            meta["url"] = link
        metadata.append(meta)
    query = _first_str(arguments, ("query", "q"))
    return [
        {"source": {"name": query or "search_web"}, "document": documents, "metadata": metadata}
    ]


def _fetch_url(arguments: Mapping[str, Any], text: str) -> list[Source]:
    """The page's first characters, cited under the fetched URL."""
    url = _first_str(arguments, ("url",))
    snippet = text[:FETCH_SNIPPET_CHARS]
    if url is None:
        return [
            {
                "source": {"name": "fetch_url"},
                "document": [snippet],
                "metadata": [{"source": "fetch_url"}],
            }
        ]
    return [
        {
            "source": {"name": url, "id": url, "url": url},
            "document": [snippet],
            "metadata": [{"source": url, "name": url, "url": url}],
        }
    ]


def _view_file(arguments: Mapping[str, Any], text: str) -> list[Source] | None:
    """The file's text, named by the path argument (or the result's own filename)."""
    document, name, file_id = text, _first_str(arguments, _PATH_KEYS), None
    knowledge = None
    decoded = _loads(text)
    if isinstance(decoded, Mapping):
        if decoded.get("error"):
            return []
        content = decoded.get("content")
        if isinstance(content, str):
            document = content
            name = _first_str(decoded, ("filename", "name", "path")) or name
            file_id = _first_str(decoded, _FILE_ID_KEYS)
            knowledge = _first_str(decoded, ("knowledge_name",))
    file_id = file_id or _first_str(arguments, _FILE_ID_KEYS)
    name = name or file_id
    if name is None:
        return None
    source: dict[str, Any] = {"name": name, "id": file_id or name}
    meta: dict[str, Any] = {"source": name, "name": name}
    if file_id:
        meta["file_id"] = file_id
    if knowledge:
        meta["knowledge_name"] = knowledge
    return [{"source": source, "document": [document], "metadata": [meta]}]


def _query_knowledge(arguments: Mapping[str, Any], text: str) -> list[Source] | None:
    """One source per file (or note), first-seen order: its chunks, metadata and distances.

    The three lists are parallel (R11): a chunk without a distance holds `None`
    in `distances` when another chunk of its source has one; a source none of
    whose chunks has a distance has no `distances`.

    Chunks group by `file_id`, then `note_id`, then the source name, as Open
    WebUI does: two files with one name stay two sources.
    """
    results = _results_list(_loads(text))
    if results is None or not all(isinstance(chunk, Mapping) for chunk in results):
        return None
    grouped: dict[str, Source] = {}
    for chunk in results:
        name = _first_str(chunk, ("source", "file", "name", "filename")) or "Unknown"
        file_id = _first_str(chunk, ("file_id",))
        note_id = _first_str(chunk, ("note_id",))
        key = file_id or note_id or name
        source = grouped.get(key)
        if source is None:
            kind = _first_str(chunk, ("type",)) or "file"
            head: dict[str, Any] = {"name": name, "id": key, "type": kind}
            source = grouped[key] = {"source": head, "document": [], "metadata": []}
        source["document"].append(_first_str(chunk, ("content", "text")) or "")
        source["metadata"].append(_chunk_meta(name, file_id, note_id))
        distance = chunk.get("distance")
        number = isinstance(distance, int | float) and not isinstance(distance, bool)
        source.setdefault("distances", []).append(distance if number else None)
    for source in grouped.values():  # parallel with document/metadata, or absent (R11)
        if all(d is None for d in source["distances"]):
            del source["distances"]
    return list(grouped.values())


def _chunk_meta(name: str, file_id: str | None, note_id: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"source": name, "name": name}
    if file_id:
        meta["file_id"] = file_id
    if note_id:
        meta["note_id"] = note_id
    return meta


_BUILDERS: Final = {
    "search_web": _search_web,
    "fetch_url": _fetch_url,
    "view_file": _view_file,
    "view_knowledge_file": _view_file,
    "query_knowledge_files": _query_knowledge,
}


# ---------------------------------------------------------------- terminal events


def terminal_event(tool_name: str, arguments: Mapping[str, Any]) -> Event | None:
    """The `terminal:*` event a file/terminal tool call triggers, or None.

    File tools need a path; `display_file` with `inline: true` shows the file
    in the chat instead, so it triggers nothing. `run_command` always
    triggers one (a command may change any file).
    """
    event_type = TERMINAL_TOOLS.get(tool_name)
    if event_type is None:
        return None
    path = _first_str(arguments, ("path", "file_path", "filepath"))
    if event_type == TERMINAL_RUN_COMMAND:
        data: dict[str, Any] = {}
        cwd = path or _first_str(arguments, ("cwd",))
        if cwd:
            data["path"] = cwd
        command = _first_str(arguments, ("command", "cmd"))
        if command:
            data["command"] = command
        return Event(event_type, data)
    if path is None or (event_type == TERMINAL_DISPLAY_FILE and arguments.get("inline") is True):
        return None
    data = {"path": path}
    page = arguments.get("page")
    if event_type == TERMINAL_DISPLAY_FILE and isinstance(page, int) and not isinstance(page, bool):
        data["page"] = page
    return Event(event_type, data)
