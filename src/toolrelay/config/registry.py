"""Registry: `Settings` turned into live objects — model clients, tools, filters, limits.

Owns picking the client class for each route, reading API keys from the
environment (once, when the registry is built), importing tool files and
modules, and importing filters (`module:attr`, `file.py:attr`, or an
`http(s)://` pipeline outlet URL). Every failure is a `ConfigError` naming
the route, file or env var, so `toolrelay serve` stops before it listens.

No server code here: the server and the CLI ask `client_for(route)` /
`tools_for(route)`. A new kind of model API gets its client class in
`adapters/models` and one case in `_client`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolrelay.adapters.http.record import Recorder
from toolrelay.adapters.models import Ollama, OpenAIChat, OpenAIResponses
from toolrelay.adapters.pipelines import HttpOutlet
from toolrelay.adapters.tools import load_tools_from_file, load_tools_from_module
from toolrelay.adapters.tools.builtin import BUILTIN, BUILTIN_SOURCE, BuiltinTools
from toolrelay.adapters.user_code import import_user_file, import_user_module
from toolrelay.config.code import build_code_runner
from toolrelay.config.route_http import http_options
from toolrelay.config.settings import ModelRoute, Settings
from toolrelay.config.sources import is_file_ref
from toolrelay.config.tasks import TaskSetup, task_setup
from toolrelay.config.tool_servers import build_source
from toolrelay.engine.code_tool import CODE_TOOL_DESCRIPTION, CODE_TOOL_NAME
from toolrelay.engine.context_fit import ContextWindow
from toolrelay.engine.interfaces import ModelClient, Tool, ToolSource, tools_by_name
from toolrelay.engine.limits import RunLimits
from toolrelay.engine.tasks import TASK_NAMES, BackgroundTask
from toolrelay.engine.toolbox import CheckedTools, Toolbox, ToolInfo, ToolSubset
from toolrelay.errors import ConfigError

__all__ = ["Registry", "build_registry", "builtin_source", "setup_hint"]

_FILTER_MODULE_PREFIX = "toolrelay_user_filters"

log = logging.getLogger("toolrelay.config")


@dataclass
class Registry:
    """The live objects one server process uses; close with `aclose`."""

    routes: dict[str, ModelRoute]
    tools: dict[str, Tool]
    filters: list[Any]
    limits: RunLimits
    task_model: str | None = None
    clients: dict[str, ModelClient] = field(default_factory=dict, repr=False)
    """One client per route, built by `build_registry` (their connection pools are lazy)."""
    sources: dict[str, ToolSource] = field(default_factory=dict)
    """`[[tool_servers]]` by name: one live source each, shared by every turn."""
    builtin: ToolSource | None = None
    """The built-in tools (`builtin_tools`), offered after every other; None when off."""
    code_runner: Any = None
    """The code interpreter (`[code_interpreter]`), shared by every turn; None when off."""
    code_users: str = "admins"
    """Who may run code besides admins: `admins` (nobody else) or `everyone`."""
    background: TaskSetup | None = None
    """`[tasks]`: each background task's route and prompt; None: all three on `task_model`."""
    record: Path | None = None
    """The settings' `record`: where routes without their own write their exchanges."""
    toolbox: Toolbox = field(init=False, repr=False)
    """Every tool and source: what `GET /api/tools` and `toolrelay tools list` show."""
    _route_tools: dict[str, CheckedTools] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.toolbox = Toolbox(self.tools.values(), self.all_sources())
        if self.background is None:
            self.background = TaskSetup(dict.fromkeys(TASK_NAMES, self.task_model))

    def all_sources(self) -> list[ToolSource]:
        """Every source as a view a turn may close: the tool servers, then the built-ins."""
        views: list[ToolSource] = [ToolSubset(s) for s in self.sources.values()]
        return views if self.builtin is None else [*views, ToolSubset(self.builtin)]

    def client_for(self, route: str) -> ModelClient:
        """The cached client of a route; `KeyError` for a name no route has."""
        try:
            return self.clients[route]
        except KeyError:
            raise KeyError(f"unknown model {route!r}") from None

    def tools_for(self, route: str) -> CheckedTools:
        """What a route may offer the model: its `tools` list (tool or server names), or all.

        Sources are handed out as views, so closing a turn's `Relay` never stops a
        shared server; a name that is neither a tool nor a server picks that tool
        out of the servers' lists. Built and checked once per route: every turn's
        `Relay` reuses it (and its toolbox) as is.
        """
        checked = self._route_tools.get(route)
        if checked is None:
            checked = self._route_tools[route] = CheckedTools(self._chosen(route))
        return checked

    def _chosen(self, route: str) -> list[Tool | ToolSource]:
        names = self.routes[route].tools
        if names is None:
            return [*self.tools.values(), *self.all_sources()]
        chosen: list[Tool | ToolSource] = [self.tools[n] for n in names if n in self.tools]
        chosen += [ToolSubset(self.sources[n]) for n in names if n in self.sources]
        if self.builtin is not None and BUILTIN_SOURCE in names:
            chosen.append(ToolSubset(self.builtin))
        rest = [n for n in names if n not in self.tools and n not in self.sources]
        if rest:
            chosen += [ToolSubset(s, rest) for s in self.sources.values()]
            if self.builtin is not None and BUILTIN_SOURCE not in names:
                chosen.append(ToolSubset(self.builtin, rest))
        return chosen

    def add_route(self, route: ModelRoute, *, env: Mapping[str, str] | None = None) -> None:
        """A route known only after the registry was built (the embedded model's port)."""
        if route.name in self.routes:
            raise ConfigError(f"model route {route.name!r} is already configured")
        client = _client(route, os.environ if env is None else env, self.record)
        self.routes[route.name] = route
        filtered = _filtered({route.name: client}, self.filters)
        self.clients[route.name] = _windowed(filtered, {route.name: route})[route.name]

    @property
    def task_client(self) -> ModelClient | None:
        """The client of `task_model`; None when unset or not served (the embedded model
        missing its extra): those tasks do not run."""
        return None if self.task_model is None else self.clients.get(self.task_model)

    def background_tasks(self) -> tuple[BackgroundTask, ...]:
        """The enabled background tasks, each on its own route's client (`config.tasks`)."""
        assert self.background is not None  # set in __post_init__
        return self.background.tasks(self.clients)

    async def describe_tools(self) -> list[ToolInfo]:
        """Every tool a turn may be offered, for `GET /api/tools` and `toolrelay tools list`:
        the toolbox's, and `execute_code` while the code interpreter is on (it is built per
        turn, for the users `code_users` names, so the toolbox does not hold it)."""
        infos = await self.toolbox.describe()
        if self.code_runner is not None:
            who = "everyone" if self.code_users == "everyone" else "admins"
            infos.append(
                ToolInfo(CODE_TOOL_NAME, CODE_TOOL_DESCRIPTION, f"code_interpreter ({who})", "ok")
            )
        return infos

    async def aclose(self) -> None:
        """Close every client, tool server (no child process left) and pooled filter."""
        for client in self.clients.values():
            await client.aclose()
        for source in self.sources.values():
            try:
                await source.aclose()
            except Exception as exc:
                log.warning("closing tool server %r failed: %s", source.name, exc)
        for item in self.filters:
            close = getattr(item, "aclose", None)
            if callable(close):
                await close()
        if self.code_runner is not None:  # every kernel stops with the server
            await self.code_runner.aclose()


