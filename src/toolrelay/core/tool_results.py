"""Whatever a tool returned → text for the model, files and embeds for the client (SPEC R10, R12).

Owns: turning any tool result (None, str, bytes, numbers, `(data, headers)`
tuples, MCP content lists, dicts, lists, odd objects) into a
`NormalisedResult` whose text is always `str` or `None`; building the
`function_call_output.output` value (plain text, or text plus `input_image`
parts); stripping large base64 payloads from what clients are sent.

Must not: raise on any input, upload files, or do I/O. Files stay data URIs
here; storing them elsewhere is an adapter's job.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

__all__ = [
    "IMAGE_READ_TEXT",
    "UI_SHOWN_TEXT",
    "NormalisedResult",
    "normalise_result",
    "result_output_parts",
    "strip_base64",
]

IMAGE_READ_TEXT: Final = "The image was read and shown to the user."
UI_SHOWN_TEXT: Final = "Displayed the UI to the user."

_MCP_TYPES: Final = frozenset({"text", "image", "audio", "resource", "resource_link"})
_DEFAULT_MIME: Final = {"image": "image/png", "audio": "audio/wav"}
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_\-\r\n]+={0,2}")


@dataclass(frozen=True, slots=True)
class NormalisedResult:
    """A tool result as the loop uses it.

    `files` are dicts such as `{"type": "image", "url": "data:image/png;base64,…"}`
    or `{"type": "audio", "url": …, "mime_type": …}`; `embeds` are HTML strings
    or `{"url": …}` shown in a sandboxed iframe.
    """

    text: str | None
    files: tuple[dict[str, Any], ...] = ()
    embeds: tuple[Any, ...] = ()


def normalise_result(result: Any, *, headers: Mapping[str, str] | None = None) -> NormalisedResult:
    """Normalise one tool result; `headers` (or a `(data, headers)` tuple) marks HTTP-ish results.

    Only a tuple whose second element is a mapping counts as `(data, headers)`;
    a client-side tool answering with a 2-element list should be passed as
    `normalise_result(data, headers=headers)` by its adapter.
    """
    if headers is None and _is_headers_tuple(result):
        result, headers = result[0], result[1]
    if headers is not None:
        embedded = _embed_from_headers(result, headers)
        if embedded is not None:
            return embedded
    return _normalise_value(result)


def _is_headers_tuple(value: Any) -> bool:
    return isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], Mapping)


def _embed_from_headers(data: Any, headers: Mapping[Any, Any]) -> NormalisedResult | None:
    """Inline HTML → its body as an embed; inline with `Location` → that URL as an embed."""
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    if "inline" not in lowered.get("content-disposition", "").lower():
        return None
    if "text/html" in lowered.get("content-type", "").lower():
        body = _as_text(data)
        if body is not None:
            return NormalisedResult(UI_SHOWN_TEXT, embeds=(body,))
    location = lowered.get("location")
    if location:
        return NormalisedResult(UI_SHOWN_TEXT, embeds=({"url": location},))
    return None


def _normalise_value(value: Any) -> NormalisedResult:
    if value is None:
        return NormalisedResult(None)
    if isinstance(value, bytes | bytearray | memoryview):
        value = bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, str):
        if value.startswith("data:image/"):
            return NormalisedResult(IMAGE_READ_TEXT, files=({"type": "image", "url": value},))
        return NormalisedResult(value)
    if _is_mcp_content(value):
        return _normalise_mcp(value)
    if isinstance(value, bool | int | float | dict | list | tuple) or dataclasses.is_dataclass(
        value
    ):
        return NormalisedResult(_json_text(value))
    return NormalisedResult(_safe_str(value))


def _as_text(data: Any) -> str | None:
    if isinstance(data, str):
        return data
    if isinstance(data, bytes | bytearray):
        return bytes(data).decode("utf-8", errors="replace")
    return None


def _json_text(value: Any) -> str:
    """Compact JSON that never raises: orjson, then stdlib (big ints, surrogates), then str."""
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except (orjson.JSONEncodeError, TypeError):
        pass
    try:
        return json.dumps(value, default=str, separators=(",", ":"))
    except (ValueError, TypeError, RecursionError):
        return _safe_str(value)


def _safe_str(value: Any) -> str:
    try:
        return str(value)
    except Exception:
        return object.__repr__(value)


# ---------------------------------------------------------------- MCP content


def _is_mcp_content(value: Any) -> bool:
    """A non-empty list whose every element is an MCP content part."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(p, dict) and _is_mcp_type(p.get("type")) for p in value)
    )


