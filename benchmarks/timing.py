"""Shared timing helpers: best-of-N wall and CPU time, robust on noisy machines."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """The fastest of `repeat` runs, in seconds of process CPU time."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def interleaved(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Best-of-N for several functions, alternating them so drift hits all alike."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best