def build_registry(
    settings: Settings, *, env: Mapping[str, str] | None = None, clients: bool = True
) -> Registry:
    """Build clients, load tools and filters; `env` stands in for `os.environ` (API keys).

    `clients=False` builds no model client, so no route's API key is needed: listing
    tools (`toolrelay tools list`) talks to no model.
    """
    environ: Mapping[str, str] = os.environ if env is None else env
    tools = _load_tools(settings.tools)
    sources = _load_sources(settings)
    routes = {route.name: route for route in settings.models}
    builtin = builtin_source(settings.builtin_tools)
    offered = {*tools, *sources, *([BUILTIN_SOURCE, *BUILTIN] if builtin is not None else [])}
    for index, route in enumerate(settings.models):
        unknown = [name for name in route.tools or [] if name not in offered]
        if unknown and not sources:  # with servers, a name may be one of their tools
            raise ConfigError(f"models[{index}].tools: unknown tool {unknown[0]!r}")
    routed = settings.models if clients else []
    built = {route.name: _client(route, environ, settings.record) for route in routed}
    filters = _by_priority([_load_filter(ref) for ref in settings.filters])
    return Registry(
        routes=routes,
        tools=tools,
        filters=filters,
        limits=settings.limits.to_run_limits(),
        task_model=settings.task_model,
        background=task_setup(settings),
        clients=_windowed(_filtered(built, filters), routes),
        sources=sources,
        builtin=builtin,
        code_runner=build_code_runner(
            settings.code_interpreter, settings.data_dir, settings.config_file
        ),
        code_users=settings.code_interpreter.users,
        record=settings.record,
    )


