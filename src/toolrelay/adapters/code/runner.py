"""`JupyterRunner`: the code interpreter on a real Jupyter kernel, one per chat.

One run = one `execute_request` on the chat's kernel (`kernels.KernelPool`).
Its IOPub messages become the output (`outputs.CellOutput`) and, as they
arrive, live output for `CodeJob.on_output`. Images are saved in the chat's
directory (`outputs/<n>.png`, `.svg`) and returned as files: the model gets
PNGs as images (R12), the client their names (downloadable from the chat).

Time: past its timeout a run's kernel is interrupted (SIGINT, the kernel
and its variables survive) and the output so far is returned with "timed
out after N s". A kernel that ignores the interrupt is restarted. A
cancelled run (the turn was cancelled) interrupts the kernel the same way.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import queue
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolrelay.adapters.code import files
from toolrelay.adapters.code.kernels import Kernel, KernelPool
from toolrelay.adapters.code.outputs import IMAGE_TYPES, CellOutput, Display
from toolrelay.adapters.code.sandbox import Level, Sandbox, SandboxLimits
from toolrelay.engine.interpreter import CodeJob

__all__ = ["JupyterRunner"]

log = logging.getLogger(__name__)

INTERRUPT_GRACE = 5.0
"""Seconds an interrupted cell gets to stop before its kernel is restarted."""
_POLL = 0.5
_PYTHON = frozenset({"python", "py", "python3", "ipython", ""})


class JupyterRunner:
    """A `CodeRunner` on Jupyter kernels (`Relay(model, code_interpreter=JupyterRunner())`)."""

    def __init__(
        self,
        root: str | Path | None = None,
        *,
        limits: SandboxLimits = SandboxLimits(),
        timeout: float = 30.0,
        max_timeout: float = 300.0,
        max_kernels: int = 8,
        idle_timeout: float = 600.0,
        startup_timeout: float = 60.0,
        hide: Sequence[str | Path] = (),
        python: str = sys.executable,
        level: Level = "full",
    ) -> None:
        """`root` holds one directory per chat (default: a new temporary directory);
        `timeout` is a run's default, `max_timeout` the most a run may ask for;
        `hide` are paths the code must not see (the server's data dir, its config file);
        `level` the sandbox's (`sandbox.py`; `SandboxUnavailable` if this host lacks it).
        A relative `root` is taken from the current directory now: the sandbox binds it
        by an absolute path, and the kernels start elsewhere."""
        self.root = (
            Path(root).expanduser().resolve()
            if root is not None
            else Path(tempfile.mkdtemp(prefix="toolrelay-code-"))
        )
        self.root.mkdir(parents=True, exist_ok=True)
        self.timeout = timeout
        self.max_timeout = max_timeout
        self.sandbox = Sandbox(limits, root=self.root, hide=hide, python=python, level=level)
        self.pool = KernelPool(
            self.root,
            self.sandbox,
            max_kernels=max_kernels,
            idle_timeout=idle_timeout,
            startup_timeout=startup_timeout,
        )

    def workdir(self, session: str | None) -> Path:
        """The chat's directory: what its cells wrote, and the images they showed."""
        return self.pool.workdir(session or "default")

    async def run(self, code: str, lang: str, job: CodeJob | None = None) -> dict[str, Any]:
        job = job or CodeJob()
        if lang.lower() not in _PYTHON:
            return {"stdout": "", "stderr": "", "error": f"Unsupported language: {lang}"}
        timeout = min(self.timeout if job.timeout is None else job.timeout, self.max_timeout)
        session = job.session or "default"
        while True:
            kernel = await self.pool.get(session)
            async with kernel.lock:
                if not self.pool.holds(kernel):  # shut down while we waited: start anew
                    continue
                try:
                    return await self._execute(kernel, code, max(timeout, 0.01), job)
                finally:
                    kernel.last_used = self.pool.clock()

    async def _execute(
        self, kernel: Kernel, code: str, seconds: float, job: CodeJob
    ) -> dict[str, Any]:
        client = kernel.client
        msg_id = client.execute(code, store_history=True, allow_stdin=False, stop_on_error=False)
        cell = CellOutput()
        try:
            note = await self._collect(kernel, msg_id, cell, seconds, job)
        except asyncio.CancelledError:
            await asyncio.shield(self._stop(kernel, msg_id, cell))
            raise
        if self.pool.holds(kernel):
            await self._drain_reply(kernel, msg_id)
        out = cell.as_dict(note=note)
        for entry, display in zip(out.get("files", []), _images(cell), strict=True):
            entry["url"] = _data_url(display)
        return out

    async def _collect(
        self, kernel: Kernel, msg_id: str, cell: CellOutput, seconds: float, job: CodeJob
    ) -> str | None:
        """Read the cell's messages until it is idle; a note when it timed out or died."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        interrupted = False
        while not cell.idle:
            left = deadline - loop.time()
            if left <= 0 and not interrupted:
                interrupted = True
                await kernel.manager.interrupt_kernel()
                deadline = loop.time() + INTERRUPT_GRACE
                continue
            if left <= 0:
                await self.pool.retire(kernel)
                return (
                    f"timed out after {seconds:g} s; the kernel did not stop when "
                    "interrupted and was restarted (its variables are gone)"
                )
            got = await self._next(kernel, msg_id, cell, min(left, _POLL), job)
            if not got and not await kernel.manager.is_alive():
                await self.pool.retire(kernel)
                return (
                    "the kernel died (a limit was reached, or the code exited); its "
                    "variables are gone, the next run starts a new one"
                )
        return (
            f"timed out after {seconds:g} s (interrupted; variables are kept)"
            if interrupted
            else None
        )

    async def _next(
        self, kernel: Kernel, msg_id: str, cell: CellOutput, wait: float, job: CodeJob
    ) -> bool:
        """Feed one message of this cell; False when none came in `wait` seconds."""
        try:
            msg = await kernel.client.get_iopub_msg(timeout=wait)
        except queue.Empty:
            return False
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # this run was cancelled
            return False  # the channel closed under us: the kernel was shut down
        except Exception:
            if self.pool.holds(kernel):
                raise
            return False
        if (msg.get("parent_header") or {}).get("msg_id") != msg_id:
            return True  # an older cell's late message
        event = cell.feed(msg)
        if event is not None and event.get("kind") == "display" and "index" in event:
            display = cell.displays[event.pop("index")]
            self._save(kernel, display)
            event["name"] = display.name
        if event is not None and job.on_output is not None:
            await job.on_output(event)
        return True

    def _save(self, kernel: Kernel, display: Display) -> None:
        """`outputs/<n>.<ext>`, n counting on past what an earlier kernel of the chat saved;
        the cell may read, replace or delete them. Written through directory descriptors
        (`files.save_new`): the cell may have made `outputs` a symlink to a host path."""
        owner = (kernel.uid, kernel.uid) if kernel.uid is not None else None
        while True:
            kernel.images += 1
            name = f"{kernel.images}.{IMAGE_TYPES[display.mime]}"
            try:
                files.save_new(kernel.workdir, "outputs", name, display.data, owner)
            except FileExistsError:
                continue
            except OSError as exc:
                log.warning("the image of %s was not saved: %s", kernel.session, exc)
                return
            display.name = f"outputs/{name}"
            return

    async def _stop(self, kernel: Kernel, msg_id: str, cell: CellOutput) -> None:
        """A cancelled run: interrupt the cell, then wait (bounded) for the kernel to be idle."""
        if not self.pool.holds(kernel):
            return
        with contextlib.suppress(Exception):
            await kernel.manager.interrupt_kernel()
            quiet = CodeJob()
            loop = asyncio.get_running_loop()
            end = loop.time() + INTERRUPT_GRACE
            while not cell.idle and loop.time() < end:
                await self._next(kernel, msg_id, cell, _POLL, quiet)
            if not cell.idle:
                await self.pool.retire(kernel)

    async def _drain_reply(self, kernel: Kernel, msg_id: str) -> None:
        """Take the cell's `execute_reply` off the shell channel (older ones too)."""
        with contextlib.suppress(queue.Empty, Exception):
            while True:
                reply = await kernel.client.get_shell_msg(timeout=2.0)
                if (reply.get("parent_header") or {}).get("msg_id") == msg_id:
                    return

    async def shutdown(self, session: str) -> None:
        """Stop one chat's kernel now (its files stay)."""
        await self.pool.shutdown(session)

    async def forget(self, session: str) -> None:
        """The chat is deleted: stop its kernel and remove its directory."""
        await self.pool.shutdown(session)
        await asyncio.to_thread(shutil.rmtree, self.workdir(session), ignore_errors=True)

    async def aclose(self) -> None:
        """Stop every kernel (server stop)."""
        await self.pool.aclose()


def _images(cell: CellOutput) -> list[Display]:
    return [d for d in cell.displays if d.mime in IMAGE_TYPES]


def _data_url(display: Display) -> str:
    return f"data:{display.mime};base64,{base64.b64encode(display.data).decode()}"
