"""Server settings: one validated `Settings` from `toolrelay.toml` plus the environment.

Owns reading the config file (stdlib `tomllib`), reading `TOOLRELAY_*` env vars
(pydantic-settings, `__` for nesting), the plain-env conveniences
(`DATABASE_URL`, `REDIS_URL`, `OPENAI_*`, `OLLAMA_*`) and turning every
validation failure into one `ConfigError` that names where the bad value came
from: the file and key, or the env var.

Precedence, highest first: `TOOLRELAY_*` env vars, plain env conveniences,
the config file, defaults. `load_settings` takes the environment as a mapping
so tests never touch `os.environ`. Nothing here opens a socket or imports a
tool; `server.registry` turns settings into live objects.
"""

from __future__ import annotations

import logging
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

from toolrelay.engine.limits import RunLimits
from toolrelay.errors import ConfigError

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_CONFIG",
    "ENV_PREFIX",
    "LimitsConfig",
    "ModelRoute",
    "Settings",
    "load_settings",
]

log = logging.getLogger("toolrelay.server")

ENV_PREFIX = "TOOLRELAY_"
CONFIG_ENV = "TOOLRELAY_CONFIG"
DEFAULT_CONFIG = Path("toolrelay.toml")
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_OLLAMA_MODEL = "llama3.2"

_RUN_DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclass_fields(RunLimits)}


class ModelRoute(BaseModel):
    """A name clients send as `model`, and the upstream server and model it maps to."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    kind: Literal["openai-chat", "openai-responses", "ollama"] = "openai-chat"
    base_url: str
    model: str = Field(min_length=1)
    """Upstream model id; defaults to the route name."""
    api_key_env: str | None = None
    """Name of the env var holding the key, so the key never sits in the file."""
    api_key: str | None = Field(default=None, repr=False)
    """The key itself: local development only (a warning is logged)."""
    params: dict[str, Any] = Field(default_factory=dict)
    tools: list[str] | None = None
    """Tool names this route may use; None means every configured tool."""
    reasoning_replay: Literal["none", "reasoning_content", "think_tags"] = "none"
    stateful: bool = False

    @model_validator(mode="before")
    @classmethod
    def _model_defaults_to_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("model") and "name" in data:
            return {**data, "model": data["name"]}
        return data

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"must start with http:// or https:// (got {value!r})")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _options_fit_kind(self) -> ModelRoute:
        """Options a client class would silently ignore are mistakes; say so."""
        if self.api_key is not None and self.api_key_env is not None:
            raise ValueError("set api_key_env or api_key, not both")
        if self.stateful and self.kind != "openai-responses":
            raise ValueError("stateful is only for kind 'openai-responses'")
        if self.reasoning_replay != "none" and self.kind != "openai-chat":
            raise ValueError("reasoning_replay is only for kind 'openai-chat'")
        if self.api_key is not None:
            log.warning(
                "model route %r: api_key is set in the config; use api_key_env in production",
                self.name,
            )
        return self


class LimitsConfig(BaseModel):
    """`RunLimits` as config; `max_iterations` unset keeps its env-var default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_iterations: int | None = None
    on_cap: Literal["error", "final_answer"] = _RUN_DEFAULTS["on_cap"]
    repeat_warn: int = Field(default=_RUN_DEFAULTS["repeat_warn"], ge=1)
    repeat_stop: int | None = Field(default=None, ge=0)
    tool_timeout: float = Field(default=_RUN_DEFAULTS["tool_timeout"], gt=0)
    max_concurrency: int = Field(default=_RUN_DEFAULTS["max_concurrency"], ge=1)
    client_tool_timeout: float = Field(default=_RUN_DEFAULTS["client_tool_timeout"], gt=0)
    coalesce_ms: float = Field(default=_RUN_DEFAULTS["coalesce_ms"], ge=0)
    coalesce_chunks: int = Field(default=_RUN_DEFAULTS["coalesce_chunks"], ge=1)
    interpreter_retries: int = Field(default=_RUN_DEFAULTS["interpreter_retries"], ge=0)

    @field_validator("max_iterations")
    @classmethod
    def _positive_or_unbounded(cls, value: int | None) -> int | None:
        if value is not None and (value < -1 or value == 0):
            raise ValueError(f"must be a positive integer or -1 for no cap (got {value})")
        return value

    def to_run_limits(self) -> RunLimits:
        return RunLimits(**self.model_dump(exclude_none=True))


