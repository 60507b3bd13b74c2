"""Daily budgets per user and per API key (`[budgets]`), kept in the store.

Before a turn starts (chat API and `/v1`), the caller's spend of the day
(UTC) is read from the store (`Store.spend_of`, one row each for the user and
the key); a spent budget is a 429 `budget_exceeded` whose message says which
budget, what was used and when it resets, with `Retry-After` (seconds to
midnight UTC). After the turn, its usage is added for both (`add_spend`). A
turn that starts under the budget runs to its end, so a day's spend can pass
the budget by one turn; a turn's own `[limits] max_*` bound that.
The key is known by its hash; a web-page session counts for its user only.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.requests import Request

from toolrelay.adapters.stores import Spend, hash_key
from toolrelay.server.auth import request_key
from toolrelay.server.error_responses import APIError

__all__ = ["Budgets"]

log = logging.getLogger(__name__)


def _day(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%d")


def _until_midnight(now: datetime) -> int:
    now = now.astimezone(UTC)
    midnight = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return max(1, int((midnight - now).total_seconds()))


class Budgets:
    """Checks and records the daily budgets of one server (`svc.budgets`)."""

    def __init__(
        self,
        svc: Any,
        *,
        metrics: Any = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.svc = svc
        self.metrics = metrics
        self.clock = clock

    def _subjects(self, user_id: str, request: Request | None) -> list[tuple[str, str]]:
        subjects = [("user", user_id)]
        key = request_key(request) if request is not None else None
        if key:
            subjects.append(("key", hash_key(key)[:32]))
        return subjects

    async def check(self, user_id: str, request: Request | None) -> None:
        """Raise the 429 when a budget of the caller is spent (module doc)."""
        config = self.svc.settings.budgets
        if not config.any:
            return
        now = self.clock()
        for scope, subject in self._subjects(user_id, request):
            spent: Spend = await self.svc.store.spend_of(scope, subject, _day(now))
            tokens = getattr(config, f"{scope}_daily_tokens")
            cost = getattr(config, f"{scope}_daily_cost")
            who = "your" if scope == "user" else "this API key's"
            problem = None
            if tokens is not None and spent.total_tokens >= tokens:
                problem = (
                    f"The daily token budget of {who} turns is spent: {spent.total_tokens:,} "
                    f"of {tokens:,} tokens used today (UTC)."
                )
            elif cost is not None and spent.cost >= cost:
                problem = (
                    f"The daily cost budget of {who} turns is spent: {spent.cost:.4f} "
                    f"of {cost:.4f} used today (UTC)."
                )
            if problem is not None:
                wait = _until_midnight(now)
                metrics = self.metrics
                if metrics is not None:
                    metrics.child(metrics.budget_refusals, scope).inc()
                raise APIError(
                    429,
                    f"{problem} It resets at 00:00 UTC, in {wait:,} s.",
                    code="budget_exceeded",
                    param=scope,
                    headers={"Retry-After": str(wait)},
                )

    def recorder(
        self, user_id: str, request: Request | None
    ) -> Callable[[Any], Awaitable[None]] | None:
        """What to call with the ended turn's `RunResult`: its usage added for the day."""
        if not self.svc.settings.budgets.any:
            return None
        subjects = self._subjects(user_id, request)

        async def record(result: Any) -> None:
            usage = getattr(result, "usage", None) or {}
            spend = Spend(
                _int(usage.get("input_tokens")),
                _int(usage.get("output_tokens")),
                float(usage.get("cost") or 0.0),
                1,
            )
            try:
                await self.svc.store.add_spend(subjects, _day(self.clock()), spend)
            except Exception:  # the answer is given; a lost count must not fail it
                log.exception("could not record the spend of a turn")

        return record


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0
