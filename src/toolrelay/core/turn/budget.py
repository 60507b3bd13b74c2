"""Token and cost budgets of one turn (issue 29 item 5).

After each model call the turn's usage so far is checked against its
budget; a turn over it makes no further model call and ends `capped`, with a
message saying which budget and by how much, as the iteration cap does (R7).
Cost is the route's price table (per million tokens, input and output) applied
to the tokens, or, with no table, the `cost` the provider reported. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Budget", "over_budget", "turn_cost"]


@dataclass(frozen=True, slots=True)
class Budget:
    """The limits; None: no limit of that kind."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    cost: float | None = None

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.input_tokens, self.output_tokens,
                                           self.total_tokens, self.cost))  # fmt: skip


def _count(usage: Mapping[str, Any], key: str) -> int:
    value = usage.get(key)
    return value if isinstance(value, int) else 0


def turn_cost(usage: Mapping[str, Any], prices: Mapping[str, float] | None) -> float | None:
    """What the usage cost: by `prices` (`input`, `output` per million tokens) when
    given, else the provider's own `cost`; None when neither says."""
    if prices:
        spent = _count(usage, "input_tokens") * float(prices.get("input", 0.0))
        spent += _count(usage, "output_tokens") * float(prices.get("output", 0.0))
        return round(spent / 1_000_000, 8)
    reported = usage.get("cost")
    return float(reported) if isinstance(reported, int | float) else None


def over_budget(budget: Budget, usage: Mapping[str, Any]) -> str | None:
    """The message of the first budget `usage` reached, else None."""
    for key, limit in (
        ("input_tokens", budget.input_tokens),
        ("output_tokens", budget.output_tokens),
        ("total_tokens", budget.total_tokens),
    ):
        used = _count(usage, key)
        if limit is not None and used >= limit:
            kind = key.replace("_", " ")
            return (
                f"Token budget reached: this turn used {used:,} {kind}; the limit is "
                f"{limit:,}. The answer stops here."
            )
    cost = usage.get("cost")
    if budget.cost is not None and isinstance(cost, int | float) and cost >= budget.cost:
        return (
            f"Cost budget reached: this turn cost {cost:.4f}; the limit is "
            f"{budget.cost:.4f}. The answer stops here."
        )
    return None
