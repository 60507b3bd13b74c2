"""Shared timing helper: best-of-N wall time, alternating the contenders (noisy machines)."""

from __future__ import annotations

import time
from collections.abc import Callable


def interleaved(
    fns: dict[str, Callable[[], object]],
    repeat: int,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """Best-of-N for several functions, alternating them so drift hits all alike.

    `clock=time.thread_time` counts only this thread's CPU time: for pure
    in-process work on a busy machine, where wall time mostly measures the wait.
    """
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            start = clock()
            fn()
            best[name] = min(best[name], clock() - start)
    return best
