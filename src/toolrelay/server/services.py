"""The live objects one server process holds, built at start-up and shared by the routes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Request

from toolrelay.adapters.events import EventBus
from toolrelay.adapters.files import FileStore, LocalFiles
from toolrelay.adapters.stores import Store, User
from toolrelay.config.registry import Registry
from toolrelay.config.settings import Settings
from toolrelay.engine.finish import RunResult
from toolrelay.engine.interfaces import EventSink
from toolrelay.engine.request import TurnRequest
from toolrelay.server.api_log import ApiTurnLog, cut_result
from toolrelay.server.auth import KeyCache
from toolrelay.server.budgets import Budgets
from toolrelay.server.error_responses import APIError
from toolrelay.server.logs import RequestIdInErrors
from toolrelay.server.processes.shutdown import Stopping
from toolrelay.server.request_info import ADMITTED, RequestInfo, model_info
from toolrelay.server.throttle import FailureLimiter
from toolrelay.server.turns import TurnManager


@dataclass(slots=True)
class Services:
    settings: Settings
    store: Store
    bus: EventBus
    registry: Registry
    turns: TurnManager
    keys: KeyCache
    stopping: Stopping
    session_secret: bytes | None = None
    """Signs the web page's session cookies (`server.session`)."""
    api_log: ApiTurnLog | None = None
    """The request log of `/v1` turns (`log_api_turns`)."""
    budgets: Budgets | None = None
    """Daily budgets (`server.budgets`); the app sets it."""
    files: FileStore = field(default_factory=lambda: LocalFiles(Path("files")))
    """Uploaded files (`adapters.files`); the app sets it under `data_dir`."""
    failures: FailureLimiter | None = None
    """Failed sign-ins and wrong keys, per address and key prefix (`[auth]`)."""

    def v1_run(
        self,
        route: str,
        user_id: str,
        turn: TurnRequest,
        *,
        coalesce_ms: float | None = None,
    ) -> Callable[[EventSink | None], Awaitable[RunResult]]:
        """A `/v1` turn as a call (a sink for streams, None otherwise); with the request log
        on, the ended turn is saved there (in the background: the answer does not wait),
        a cut stream's too: from its final event, which a `TurnStream` sink keeps (`final`).
        `coalesce_ms` is the request's delta window (`stream_options`), None: the route's."""
        relay = self.turns.relay_for(route, coalesce_ms=coalesce_ms)
        log = self.api_log if self.settings.log_api_turns else None
        spent = self.budgets.recorder(user_id, ADMITTED.get()) if self.budgets else None

        async def run(sink: EventSink | None = None) -> RunResult:
            request_id = turn.message_id
            messages = turn.messages
            given = sink
            if sink is not None and isinstance(request_id, str):
                sink = RequestIdInErrors(sink, request_id)
            try:
                result = await relay.run(turn, sink=sink)
            except asyncio.CancelledError:  # a stream cut (client left, shutdown): log its part
                final = getattr(given, "final", None)
                if log is not None and final is not None:
                    log.record(user_id, route, messages, str(request_id), cut_result(final))
                raise
            if log is not None:
                log.record(user_id, route, messages, str(request_id), result)
            if spent is not None:
                await spent(result)
            return result

        return run

    def route(self, name: Any) -> str:
        """A known route name, else a 404 in OpenAI's words."""
        if not isinstance(name, str) or not name:
            raise APIError(400, "You must provide a model.", param="model", code="missing_model")
        if name not in self.registry.routes:
            if not self.registry.routes:
                raise APIError(
                    404,
                    f"The model '{name}' does not exist: no model is configured on this server. "
                    "See GET / for how to add one.",
                    param="model",
                    code="model_not_found",
                )
            known = ", ".join(sorted(self.registry.routes))
            raise APIError(
                404,
                f"The model '{name}' does not exist. Available: {known}.",
                param="model",
                code="model_not_found",
            )
        return name

    def turn_context(
        self, route: str, request: Request | None, user: Mapping[str, Any], interface: str
    ) -> dict[str, Any]:
        """`TurnRequest` fields for `__model__`, `__request__` and the server's part
        of `__metadata__` (`interface`: `chat` for the chat API, `v1` for the OpenAI API).
        `request` None: the one a lean `/v1` route answers (`request_info.ADMITTED`)."""
        request = request if request is not None else ADMITTED.get()
        return {
            "model_info": model_info(self.registry.routes[route]),
            "request": RequestInfo.of(request, user) if request is not None else None,
            "metadata": {"interface": interface},
        }

    def turn_user(self, user: User) -> dict[str, Any]:
        """The user as a turn sees them: id, name, role, and whether they may run code
        (the user gate of SPEC R5: admins always, others when `code_interpreter.users`
        is `everyone`)."""
        may_run_code = self.registry.code_users == "everyone"
        return {
            "id": user.id,
            "name": user.name,
            "role": "admin" if user.is_admin else "user",
            "permissions": {"features": {"code_interpreter": may_run_code}},
        }


def _services(request: Request) -> Services:
    svc: Services = request.app.state.services
    return svc


async def services(request: Request) -> Services:
    """A dependency; async, since FastAPI runs sync dependencies in a worker thread."""
    return _services(request)


ServicesDep = Annotated[Services, Depends(services)]
