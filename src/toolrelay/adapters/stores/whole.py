"""Store calls that a cancellation cannot cut in half.

A cancel that reaches SQLAlchemy's async connection in the middle of a
statement (a turn cancelled while it is being saved, a client that leaves
during a write) abandons the database connection with its work still running
in the driver: on SQLite that connection kept the file's write lock for good
and every later write failed with "database is locked" (issue 24, item 1).
So each call of a store runs as its own task, and a cancel of the caller waits
for that task to end (commit or rollback, the connection back in its pool)
before it goes on: the caller is still cancelled, one short transaction later.
A call is short (one transaction, bounded by the busy timeout on SQLite and the
pool and statement timeouts on PostgreSQL), so the wait is too.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["uninterruptible", "whole"]

T = TypeVar("T")
C = TypeVar("C", bound=type)


async def whole(work: Coroutine[Any, Any, T]) -> T:
    """Run `work` to its end even if the caller is cancelled meanwhile; then the caller's
    cancellation goes on (raised here), else `work`'s result or exception."""
    task = asyncio.ensure_future(work)
    current = asyncio.current_task()
    before = current.cancelling() if current is not None else 0
    while not task.done():
        # a cancel of ours: wait on; the task's own outcome is read below
        with contextlib.suppress(BaseException):
            await asyncio.shield(task)
    if current is not None and current.cancelling() > before:
        if not task.cancelled():
            task.exception()  # retrieved (no warning): the caller's cancel wins
        raise asyncio.CancelledError
    return task.result()


def uninterruptible(cls: C) -> C:
    """Make every public coroutine method of `cls` run through `whole`, inherited ones
    (a mixin's) included."""
    for name in dir(cls):
        member = inspect.getattr_static(cls, name)
        if name.startswith("_") or not inspect.iscoroutinefunction(member):
            continue
        setattr(cls, name, _wrapped(member))
    return cls


def _wrapped(method: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Any]:
    @functools.wraps(method)
    async def run(*args: Any, **kwargs: Any) -> Any:
        return await whole(method(*args, **kwargs))

    return run
