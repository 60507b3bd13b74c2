"""Python functions as tools: the `@tool` decorator and `PythonTool`.

Owns turning a plain (sync or async) function into a `Tool`: the JSON schema
of its parameters (from type hints, through pydantic), its description and
per-parameter docs (from the docstring, read by `docstrings`), the
validation of the model's arguments, and the injection of the context
parameters it declares (`__messages__`, `__user__` … SPEC R9).

It does not decide timeouts, concurrency or approval (the runner does; the
flags given here only travel in the `ToolSpec`), and it never turns a tool's
exception into a result: that is the runner's job too.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from toolrelay.adapters.tools.docstrings import parse_docstring
from toolrelay.engine.interfaces import ToolContext, ToolSpec
from toolrelay.errors import ToolError

__all__ = ["CONTEXT_PARAMS", "PythonTool", "tool"]

CONTEXT_PARAMS: Mapping[str, str] = {
    "__messages__": "messages",
    "__files__": "files",
    "__user__": "user",
    "__metadata__": "metadata",
    "__chat_id__": "chat_id",
    "__message_id__": "message_id",
    "__event_emitter__": "event_emitter",
    "__event_call__": "event_call",
    "__model__": "model",
    "__request__": "request",
    "__tools__": "tools",
}
"""Declared parameter name → `ToolContext` attribute it is filled from."""

_NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What OpenAI-style APIs accept as a function name."""


# --------------------------------------------------------------------------
# Schemas

_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties"})
_SCHEMA_LISTS = frozenset({"anyOf", "allOf", "oneOf", "prefixItems"})
_SCHEMA_ONES = frozenset({"items", "additionalProperties", "not", "contains"})


