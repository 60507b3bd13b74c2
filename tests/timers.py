"""Which timers code asks the running loop for (`loop.call_at`), recorded by deadline."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def timers_asked(keep: Callable[[float, type], bool]) -> Iterator[list[float]]:
    """The deadlines of the running loop's new timers that `keep(deadline, owner)` keeps,
    `owner` being the type of the object whose method the timer calls."""
    loop = asyncio.get_running_loop()
    seen: list[float] = []
    call_at = loop.call_at

    def counting(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        if keep(when, type(getattr(callback, "__self__", None))):
            seen.append(when)
        return call_at(when, callback, *args, **kwargs)

    loop.call_at = counting  # type: ignore[method-assign,assignment]
    try:
        yield seen
    finally:
        del loop.call_at