def _filtered(clients: dict[str, ModelClient], filters: list[Any]) -> dict[str, ModelClient]:
    """Clients wrapped so Open WebUI `stream` filters see every delta, when any has one."""
    if not any(callable(getattr(f, "stream", None)) for f in filters):
        return clients
    from toolrelay.adapters.tools.owui import StreamFiltered

    return {name: StreamFiltered(c, filters) for name, c in clients.items()}


def _windowed(
    clients: dict[str, ModelClient], routes: Mapping[str, ModelRoute]
) -> dict[str, ModelClient]:
    """Clients of routes with `context_tokens` say so (`engine.context_fit.ContextWindow`)."""
    windowed: dict[str, ModelClient] = {}
    for name, client in clients.items():
        tokens = routes[name].context_tokens
        windowed[name] = client if tokens is None else ContextWindow(client, tokens)
    return windowed


def builtin_source(choice: bool | list[str]) -> ToolSource | None:
    """`builtin_tools`: all (true), none (false, or an empty list), or the ones named."""
    if choice is False or choice == []:
        return None
    return BuiltinTools(None if choice is True else choice)


def _load_sources(settings: Settings) -> dict[str, ToolSource]:
    """One source per `[[tool_servers]]` entry; names must be unique."""
    sources: dict[str, ToolSource] = {}
    for index, server in enumerate(settings.tool_servers):
        if server.name in sources:
            raise ConfigError(f"tool_servers[{index}]: name {server.name!r} is used twice")
        if server.name == BUILTIN_SOURCE:
            raise ConfigError(f"tool_servers[{index}]: the name {server.name!r} is reserved")
        sources[server.name] = build_source(server)
    return sources


def _api_key(route: ModelRoute, environ: Mapping[str, str]) -> str | None:
    if route.api_key_env is None:
        if route.api_key is not None:
            log.warning(
                "model route %r: api_key is set in the config; use api_key_env in production",
                route.name,
            )
        return route.api_key
    key = environ.get(route.api_key_env)
    if not key:
        raise ConfigError(
            f"model route {route.name!r}: env var {route.api_key_env} (api_key_env) is not set"
        )
    return key