def _strip_titles(node: Any) -> Any:
    """Drop pydantic's generated `title`s; only schema positions are walked,
    so a property *named* `title` or a default holding one survives."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: _strip_titles(v) for k, v in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_strip_titles(v) for v in value]
        elif key in _SCHEMA_ONES:
            out[key] = _strip_titles(value)
        else:
            out[key] = value
    return out


class _RecursiveRef(Exception):
    """A `$ref` that refers to itself: cannot be inlined."""


def _inline_refs(node: Any, defs: Mapping[str, Any], seen: frozenset[str]) -> Any:
    """Replace `#/$defs/X` references by their definition: several model
    providers do not resolve `$ref`, and tool schemas are small."""
    if isinstance(node, list):
        return [_inline_refs(v, defs, seen) for v in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        key = ref.removeprefix("#/$defs/")
        if key in seen or key not in defs:
            raise _RecursiveRef(key)
        target = _inline_refs(defs[key], defs, seen | {key})
        rest = {k: _inline_refs(v, defs, seen) for k, v in node.items() if k != "$ref"}
        return {**target, **rest}
    return {k: _inline_refs(v, defs, seen) for k, v in node.items()}


def _parameters_schema(model: type[BaseModel]) -> dict[str, Any]:
    """`{"type": "object", "properties": …, "required": […]}` for an argument model."""
    raw = _strip_titles(model.model_json_schema())
    defs: dict[str, Any] = raw.get("$defs", {})
    properties = raw.get("properties", {})
    try:
        properties = _inline_refs(properties, defs, frozenset())
        defs = {}
    except _RecursiveRef:
        pass
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": list(raw.get("required", [])),
    }
    if defs:
        schema["$defs"] = defs
    return schema


def _is_context_param(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


@dataclass(frozen=True, slots=True)
class _Signature:
    """What `call` needs to rebuild a Python call from validated arguments."""

    model: type[BaseModel]
    fields: tuple[tuple[str, str, bool], ...]
    """(field name in the model, parameter name, positional-only)."""
    context: tuple[str, ...]
    var_keyword: bool


def _analyse(fn: Callable[..., Any], name: str, docs: Mapping[str, str]) -> _Signature:
    """Build the pydantic argument model from the function's signature.

    Fields get neutral names (`p0`, `p1` …) with the parameter name as alias,
    so parameters called `json`, `schema` or `_x` cannot clash with pydantic.
    """
    try:
        sig = inspect.signature(fn, eval_str=True)
    except (NameError, TypeError, ValueError) as exc:
        raise TypeError(f"tool {name!r}: cannot read its signature: {exc}") from exc
    definitions: dict[str, Any] = {}
    fields: list[tuple[str, str, bool]] = []
    context: list[str] = []
    var_keyword = False
    for param in sig.parameters.values():
        if param.kind is param.VAR_KEYWORD:
            var_keyword = True
        elif param.kind is param.VAR_POSITIONAL:
            continue
        elif _is_context_param(param.name):
            context.append(param.name)
        else:
            key = f"p{len(fields)}"
            annotation = Any if param.annotation is param.empty else param.annotation
            default = ... if param.default is param.empty else param.default
            doc = docs.get(param.name)
            info = (  # no description=None: it would hide an Annotated[..., Field(description=…)]
                Field(default, alias=param.name)
                if doc is None
                else Field(default, alias=param.name, description=doc)
            )
            definitions[key] = (annotation, info)
            fields.append((key, param.name, param.kind is param.POSITIONAL_ONLY))
    config = ConfigDict(extra="allow" if var_keyword else "ignore")
    model = create_model(f"{name}_arguments", __config__=config, **definitions)
    return _Signature(model, tuple(fields), tuple(context), var_keyword)


def _is_async(fn: Callable[..., Any]) -> bool:
    call = getattr(fn, "__call__", None)  # noqa: B004 - async callable objects count too
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)


def _format_errors(name: str, error: ValidationError) -> str:
    problems = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        problems.append(f"{where}: {item['msg']}")
    return f"Invalid arguments for tool {name!r}: " + "; ".join(problems)


# --------------------------------------------------------------------------
# The tool


class PythonTool:
    """A Python function the model can call; still callable like the function."""

    spec: ToolSpec
    fn: Callable[..., Any]
    context_params: frozenset[str]
    __name__: str  # set by functools.update_wrapper, like the rest of the function's metadata

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
        sequential: bool = False,
        requires_approval: bool = False,
        inline: bool = False,
        idempotent: bool = False,
    ) -> None:
        tool_name: str = name or str(getattr(fn, "__name__", ""))
        if not _NAME_RE.fullmatch(tool_name):
            raise ValueError(f"tool name {tool_name!r} must match [A-Za-z0-9_-]{{1,64}}")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"tool {tool_name!r}: timeout must be positive, got {timeout}")
        docs = parse_docstring(inspect.getdoc(fn))
        self.fn = fn
        self._sig = _analyse(fn, tool_name, docs.params)
        self._async = _is_async(fn)
        self._inline = inline
        self.context_params = frozenset(self._sig.context)
        self.spec = ToolSpec(
            name=tool_name,
            description=docs.description if description is None else description,
            parameters=_parameters_schema(self._sig.model),
            timeout=timeout,
            sequential=sequential,
            requires_approval=requires_approval,
            idempotent=idempotent,
            filter_arguments=not self._sig.var_keyword,
            validates_arguments=True,
        )
        functools.update_wrapper(self, fn)

    def __repr__(self) -> str:
        return f"<PythonTool {self.spec.name}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def bind(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> tuple[list[Any], dict[str, Any]]:
        """Validate (lax: `"3"` → 3) and add the context parameters the function declares."""
        try:
            validated = self._sig.model.model_validate(dict(arguments))
        except ValidationError as exc:
            raise ToolError(_format_errors(self.spec.name, exc)) from exc
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for key, param, positional in self._sig.fields:
            value = getattr(validated, key)
            if positional:
                args.append(value)
            else:
                kwargs[param] = value
        for extra, value in (validated.model_extra or {}).items():
            if not _is_context_param(extra):
                kwargs[extra] = value
        for param in self._sig.context:
            attr = CONTEXT_PARAMS.get(param)
            kwargs[param] = getattr(context, attr) if attr else None
        return args, kwargs

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        """Run the function; a sync one runs in a worker thread unless `inline`.

        The thread keeps a blocking tool from stalling every other turn; the hop
        costs a few hundred µs, so a quick pure function may ask to run inline.
        Cancelling the caller returns at once: the thread cannot be stopped and
        is left to finish on its own, its result dropped.
        """
        args, kwargs = self.bind(arguments, context)
        if self._async:
            result = await self.fn(*args, **kwargs)
        elif self._inline:
            result = self.fn(*args, **kwargs)
        else:
            result = await asyncio.to_thread(self.fn, *args, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result


@overload
def tool(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    sequential: bool = False,
    requires_approval: bool = False,
    inline: bool = False,
    idempotent: bool = False,
) -> PythonTool: ...


@overload
def tool(
    fn: None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    sequential: bool = False,
    requires_approval: bool = False,
    inline: bool = False,
    idempotent: bool = False,
) -> Callable[[Callable[..., Any]], PythonTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    sequential: bool = False,
    requires_approval: bool = False,
    inline: bool = False,
    idempotent: bool = False,
) -> PythonTool | Callable[[Callable[..., Any]], PythonTool]:
    """Make a function a tool; use as `@tool` or `@tool(name=…, timeout=…)`.

    `inline=True` runs a sync function on the event loop instead of a worker
    thread: only for quick functions that never block. `idempotent=True` says a
    second run with the same arguments changes nothing more: a call cut by a
    stopped server is then run again when its turn resumes (docs/reliability.md).
    """

    def wrap(func: Callable[..., Any]) -> PythonTool:
        return PythonTool(
            func,
            name=name,
            description=description,
            timeout=timeout,
            sequential=sequential,
            requires_approval=requires_approval,
            inline=inline,
            idempotent=idempotent,
        )

    return wrap if fn is None else wrap(fn)
