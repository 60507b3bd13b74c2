"""`SandboxedSubprocess`: each run a fresh Python process, in the same sandbox as the kernels.

The `subprocess` engine: no state between runs (no kernel), no rich output,
killed (not interrupted) at its timeout; but the same limits, scrubbed
environment, own directory per chat, own user and namespaces as
`JupyterRunner` (`sandbox.py`). Each run takes a user of its own and gives
it back when nothing runs under it any more; the runs of one chat take
turns (they share its directory). For hosts where ipykernel is not wanted.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolrelay.adapters.code.sandbox import Level, Sandbox, SandboxLimits
from toolrelay.engine.interpreter import CodeJob, SubprocessRunner

__all__ = ["SandboxedSubprocess"]

_USER: contextvars.ContextVar[int | None] = contextvars.ContextVar("code_run_user", default=None)
"""The user of the run in progress in this task (read by `_prefix`)."""


class SandboxedSubprocess(SubprocessRunner):
    def __init__(
        self,
        root: str | Path,
        *,
        limits: SandboxLimits = SandboxLimits(),
        timeout: float = 30.0,
        hide: Sequence[str | Path] = (),
        python: str = sys.executable,
        level: Level = "full",
    ) -> None:
        super().__init__(timeout=timeout, python=python, prefix=self._prefix)
        self.root = Path(root).expanduser().resolve()  # bound by an absolute path (JupyterRunner)
        self.root.mkdir(parents=True, exist_ok=True)
        self.sandbox = Sandbox(limits, root=self.root, hide=hide, python=python, level=level)
        self.max_timeout = timeout
        self._turns: dict[str, tuple[asyncio.Lock, list[int]]] = {}
        """Per chat: the lock its runs take turns on, and how many runs want it."""

    def workdir(self, session: str | None) -> Path:
        name = hashlib.sha256((session or "default").encode()).hexdigest()[:24]
        return self.root / name

    async def run(self, code: str, lang: str, job: CodeJob | None = None) -> dict[str, Any]:
        job = job or CodeJob()
        session = job.session or "default"
        turn, wanting = self._turns.setdefault(session, (asyncio.Lock(), [0]))
        wanting[0] += 1
        try:
            async with turn:
                uid = self.sandbox.take_user()
                token = _USER.set(uid)
                try:
                    return await super().run(code, lang, job)
                finally:
                    _USER.reset(token)
                    await asyncio.shield(self._done(session, uid))
        finally:
            wanting[0] -= 1
            if not wanting[0]:
                del self._turns[session]

    async def _done(self, session: str, uid: int | None) -> None:
        await self.sandbox.give_back(uid)  # nothing of the run is left
        self.sandbox.own(self.workdir(session), None)

    async def forget(self, session: str) -> None:
        """The chat is deleted: remove its directory."""
        await asyncio.to_thread(shutil.rmtree, self.workdir(session), ignore_errors=True)

    async def aclose(self) -> None:
        """Nothing runs between calls."""
        self.sandbox.close()

    async def _prefix(self, job: CodeJob) -> tuple[list[str], dict[str, Any]]:
        workdir = self.workdir(job.session)
        workdir.mkdir(parents=True, exist_ok=True)
        uid = _USER.get()
        self.sandbox.own(workdir, uid)
        command = self.sandbox.command([], workdir, uid)
        return command, {"env": self.sandbox.env(workdir), "cwd": str(workdir)}