def _client(
    route: ModelRoute, environ: Mapping[str, str], record: Path | None = None
) -> ModelClient:
    """The client class for the route's API, configured from the route (`record`: the
    settings' recording directory, when the route names none)."""
    key = _api_key(route, environ)
    directory = route.record or record
    recorder = (
        None
        if directory is None
        else Recorder(directory, secrets=[key or ""], secret_fields=route.record_scrub)
    )
    http = http_options(route.timeouts, route.retries, route.max_response_bytes, recorder)
    if route.kind == "openai-responses":
        return OpenAIResponses(
            base_url=route.base_url,
            model=route.model,
            api_key=key,
            params=route.params,
            stateful=route.stateful,
            http=http,
        )
    if route.kind == "ollama":
        return Ollama(
            base_url=route.base_url,
            model=route.model,
            api_key=key,
            params=route.params,
            reasoning_replay=route.reasoning_replay,
            http=http,
        )
    return OpenAIChat(
        base_url=route.base_url,
        model=route.model,
        api_key=key,
        params=route.params,
        reasoning_replay=route.reasoning_replay,
        http=http,
    )


def _load_tools(refs: list[str]) -> dict[str, Tool]:
    """Every tool of every file/module; a name defined twice is an error naming both."""
    return tools_by_name(
        (ref, load_tools_from_file(ref) if is_file_ref(ref) else load_tools_from_module(ref))
        for ref in refs
    )


def _load_filter(ref: str) -> Any:
    """A filter object from `module:attr`, `file.py:attr` or a pipeline outlet URL."""
    if ref.startswith(("http://", "https://")):
        return HttpOutlet(ref)
    target, sep, attr = ref.rpartition(":")
    if not sep or not target or not attr:
        raise ConfigError(f"filters: {ref!r} must be 'module:attr', 'file.py:attr' or a URL")
    label = f"filters: {ref!r}"
    if is_file_ref(target) and attr == "Filter":
        from toolrelay.adapters.tools.owui import OpenWebUIFilter

        try:
            return OpenWebUIFilter(target)  # valves, user valves, priority, toggle, reserved params
        except ConfigError as exc:
            raise ConfigError(f"{label}: {exc}") from None
    if is_file_ref(target):
        module = import_user_file(target, label=label, prefix=_FILTER_MODULE_PREFIX)
    else:
        module = import_user_module(target, label=label)
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"filters: {ref!r}: {target!r} has no attribute {attr!r}") from None
    if isinstance(obj, type):
        obj = _instantiate(obj, ref)
    if not any(callable(getattr(obj, m, None)) for m in ("inlet", "outlet")):
        raise ConfigError(f"filters: {ref!r} has neither inlet nor outlet")
    return obj


def _by_priority(filters: list[Any]) -> list[Any]:
    """Open WebUI's order: lowest `valves.priority` first; ties keep the config's order."""

    def priority(item: Any) -> int:
        value = getattr(item, "priority", None)
        if not isinstance(value, int):
            value = getattr(getattr(item, "valves", None), "priority", 0)
        return value if isinstance(value, int) else 0

    return sorted(filters, key=priority)


def _instantiate(cls: type, ref: str) -> Any:
    """Open WebUI style: a `class Filter` whose instance has inlet/outlet methods."""
    try:
        return cls()
    except Exception as exc:
        raise ConfigError(
            f"filters: {ref!r} cannot be created: {type(exc).__name__}: {exc}"
        ) from exc


_HINT = """\
No model is configured, so toolrelay has nothing to relay to. Add one of:

  1. An OpenAI-compatible server, through env vars:
       OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=sk-... toolrelay serve
     (OPENAI_MODEL picks the model; default gpt-4o-mini)

  2. A local Ollama:
       OLLAMA_BASE_URL=http://localhost:11434 OLLAMA_MODEL=llama3.2 toolrelay serve

  3. A toolrelay.toml (or --config PATH / TOOLRELAY_CONFIG) with a [[models]] table:
       [[models]]
       name = "gpt"                          # what clients send as `model`
       base_url = "https://api.openai.com/v1"
       model = "gpt-4o-mini"                 # the upstream model id
       api_key_env = "OPENAI_API_KEY"        # the env var holding the key
"""


def setup_hint() -> str:
    """What `GET /` and the startup log say when no model is configured."""
    return _HINT
