"""Giving memory back to the system after a big model answer.

A turn that read tens of megabytes leaves the process's heap that big once
the turn is over: CPython hands freed blocks back to the C allocator, which
keeps them (glibc raises its mmap threshold to the size of the last big block
freed, so the next big ones come from a heap it only trims at its top). A
server that once answered one huge stream would hold that memory for good.

`read_big(size)` is told the size of every model body read; after one of
`BIG_BYTES` or more, once `SETTLE_S` have passed with no other (the turn has
ended and its objects are freed by then), unreachable cycles are collected
and glibc's `malloc_trim(0)` returns the free pages (a public C call, through
ctypes; on another C library only the collection runs).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import functools
import gc
import logging
from collections.abc import Callable
from typing import Final

__all__ = ["BIG_BYTES", "SETTLE_S", "give_back", "read_big"]

log = logging.getLogger(__name__)

BIG_BYTES: Final = 8 << 20
SETTLE_S: Final = 5.0

_pending: dict[asyncio.AbstractEventLoop, asyncio.TimerHandle] = {}


def read_big(size: int) -> None:
    """Note a body of `size` bytes just read (module doc); cheap for small ones."""
    if size < BIG_BYTES:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    handle = _pending.pop(loop, None)
    if handle is not None:
        handle.cancel()
    _pending[loop] = loop.call_later(SETTLE_S, _settled, loop)


def _settled(loop: asyncio.AbstractEventLoop) -> None:
    _pending.pop(loop, None)
    give_back()


def give_back() -> int:
    """Collect cycles and return free heap pages to the system; the objects collected."""
    collected = gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
    log.debug("gave memory back after a big model answer (%d objects collected)", collected)
    return collected


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    return trim
