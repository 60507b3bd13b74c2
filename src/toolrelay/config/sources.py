"""Where settings values come from: pydantic-settings sources, plus who set what.

Owns the sources `Settings.settings_customise_sources` returns, highest
priority first (pydantic-settings deep-merges them, so a nested env var
replaces one key of a file's table, not the table):

1. `TOOLRELAY_*` env vars (`__` for nesting; JSON for lists and tables),
2. the plain names other tools use: `DATABASE_URL`, `REDIS_URL`,
3. the config file (`TomlConfigSettingsSource`; relative tool and filter
   files resolve against the file's directory),
4. fallbacks that apply only when nothing above sets the key: routes from
   `OPENAI_*` / `OLLAMA_*` (their HTTP options from `*_TIMEOUTS`, `*_RETRIES`,
   `*_MAX_RESPONSE_BYTES`), and `CHAT_RESPONSE_MAX_TOOL_CALL_ITERATIONS`,
5. the fields' defaults.

Every source also notes in a shared `Provenance` which keys it set and
under what name (an env var or the file), so an error can name the place a
value came from. To add a plain env name, add it to `PLAIN_ENV`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pydantic.fields import FieldInfo
from pydantic_settings import (
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    TomlConfigSettingsSource,
)

from toolrelay.errors import ConfigError

if TYPE_CHECKING:
    from pydantic_settings import BaseSettings

__all__ = [
    "CONFIG_ENV",
    "ENV_MAX_ITERATIONS",
    "ENV_PREFIX",
    "PLAIN_ENV",
    "FILE",
    "ConfigFile",
    "Fallbacks",
    "Origin",
    "PlainEnv",
    "PrefixedEnv",
    "Provenance",
    "is_file_ref",
]

ENV_PREFIX = "TOOLRELAY_"
CONFIG_ENV = "TOOLRELAY_CONFIG"
ENV_MAX_ITERATIONS = "CHAT_RESPONSE_MAX_TOOL_CALL_ITERATIONS"
PLAIN_ENV: Mapping[str, str] = {"DATABASE_URL": "database_url", "REDIS_URL": "events_url"}
"""Plain env names other tools use, and the setting each stands for."""

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_OLLAMA_MODEL = "llama3.2"


PREFIXED, PLAIN, FILE, FALLBACK = 1, 2, 3, 4
"""Ranks of the sources in `Provenance`: a lower rank won the merge."""


@dataclass(frozen=True, slots=True)
class Origin:
    """A source that set `key` (and everything under it), by `name`."""

    rank: int
    key: tuple[str, ...]
    name: str
    """The env var, or the config file's path."""


@dataclass
class Provenance:
    """Which source set which key, so an error can say where a value came from."""

    origins: list[Origin] = field(default_factory=list)

    def note(self, rank: int, key: tuple[str, ...], name: str) -> None:
        self.origins.append(Origin(rank, key, name))

    def origin(self, names: tuple[str, ...]) -> Origin | None:
        """The winning source for this key or a table above it (the longest key of that source)."""
        found = [o for o in self.origins if names[: len(o.key)] == o.key]
        return min(found, key=lambda o: (o.rank, -len(o.key)), default=None)


class PrefixedEnv(EnvSettingsSource):
    """pydantic-settings' env source; a bad JSON value names its variable."""

    def __init__(self, settings_cls: type[BaseSettings], provenance: Provenance) -> None:
        super().__init__(settings_cls)
        for var in os.environ:
            upper = var.upper()
            if upper.startswith(ENV_PREFIX) and upper != CONFIG_ENV:
                path = tuple(upper[len(ENV_PREFIX) :].lower().split("__"))
                provenance.note(PREFIXED, path, var)

    def decode_complex_value(self, field_name: str, field: FieldInfo, value: Any) -> Any:
        try:
            return super().decode_complex_value(field_name, field, value)
        except ValueError:
            raise ConfigError(f"{ENV_PREFIX}{field_name.upper()}: not valid JSON") from None


class _DerivedSource(PydanticBaseSettingsSource):
    """A source that builds its whole dict in `__call__` and records where values came from."""

    def __init__(self, settings_cls: type[BaseSettings], provenance: Provenance) -> None:
        super().__init__(settings_cls)
        self.provenance = provenance

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False


