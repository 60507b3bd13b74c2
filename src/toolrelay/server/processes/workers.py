"""`toolrelay serve --workers N`: several server processes sharing one port, one database, one bus.

Each worker is a whole server, with its own registry and upstream pools; they
share the database and the event bus. The chat API's guarantees across workers
(one turn per chat, resume from any worker, cancel from any worker) live in
the bus, so the workers must share one: Redis when `events_url` names it, else
the bus the parent hosts (`shared_bus`: a `BusHost`, one `MemoryBus` served
over a Unix socket in a per-run directory, `ipc://…` for the workers). The
in-process bus (`events_url = "memory"`) cannot: each process would have its
own locks and logs. So the default is every core (`default_workers`), except
where state lives in one process: the embedded model runs in the process that
loaded it, and a chat's code kernel (its variables, its files) in one process
while the chat's next turn may land on another worker; both mean one worker.

SQLite takes several processes (each write transaction holds SQLite's lock from
its first statement, `adapters/stores/sql.py`); PostgreSQL scales further.
The parent migrates the database and makes sure of the admin key before any
worker starts, so workers never race each other for either; the settings the
parent checked (flags applied, port 0 made a real port) reach the workers as
JSON in `SETTINGS_ENV`. How the workers are started, kept and stopped:
`server/processes/supervisor.py` (each its own SO_REUSEPORT listener), `server/processes/worker.py`.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from toolrelay.config.settings import Settings
from toolrelay.errors import ConfigError
from toolrelay.server.processes import run_dirs

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = [
    "EVENTS_ENV",
    "SETTINGS_ENV",
    "app",
    "check_workers",
    "default_workers",
    "prepare",
    "shared_bus",
    "worker_settings",
]

SETTINGS_ENV: Final = "TOOLRELAY_WORKER_SETTINGS"
EVENTS_ENV: Final = "TOOLRELAY_WORKER_EVENTS_URL"
"""The parent's bus (`ipc://…`) for uvicorn's workers (the fallback without SO_REUSEPORT)."""
_SOCKET_PATH_ROOM: Final = 90
_IPC = hasattr(socket, "AF_UNIX")
"""The inter-process bus needs Unix sockets (not on Windows)."""


def default_workers(settings: Settings, *, local: bool) -> int:
    """Every core when the bus can be shared (Redis, or the parent's) and nothing lives in
    one process, else one: what keeps the guarantees (module doc)."""
    url = settings.events_url
    shared = url != "memory" if url else _IPC
    if shared and not local and not settings.code_interpreter.enabled:
        return os.cpu_count() or 1
    return 1


def check_workers(workers: int, settings: Settings, *, local: bool) -> None:
    """Refuse a worker count whose guarantees cannot hold, saying why (module doc)."""
    if workers < 1:
        raise ConfigError(f"--workers: must be at least 1 (got {workers})")
    if workers == 1:
        return
    if local:
        raise ConfigError(
            f"--workers {workers}: the embedded model runs in one process; "
            "serve it with --workers 1, or configure a model server"
        )
    if settings.code_interpreter.enabled:
        raise ConfigError(
            f"--workers {workers}: a chat's code kernel lives in one process and its next "
            "turn may reach another worker (losing its variables and files); serve it with "
            '--workers 1, or set [code_interpreter] engine = "off"'
        )
    if settings.events_url == "memory" or (not settings.events_url and not _IPC):
        raise ConfigError(
            f"--workers {workers} needs a shared event bus: set events_url "
            "(e.g. redis://127.0.0.1:6379/0)"
            + ("" if settings.events_url else ", or leave it unset where Unix sockets exist")
            + ". With the in-process bus each worker has its own chat locks and event logs, "
            "so one turn per chat, resume and cancel would not hold across workers"
        )


async def check_database(settings: Settings) -> None:
    """Open (and migrate) the database once before anything listens: a database that
    cannot be used is one line naming it (`ConfigError`), not a worker's traceback."""
    from toolrelay.adapters.stores.sql import SQLStore

    _sqlite_readable(settings.database_url)
    store = await _opened(SQLStore, settings.database_url)
    await store.close()


def _sqlite_readable(url: str) -> None:
    """An existing SQLite file is read once with the standard library first: a file that
    is not a database fails here, cleanly, not inside aiosqlite's thread (whose failed
    connection then reports on a closed loop, a traceback after the one line)."""
    import sqlite3
    from urllib.parse import quote

    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    path = parsed.database
    if parsed.get_backend_name() != "sqlite" or not path or path == ":memory:":
        return
    if path.startswith("file:") or not os.path.exists(os.path.expanduser(path)):
        return  # a URI (its own options) or a file SQLite creates
    try:
        where = quote(os.path.expanduser(path))
        connection = sqlite3.connect(f"file:{where}?mode=rw", uri=True)
        try:
            connection.execute("PRAGMA schema_version").fetchone()
        finally:
            connection.close()
    except sqlite3.Error as exc:
        raise ConfigError(database_problem(url, exc)) from None


async def _opened(store_class: Any, url: str) -> Any:
    try:
        return await store_class.open(url)
    except (Exception, TimeoutError) as exc:
        raise ConfigError(database_problem(url, exc)) from None


def database_problem(url: str, exc: BaseException) -> str:
    """One line: which database (its password hidden) and what its driver said."""
    from sqlalchemy.engine import make_url

    try:
        shown = make_url(url).render_as_string(hide_password=True)
    except Exception:
        shown = "(an unparseable URL)"
    cause = getattr(exc, "orig", None) or exc
    said = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
    return f"database_url: cannot use the database {shown}: {said}"


async def prepare(settings: Settings) -> str | None:
    """Migrate the database and make sure of the admin key, once, before the workers start.

    Returns a freshly minted admin key (to show once), as the app's start-up does.
    """
    from toolrelay.adapters.stores.sql import SQLStore  # the checks above stay light
    from toolrelay.server.app import ensure_admin_key

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    store: SQLStore = await _opened(SQLStore, settings.database_url)
    try:
        return await ensure_admin_key(store, settings.admin_key)
    finally:
        await store.close()


@contextmanager
def shared_bus(settings: Settings) -> Iterator[str | None]:
    """Around the workers in the parent: with no `events_url`, the parent hosts the bus
    (`BusHost`) on a Unix socket in a per-run directory, removed at the end, and yields its
    `ipc://` url for the workers; else None (they use `events_url`)."""
    if settings.events_url:
        yield None
        return
    from toolrelay.adapters.events import clock_seq_base
    from toolrelay.adapters.events.ipc import BusHost
    from toolrelay.adapters.events.memory import MemoryBus

    run_dir = run_dirs.make("run")  # a killed parent's is removed by the next (run_dirs.py)
    if len(run_dir) > _SOCKET_PATH_ROOM:  # a long TMPDIR: a Unix socket path has ~100 bytes
        os.rmdir(run_dir)
        run_dir = run_dirs.make("run", "/tmp")
    try:
        path = os.path.join(run_dir, "bus.sock")
        retain = int(settings.events_retain_mb * 2**20)
        with BusHost(path, bus=MemoryBus(seq_base=clock_seq_base, max_bytes=retain)):
            yield f"ipc://{path}"
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def worker_settings(events_url: str | None) -> Settings:
    """The settings the parent checked (`SETTINGS_ENV`), on the parent's bus if it hosts one
    (set after validation: `ipc://` is the parent's to give, not a setting)."""
    settings = Settings.model_validate_json(os.environ[SETTINGS_ENV])
    if events_url:
        settings = settings.model_copy(update={"events_url": events_url})
    return settings


def app() -> FastAPI:
    """One worker's app (uvicorn's factory, the fallback): the parent's settings, its own
    registry."""
    from toolrelay.server.app import create_app
    from toolrelay.server.logs import configure_logging
    from toolrelay.server.startup_log import config_secrets

    settings = worker_settings(os.environ.get(EVENTS_ENV))
    configure_logging(settings.log_level, settings.log_format, secrets=config_secrets(settings))
    return create_app(settings, tune_gc=True)
