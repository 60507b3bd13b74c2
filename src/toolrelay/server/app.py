"""The FastAPI app: `create_app(settings)` wires store, bus, registry and routes.

Start-up migrates the database, makes sure an admin API key exists (printed
once, or taken from `TOOLRELAY_ADMIN_KEY`), and builds the model clients.
With no model configured the server still starts and says how to add one.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from toolrelay import __version__
from toolrelay.adapters.events import make_bus
from toolrelay.adapters.files import LocalFiles
from toolrelay.adapters.http.aio import AiohttpTransport
from toolrelay.adapters.s3_files import S3Files
from toolrelay.adapters.stores import Store, User
from toolrelay.adapters.stores.sql import SQLStore
from toolrelay.config.registry import Registry, build_registry, setup_hint
from toolrelay.config.settings import Settings
from toolrelay.server import gc_tuning
from toolrelay.server.api_log import ApiTurnLog
from toolrelay.server.auth import KeyCache
from toolrelay.server.budgets import Budgets
from toolrelay.server.durability import Durability
from toolrelay.server.error_responses import BodyLimit, JSONBody, install_error_handlers
from toolrelay.server.logs import RequestIds
from toolrelay.server.openapi import fix_openapi
from toolrelay.server.processes.shutdown import Stopping
from toolrelay.server.resume import default_node
from toolrelay.server.routes import (
    admin,
    branches,
    chats,
    code_files,
    files,
    health,
    metrics,
    openai,
    responses,
    tool_outputs,
    tools,
    web,
)
from toolrelay.server.services import Services
from toolrelay.server.session import load_secret
from toolrelay.server.startup_log import log_startup
from toolrelay.server.streams import cancel_streams
from toolrelay.server.telemetry import Telemetry
from toolrelay.server.throttle import FailureLimiter
from toolrelay.server.tool_probe import ToolProbe
from toolrelay.server.turns import TurnManager
from toolrelay.server.v1_front import V1Front, lean_routes

log = logging.getLogger("toolrelay.server")

ROUTERS: Final = tuple(
    module.router
    for module in (
        openai,
        responses,
        chats,
        branches,
        code_files,
        files,
        tool_outputs,
        admin,
        tools,
        web,
        health,
        metrics,
    )
)
"""Every route of the API; each is a `guard.GuardedRoute`, admitted by `guard.admit`."""


async def ensure_admin_key(store: Store, admin_key: str | None) -> str | None:
    """Make sure someone can log in; returns a freshly minted key to show once."""
    if admin_key:
        found = await store.find_api_key(admin_key)
        if found is None:
            user = await _admin_user(store)
            await store.create_api_key_with_value(user.id, admin_key, name="TOOLRELAY_ADMIN_KEY")
        elif found.revoked_at is not None:  # the operator's decision stands; say how to undo it
            log.warning(
                "TOOLRELAY_ADMIN_KEY was revoked (key %s) and grants no access: "
                "set a new key in TOOLRELAY_ADMIN_KEY, or unset it, and restart",
                found.id,
            )
        return None
    if await store.list_api_keys():  # revoked ones count: revoking is the operator's call
        return None
    user = await _admin_user(store)
    _, key = await store.create_api_key(user.id, name="first start")
    return key


async def _admin_user(store: Store) -> User:
    """The administrator named `admin` (`toolrelay chat` may have made it, keyless), or a new one."""
    user = await store.user_named("admin")
    if user is not None and user.is_admin:
        return user
    return await store.create_user("admin", is_admin=True)


def _user_valves_from(store: Any, live: Registry) -> None:
    """Open WebUI tool files read each user's `UserValves` from the store at each call."""
    for name, source in live.sources.items():
        read_from = getattr(source, "read_user_valves_from", None)
        if callable(read_from):
            read_from(functools.partial(_stored_valves, store, name))


async def _stored_valves(store: Any, tool_id: str, user_id: str) -> dict[str, Any] | None:
    found: dict[str, Any] | None = await store.get_user_valves(user_id, tool_id)
    return found


