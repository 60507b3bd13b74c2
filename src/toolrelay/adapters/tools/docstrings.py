"""Reading a tool function's docstring: its description and per-parameter docs.

Owns the three docstring styles tools are written in — Google (`Args:`),
NumPy (`Parameters` over a dashed line) and Sphinx (`:param x:`) — and only
what a tool spec needs of them: the first paragraph as the description, and
one text per documented parameter. Pure string work, no imports of the tool.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

__all__ = ["Docstring", "parse_docstring"]


@dataclass(frozen=True, slots=True)
class Docstring:
    """The parts of a docstring a tool spec uses."""

    description: str = ""
    params: dict[str, str] = field(default_factory=dict)


_GOOGLE_PARAM_HEADERS = frozenset(
    {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"}
)
_GOOGLE_OTHER_HEADERS = frozenset(
    {"returns", "return", "yields", "raises", "examples", "example", "note", "notes"}
    | {"see also", "attributes", "warns", "warnings", "references", "todo"}
)
_NUMPY_PARAM_HEADERS = frozenset({"parameters", "other parameters"})
_DASHES_RE = re.compile(r"\s*-{3,}\s*")
_GOOGLE_ENTRY_RE = re.compile(r"\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)")
_SPHINX_RE = re.compile(r":(?:param|parameter|arg|argument|key|keyword)\s+([^:]+?)\s*:\s*(.*)")


def parse_docstring(doc: str | None) -> Docstring:
    """Split a docstring into its first paragraph and its parameter docs.

    All three styles are tried on the same text, so a docstring that mixes
    them (it happens) still yields every parameter it documents.
    """
    if not doc:
        return Docstring()
    lines = inspect.cleandoc(doc).splitlines()
    params: dict[str, str] = {}
    params.update(_numpy_params(lines))
    params.update(_google_params(lines))
    params.update(_sphinx_params(lines))
    return Docstring(_first_paragraph(lines), params)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _is_numpy_header(lines: list[str], i: int) -> bool:
    return (
        bool(lines[i].strip()) and i + 1 < len(lines) and bool(_DASHES_RE.fullmatch(lines[i + 1]))
    )


def _is_google_header(line: str) -> bool:
    text = line.strip()
    name = text[:-1].strip().lower()
    return text.endswith(":") and name in (_GOOGLE_PARAM_HEADERS | _GOOGLE_OTHER_HEADERS)


def _first_paragraph(lines: list[str]) -> str:
    """Lines up to the first blank line or section, joined: the tool's description."""
    out: list[str] = []
    for i, line in enumerate(lines):
        text = line.strip()
        if not text or text.startswith(":") or _is_google_header(line):
            break
        if _is_numpy_header(lines, i):
            break
        out.append(text)
    return " ".join(out)


def _indented_block(lines: list[str], start: int, base: int) -> list[str]:
    """Lines from `start` indented deeper than `base`, up to the first dedent."""
    block: list[str] = []
    for line in lines[start:]:
        if line.strip() and _indent(line) <= base:
            break
        block.append(line)
    return block


def _google_params(lines: list[str]) -> dict[str, str]:
    """`Args:` sections: `name (type): text`, continuation lines indented deeper."""
    params: dict[str, str] = {}
    for i, line in enumerate(lines):
        text = line.strip()
        if not (text.endswith(":") and text[:-1].strip().lower() in _GOOGLE_PARAM_HEADERS):
            continue
        block = [b for b in _indented_block(lines, i + 1, _indent(line)) if b.strip()]
        if not block:
            continue
        entry_indent = _indent(block[0])
        current: str | None = None
        for entry in block:
            match = _GOOGLE_ENTRY_RE.fullmatch(entry.strip())
            if _indent(entry) == entry_indent:
                current = match.group(1) if match else None
                if match:
                    params[match.group(1)] = match.group(2).strip()
            elif current is not None:
                params[current] = f"{params[current]} {entry.strip()}".strip()
    return params


def _numpy_params(lines: list[str]) -> dict[str, str]:
    """`Parameters` + dashes: `name : type` lines, description indented below."""
    params: dict[str, str] = {}
    i = 0
    while i < len(lines):
        if not (_is_numpy_header(lines, i) and lines[i].strip().lower() in _NUMPY_PARAM_HEADERS):
            i += 1
            continue
        base = _indent(lines[i])
        i += 2
        names: list[str] = []
        while i < len(lines) and not _is_numpy_header(lines, i):
            line = lines[i]
            if line.strip() and _indent(line) <= base:
                head = line.split(":", 1)[0]
                names = [n.strip().lstrip("*") for n in head.split(",") if n.strip()]
                params.update(dict.fromkeys(names, ""))
            elif line.strip():
                for name in names:
                    params[name] = f"{params[name]} {line.strip()}".strip()
            i += 1
    return params


def _sphinx_params(lines: list[str]) -> dict[str, str]:
    """`:param [type] name: text` fields, continuation lines indented."""
    params: dict[str, str] = {}
    for i, line in enumerate(lines):
        match = _SPHINX_RE.fullmatch(line.strip())
        if not match:
            continue
        name = match.group(1).split()[-1].lstrip("*")
        rest = [b.strip() for b in _indented_block(lines, i + 1, _indent(line)) if b.strip()]
        params[name] = " ".join([match.group(2).strip(), *rest]).strip()
    return params
