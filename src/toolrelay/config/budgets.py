"""`[budgets]`: what one user, or one API key, may spend per UTC day."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["BudgetsConfig"]


class BudgetsConfig(BaseModel):
    """Daily budgets (tokens: input + output; cost: in the routes' `prices` unit, else
    the providers' reported cost). Unset: no budget of that kind."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    user_daily_tokens: int | None = Field(default=None, ge=1)
    user_daily_cost: float | None = Field(default=None, gt=0)
    key_daily_tokens: int | None = Field(default=None, ge=1)
    key_daily_cost: float | None = Field(default=None, gt=0)

    @property
    def any(self) -> bool:
        return any(
            v is not None
            for v in (
                self.user_daily_tokens,
                self.user_daily_cost,
                self.key_daily_tokens,
                self.key_daily_cost,
            )
        )
