"""Validation errors as the lines an operator reads: `where: key: what`, one per problem.

`where` is the env var that set the key (or a table above it), else the
config file, else `settings`. Messages are pydantic's, reworded where
pydantic speaks of Python types (`must be a table`, not `dict_type`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import ValidationError

from toolrelay.config.sources import FILE, Provenance

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails  # pydantic's own: a type, nothing at run time

__all__ = ["describe"]


def describe(exc: ValidationError, label: str, provenance: Provenance) -> str:
    """One line per problem (module doc)."""
    return "\n".join(_describe_one(err, label, provenance) for err in exc.errors())


def _describe_one(err: ErrorDetails, label: str, provenance: Provenance) -> str:
    loc = err["loc"]
    message = _message(err)
    names = tuple(str(p) for p in loc if not isinstance(p, int))
    origin = provenance.origin(names) if names else None
    if origin is not None:
        if origin.rank != FILE and origin.key == names:  # an env var standing for this very key
            return f"{origin.name}: {message}"
        return f"{origin.name}: {_key_path(loc)}: {message}"
    if not loc:
        return f"{label}: {message}"
    return f"{label}: {_key_path(loc)}: {message}"


def _key_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


_PLAIN = {
    "int_parsing": "not a valid integer",
    "int_type": "not a valid integer",
    "int_from_float": "not a valid integer",
    "float_parsing": "not a valid number",
    "float_type": "not a valid number",
    "bool_parsing": "not a valid boolean",
    "bool_type": "not a valid boolean",
    "string_type": "must be a string",
    "list_type": "must be a list",
    "dict_type": "must be a table",
    "model_type": "must be a table",
    "missing": "required",
    "extra_forbidden": "unknown key",
}


def _message(err: ErrorDetails) -> str:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if kind == "literal_error":
        expected = str(ctx.get("expected", ""))
        head, sep, last = expected.rpartition(" or ")
        choices = f"{head}, {last}" if sep else expected
        return f"must be one of {choices} (got {err['input']!r})"
    if kind == "value_error":
        return str(ctx.get("error", err["msg"]))
    if kind in _PLAIN:
        return _PLAIN[kind]
    msg = err["msg"]
    return msg[:1].lower() + msg[1:]
