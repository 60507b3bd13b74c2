"""`SandboxedSubprocess`: each run a fresh Python process, in the same sandbox as the kernels.

The `subprocess` engine: no state between runs (no kernel), no rich output,
killed (not interrupted) at its timeout; but the same limits, scrubbed
environment, own directory per chat, own user and network namespace as
`JupyterRunner` (`sandbox.py`). For hosts where ipykernel is not wanted.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolrelay.adapters.code.sandbox import Sandbox, SandboxLimits
from toolrelay.engine.interpreter import CodeJob, SubprocessRunner

__all__ = ["SandboxedSubprocess"]

_SLOTS = 1000
_FIRST_SLOT = 1000
"""Subprocess users sit in the upper half of the sandbox's block (a chat's slot comes
from its id's hash; kernels use the lower half)."""


class SandboxedSubprocess(SubprocessRunner):
    def __init__(
        self,
        root: str | Path,
        *,
        limits: SandboxLimits = SandboxLimits(),
        timeout: float = 30.0,
        hide: Sequence[str | Path] = (),
        python: str = sys.executable,
    ) -> None:
        super().__init__(timeout=timeout, python=python, prefix=self._prefix)
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.sandbox = Sandbox(limits, hide=hide, python=python, key=str(self.root.resolve()))
        self.max_timeout = timeout

    def workdir(self, session: str | None) -> Path:
        name = hashlib.sha256((session or "default").encode()).hexdigest()[:24]
        return self.root / name

    async def forget(self, session: str) -> None:
        """The chat is deleted: remove its directory."""
        await asyncio.to_thread(shutil.rmtree, self.workdir(session), ignore_errors=True)

    async def aclose(self) -> None:
        """Nothing runs between calls."""

    async def _prefix(self, job: CodeJob) -> tuple[list[str], dict[str, Any]]:
        session = job.session or "default"
        slot = _FIRST_SLOT + int(hashlib.sha256(session.encode()).hexdigest(), 16) % _SLOTS
        workdir = self.workdir(session)
        workdir.mkdir(parents=True, exist_ok=True)
        self.sandbox.own(workdir, slot)
        command = self.sandbox.command([], workdir, slot)
        return command, {"env": self.sandbox.env(), "cwd": str(workdir)}
