"""How long a test may wait for something that is driven by events, not by the clock.

Tests wait on events and conditions; these bounds only stop a broken test from
hanging the suite, so they are far above anything a loaded machine needs.
"""

from __future__ import annotations

from typing import Final

HANG: Final = 30.0
"""Seconds after which a wait that should end on an event is a failure (a hang)."""
