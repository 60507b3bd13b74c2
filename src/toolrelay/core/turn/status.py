"""How a turn ended: a closed set, checked by mypy from the loop to the wire.

The loop maps each terminal outcome of `core.turn.decide` onto one member
(`Final`/`Interrupted` -> completed, `Capped` -> capped, `Failed` -> failed,
a cancel -> cancelled); the finisher, `RunResult`, the final event, the
store and `core.formats.answer` all carry the member, never a loose string.
A `StrEnum`: it equals, formats and serialises (orjson, JSON, SQL) as its
value, so stored rows and events read exactly as before.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["TurnStatus", "turn_status"]


class TurnStatus(StrEnum):
    """The four ways a turn ends."""

    COMPLETED = "completed"
    CAPPED = "capped"
    """The tool-round limit stopped the turn, not the model (R7)."""
    FAILED = "failed"
    CANCELLED = "cancelled"


def turn_status(value: object) -> TurnStatus:
    """A status read back from the wire or a store; anything unknown is `failed`."""
    try:
        return TurnStatus(str(value))
    except ValueError:
        return TurnStatus.FAILED
