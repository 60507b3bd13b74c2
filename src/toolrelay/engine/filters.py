"""Running inlet/outlet filters (SPEC R19), whatever they are.

A filter is any object with `inlet(body)` and/or `outlet(body)`, sync or
async, returning the (possibly changed) body — the shape Open WebUI's filter
functions use. A filter with `pipeline = True` (`adapters.pipelines.HttpOutlet`,
which posts the body to a pipelines server) runs before the in-process ones.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Mapping, Sequence
from typing import Any

Body = dict[str, Any]
log = logging.getLogger(__name__)


async def _call(
    method: Any, body: Body, user: Mapping[str, Any] | None, extra: Mapping[str, Any]
) -> Body:
    params = inspect.signature(method).parameters
    kwargs: dict[str, Any] = {"user": user} if "user" in params else {}
    if "__user__" in params:
        kwargs = {"__user__": user}
    takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    kwargs.update({k: v for k, v in extra.items() if takes_all or k in params})
    result = method(body, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result if isinstance(result, dict) else body


async def run_inlets(
    filters: Sequence[Any],
    body: Body,
    user: Mapping[str, Any] | None,
    extra: Mapping[str, Any] | None = None,
) -> Body:
    """`extra`: reserved parameters (`__request__`, `__model__`, `__tools__`, `__task__` …),
    each passed to a filter method that declares it (or takes `**kwargs`)."""
    for f in filters:
        if callable(getattr(f, "inlet", None)):
            body = await _call(f.inlet, body, user, extra or {})
    return body


def has_inlets(filters: Sequence[Any]) -> bool:
    return any(callable(getattr(f, "inlet", None)) for f in filters)


async def run_outlets(
    filters: Sequence[Any],
    body: Body,
    user: Mapping[str, Any] | None,
    extra: Mapping[str, Any] | None = None,
) -> Body:
    """Pipelines first, then in-process filters; a failing one is logged and skipped."""
    ordered = [f for f in filters if getattr(f, "pipeline", False)]
    ordered += [f for f in filters if not getattr(f, "pipeline", False)]
    for f in ordered:
        if callable(getattr(f, "outlet", None)):
            try:
                body = await _call(f.outlet, body, user, extra or {})
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # one broken filter must not cost the others, or the answer
                log.warning("outlet filter %r failed: %s", f, exc)
    return body
