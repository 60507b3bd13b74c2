"""`toolrelay serve`: check everything that can be checked, then start the server.

Owns the start-up order that keeps every configuration problem to one line
and exit code 2: the server extra is installed, the settings load, the
drivers they name are installed, the data dir can be created, and the
registry (model clients, tools, filters, API keys from the environment) is
built. With no model configured, the embedded model (`config.local`) is
started next and added as route `local` (it stops after uvicorn does). Only
then is uvicorn started with that registry, or, with several workers (the
default: one per core), the parent reserves the port and starts them
(`server/processes/supervisor.py`), hosting their bus when no `events_url` names one.
This is the one CLI module that imports `toolrelay.server`, lazily, to start it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from toolrelay.cli.admin import ConfigPath, fail
from toolrelay.cli.extras import OTEL, SERVER, require, require_for_urls
from toolrelay.errors import ConfigError

if TYPE_CHECKING:
    from toolrelay.config import Settings
    from toolrelay.config.local import LocalModel
    from toolrelay.server.logs import Redactor

__all__ = ["serve"]


def serve(
    host: Annotated[str | None, typer.Option("--host", help="Default: the settings'.")] = None,
    port: Annotated[int | None, typer.Option("--port", help="Default: the settings'.")] = None,
    config: ConfigPath = None,
    no_local: Annotated[
        bool,
        typer.Option(
            "--no-local", help="Do not serve the embedded model when no model is configured."
        ),
    ] = False,
    log_level: Annotated[
        str | None,
        typer.Option("--log-level", help="DEBUG, INFO, WARNING, ERROR (or TOOLRELAY_LOG_LEVEL)."),
    ] = None,
    log_format: Annotated[
        Literal["pretty", "json"] | None,
        typer.Option("--log-format", help="pretty (a terminal) or json (one object a line)."),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            metavar="N",
            help="Server processes. Default: every core (1 with the embedded model or the "
            "code interpreter); they share events_url's bus, else one the parent hosts.",
        ),
    ] = None,
    record: Annotated[
        Path | None,
        typer.Option(
            "--record",
            metavar="DIR",
            help="Write every exchange with the model servers into DIR as test fixtures "
            "(secrets scrubbed; docs/development.md).",
        ),
    ] = None,
) -> None:
    """Run the HTTP server (OpenAI-compatible API, chat API, web page)."""
    from toolrelay.config import build_registry, load_settings
    from toolrelay.config.local import install_hint, not_installed, wants_local

    local: LocalModel | None = None
    try:
        require("toolrelay serve", "server", SERVER)
        settings = load_settings(config)
        settings = _with_flags(settings, host, port, log_level, log_format, record)
        require_for_urls(settings.database_url, settings.events_url)
        if settings.otel_endpoint:
            require("otel_endpoint", "otel", OTEL)
        _check_database(settings)  # before logging is set up: no migration's INFO lines
        redact = _configure_logs(settings)  # before the registry: its warnings formatted, masked
        _make_dir(settings.data_dir)
        registry = build_registry(settings)  # every configuration problem before the model loads
        from toolrelay.server.processes.workers import check_workers, default_workers

        missing = not_installed(settings) if wants_local(settings, enabled=not no_local) else None
        serves_local = missing == []
        count = workers if workers is not None else default_workers(settings, local=serves_local)
        check_workers(count, settings, local=serves_local)
        if serves_local:
            from toolrelay.cli.embedded import start_embedded

            settings, local = start_embedded(settings)
            redact.add([local.server.api_key])  # the private llama.cpp server's key
            registry.add_route(local.route())
    except ConfigError as exc:
        if local is not None:
            local.close()
        raise fail(str(exc)) from None

    import uvicorn

    from toolrelay.server.app import create_app

    if local is not None:  # what was done, and how to use a real model instead
        logging.getLogger("toolrelay.local").info("%s", local.describe())
    elif missing:
        logging.getLogger("toolrelay.local").warning("%s", install_hint(missing, settings))
    if count > 1:
        _serve_workers(settings, count)
        return
    try:
        _check_port(settings.host, settings.port)
        uvicorn.run(
            create_app(settings, registry=registry, tune_gc=True),
            host=settings.host,
            port=settings.port,
            log_config=None,  # uvicorn's lines go through toolrelay's handler (format, masking)
            log_level=settings.log_level.lower(),
        )
    finally:
        if local is not None:
            local.close()


def _check_port(host: str, port: int) -> None:
    """The port is free, or one `error:` line and exit 2 as with `--workers N` (uvicorn
    would log a traceback-less ERROR and exit 3). Bound as uvicorn binds (SO_REUSEADDR),
    then released for it; a process taking the port in between still fails there."""
    import socket

    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise fail(f"cannot listen on {host}:{port}: {exc.strerror}") from None


def _check_database(settings: Settings) -> None:
    """Open (and migrate) the database once before anything starts: one line if it
    cannot be used (`ConfigError`), before a model loads or a worker is spawned."""
    import asyncio

    from toolrelay.server.processes.workers import check_database

    _make_dir(settings.data_dir)
    asyncio.run(check_database(settings))


def _configure_logs(settings: Settings) -> Redactor:
    from toolrelay.server.logs import configure_logging
    from toolrelay.server.startup_log import config_secrets

    return configure_logging(
        settings.log_level, settings.log_format, secrets=config_secrets(settings)
    )


WORKER_HEALTHCHECK_S = 60
"""How long uvicorn's parent (the fallback without SO_REUSEPORT) waits for a worker to
answer its ping before killing it as hung. A spawned worker answers only once it has
imported uvicorn again; with uvicorn's 5 s default a loaded machine killed every worker
before that and spawned the next one, forever (seen: `--workers 2` never came up under a
loaded test suite). Our own supervisor kills no worker for being slow at all."""
BACKLOG = 2048
"""Each worker's listen backlog (uvicorn's default)."""


def _serve_workers(settings: Settings, count: int) -> None:
    """`count` worker processes on one port (`server/processes/workers.py` says what they share,
    `server/processes/supervisor.py` how they are kept)."""
    import asyncio
    import sys
    from contextlib import ExitStack

    from toolrelay.server.metrics import shared_across_workers, worker_exited
    from toolrelay.server.processes.supervisor import REUSEPORT, reserve_port
    from toolrelay.server.processes.workers import prepare, shared_bus

    minted = asyncio.run(prepare(settings))
    if minted:
        sys.stderr.write(f"\ntoolrelay: admin API key (shown once, keep it): {minted}\n\n")
    with ExitStack() as stack:
        if REUSEPORT is None:
            bus_url = stack.enter_context(shared_bus(settings))
            stack.enter_context(shared_across_workers(settings.host, settings.metrics_port))
            _uvicorn_workers(settings, count, bus_url)
            return
        try:
            reserved = stack.enter_context(reserve_port(settings.host, settings.port))
        except OSError as exc:
            raise fail(
                f"cannot listen on {settings.host}:{settings.port}: {exc.strerror}"
            ) from None
        settings = settings.model_copy(update={"port": reserved.getsockname()[1]})
        bus_url = stack.enter_context(shared_bus(settings))
        metrics_dir = stack.enter_context(
            shared_across_workers(settings.host, settings.metrics_port)
        )
        code = _supervise(settings, count, bus_url, lambda pid: worker_exited(metrics_dir, pid))
    if code:
        raise typer.Exit(code)


def _supervise(
    settings: Settings, count: int, bus_url: str | None, on_exit: Callable[[int], None]
) -> int:
    """Our supervisor: one SO_REUSEPORT listener per worker (`server/processes/supervisor.py`)."""
    import asyncio
    import json
    import os

    from toolrelay.server.processes.supervisor import STOP_MARGIN_S, WORKER_ENV, Supervisor
    from toolrelay.server.processes.workers import SETTINGS_ENV

    orders = {"host": settings.host, "port": settings.port, "backlog": BACKLOG}
    env = {
        **os.environ,
        SETTINGS_ENV: settings.model_dump_json(),
        WORKER_ENV: json.dumps({**orders, "events_url": bus_url}),
    }
    where = f"http://{settings.host}:{settings.port}"
    announced: list[int] = []

    def announce(pid: int) -> None:  # once the first worker listens: uvicorn's own line
        if not announced:
            logging.getLogger("uvicorn.error").info(
                "Uvicorn running on %s (Press CTRL+C to quit)", where
            )
        announced.append(pid)

    limit = settings.shutdown_grace_s + STOP_MARGIN_S
    supervisor = Supervisor(count, env, on_exit=on_exit, on_ready=announce, stop_limit=limit)
    logging.getLogger("toolrelay.server").info(
        "%d workers, each with its own listener on %s (SO_REUSEPORT)", count, where
    )
    return asyncio.run(supervisor.run())


def _uvicorn_workers(settings: Settings, count: int, bus_url: str | None) -> None:
    """uvicorn's supervisor, one shared socket: where no SO_REUSEPORT balances connections."""
    import os

    import uvicorn

    from toolrelay.server.processes.workers import EVENTS_ENV, SETTINGS_ENV

    logging.getLogger("toolrelay.server").info(
        "no balancing SO_REUSEPORT here: %d uvicorn workers share one listening socket", count
    )
    os.environ[SETTINGS_ENV] = settings.model_dump_json()  # the spawned workers read it
    if bus_url:
        os.environ[EVENTS_ENV] = bus_url
    uvicorn.run(
        "toolrelay.server.processes.workers:app",
        factory=True,
        workers=count,
        timeout_worker_healthcheck=WORKER_HEALTHCHECK_S,
        host=settings.host,
        port=settings.port,
        log_config=None,
        log_level=settings.log_level.lower(),
    )


def _with_flags(
    settings: Settings,
    host: str | None,
    port: int | None,
    log_level: str | None,
    log_format: str | None,
    record: Path | None = None,
) -> Settings:
    """The flags win over the settings (checked like the settings: one line, exit 2)."""
    from pydantic import ValidationError

    given = {
        "host": host,
        "port": port,
        "log_level": log_level,
        "log_format": log_format,
        "record": record,
    }
    changes = {k: v for k, v in given.items() if v is not None}
    if not changes:
        return settings
    try:
        return type(settings).model_validate({**settings.model_dump(), **changes})
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(p) for p in problem.get("loc", ()))
        raise ConfigError(f"--{where.replace('_', '-')}: {problem.get('msg')}") from None


def _make_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"data_dir: cannot create {str(path)!r}: {exc.strerror}") from None
