"""Settings: one validated `Settings` from `toolrelay.toml` plus the environment.

Owns the shape of the configuration (every key, its default, its checks) and
`load_settings`, which picks the config file and turns every problem into one
`ConfigError` line naming the env var, or the file and key. Where values come
from, and in what order, is `config.sources`; the wording of errors is
`config.messages`; one `[[models]]` route's shape is `config.model_route`
(`ModelRoute`, re-exported here). Nothing here opens a socket or imports a tool:
`config.registry` turns settings into live objects.

To add a setting: add a field to `Settings` (or a table: a frozen `BaseModel`
with `extra="forbid"`, as `LimitsConfig`). The file key, `TOOLRELAY_<KEY>`
(`__` for nesting) and the error messages follow from the field.
"""

from __future__ import annotations

import os
import tomllib
from contextvars import ContextVar
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from toolrelay.config.access import AuthConfig, WebConfig
from toolrelay.config.budgets import BudgetsConfig
from toolrelay.config.code import CodeInterpreterConfig
from toolrelay.config.files import FilesConfig
from toolrelay.config.messages import describe
from toolrelay.config.model_route import LOCAL_ROUTE, ModelRoute
from toolrelay.config.sources import (
    CONFIG_ENV,
    ENV_PREFIX,
    ConfigFile,
    Fallbacks,
    PlainEnv,
    PrefixedEnv,
    Provenance,
)
from toolrelay.config.tool_servers import ToolServer
from toolrelay.engine.limits import RunLimits
from toolrelay.errors import ConfigError

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_CONFIG",
    "ConfigChoice",
    "ENV_PREFIX",
    "LOCAL_ROUTE",
    "LimitsConfig",
    "ModelRoute",
    "Settings",
    "TaskConfig",
    "TasksConfig",
    "load_settings",
]

DEFAULT_CONFIG = Path("toolrelay.toml")

_RUN_DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclass_fields(RunLimits)}


class LimitsConfig(BaseModel):
    """`RunLimits` as config (`CHAT_RESPONSE_MAX_TOOL_CALL_ITERATIONS` is a fallback source)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_iterations: int = _RUN_DEFAULTS["max_iterations"]
    on_cap: Literal["error", "final_answer"] = _RUN_DEFAULTS["on_cap"]
    repeat_warn: int = Field(default=_RUN_DEFAULTS["repeat_warn"], ge=1)
    repeat_stop: int | None = Field(default=None, ge=0)
    tool_timeout: float = Field(default=_RUN_DEFAULTS["tool_timeout"], gt=0)
    max_concurrency: int = Field(default=_RUN_DEFAULTS["max_concurrency"], ge=1)
    client_tool_timeout: float = Field(default=_RUN_DEFAULTS["client_tool_timeout"], gt=0)
    coalesce_ms: float = Field(default=_RUN_DEFAULTS["coalesce_ms"], ge=0)
    coalesce_chunks: int = Field(default=_RUN_DEFAULTS["coalesce_chunks"], ge=1)
    interpreter_retries: int = Field(default=_RUN_DEFAULTS["interpreter_retries"], ge=0)
    tool_result_max_bytes: int = Field(default=_RUN_DEFAULTS["tool_result_max_bytes"], ge=0)
    """Bytes of one tool result the model reads; longer ones are cut (the user gets the
    whole result from `GET /api/chats/{id}/outputs/{item_id}`). 0: no cap."""
    max_input_tokens: int | None = Field(default=None, ge=1)
    """A turn's budget (over all its model calls); reached, the turn ends `capped`."""
    max_output_tokens: int | None = Field(default=None, ge=1)
    max_total_tokens: int | None = Field(default=None, ge=1)
    max_cost: float | None = Field(default=None, gt=0)
    """In the unit of the routes' `prices` (or of the provider's reported `cost`)."""

    @field_validator("max_iterations")
    @classmethod
    def _positive_or_unbounded(cls, value: int) -> int:
        if value < -1 or value == 0:
            raise ValueError(f"must be a positive integer or -1 for no cap (got {value})")
        return value

    def to_run_limits(self) -> RunLimits:
        return RunLimits(**self.model_dump())


