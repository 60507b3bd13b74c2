"""The lines `toolrelay serve` logs once it is up: what it serves, from where, and where to look.

Routes (name, kind, upstream model and host), tools, the built-in tools, tool servers with their
status (started at start-up by `server.tool_probe`) and tool counts, the filters
and the code interpreter when they are on (both change every turn: an operator
must see them), the store, the bus and the URL to open. Secrets stay out: a
URL's password is masked here and again by the log's redactor.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator, Mapping, Sequence

from toolrelay.config.registry import Registry
from toolrelay.config.settings import Settings
from toolrelay.engine.toolbox import SourceStatus
from toolrelay.server.logs import fields
from toolrelay.server.tool_probe import log_status

__all__ = ["config_secrets", "log_startup", "safe_url"]

log = logging.getLogger("toolrelay.server")

_USERINFO = re.compile(r"(://)[^/@]*@")


def safe_url(url: str | None) -> str:
    """A URL without its user and password (`postgresql://***@host/db`)."""
    return _USERINFO.sub(r"\1***@", url) if url else "memory"


def log_startup(
    settings: Settings,
    registry: Registry,
    url: str,
    servers: Sequence[SourceStatus] | None = None,
) -> None:
    """`servers`: the tool servers as start-up found them (`server.tool_probe`); None:
    as the registry's toolbox knows them (not started)."""
    for route in registry.routes.values():
        log.info(
            "route %s",
            route.name,
            extra=fields(
                kind=route.kind, upstream_model=route.model, base_url=safe_url(route.base_url)
            ),
        )
    if registry.tools:
        log.info(
            "tools: %s", ", ".join(sorted(registry.tools)), extra=fields(count=len(registry.tools))
        )
    if registry.builtin is not None:
        names = [t.spec.name for t in getattr(registry.builtin, "tools", ())]
        log.info(
            "built-in tools: %s (builtin_tools)", ", ".join(names), extra=fields(count=len(names))
        )
    for status in registry.toolbox.status() if servers is None else servers:
        if registry.builtin is None or status.name != registry.builtin.name:
            log_status(status, waited=settings.tool_probe_s)
    if registry.filters:
        log.info(
            "filters: %s",
            ", ".join(settings.filters),
            extra=fields(count=len(registry.filters)),
        )
    if registry.code_runner is not None:
        code = settings.code_interpreter
        log.info(
            "code interpreter: on (%s engine, %s sandbox, network %s; runs code for %s)",
            code.engine,
            code.sandbox,
            "on" if code.network else "off",
            "everyone" if code.users == "everyone" else "admins only",
        )
    log.info("store: %s", safe_url(settings.database_url))
    log.info("event bus: %s", safe_url(settings.events_url))
    metrics = (
        f"port {settings.metrics_port}"
        if settings.metrics_port is not None
        else "/metrics (admin key)"
    )
    log.info("metrics: %s; health: /healthz, /readyz", metrics)
    log.info("toolrelay is up: open %s", url)


def config_secrets(settings: Settings, environ: Mapping[str, str] | None = None) -> Iterator[str]:
    """Every secret value the settings name, for the log's redactor: the admin key, the
    routes' API keys, tool servers' tokens, headers and env values, URL passwords."""
    env = os.environ if environ is None else environ
    if settings.admin_key:
        yield settings.admin_key
    for route in settings.models:
        if route.api_key:
            yield route.api_key
        if route.api_key_env and env.get(route.api_key_env):
            yield env[route.api_key_env]
    for server in settings.tool_servers:
        yield from server.headers.values()
        yield from server.env.values()
        for name in (server.bearer_token_env, server.auth_header_env):
            if name and env.get(name):
                yield env[name]
    for url in (settings.database_url, settings.events_url):
        match = re.search(r"://[^/@:]*:([^/@]+)@", url or "")
        if match:
            yield match.group(1)