def _default_data_dir() -> Path:
    return Path.home() / ".toolrelay"


class Settings(BaseSettings):
    """Everything `toolrelay serve` is configured with (module doc: precedence)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", frozen=True
    )

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    data_dir: Path = Field(default_factory=_default_data_dir)
    database_url: str | None = None
    """Always set after validation: unset means SQLite under `data_dir`."""
    events_url: str | None = None
    """Redis URL for the event log; None keeps events in-process."""
    admin_key: str | None = Field(default=None, repr=False)
    models: list[ModelRoute] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)
    filters: list[str] = Field(default_factory=list)
    task_model: str | None = None
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    max_body_bytes: int = Field(default=10 * 1024 * 1024, ge=1)
    cors_origins: list[str] = Field(default_factory=list)

    @field_validator("data_dir")
    @classmethod
    def _expand_home(cls, value: Path) -> Path:
        return value.expanduser()

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
        routes: list[ModelRoute] | None = info.data.get("models")
        if name is None or routes is None:
            return name
        known = [route.name for route in routes]
        if name not in known:
            listed = ", ".join(repr(n) for n in known) or "none configured"
            raise ValueError(f"unknown route {name!r} (routes: {listed})")
        return name

    @model_validator(mode="after")
    def _default_database(self) -> Settings:
        url = self.database_url or f"sqlite+aiosqlite:///{self.data_dir}/toolrelay.db"
        object.__setattr__(self, "database_url", _async_db_url(url))
        return self

    @property
    def route_names(self) -> list[str]:
        return [route.name for route in self.models]


def _async_db_url(url: str) -> str:
    """SQLAlchemy's async engine needs the asyncpg driver named in the URL."""
    for scheme in ("postgresql://", "postgres://"):
        if url.startswith(scheme):
            return "postgresql+asyncpg://" + url.removeprefix(scheme)
    return url