def _is_mcp_type(kind: Any) -> bool:
    return isinstance(kind, str) and kind in _MCP_TYPES


def _normalise_mcp(parts: list[dict[str, Any]]) -> NormalisedResult:
    """Texts joined by newlines; images and audio become data-URI files."""
    texts: list[str] = []
    files: list[dict[str, Any]] = []
    for part in parts:
        kind = part["type"]
        if kind == "text":
            texts.append(_str_field(part, "text"))
        elif kind in ("image", "audio"):
            files.append(_media_file(kind, part.get("mimeType"), part.get("data")))
        elif kind == "resource":
            _add_resource(part.get("resource"), texts, files)
        else:  # resource_link
            texts.append(_link_text(part))
    return NormalisedResult("\n".join(texts) if texts else None, tuple(files))


def _str_field(part: Mapping[str, Any], key: str) -> str:
    value = part.get(key)
    return value if isinstance(value, str) else ("" if value is None else _json_text(value))


def _media_file(kind: str, mime: Any, data: Any) -> dict[str, Any]:
    mime_type = mime if isinstance(mime, str) and mime else _DEFAULT_MIME[kind]
    url = f"data:{mime_type};base64,{data if isinstance(data, str) else ''}"
    if kind == "image":
        return {"type": "image", "url": url}
    return {"type": kind, "url": url, "mime_type": mime_type}


def _add_resource(resource: Any, texts: list[str], files: list[dict[str, Any]]) -> None:
    """Embedded resource: its text, or its blob as a file (images/audio by mime type)."""
    if not isinstance(resource, Mapping):
        return
    uri = resource.get("uri") if isinstance(resource.get("uri"), str) else "resource"
    text = resource.get("text")
    if isinstance(text, str):
        texts.append(text)
        return
    blob = resource.get("blob")
    if not isinstance(blob, str):
        texts.append(f"[Resource: {uri}]")
        return
    raw_mime = resource.get("mimeType")
    mime = raw_mime if isinstance(raw_mime, str) and raw_mime else "application/octet-stream"
    if mime.startswith(("image/", "audio/")):
        files.append(_media_file(mime.split("/", 1)[0], mime, blob))
        return
    files.append(
        {"type": "file", "url": f"data:{mime};base64,{blob}", "mime_type": mime, "name": uri}
    )
    texts.append(f"[Resource: {uri}] (binary data, mimeType: {mime})")


def _link_text(part: Mapping[str, Any]) -> str:
    uri = part.get("uri") if isinstance(part.get("uri"), str) else ""
    name = part.get("name")
    return f"[Resource: {name}] {uri}" if isinstance(name, str) and name else f"[Resource: {uri}]"


# ---------------------------------------------------------------- output and stripping


def result_output_parts(result: NormalisedResult) -> str | list[dict[str, Any]]:
    """The `function_call_output.output`: plain text, or text then `input_image` parts."""
    images = [
        f["url"] for f in result.files if f.get("type") == "image" and isinstance(f.get("url"), str)
    ]
    if not images:
        return result.text or ""
    parts: list[dict[str, Any]] = []
    if result.text:
        parts.append({"type": "input_text", "text": result.text})
    parts.extend({"type": "input_image", "image_url": url} for url in images)
    return parts


def strip_base64(value: Any, *, limit: int = 1024) -> Any:
    """A copy with every data URI or bare base64 run longer than `limit` cut to a placeholder.

    Clients need the shape, not megabytes of image data (R12); the model
    still gets the full payload from the original.
    """
    if isinstance(value, str):
        return _strip_string(value, limit)
    if isinstance(value, dict):
        return {k: strip_base64(v, limit=limit) for k, v in value.items()}
    if isinstance(value, list):
        return [strip_base64(v, limit=limit) for v in value]
    if isinstance(value, tuple):
        return tuple(strip_base64(v, limit=limit) for v in value)
    return value


def _strip_string(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    if text.startswith("data:"):
        head, sep, payload = text.partition(",")
        if sep and head.endswith(";base64"):
            return f"{head},…[stripped {len(payload)} bytes]"
        return text
    if _BASE64_RUN.fullmatch(text):
        return f"…[stripped {len(text)} bytes]"
    return text