def create_app(
    settings: Settings,
    *,
    registry: Registry | None = None,
    tracer_provider: Any = None,
    tune_gc: bool = False,
    node: str | None = None,
) -> FastAPI:
    """The app; `registry` is built at start-up unless given (`toolrelay serve` builds it
    first, so a configuration problem is one line before anything listens).
    `tracer_provider`: where the turns' spans go (else `otel_endpoint`, or none).
    `tune_gc`: once started, set the process's garbage collector for serving
    (`server/gc_tuning.py`; the server's own process only, never a host's).
    `node`: this server's name on the turns it runs (`server.resume.default_node`)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        live = registry if registry is not None else build_registry(settings)
        store = await SQLStore.open(
            settings.database_url,
            pool_size=settings.database_pool_size,
            max_overflow=settings.database_max_overflow,
            pool_timeout=settings.database_pool_timeout,
        )
        bus = make_bus(settings.events_url, max_bytes=int(settings.events_retain_mb * 2**20))
        minted = await ensure_admin_key(store, settings.admin_key)
        if minted:
            sys.stderr.write(f"\ntoolrelay: admin API key (shown once, keep it): {minted}\n\n")
        if not live.routes:
            log.warning("no model configured.\n%s", setup_hint())
        durability = Durability(
            lease_ttl=settings.turn_lease_s,
            checkpoint_s=settings.checkpoint_s,
            max_resumes=settings.max_resumes,
            pause_timeout=settings.pause_timeout_s,
        )
        telemetry.start(live)
        turns = TurnManager(
            store,
            bus,
            live,
            durability,
            observer=telemetry.observer,
            node=node or default_node(settings.data_dir, settings.port),
        )
        await turns.recover()

        async def cancel_running() -> None:
            await cancel_streams()
            await turns.aclose()

        stopping = Stopping(settings.shutdown_grace_s, cancel_running)
        stopping.install()
        secret = load_secret(settings.session_secret, settings.data_dir)
        app.state.services = Services(
            settings, store, bus, live, turns, KeyCache(store), stopping, secret
        )
        app.state.services.api_log = api_log = ApiTurnLog(store, settings)
        s3 = settings.files.s3
        app.state.services.files = (
            LocalFiles(settings.data_dir / "files")
            if s3 is None
            else S3Files(s3.place(), AiohttpTransport(connect_timeout=s3.connect_timeout_s))
        )
        app.state.services.budgets = Budgets(
            app.state.services, metrics=getattr(app.state, "metrics", None)
        )
        app.state.services.failures = FailureLimiter(
            settings.auth.max_failures, settings.auth.window_s
        )
        _user_valves_from(store, live)
        probe = ToolProbe(live.toolbox, settings.tool_probe_s)
        servers = await probe.run()
        log_startup(settings, live, f"http://{settings.host}:{settings.port}/", servers)
        if tune_gc:
            gc_tuning.tune()
        try:
            yield
        finally:
            stopping.uninstall()
            await probe.aclose()
            await turns.aclose()
            await api_log.drain()
            await bus.aclose()
            await live.aclose()
            if isinstance(files := app.state.services.files, S3Files):
                await files.aclose()
            await store.close()
            telemetry.close()

    app = FastAPI(
        title="toolrelay",
        version=__version__,
        lifespan=lifespan,
        default_response_class=JSONBody,
    )
    install_error_handlers(app)
    app.openapi = fix_openapi(app)  # type: ignore[method-assign]
    for module in (
        openai,
        responses,
        chats,
        branches,
        code_files,
        files,
        tool_outputs,
        admin,
        tools,
        web,
        health,
        metrics,
    ):
        app.include_router(module.router)
    # first added, innermost: the /v1 hot path skips the router
    app.add_middleware(
        V1Front, routes=lean_routes([*openai.router.routes, *responses.router.routes])
    )
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["*"],
            allow_headers=["*"],
        )
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes, timeout=settings.body_timeout_s)
    app.add_middleware(RequestIds)
    telemetry = Telemetry(settings, tracer_provider=tracer_provider)
    app.state.metrics = telemetry.metrics
    return app
