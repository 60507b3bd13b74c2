"""Open WebUI tool and filter files, loaded as they are.

Owns what such a file expects from its host: the front-matter docstring
(`title`, `author`, `version`, `requirements` …), `Valves` (values from our
config per file) and `UserValves` (per user, set through the API), the
reserved parameters (`__user__` with its `valves`, `__event_emitter__`,
`__event_call__`, `__metadata__`, `__files__`, `__messages__`, `__model__`,
`__request__`, `__tools__`, `__task__`, `__task_body__`, `__oauth_token__`
(None: no OAuth here), `__id__`; docs/tools.md says what each holds), events
mapped to ours (`citation` → `source`; `status`, `message`, `notification`
keep their names), `self.citation` (True: each result becomes a source).
Filters: `inlet`, `stream`, `outlet`, ordered by `valves.priority`, and a
`toggle` filter runs only when the request names it in `filter_ids`;
`StreamFiltered` wraps a model client so `stream` sees every SSE chunk.

It does not install a file's `requirements`: they must already be importable.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from toolrelay.adapters.tools.loader import import_tool_file
from toolrelay.adapters.tools.python import PythonTool
from toolrelay.core import events as ev
from toolrelay.core.tools.results import normalise_result
from toolrelay.engine.interfaces import Tool, ToolContext
from toolrelay.errors import ConfigError, ToolError

__all__ = ["OpenWebUIFilter", "OpenWebUITools", "StreamFiltered", "front_matter", "load_filters"]

UserValvesLoader = Callable[[str], Awaitable[Mapping[str, Any] | None]]
"""A user id to their stored `UserValves` values (None: never set)."""

_FIELD = re.compile(r"^\s*([A-Za-z_][\w ]*?)\s*:\s*(.*?)\s*$")
_EVENT_NAMES = {"citation": ev.SOURCE, "source": ev.SOURCE}


def front_matter(doc: str | None) -> dict[str, str]:
    """`key: value` lines of a module docstring (Open WebUI's plugin metadata)."""
    out: dict[str, str] = {}
    for line in (doc or "").splitlines():
        match = _FIELD.match(line)
        if match:
            out[match.group(1).strip().lower()] = match.group(2)
    return out


def _valves(owner: Any, cls_name: str, values: Mapping[str, Any] | None, where: str) -> Any:
    cls = getattr(type(owner), cls_name, None)
    if cls is None:
        return None
    try:
        return cls(**dict(values or {}))
    except Exception as exc:
        raise ConfigError(f"{where}: invalid {cls_name}: {_problems(exc)}") from None


def _problems(exc: Exception) -> str:
    """What is wrong, by field, never the values given (a valve may hold a secret)."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return type(exc).__name__
    try:
        found = errors(include_input=False, include_url=False)
    except TypeError:
        return type(exc).__name__
    return "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in found)


class _Host:
    """What a tool or filter instance gets from us: valves, user valves, reserved params."""

    def __init__(self, path: str | Path, kind: str, valves: Mapping[str, Any] | None) -> None:
        self.path = str(path)
        module = import_tool_file(path)
        cls = getattr(module, kind, None)
        if not isinstance(cls, type):
            raise ConfigError(f"{self.path!r} has no `class {kind}`")
        self.id = Path(path).stem
        self.meta = front_matter(module.__doc__)
        try:
            self.instance = cls()
        except Exception as exc:
            raise ConfigError(f"{self.path!r}: {kind}() failed: {exc}") from exc
        configured = _valves(self.instance, "Valves", valves, self.path)
        if configured is not None:
            self.instance.valves = configured
        self.user_valves: dict[str, dict[str, Any]] = {}

    def set_user_valves(self, user_id: str, values: Mapping[str, Any]) -> None:
        """A user's own valve values (checked now, so a bad value fails here, not mid-turn)."""
        self.check_user_valves(values)
        self.user_valves[user_id] = dict(values)

    def check_user_valves(self, values: Mapping[str, Any]) -> None:
        """`ConfigError` (naming fields, never values) unless the file's `UserValves` takes them."""
        _valves(self.instance, "UserValves", values, self.path)

    def user(self, user: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """`__user__` as Open WebUI passes it: the user plus a `valves` model."""
        if user is None:
            return None
        values = self.user_valves.get(str(user.get("id")), {})
        found = _valves(self.instance, "UserValves", values, self.path)
        return {**user, "valves": found} if found is not None else dict(user)

    def extras(self, context: ToolContext, emitter: Any) -> dict[str, Any]:
        """Every reserved parameter by name; a method gets the ones it declares."""
        metadata = dict(context.metadata)
        return {
            "__user__": self.user(context.user),
            "__event_emitter__": emitter,
            "__event_call__": context.event_call,
            "__metadata__": metadata,
            "__files__": list(context.files),
            "__messages__": list(context.messages),
            "__model__": context.model if context.model is not None else metadata.get("model"),
            "__request__": context.request,
            "__tools__": context.tools,
            "__task__": metadata.get("task"),
            "__task_body__": metadata.get("task_body"),
            "__oauth_token__": None,
            "__id__": self.id,
            "__chat_id__": context.chat_id,
            "__message_id__": context.message_id,
        }


def _mapped_emitter(emit: Any) -> Any:
    """Open WebUI event types → ours (`citation` → `source`)."""
    if emit is None:
        return None

    async def send(event: Mapping[str, Any]) -> None:
        kind = str(event.get("type", "status"))
        await emit({"type": _EVENT_NAMES.get(kind, kind), "data": event.get("data") or {}})

    return send


class OpenWebUITools:
    """An Open WebUI tool file (`class Tools`) as a tool source."""

    kind = "python"

    def __init__(self, path: str | Path, *, valves: Mapping[str, Any] | None = None) -> None:
        self.host = _Host(path, "Tools", valves)
        self._user_valves_loader: UserValvesLoader | None = None
        self.name = self.host.meta.get("title") or self.host.id
        self.citation = bool(getattr(self.host.instance, "citation", False))
        self.tools: list[Tool] = []
        self._methods: dict[str, PythonTool] = {}
        for attr, raw in vars(type(self.host.instance)).items():
            if attr.startswith("_") or not (
                inspect.isfunction(raw) or isinstance(raw, staticmethod)
            ):
                continue
            method = PythonTool(getattr(self.host.instance, attr))
            self._methods[attr] = method
            self.tools.append(_OwuiTool(method, self))

    @property
    def valves(self) -> Any:
        return getattr(self.host.instance, "valves", None)

    def set_user_valves(self, user_id: str, values: Mapping[str, Any]) -> None:
        self.host.set_user_valves(user_id, values)

    def check_user_valves(self, values: Mapping[str, Any]) -> None:
        self.host.check_user_valves(values)

    def read_user_valves_from(self, loader: UserValvesLoader) -> None:
        """Where a user's values live (the server's store: every worker, every restart);
        read at each call, so a value set on one worker is seen by all."""
        self._user_valves_loader = loader

    async def _load_user_valves(self, context: ToolContext) -> None:
        loader = self._user_valves_loader
        user_id = str((context.user or {}).get("id") or "")
        if loader is None or not user_id:
            return
        found = await loader(user_id)
        if found is not None:
            self.host.user_valves[user_id] = dict(found)

    async def list(self) -> Sequence[Tool]:
        return self.tools

    async def call(self, name: str, arguments: dict[str, Any], context: ToolContext) -> Any:
        method = self._methods.get(name)
        if method is None:
            raise ToolError(f'Tool "{name}" not found.')
        emitter = _mapped_emitter(context.event_emitter)
        args, kwargs = method.bind(arguments, context)
        await self._load_user_valves(context)
        extras = self.host.extras(context, emitter)
        kwargs.update({k: extras[k] for k in method.context_params if k in extras})
        if inspect.iscoroutinefunction(method.fn):
            result = await method.fn(*args, **kwargs)
        else:  # a sync method in a thread: it never stalls the loop, a timeout ends the wait
            result = await asyncio.to_thread(method.fn, *args, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        if self.citation and emitter is not None:
            await emitter(_citation(f"TOOL:{self.host.id}/{name}", arguments, result))
        return result

    async def aclose(self) -> None:
        return None


class _OwuiTool:
    __slots__ = ("method", "source")

    def __init__(self, method: PythonTool, source: OpenWebUITools) -> None:
        self.method = method
        self.source = source

    @property
    def spec(self) -> Any:
        return self.method.spec

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        return await self.source.call(self.method.spec.name, arguments, context)


def _citation(name: str, arguments: Mapping[str, Any], result: Any) -> dict[str, Any]:
    text = normalise_result(result).text or ""
    return {
        "type": "citation",
        "data": {
            "source": {"name": name},
            "document": [text],
            "metadata": [{"source": name, "parameters": dict(arguments)}],
        },
    }


class OpenWebUIFilter:
    """An Open WebUI filter file (`class Filter`): `inlet`, `stream`, `outlet`."""

    def __init__(self, path: str | Path, *, valves: Mapping[str, Any] | None = None) -> None:
        self.host = _Host(path, "Filter", valves)
        self.id = self.host.id
        self.name = self.host.meta.get("title") or self.id
        self.toggle = bool(getattr(self.host.instance, "toggle", False))

    @property
    def priority(self) -> int:
        value = getattr(getattr(self.host.instance, "valves", None), "priority", 0)
        return value if isinstance(value, int) else 0

    def set_user_valves(self, user_id: str, values: Mapping[str, Any]) -> None:
        self.host.set_user_valves(user_id, values)

    def enabled(self, body: Mapping[str, Any]) -> bool:
        """A toggle filter runs only when the request turns it on (`filter_ids`)."""
        if not self.toggle:
            return True
        ids = body.get("filter_ids") or (body.get("metadata") or {}).get("filter_ids") or ()
        return self.id in ids

    async def inlet(
        self, body: dict[str, Any], user: Mapping[str, Any] | None = None, **extra: Any
    ) -> dict[str, Any]:
        return await self._run("inlet", body, user, extra)

    async def outlet(
        self, body: dict[str, Any], user: Mapping[str, Any] | None = None, **extra: Any
    ) -> dict[str, Any]:
        return await self._run("outlet", body, user, extra)

    async def stream(self, event: dict[str, Any]) -> dict[str, Any]:
        """One streamed chunk through the filter's `stream` (unchanged when it has none)."""
        method = getattr(self.host.instance, "stream", None)
        if not callable(method):
            return event
        result = await _maybe_await(method(event))
        return result if isinstance(result, dict) else event

    async def _run(
        self,
        which: str,
        body: dict[str, Any],
        user: Mapping[str, Any] | None,
        extra: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """`extra`: the host's reserved parameters (`engine.filters.run_inlets`)."""
        method = getattr(self.host.instance, which, None)
        if not callable(method) or not self.enabled(body):
            return body
        given = dict(extra or {})
        metadata = given.get("__metadata__") or body.get("metadata") or {}
        context = ToolContext(
            user=user,
            metadata=dict(metadata),
            messages=list(body.get("messages") or []),
            chat_id=body.get("chat_id") or metadata.get("chat_id"),
            message_id=metadata.get("message_id"),
            model=given.get("__model__"),
            request=given.get("__request__"),
        )
        extras = self.host.extras(context, given.get("__event_emitter__"))
        extras.update(
            {k: v for k, v in given.items() if k in ("__task__", "__task_body__", "__tools__")}
        )
        params = inspect.signature(method).parameters
        kwargs = {k: v for k, v in extras.items() if k in params}
        result = await _maybe_await(method(body, **kwargs))
        return result if isinstance(result, dict) else body


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def load_filters(
    paths: Sequence[str | Path], valves: Mapping[str, Mapping[str, Any]] | None = None
) -> list[OpenWebUIFilter]:
    """Filter files in priority order (lowest first, as Open WebUI runs them); stable for ties."""
    filters = [OpenWebUIFilter(p, valves=(valves or {}).get(Path(p).stem)) for p in paths]
    return sorted(filters, key=lambda f: f.priority)


class StreamFiltered:
    """A model client whose SSE chunks pass through filters' `stream(event)` (Open WebUI's
    per-chunk hook): `Relay(StreamFiltered(model, filters), filters=filters)`.

    Only `data:` lines of SSE bodies are touched; NDJSON and JSON bodies pass as they are.
    """

    def __init__(self, model: Any, filters: Sequence[Any]) -> None:
        self.model = model
        self.filters = [f for f in filters if callable(getattr(f, "stream", None))]

    async def open(self, request: Any) -> Any:
        stream = await self.model.open(request)
        if not self.filters or stream.format != "sse":
            return stream
        return _FilteredStream(stream, self.filters)

    async def aclose(self) -> None:
        await self.model.aclose()


class _FilteredStream:
    def __init__(self, inner: Any, filters: Sequence[Any]) -> None:
        self.inner = inner
        self.format = inner.format
        self.filters = filters

    def __aiter__(self) -> Any:
        return self._lines()

    async def _lines(self) -> Any:
        buffer = b""
        async for piece in self.inner:
            buffer += piece
            *lines, buffer = buffer.split(b"\n")
            if lines:
                yield b"".join([await self._line(line) + b"\n" for line in lines])
        if buffer:
            yield await self._line(buffer)

    async def _line(self, line: bytes) -> bytes:
        body = line.rstrip(b"\r")
        if not body.startswith(b"data:") or body[5:].strip() == b"[DONE]":
            return line
        try:
            event = orjson.loads(body[5:])
        except orjson.JSONDecodeError:
            return line
        for f in self.filters:
            changed = await _maybe_await(f.stream(event))
            event = changed if isinstance(changed, dict) else event
        return b"data: " + orjson.dumps(event)

    async def aclose(self) -> None:
        await self.inner.aclose()
