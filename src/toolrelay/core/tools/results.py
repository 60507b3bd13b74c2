"""Whatever a tool returned → text for the model, files and embeds for the client (SPEC R10, R12).

Owns: turning any tool result (None, str, bytes, numbers, `(data, headers)`
tuples, HTTP responses such as Starlette's `HTMLResponse` (duck-typed, no
import), MCP content lists, dicts, lists, odd objects) into a
`NormalisedResult` whose text is always `str` or `None`; building the
`function_call_output.output` value (plain text, or text plus `input_image`
parts); stripping large base64 payloads from what clients are sent.

Images: only a whole-string base64 PNG/JPEG/GIF/WebP data URI is an image for
the model (OpenAI-style APIs reject SVG and non-base64 URIs); found anywhere in
a dict, list, tuple or MCP text part it moves to `files` and the text keeps
`[image]` in its place. Other `data:image/` URIs are display-only files.

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
    "IMAGE_PLACEHOLDER",
    "IMAGE_READ_TEXT",
    "IMAGE_SHOWN_TEXT",
    "UI_SHOWN_TEXT",
    "NormalisedResult",
    "is_model_image",
    "normalise_result",
    "result_output_parts",
    "strip_base64",
]

IMAGE_READ_TEXT: Final = "The image was read and shown to the user."
UI_SHOWN_TEXT: Final = "Displayed the UI to the user."
IMAGE_SHOWN_TEXT: Final = "The image was shown to the user."
IMAGE_PLACEHOLDER: Final = "[image]"

_MCP_TYPES: Final = frozenset({"text", "image", "audio", "resource", "resource_link"})
_DEFAULT_MIME: Final = {"image": "image/png", "audio": "audio/wav"}
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_\-\r\n]+={0,2}")
_MODEL_IMAGE = re.compile(r"data:image/(?:png|jpe?g|gif|webp);base64,[A-Za-z0-9+/]+={0,2}", re.I)


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


def normalise_result(
    result: Any, *, headers: Mapping[str, str] | None = None, direct: bool = False
) -> NormalisedResult:
    """Normalise one tool result; `headers` (or a `(data, headers)` pair) marks HTTP-ish results.

    A tuple whose second element is a mapping counts as `(data, headers)`; so
    does a 2-element list when `direct` (a client-side tool's answer, which
    arrives as JSON). An HTTP response object, or `(response, context)`,
    gives its body, or an embed when it is marked inline. A `NormalisedResult`
    (a tool that built its own: text, images and embeds at once) passes as is.
    """
    if isinstance(result, NormalisedResult):
        return result
    if headers is None:
        response = _from_response(result)
        if response is not None:
            return response
        if _is_headers_pair(result, direct):
            result, headers = result[0], result[1]
    if headers is not None:
        embedded = _embed_from_headers(result, headers)
        if embedded is not None:
            return embedded
    return _normalise_value(result)


def _is_headers_pair(value: Any, direct: bool) -> bool:
    kinds = (tuple, list) if direct else tuple
    return isinstance(value, kinds) and len(value) == 2 and isinstance(value[1], Mapping)


def _lowered(headers: Any) -> dict[str, str]:
    try:
        return {str(k).lower(): str(v) for k, v in headers.items()}
    except Exception:
        return {}


def _embed_from_headers(data: Any, headers: Mapping[Any, Any]) -> NormalisedResult | None:
    """Inline HTML → its body as an embed; inline with `Location` → that URL as an embed.

    `data` may be `(html, context)` (or `(anything, context)` with a
    `Location`): the context is then what the model reads.
    """
    lowered = _lowered(headers)
    if "inline" not in lowered.get("content-disposition", "").lower():
        return None
    paired = isinstance(data, tuple | list) and len(data) == 2
    context = data[1] if paired else None
    if "text/html" in lowered.get("content-type", "").lower():
        body = _as_text(data[0] if paired else data)
        if body is not None:
            return NormalisedResult(_context_text(context), embeds=(body,))
    location = lowered.get("location")
    if location:
        return NormalisedResult(_context_text(context), embeds=({"url": location},))
    return None


def _context_text(context: Any) -> str:
    """What the model reads about a shown UI: the tool's context, else the default line."""
    if isinstance(context, str):
        return context
    if isinstance(context, dict | list):
        return _json_text(context)
    return UI_SHOWN_TEXT


def _response_fields(value: Any) -> tuple[Any, Mapping[Any, Any], int] | None:
    """`(body, headers, status)` of a Starlette-like response object, else None."""
    try:
        body, headers = getattr(value, "body", None), getattr(value, "headers", None)
        status = getattr(value, "status_code", None)
    except Exception:
        return None
    if not isinstance(body, bytes | bytearray | memoryview | str):
        return None
    if not isinstance(headers, Mapping) or not isinstance(status, int):
        return None
    return body, headers, status


