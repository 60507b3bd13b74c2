"""Tool calls between the model's output and the tool itself (SPEC R6, R8).

Owns: splitting arguments that hold several JSON values back to back into
separate calls; parsing arguments (JSON, then a guarded Python literal) into
a dict or one of the two fixed error texts the model is shown; dropping keys
a tool did not declare; validating against the tool's JSON Schema with a
message the model can act on; the canonical JSON stored in the item.

Must not: run tools, look tools up, or do any I/O. `eval` is never used;
`ast.literal_eval` only sees bounded input.
"""

from __future__ import annotations

import ast
import json
import math
import threading
import warnings
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import orjson
from jsonschema import exceptions as jsonschema_exceptions
from jsonschema import validators as jsonschema_validators

from toolrelay.core.ids import new_id

_Call = TypeVar("_Call", bound=Mapping[str, Any])
"""A function_call item, typed (`FunctionCallItem`) or a raw dict: kept as it came."""

__all__ = [
    "ArgumentsError",
    "ParsedArguments",
    "canonical_arguments",
    "filter_to_schema",
    "malformed_arguments_text",
    "not_an_object_text",
    "parse_arguments",
    "split_calls",
    "split_concatenated",
    "validate_arguments",
]

MAX_LITERAL_CHARS = 200_000
"""Longer arguments are not handed to `ast.literal_eval` (its AST costs memory)."""

MAX_LITERAL_DEPTH = 100
"""Deeper Python-literal values are rejected rather than recursed into."""

_MAX_SCHEMA_ERRORS = 10
_MAX_ERROR_CHARS = 200
_VALIDATOR_CACHE_SIZE = 128


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)
"""Strict about `NaN`/`Infinity`: a piece the split keeps must be JSON."""


# ---------------------------------------------------------------- R6: splitting


def split_concatenated(arguments: str) -> list[str]:
    """Split `{"a":1}{"b":2}` into its JSON objects; anything else comes back whole.

    Successive raw decoding with any Unicode whitespace (`str.isspace`: U+2028,
    a no-break space as well as JSON's four) allowed between objects. Only a run
    of objects splits (R6; Open WebUI also splits `1 2`, `[1][2]`, `"a""b"`): a
    single value, blank text, a non-object piece, trailing garbage or truncated
    JSON all return `[arguments]` unchanged, so splitting never loses or invents text.
    """
    if arguments.__class__ is not str:
        return [arguments]
    pieces: list[str] = []
    pos, end = 0, len(arguments)
    while True:
        while pos < end and arguments[pos].isspace():
            pos += 1
        if pos >= end:
            break
        if arguments[pos] != "{":
            return [arguments]
        try:
            _, stop = _DECODER.raw_decode(arguments, pos)
        except (ValueError, RecursionError, MemoryError):
            return [arguments]
        pieces.append(arguments[pos:stop])
        pos = stop
    return pieces if len(pieces) >= 2 else [arguments]


def split_calls(calls: Sequence[_Call]) -> list[_Call]:
    """Replace each call holding several argument values by one call per value.

    The replacements get new `call_id`s and item ids and the original is
    dropped, so no call is left without an output (DESIGN §6). Calls that do
    not split are returned as the same objects.
    """
    out: list[_Call] = []
    for call in calls:
        arguments = call.get("arguments")
        pieces = split_concatenated(arguments) if isinstance(arguments, str) else []
        if len(pieces) < 2:
            out.append(call)
            continue
        for piece in pieces:
            new_call = {**call, "id": new_id("fc"), "call_id": new_id("call"), "arguments": piece}
            out.append(cast(_Call, new_call))  # the same kind of call, new ids and arguments
    return out


# ---------------------------------------------------------------- R8: parsing


@dataclass(frozen=True, slots=True)
class ParsedArguments:
    """Arguments that parsed to a JSON object, and their canonical JSON text."""

    value: dict[str, Any]
    canonical: str


@dataclass(frozen=True, slots=True)
class ArgumentsError:
    """Arguments that cannot be used; `message` is the tool result the model sees."""

    message: str


def malformed_arguments_text(name: str) -> str:
    """SPEC R8's text for arguments neither JSON nor a Python literal could read."""
    return (
        "Error: Tool call arguments could not be parsed. The model generated "
        f"malformed or incomplete JSON for `{name}`. Please try again."
    )


def not_an_object_text(name: str) -> str:
    """SPEC R8's text for arguments that parsed to something other than an object."""
    return f"Error: Tool call arguments for `{name}` must be a JSON object. Please try again."


class _NotJsonable(Exception):
    """A Python-literal value with no JSON form (bytes, complex, Ellipsis, too deep)."""


def parse_arguments(name: str, raw: str | None) -> ParsedArguments | ArgumentsError:
    """JSON first, then a Python literal (models write `{'a': True}`); blank means `{}`."""
    if raw is None or not raw.strip():
        return ParsedArguments({}, "{}")
    try:
        value: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            value = _literal(raw)
        except _NotJsonable:
            return ArgumentsError(malformed_arguments_text(name))
    if not isinstance(value, dict):
        return ArgumentsError(not_an_object_text(name))
    try:
        canonical = canonical_arguments(value)
    except orjson.JSONEncodeError:  # e.g. a lone surrogate from a Python escape
        return ArgumentsError(malformed_arguments_text(name))
    return ParsedArguments(value, canonical)


