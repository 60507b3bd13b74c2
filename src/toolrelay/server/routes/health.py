"""`GET /healthz` (the process answers) and `GET /readyz` (it can serve: store and bus reachable).

`/readyz` also names each tool server's last known state (no details: no key
is needed to ask), without counting it towards readiness.

No API key on either: load balancers and orchestrators probe them. `/readyz`
answers 503, naming what failed, when the database or the event bus does not
answer within `READY_TIMEOUT_S`; `/healthz` only says the event loop runs, so
a database outage does not get the process restarted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from fastapi import APIRouter

from toolrelay.server.error_responses import JSONBody
from toolrelay.server.guard import GuardedRoute
from toolrelay.server.openapi import Health, doc
from toolrelay.server.services import ServicesDep

router = APIRouter(route_class=GuardedRoute)
log = logging.getLogger("toolrelay.server")

READY_TIMEOUT_S = 2.0


@router.get("/healthz", response_model=None, responses=doc(Health))
async def healthz() -> dict[str, str]:
    """Liveness: the server process is up and its event loop answers."""
    return {"status": "ok"}


@router.get("/readyz", response_model=None, responses={503: {"description": "Not ready"}})
async def readyz(svc: ServicesDep) -> JSONBody:
    """Readiness: the store and the event bus answer; 503 naming the one that does not.
    Tool servers are listed with their last known state (`ok`, `error`, `not started`):
    one that is down costs its own tools only, so it does not make the server unready."""
    store, bus = await asyncio.gather(_check("store", svc.store.ping), _check("bus", svc.bus.ping))
    ready = store == "ok" and bus == "ok"
    body: dict[str, object] = {
        "status": "ok" if ready else "unavailable",
        "checks": {"store": store, "bus": bus},
    }
    servers = {s.name: s.state for s in svc.registry.toolbox.status()}
    if servers:
        body["tool_servers"] = servers
    return JSONBody(body, status_code=200 if ready else 503)


async def _check(name: str, ping: Callable[[], Awaitable[None]]) -> str:
    """`ok`, or a short reason (the details go to the log: the probe needs no key)."""
    try:
        async with asyncio.timeout(READY_TIMEOUT_S):
            await ping()
    except TimeoutError:
        log.warning("not ready: the %s did not answer in %g s", name, READY_TIMEOUT_S)
        return "timeout"
    except Exception as exc:
        log.warning("not ready: the %s is unreachable: %s: %s", name, type(exc).__name__, exc)
        return f"error: {type(exc).__name__}"
    return "ok"