class PlainEnv(_DerivedSource):
    """`DATABASE_URL` and `REDIS_URL` (`PLAIN_ENV`), below their `TOOLRELAY_*` names."""

    def __call__(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for var, key in PLAIN_ENV.items():
            if os.environ.get(var):
                values[key] = os.environ[var]
                self.provenance.note(PLAIN, (key,), var)
        return values


class ConfigFile(TomlConfigSettingsSource):
    """The TOML file; tool and filter files in it are relative to its directory."""

    def __init__(
        self, settings_cls: type[BaseSettings], path: Path | None, provenance: Provenance
    ) -> None:
        super().__init__(settings_cls, toml_file=path)
        self.path = path
        self.provenance = provenance

    def __call__(self) -> dict[str, Any]:
        data = dict(super().__call__())
        if self.path is None:
            return data
        for key in data:
            self.provenance.note(FILE, (key,), str(self.path))
        base = self.path.resolve().parent
        for key, resolve in (("tools", _resolve_file), ("filters", _resolve_filter)):
            refs = data.get(key)
            if isinstance(refs, list):
                data[key] = [resolve(r, base) if isinstance(r, str) else r for r in refs]
        servers = data.get("tool_servers")
        if isinstance(servers, list):
            data["tool_servers"] = [_resolve_server(s, base) for s in servers]
        return data


class Fallbacks(_DerivedSource):
    """Routes from `OPENAI_*` / `OLLAMA_*` and the iteration cap from its Open WebUI name."""

    def __call__(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        routes = _convenience_routes(os.environ)
        if routes:
            values["models"] = routes
            names = [var for var in ("OPENAI_BASE_URL", "OLLAMA_BASE_URL") if os.environ.get(var)]
            self.provenance.note(FALLBACK, ("models",), " / ".join(names) or "OPENAI_API_KEY")
            for route in routes:
                for key, var in route.pop("_from", {}).items():
                    self.provenance.note(FALLBACK, ("models", key), var)
        cap = os.environ.get(ENV_MAX_ITERATIONS, "").strip()
        if cap:
            values["limits"] = {"max_iterations": cap}
            self.provenance.note(FALLBACK, ("limits", "max_iterations"), ENV_MAX_ITERATIONS)
        return values


def _convenience_routes(environ: Mapping[str, str]) -> list[dict[str, Any]]:
    routes: list[dict[str, Any]] = []
    if environ.get("OPENAI_BASE_URL") or environ.get("OPENAI_API_KEY"):
        model = environ.get("OPENAI_MODEL") or DEFAULT_OPENAI_MODEL
        route = {
            "name": model,
            "kind": "openai-chat",
            "base_url": environ.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_BASE_URL,
            "model": model,
            "api_key_env": "OPENAI_API_KEY" if environ.get("OPENAI_API_KEY") else None,
        }
        routes.append(_with_http_options(route, "OPENAI_", environ))
    if environ.get("OLLAMA_BASE_URL"):
        model = environ.get("OLLAMA_MODEL") or DEFAULT_OLLAMA_MODEL
        route = {
            "name": model,
            "kind": "ollama",
            "base_url": environ["OLLAMA_BASE_URL"],
            "model": model,
        }
        routes.append(_with_http_options(route, "OLLAMA_", environ))
    return routes


ROUTE_HTTP_ENV: Final = {"TIMEOUTS": "timeouts", "RETRIES": "retries"}
"""`<PREFIX>TIMEOUTS` / `<PREFIX>RETRIES`: a JSON table each (`config.route_http`)."""


def _with_http_options(
    route: dict[str, Any], prefix: str, environ: Mapping[str, str]
) -> dict[str, Any]:
    """The route's `timeouts`, `retries` and `max_response_bytes` from `<prefix>*` vars;
    `_from` notes which var set which key (taken out by `Fallbacks`)."""
    named: dict[str, str] = {}
    for suffix, key in ROUTE_HTTP_ENV.items():
        var = prefix + suffix
        raw = environ.get(var, "").strip()
        if not raw:
            continue
        try:
            route[key] = json.loads(raw)
        except ValueError:
            raise ConfigError(
                f'{var}: not valid JSON (a table like {{"first_byte": 600}})'
            ) from None
        named[key] = var
    var = prefix + "MAX_RESPONSE_BYTES"
    if environ.get(var, "").strip():
        route["max_response_bytes"] = environ[var].strip()
        named["max_response_bytes"] = var
    route["_from"] = named
    return route


def is_file_ref(ref: str) -> bool:
    """A tool or filter source that names a file rather than an importable module."""
    return ref.endswith(".py") or "/" in ref or os.sep in ref


def _resolve_file(ref: str, base: Path) -> str:
    if not is_file_ref(ref):
        return ref
    return str(base / Path(ref).expanduser())


def _resolve_server(server: Any, base: Path) -> Any:
    """A `[[tool_servers]]` table's `path` and `cwd` are relative to the config file."""
    if not isinstance(server, dict):
        return server
    out = dict(server)
    for key in ("path", "cwd"):
        if isinstance(out.get(key), str):
            out[key] = str(base / Path(out[key]).expanduser())
    return out


def _resolve_filter(ref: str, base: Path) -> str:
    if ref.startswith(("http://", "https://")):
        return ref
    target, sep, attr = ref.rpartition(":")
    if not sep or not is_file_ref(target):
        return ref
    return f"{_resolve_file(target, base)}:{attr}"
