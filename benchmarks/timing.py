"""Shared timing helper: best-of-N wall time, alternating the contenders (noisy machines)."""

from __future__ import annotations

import time
from collections.abc import Callable


def interleaved(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Best-of-N for several functions, alternating them so drift hits all alike."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best