class TaskConfig(BaseModel):
    """One background task (`[tasks.title]`, `[tasks.tags]`, `[tasks.follow_ups]`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    model: str | None = Field(default=None, min_length=1)
    """The route this task runs on (`local`: the embedded model); unset: `task_model`."""
    prompt: str | None = Field(default=None, min_length=1)
    """The task's system prompt; it must ask for JSON (`{"title": …}`, `{"tags": […]}`,
    `{"follow_ups": […]}`). Unset: the built-in one."""
    prompt_file: Path | None = None
    """A file holding the prompt (UTF-8), relative to the config file's folder."""

    @model_validator(mode="after")
    def _one_prompt(self) -> TaskConfig:
        if self.prompt is not None and self.prompt_file is not None:
            raise ValueError("set prompt or prompt_file, not both")
        return self


class TasksConfig(BaseModel):
    """The background tasks after a chat turn (title, tags, follow-ups): on, route, prompt."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    title: TaskConfig = Field(default_factory=TaskConfig)
    tags: TaskConfig = Field(default_factory=TaskConfig)
    follow_ups: TaskConfig = Field(default_factory=TaskConfig)

    def routes(self) -> list[tuple[str, str]]:
        """(task, route) of each enabled task with a route of its own."""
        tasks = (("title", self.title), ("tags", self.tags), ("follow_ups", self.follow_ups))
        return [(name, t.model) for name, t in tasks if t.enabled and t.model is not None]


def _default_data_dir() -> Path:
    return Path.home() / ".toolrelay"


_FILE: ContextVar[Path | None] = ContextVar("toolrelay_config_file", default=None)
_PROVENANCE: ContextVar[Provenance | None] = ContextVar("toolrelay_provenance", default=None)


class Settings(BaseSettings):
    """Everything `toolrelay serve` is configured with (`config.sources`: precedence).

    `Settings(...)` reads the environment under its arguments; `load_settings`
    adds the config file and turns errors into `ConfigError`.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", frozen=True
    )

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    data_dir: Path = Field(default_factory=_default_data_dir)
    database_url: str = Field(default="", validate_default=True)
    """SQLAlchemy async URL; empty means SQLite under `data_dir`."""
    database_pool_size: int = Field(default=20, ge=1)
    """Database connections kept open (SQLite still writes through one writer)."""
    database_max_overflow: int = Field(default=30, ge=0)
    """Connections opened beyond the pool under load."""
    database_pool_timeout: float = Field(default=60.0, gt=0)
    """Seconds a query waits for a free connection before failing."""
    turn_lease_s: float = Field(default=30.0, gt=0)
    """A running turn's lock lasts this long past its last heartbeat (a dead worker's chat frees)."""
    checkpoint_s: float = Field(default=5.0, gt=0)
    """How often a running turn's partial output is saved (it survives a crash)."""
    max_resumes: int = Field(default=3, ge=0)
    """Times a turn whose server died is resumed from its checkpoint before it fails."""
    pause_timeout_s: float = Field(default=86400.0, ge=0)
    """How long a chat turn paused for an approval or a client tool's result waits for
    it (saved, holding nothing) before it ends failed; 0 waits for ever."""
    events_url: str | None = None
    """Where chats' event logs, turn leases and control messages live: None (or "memory")
    keeps them in this process; "ipc:///abs/path/bus.sock" reaches the `BusHost` at that
    Unix socket, which the parent of `serve --workers N` runs for the workers of one
    machine (no service needed); "redis://…" shares them through Redis, across machines."""
    events_retain_mb: float = Field(default=64.0, gt=0)
    """The most the event bus keeps of all chats' events, in MB: the in-process or machine
    bus (memory, ipc) in its process, Redis counted in Redis for every worker sharing its
    prefix; a finished turn's deltas are dropped after its final save anyway
    (docs/events.md)."""
    admin_key: str | None = Field(default=None, repr=False)
    session_secret: str | None = Field(default=None, repr=False)
    """Signs the web page's session cookies; unset: a random one kept in `data_dir`."""
    models: list[ModelRoute] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)
    builtin_tools: bool | list[str] = True
    """The built-in tools every route offers (`get_time`, `calculator`;
    `adapters.tools.builtin`): true for all, false for none, or a list of their names.
    A configured tool of the same name replaces a built-in one."""
    tool_servers: list[ToolServer] = Field(default_factory=list)
    """MCP servers, OpenAPI servers and tool files (`[[tool_servers]]`), started at start-up."""
    tool_probe_s: float = Field(default=5.0, ge=0)
    """At start-up, how long the server waits for its tool servers to start (all at once)
    before it serves; a slower one goes on starting and is logged when it answers.
    0: none is started before a turn needs it."""
    filters: list[str] = Field(default_factory=list)
    task_model: str | None = None
    """The route titles, tags and follow-ups run on (`local`: the embedded model, started
    for them even when routes are configured); unset: no task runs, a chat's first message
    is its title. `[tasks]` sets each task's own route and prompt."""
    tasks: TasksConfig = Field(default_factory=TasksConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    code_interpreter: CodeInterpreterConfig = Field(default_factory=CodeInterpreterConfig)
    max_body_bytes: int = Field(default=10 * 1024 * 1024, ge=1)
    body_timeout_s: float = Field(default=30.0, gt=0)
    """Longest wait for the rest of a request body (then 408)."""
    shutdown_grace_s: float = Field(default=10.0, ge=0)
    """At SIGTERM, how long running turns may go on before they are cancelled (and saved)."""
    keepalive_s: float = Field(default=10.0, gt=0)
    """A streamed /v1 answer silent this long (tools running) gets an SSE comment."""
    cors_origins: list[str] = Field(default_factory=list)
    auth: AuthConfig = Field(default_factory=AuthConfig)
    web: WebConfig = Field(default_factory=WebConfig)
    files: FilesConfig = Field(default_factory=FilesConfig)
    budgets: BudgetsConfig = Field(default_factory=BudgetsConfig)
    """Daily token and cost budgets per user and per API key (`server.budgets`)."""
    """Uploads (`POST /api/files`): sizes and types (`config.files`)."""
    record: Path | None = None
    """Every route's upstream exchanges written as fixtures here (a route's own `record`
    wins); `--record DIR` of `toolrelay serve` and `toolrelay chat`."""
    local: bool = True
    """With no model configured, serve the embedded model as route `local` (`config.local`)."""
    local_threads: int | None = Field(default=None, ge=1)
    """llama.cpp threads for the embedded model; unset: one fewer than the cores, at least 1."""
    local_ctx: int = Field(default=8192, ge=512)
    """The embedded model's context in tokens (shared by its two slots)."""
    local_model: Literal["0.5b", "1.5b"] = "0.5b"
    """Which embedded model: the 0.5B (the `[local]` extra) or, opt-in, the 1.5B (the
    `[local-1-5b]` extra: twice the disk and time per turn, a better tool-turn rate)."""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    log_format: Literal["pretty", "json"] = "pretty"
    metrics_port: int | None = Field(default=None, ge=0, le=65535)
    """`/metrics` on its own port with no key (bind it where only Prometheus reaches);
    unset: `/metrics` on the main port, for admin keys."""
    otel_endpoint: str | None = None
    """OTLP/HTTP endpoint for traces (the `otel` extra); unset: spans go to the process's
    tracer provider when one is set up (`opentelemetry-instrument`), else nowhere."""
    log_api_turns: bool = True
    """Save `/v1/*` turns as chats of the caller (listed and searched like any chat)."""
    api_turns_max_age_days: float | None = Field(default=None, gt=0)
    api_turns_max_count: int | None = Field(default=None, ge=1)
    """Retention of saved `/v1` turns: older ones, or all but the newest N, are deleted."""
    _file: Path | None = PrivateAttr(default=None)

    @property
    def config_file(self) -> Path | None:
        """The config file these settings were read from (`load_settings`), if any: the
        code interpreter hides it (it may hold `admin_key`)."""
        return self._file

    @field_validator("log_level", mode="before")
    @classmethod
    def _level_upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Arguments, then the sources `config.sources` describes, in its order."""
        seen = _PROVENANCE.get() or Provenance()
        return (
            init_settings,
            PrefixedEnv(settings_cls, seen),
            PlainEnv(settings_cls, seen),
            ConfigFile(settings_cls, _FILE.get(), seen),
            Fallbacks(settings_cls, seen),
        )

    @field_validator("data_dir")
    @classmethod
    def _expand_home(cls, value: Path) -> Path:
        return value.expanduser()

    @field_validator("database_url", mode="before")
    @classmethod
    def _database_url(cls, value: str | None, info: ValidationInfo) -> str:
        """Unset means SQLite under the data dir; PostgreSQL URLs get the asyncpg driver."""
        if value:
            return _async_db_url(str(value))
        data_dir = info.data.get("data_dir", _default_data_dir())
        return f"sqlite+aiosqlite:///{data_dir}/toolrelay.db"

    @field_validator("events_url")
    @classmethod
    def _events_url(cls, value: str | None) -> str | None:
        if value is None or value == "memory" or value.startswith(_BUS_SCHEMES):
            return value
        raise ValueError(
            "must be 'memory', an ipc:///abs/path.sock URL or a redis:// URL "
            f"(got {value.split(':')[0]!r}:…)"
        )

    @field_validator("models")
    @classmethod
    def _unique_names(cls, routes: list[ModelRoute]) -> list[ModelRoute]:
        seen: set[str] = set()
        for route in routes:
            if route.name in seen:
                raise ValueError(f"duplicate route name {route.name!r}")
            seen.add(route.name)
        return routes

    @field_validator("task_model")
    @classmethod
    def _known_route(cls, name: str | None, info: ValidationInfo) -> str | None:
        _check_route(name, info.data.get("models"))
        return name

    @field_validator("tasks")
    @classmethod
    def _known_task_routes(cls, tasks: TasksConfig, info: ValidationInfo) -> TasksConfig:
        for task, route in tasks.routes():
            try:
                _check_route(route, info.data.get("models"))
            except ValueError as exc:
                raise ValueError(f"{task}.model: {exc}") from None
        return tasks

    def task_routes(self) -> set[str]:
        """Every route a background task runs on."""
        names = {route for _, route in self.tasks.routes()}
        return names | ({self.task_model} if self.task_model else set())

    @property
    def route_names(self) -> list[str]:
        return [route.name for route in self.models]


def _check_route(name: str | None, routes: list[ModelRoute] | None) -> None:
    """A task's route is a configured one, or the embedded model's (`local`)."""
    if name is None or routes is None or name == LOCAL_ROUTE:
        return
    known = [route.name for route in routes]
    if name not in known:
        listed = ", ".join(repr(n) for n in known) or "none configured"
        raise ValueError(f"unknown route {name!r} (routes: {listed}, or 'local')")


_BUS_SCHEMES = ("redis://", "rediss://", "unix://", "ipc:///")
"""Redis URLs, and ipc:// with an absolute socket path."""
_DB_SCHEMES = {
    "postgresql://": "postgresql+asyncpg://",
    "postgres://": "postgresql+asyncpg://",
    "postgresql+asyncpg://": "postgresql+asyncpg://",
    "sqlite://": "sqlite+aiosqlite://",
    "sqlite+aiosqlite://": "sqlite+aiosqlite://",
}


def _async_db_url(url: str) -> str:
    """SQLAlchemy's async engine needs the async driver named in the URL."""
    for scheme, driver in _DB_SCHEMES.items():
        if url.startswith(scheme):
            return driver + url.removeprefix(scheme)
    scheme = url.split(":")[0]
    raise ValueError(f"must be a sqlite:// or postgresql:// URL (got {scheme!r}:…)")


ConfigChoice = Path | Literal[False] | None
"""`--config FILE` (a path), `--no-config` (False: the environment alone), or neither (None)."""


def load_settings(config: ConfigChoice = None) -> Settings:
    """Read the config file and the environment into `Settings` (module doc).

    `config` is the `--config` flag; without it `TOOLRELAY_CONFIG`, then
    `./toolrelay.toml` when it exists; `False` (`--no-config`) reads no file, so
    the flags stand alone. A named file that is missing is an error.
    """
    path = None if config is False else config if config is not None else _config_from_env()
    if path is not None and not path.is_file():
        reason = "config file not found" if not path.exists() else "not a file"
        raise ConfigError(f"{path}: {reason}")
    provenance = Provenance()
    file_token = _FILE.set(path)
    seen_token = _PROVENANCE.set(provenance)
    try:
        settings = Settings()
        settings._file = path.resolve() if path is not None else None
        return settings
    except ValidationError as exc:
        raise ConfigError(describe(exc, str(path or "settings"), provenance)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc}") from None
    finally:
        _FILE.reset(file_token)
        _PROVENANCE.reset(seen_token)


def _config_from_env() -> Path | None:
    named = os.environ.get(CONFIG_ENV, "").strip()
    if named:
        return Path(named)
    return DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None