def _literal(raw: str) -> Any:
    """`ast.literal_eval` on bounded input, converted to JSON-able values."""
    if len(raw) > MAX_LITERAL_CHARS:
        raise _NotJsonable
    try:
        value = ast.literal_eval(raw.strip())
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError, OverflowError) as exc:
        raise _NotJsonable from exc
    return _jsonable(value, 0)


def _jsonable(value: Any, depth: int) -> Any:
    """Tuples and sets become lists, dict keys become JSON keys; bytes and the like fail."""
    if depth > MAX_LITERAL_DEPTH:
        raise _NotJsonable
    if value is None or isinstance(value, str | bool):
        return value
    if isinstance(value, int):  # beyond 64 bits: a float, as the JSON path (orjson) gives
        return value if -(2**63) <= value < 2**64 else _finite(float(value))
    if isinstance(value, float):
        return _finite(value)
    if isinstance(value, dict):
        return {_json_key(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v, depth + 1) for v in value]
    if isinstance(value, set | frozenset):
        return [_jsonable(v, depth + 1) for v in _stable_order(value)]
    raise _NotJsonable


def _finite(value: float) -> float:
    """JSON has no NaN or infinity; `1e400` in a literal is unreadable, not `null`."""
    if math.isfinite(value):
        return value
    raise _NotJsonable


def _json_key(key: Any) -> str:
    """The key JSON would write: `1` → "1", `True` → "true", `None` → "null"."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(key)
    raise _NotJsonable


def _stable_order(values: set[Any] | frozenset[Any]) -> list[Any]:
    """Sorted when comparable, so the same set always gives the same list."""
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=repr)


def canonical_arguments(args: dict[str, Any]) -> str:
    """Compact JSON, key order kept: what the stored `function_call` item carries."""
    return orjson.dumps(args).decode()


# ---------------------------------------------------------------- R8: schema


def filter_to_schema(args: dict[str, Any], parameters: Mapping[str, Any] | None) -> dict[str, Any]:
    """Keep only keys the tool declares in `parameters.properties`.

    No `properties` mapping at all means the schema says nothing about
    keys, so `args` comes back unchanged; an empty `properties` drops all.
    """
    properties = parameters.get("properties") if parameters is not None else None
    if not isinstance(properties, Mapping):
        return args
    return {k: v for k, v in args.items() if k in properties}


class _ValidatorCache:
    """A small LRU of compiled validators keyed by the schema object's identity.

    The schema itself is kept alongside, so its `id` cannot be reused by
    another object while the entry lives; an identity check guards anyway.
    `None` is cached for schemas that are themselves invalid.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[int, tuple[Mapping[str, Any], Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, schema: Mapping[str, Any]) -> Any:
        key = id(schema)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] is schema:
                self._entries.move_to_end(key)
                return entry[1]
        validator = _compile(schema)
        with self._lock:
            self._entries[key] = (schema, validator)
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return validator

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def _compile(schema: Mapping[str, Any]) -> Any:
    """A validator for `schema` (draft from its `$schema`, 2020-12 by default), or None."""
    as_dict = dict(schema)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # unknown `$schema` URIs warn
            cls = jsonschema_validators.validator_for(
                as_dict, default=jsonschema_validators.Draft202012Validator
            )
            cls.check_schema(as_dict)
            return cls(as_dict)
    except (jsonschema_exceptions.SchemaError, TypeError, ValueError, LookupError):
        return None


_VALIDATORS = _ValidatorCache(_VALIDATOR_CACHE_SIZE)


def validate_arguments(
    name: str, args: dict[str, Any], parameters: Mapping[str, Any] | None
) -> str | None:
    """None when `args` fit the tool's schema, else one message naming each problem.

    A schema that is itself broken (or cannot be resolved) skips validation:
    a tool author's mistake must not block the model.
    """
    if not parameters:
        return None
    validator = _VALIDATORS.get(parameters)
    if validator is None:
        return None
    try:
        errors = sorted(
            validator.iter_errors(args),
            key=lambda e: (len(e.absolute_path), e.json_path, e.message),
        )
    except Exception:  # unresolvable $ref and similar schema faults
        return None
    if not errors:
        return None
    problems = [_describe(e) for e in errors[:_MAX_SCHEMA_ERRORS]]
    if len(errors) > _MAX_SCHEMA_ERRORS:
        problems.append(f"and {len(errors) - _MAX_SCHEMA_ERRORS} more")
    return (
        f"Error: Invalid arguments for `{name}`: {'; '.join(problems)}. Please fix and try again."
    )


def _describe(error: Any) -> str:
    """One problem: its message, prefixed by its JSON path unless at the root."""
    message = str(error.message)
    if len(message) > _MAX_ERROR_CHARS:
        message = message[: _MAX_ERROR_CHARS - 1] + "…"
    path = str(error.json_path)
    return message if path == "$" else f"at {path}: {message}"