def _from_response(result: Any) -> NormalisedResult | None:
    """An HTTP response, or `(response, context)`: inline → embed (R10), else its body."""
    context: Any = None
    fields = _response_fields(result)
    if fields is None and isinstance(result, tuple) and len(result) == 2:
        fields, context = _response_fields(result[0]), result[1]
    if fields is None:
        return None
    raw, headers, status = fields
    body = raw if isinstance(raw, str) else bytes(raw).decode("utf-8", errors="replace")
    if "inline" not in _lowered(headers).get("content-disposition", "").lower():
        return _normalise_value(body)
    if status >= 400:
        text = f"Error: the embedded UI answered with HTTP status {status}."
    else:
        text = _context_text(context)
    return NormalisedResult(text, embeds=(body,))


def _normalise_value(value: Any) -> NormalisedResult:
    if value is None:
        return NormalisedResult(None)
    if isinstance(value, bytes | bytearray | memoryview):
        value = bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, str):
        if is_model_image(value):
            return NormalisedResult(IMAGE_READ_TEXT, files=({"type": "image", "url": value},))
        if value.startswith("data:image/"):
            return NormalisedResult(IMAGE_SHOWN_TEXT, files=(_display_file(value),))
        return NormalisedResult(value)
    if _is_mcp_content(value):
        return _normalise_mcp(value)
    if isinstance(value, dict | list | tuple):
        images: list[str] = []
        value = _without_images(value, images)
        text = _json_text(value)
        return NormalisedResult(text, tuple({"type": "image", "url": u} for u in images))
    if isinstance(value, bool | int | float) or dataclasses.is_dataclass(value):
        return NormalisedResult(_json_text(value))
    return NormalisedResult(_safe_str(value))


def is_model_image(value: str) -> bool:
    """A whole-string base64 raster image data URI, the only image form models accept."""
    return value.startswith("data:image/") and _MODEL_IMAGE.fullmatch(value) is not None


def _display_file(url: str) -> dict[str, Any]:
    """A `data:` URI the client may show but the model must not get as an image."""
    mime = url[5:].split(",", 1)[0].split(";", 1)[0] or "application/octet-stream"
    return {"type": "file", "url": url, "mime_type": mime}


def _has_image(value: Any, path: set[int]) -> bool:
    if isinstance(value, str):
        return is_model_image(value)
    if not isinstance(value, dict | list | tuple) or id(value) in path:
        return False
    path.add(id(value))
    items = value.values() if isinstance(value, dict) else value
    found = any(_has_image(v, path) for v in items)
    path.discard(id(value))
    return found


def _without_images(value: Any, images: list[str]) -> Any:
    """`value` with every model image replaced by the placeholder (a copy; `images` collects)."""
    if not _has_image(value, set()):
        return value
    if isinstance(value, str):
        images.append(value)
        return IMAGE_PLACEHOLDER
    if isinstance(value, dict):
        return {k: _without_images(v, images) for k, v in value.items()}
    return [_without_images(v, images) for v in value]


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
    """Texts joined by newlines; images and audio become data-URI files.

    An image or audio part's data is its `data`, or its `blob` when `data` is
    missing (Open WebUI reads both). A part with neither is skipped with a note (an empty data URI is
    rejected by providers); images inside a text part are extracted.
    """
    texts: list[str] = []
    files: list[dict[str, Any]] = []
    for part in parts:
        kind = part["type"]
        if kind == "text":
            texts.append(_mcp_text(_str_field(part, "text"), files))
        elif kind in ("image", "audio"):
            data = part.get("data")
            if not (isinstance(data, str) and data):
                data = part.get("blob")  # some servers name it as a resource's field
            if isinstance(data, str) and data:
                files.append(_media_file(kind, part.get("mimeType"), data))
            else:
                texts.append(f"[{kind} without data skipped]")
        elif kind == "resource":
            _add_resource(part.get("resource"), texts, files)
        else:  # resource_link
            texts.append(_link_text(part))
    return NormalisedResult("\n".join(texts) if texts else None, tuple(files))


def _mcp_text(text: str, files: list[dict[str, Any]]) -> str:
    """A text part; an image data URI in it (whole, or inside its JSON) becomes a file."""
    if is_model_image(text):
        files.append({"type": "image", "url": text})
        return IMAGE_PLACEHOLDER
    if "data:image/" not in text or not text.lstrip().startswith(("{", "[")):
        return text
    try:
        decoded = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text
    images: list[str] = []
    stripped = _without_images(decoded, images)
    files.extend({"type": "image", "url": u} for u in images)
    return _json_text(stripped) if images else text


def _str_field(part: Mapping[str, Any], key: str) -> str:
    value = part.get(key)
    return value if isinstance(value, str) else ("" if value is None else _json_text(value))


def _media_file(kind: str, mime: Any, data: str) -> dict[str, Any]:
    mime_type = mime if isinstance(mime, str) and mime else _DEFAULT_MIME[kind]
    url = f"data:{mime_type};base64,{data}"
    if kind == "image":
        return {"type": "image", "url": url} if is_model_image(url) else _display_file(url)
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