class _MappingEnvSource(EnvSettingsSource):
    """pydantic-settings' env source over a given mapping instead of `os.environ`."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = env
        super().__init__(Settings)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {key.lower(): value for key, value in self._env.items()}


def load_settings(config: Path | None = None, *, env: Mapping[str, str] | None = None) -> Settings:
    """Read the config file and the environment into `Settings` (module doc).

    `config` is the `--config` flag; without it `TOOLRELAY_CONFIG`, then
    `./toolrelay.toml` when it exists. A named file that is missing is an error.
    """
    environ: Mapping[str, str] = os.environ if env is None else env
    path = config if config is not None else _config_from_env(environ)
    data = _read_toml(path) if path is not None else {}
    if path is not None:
        _resolve_paths(data, path.resolve().parent)
    overrides, origins = _env_values(environ)
    merged = _deep_merge(data, overrides)
    if not merged.get("models"):
        merged["models"] = _convenience_routes(environ)
    label = str(path) if path is not None else "settings"
    try:
        return Settings.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, label, origins)) from None


def _config_from_env(environ: Mapping[str, str]) -> Path | None:
    named = environ.get(CONFIG_ENV, "").strip()
    if named:
        return Path(named)
    return DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def _resolve_paths(data: dict[str, Any], base: Path) -> None:
    """Tool files and `file.py:attr` filters in the file are relative to its directory."""
    tools = data.get("tools")
    if isinstance(tools, list):
        data["tools"] = [_resolve_file(t, base) if isinstance(t, str) else t for t in tools]
    filters = data.get("filters")
    if isinstance(filters, list):
        data["filters"] = [_resolve_filter(f, base) if isinstance(f, str) else f for f in filters]


def is_file_ref(ref: str) -> bool:
    """A tool or filter source that names a file rather than an importable module."""
    return ref.endswith(".py") or "/" in ref or os.sep in ref


def _resolve_file(ref: str, base: Path) -> str:
    if not is_file_ref(ref):
        return ref
    return str(base / Path(ref).expanduser())


def _resolve_filter(ref: str, base: Path) -> str:
    if ref.startswith(("http://", "https://")):
        return ref
    target, sep, attr = ref.rpartition(":")
    if not sep or not is_file_ref(target):
        return ref
    return f"{_resolve_file(target, base)}:{attr}"


def _env_values(environ: Mapping[str, str]) -> tuple[dict[str, Any], dict[tuple[str, ...], str]]:
    """`TOOLRELAY_*` values (nested) plus plain-env fallbacks, and which var set which key."""
    try:
        values = dict(_MappingEnvSource(environ)())
    except SettingsError as exc:
        match = re.search(r'field "(\w+)"', str(exc))
        name = f"{ENV_PREFIX}{match.group(1).upper()}" if match else "environment"
        raise ConfigError(f"{name}: not valid JSON") from None
    origins = {
        tuple(key[len(ENV_PREFIX) :].lower().split("__")): key
        for key in environ
        if key.upper().startswith(ENV_PREFIX) and key.upper() != CONFIG_ENV
    }
    for field, plain in (("database_url", "DATABASE_URL"), ("events_url", "REDIS_URL")):
        if field not in values and environ.get(plain):
            values[field] = environ[plain]
            origins[(field,)] = plain
    return values, origins


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _convenience_routes(environ: Mapping[str, str]) -> list[dict[str, Any]]:
    """Routes from `OPENAI_*` / `OLLAMA_*` when neither file nor env configures any."""
    routes: list[dict[str, Any]] = []
    if environ.get("OPENAI_BASE_URL") or environ.get("OPENAI_API_KEY"):
        model = environ.get("OPENAI_MODEL") or DEFAULT_OPENAI_MODEL
        routes.append(
            {
                "name": model,
                "kind": "openai-chat",
                "base_url": environ.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_BASE_URL,
                "model": model,
                "api_key_env": "OPENAI_API_KEY" if environ.get("OPENAI_API_KEY") else None,
            }
        )
    if environ.get("OLLAMA_BASE_URL"):
        model = environ.get("OLLAMA_MODEL") or DEFAULT_OLLAMA_MODEL
        routes.append(
            {
                "name": model,
                "kind": "ollama",
                "base_url": environ["OLLAMA_BASE_URL"],
                "model": model,
            }
        )
    return routes


def _describe(exc: ValidationError, label: str, origins: Mapping[tuple[str, ...], str]) -> str:
    """One line per problem: `where: key: what`, the env var standing in for file+key."""
    return "\n".join(_describe_one(err, label, origins) for err in exc.errors())


def _describe_one(err: ErrorDetails, label: str, origins: Mapping[tuple[str, ...], str]) -> str:
    loc = tuple(str(part) for part in err["loc"])
    message = _message(err)
    names = tuple(p for p in loc if not p.isdigit())
    var = _origin(names, origins)
    if var is not None:
        var_key, var_name = var
        if var_key == names:
            return f"{var_name}: {message}"
        return f"{var_name}: {_key_path(err['loc'])}: {message}"
    if not loc:
        return f"{label}: {message}"
    return f"{label}: {_key_path(err['loc'])}: {message}"


def _origin(
    names: tuple[str, ...], origins: Mapping[tuple[str, ...], str]
) -> tuple[tuple[str, ...], str] | None:
    """The env var that set this key or a table above it (longest match)."""
    best: tuple[tuple[str, ...], str] | None = None
    for key, var in origins.items():
        if names[: len(key)] == key and (best is None or len(key) > len(best[0])):
            best = (key, var)
    return best


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
