"""Item and call ids: `prefix_` + 24 hex characters, like the Responses API."""

from __future__ import annotations

import os


def new_id(prefix: str) -> str:
    """A fresh random id; `os.urandom` keeps this free of clocks and global RNG state."""
    return f"{prefix}_{os.urandom(12).hex()}"
