"""How long a test may wait for something that is driven by events, not by the clock.

Tests wait on events and conditions; these bounds only stop a broken test from
hanging the suite, so they are far above anything a loaded machine needs.
"""

from __future__ import annotations

import os
from typing import Final

HANG: Final = 30.0
"""Seconds after which a wait that should end on an event is a failure (a hang)."""


FUZZ: Final = os.environ.get("TOOLRELAY_FUZZ") == "1"
"""`make fuzz` sets TOOLRELAY_FUZZ=1: the property tests then spend their long budget."""


def fuzz_budget(examples: int) -> int:
    """A slow property test's examples: a quarter by default (each run of the suite still
    draws new ones), ten times the number under `make fuzz`."""
    return examples * 10 if FUZZ else max(20, examples // 4)
