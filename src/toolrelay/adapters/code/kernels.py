"""One Jupyter kernel per chat: started on first use, reused, shut down when idle.

`KernelPool` owns the kernels' lives: a chat's first run starts its kernel
(in the sandbox, `sandbox.py`), later runs of that chat reuse it (so its
variables persist across turns), a kernel unused for `idle_timeout` seconds
is shut down, and `aclose()` shuts every one down (server stop). At most
`max_kernels` run at once; one more chat gets `PoolFull`, a clear message.

Each kernel talks to us over Unix sockets (ZeroMQ `ipc`) in a directory of
its own (`.kernels/<uid>`), which also work from inside a network namespace
with no interface. A Unix socket's path holds at most 107 bytes: under a
data directory too deep for that, the socket directories go to a short
temporary directory of the pool's instead (`sockets_root`), removed when
the pool closes; otherwise no kernel could start there at all. Each kernel runs as a user of its own (`Sandbox.take_user`),
taken before it starts and given back only once nothing runs under it. It is
interrupted by a message on its control channel, not a signal: a signal would
reach bubblewrap, not the kernel.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager

from toolrelay.adapters.code.sandbox import Sandbox
from toolrelay.errors import ToolError

__all__ = ["Kernel", "KernelPool", "PoolFull"]

log = logging.getLogger(__name__)

_SAFE = re.compile(r"[^A-Za-z0-9_.-]")
_SOCKET_PATH_MAX = 107
"""Bytes of a Unix socket's path (`sun_path` is 108 with its final NUL)."""
_SOCKET_NAME_ROOM = len("/k-0123456789abcdef/k-65535")
"""The longest a kernel's directory and socket name add to `sockets_root()`."""


def _tail(path: Path, lines: int = 3) -> str:
    """The last lines the kernel process wrote (why it did not start)."""
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return ""
    return " | ".join(text.splitlines()[-lines:])


async def _stop_unstarted(manager: AsyncKernelManager) -> None:
    """Stop a kernel whose start failed, and close its ZeroMQ context and sockets.

    `shutdown_kernel` first interrupts it over its control socket, which is what may
    have failed to connect (then it raises and kills nothing): the process is then
    stopped by signal and the manager's resources freed here, or they would leak
    until garbage collection (a running process, an unclosed context)."""
    try:
        await manager.shutdown_kernel(now=True)
        return
    except Exception as exc:
        log.debug("a kernel that did not start did not shut down: %s", exc)
    with contextlib.suppress(Exception):
        await manager.finish_shutdown(waittime=0)  # SIGTERM, SIGKILL, then reaped
    with contextlib.suppress(Exception):
        await manager.cleanup_resources()


class PoolFull(ToolError):
    """Every kernel slot is held by another chat."""


class SandboxedKernelManager(AsyncKernelManager):
    """A kernel manager whose kernel command goes through the sandbox, interrupted by message."""

    wrap: Callable[[list[str]], list[str]] | None = None
    owner: Callable[[Path], None] | None = None

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        cmd: list[str] = super().format_kernel_cmd(extra_arguments)
        spec = self.kernel_spec
        if spec is not None:  # jupyter_client reads it at each interrupt
            spec.interrupt_mode = "message"
        return self.wrap(cmd) if self.wrap is not None else cmd

    def write_connection_file(self, **kwargs: Any) -> None:
        super().write_connection_file(**kwargs)
        if self.owner is not None:  # the kernel's user must read it
            self.owner(Path(self.connection_file).parent)


@dataclass(slots=True)
class Kernel:
    """A running kernel of one chat."""

    session: str
    uid: int | None
    """Its own user (None at the sandbox's `basic` level)."""
    workdir: Path
    rundir: Path
    """Its connection file and sockets."""
    manager: SandboxedKernelManager
    client: AsyncKernelClient
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = 0.0
    images: int = 0
    """Images saved so far (their file names count up)."""


class KernelPool:
    def __init__(
        self,
        root: Path,
        sandbox: Sandbox,
        *,
        max_kernels: int = 8,
        idle_timeout: float = 600.0,
        startup_timeout: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.root = root
        self.sandbox = sandbox
        self.max_kernels = max_kernels
        self.idle_timeout = idle_timeout
        self.startup_timeout = startup_timeout
        self.clock = clock
        self._kernels: dict[str, Kernel] = {}
        self._starting: dict[str, asyncio.Task[Kernel]] = {}
        self._closing: dict[str, asyncio.Event] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._closed = False
        self._short_root: Path | None = None
        """The temporary socket root, made when `root` is too deep (removed in `aclose`)."""

    def workdir(self, session: str) -> Path:
        """The chat's own directory (files its cells write; images it showed)."""
        name = _SAFE.sub("_", session)
        if name != session or name.startswith(".") or not name:  # .kernels, .users: ours
            name = "s-" + hashlib.sha256(session.encode()).hexdigest()[:24]
        return self.root / name

    def sockets_root(self) -> Path:
        """Where the kernels' socket directories go: `root/.kernels`, or a short temporary
        directory when a socket path under that would be too long to bind."""
        own = self.root / ".kernels"
        if len(os.fsencode(own)) + _SOCKET_NAME_ROOM <= _SOCKET_PATH_MAX:
            return own
        if self._short_root is None:
            self._short_root = Path(tempfile.mkdtemp(prefix="toolrelay-k-"))
        return self._short_root

    def running(self) -> list[str]:
        return sorted(self._kernels)

    def holds(self, kernel: Kernel) -> bool:
        """`kernel` is still its chat's live kernel (not shut down since it was handed out)."""
        return self._kernels.get(kernel.session) is kernel

    async def get(self, session: str) -> Kernel:
        """The chat's kernel, started now if it has none (`PoolFull` when no slot is free)."""
        if self._closed:
            raise ToolError("the code interpreter is shut down")
        closing = self._closing.get(session)
        if closing is not None:  # its old kernel is still stopping: start after it
            await closing.wait()
        kernel = self._kernels.get(session)
        if kernel is not None:
            kernel.last_used = self.clock()  # asked for: not idle, whatever the lock says
            return kernel
        starting = self._starting.get(session)
        if starting is None:
            if len(self._kernels) + len(self._starting) >= self.max_kernels:
                raise PoolFull(
                    f"all {self.max_kernels} code kernels are in use by other chats; "
                    "try again when one is idle (or raise code_interpreter.max_kernels)"
                )
            starting = asyncio.get_running_loop().create_task(self._start(session))
            self._starting[session] = starting
        try:
            return await asyncio.shield(starting)
        finally:
            if starting.done():
                self._starting.pop(session, None)

    async def _start(self, session: str) -> Kernel:
        uid = self.sandbox.take_user()
        try:
            return await self._start_as(session, uid)
        except BaseException:
            await asyncio.shield(self.sandbox.give_back(uid))
            raise

    def _rundir(self, uid: int | None) -> Path:
        """A fresh directory for the kernel's connection file and sockets."""
        name = str(uid) if uid is not None else f"k-{secrets.token_hex(8)}"
        rundir = self.sockets_root() / name
        rundir.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.rmtree(rundir, ignore_errors=True)  # an old kernel's (rmtree follows no link)
        rundir.mkdir(mode=0o700)
        return rundir

    async def _start_as(self, session: str, uid: int | None) -> Kernel:
        workdir = self.workdir(session)
        rundir = self._rundir(uid)
        workdir.mkdir(parents=True, exist_ok=True)
        self.sandbox.own(workdir, uid)
        manager = SandboxedKernelManager(
            transport="ipc", ip=str(rundir / "k"), connection_file=str(rundir / "kernel.json")
        )
        python = self.sandbox.python
        manager.wrap = lambda cmd: self.sandbox.command(
            [python, *cmd[1:]], workdir, uid, expose=[rundir]
        )
        manager.owner = lambda path: self.sandbox.own(path, uid)
        log_path = rundir.with_suffix(".log")
        client: AsyncKernelClient | None = None
        try:
            with log_path.open("wb") as log_file:  # the kernel's own messages, not a cell's
                await manager.start_kernel(
                    env=self.sandbox.env(workdir),
                    cwd=str(workdir),
                    stdout=log_file,
                    stderr=log_file,
                    # no JPY_PARENT_PID: in its PID namespace the kernel's parent is pid 1,
                    # which ipykernel's poller takes for "the server died"; bubblewrap's
                    # --die-with-parent does that job
                    independent=True,
                )
            client = manager.client()
            client.start_channels()
            await client.wait_for_ready(timeout=self.startup_timeout)
        except BaseException as exc:
            if client is not None:
                client.stop_channels()
            await _stop_unstarted(manager)
            self.sandbox.own(workdir, None)
            if isinstance(exc, Exception):
                said = _tail(log_path)
                raise ToolError(
                    f"the code kernel did not start: {exc}" + (f" ({said})" if said else "")
                ) from exc
            raise
        kernel = self._kernels[session] = Kernel(session, uid, workdir, rundir, manager, client)
        kernel.last_used = self.clock()
        self._ensure_reaper()
        return kernel

    async def shutdown(self, session: str) -> None:
        """Stop the chat's kernel (its files stay; its variables are gone)."""
        kernel = self._kernels.pop(session, None)
        if kernel is None:
            return
        # until it is gone, its user (and sockets) and its chat's directory stay its own
        closed = self._closing[session] = asyncio.Event()
        try:
            with contextlib.suppress(Exception):
                kernel.client.stop_channels()
            try:
                await kernel.manager.shutdown_kernel(now=True)
            except Exception as exc:
                log.warning("stopping the kernel of %s failed: %s", session, exc)
            await self.sandbox.give_back(kernel.uid)  # every process of the kernel is gone
            self.sandbox.own(kernel.workdir, None)
            shutil.rmtree(kernel.rundir, ignore_errors=True)
        finally:
            del self._closing[session]
            closed.set()

    async def retire(self, kernel: Kernel) -> None:
        """Stop this kernel if it still is its chat's (never a newer one of the same chat)."""
        if self.holds(kernel):
            await self.shutdown(kernel.session)

    async def reap(self) -> list[str]:
        """Shut down kernels idle longer than `idle_timeout`; returns their chats."""
        now = self.clock()
        idle = [
            s
            for s, k in self._kernels.items()
            if not k.lock.locked() and now - k.last_used > self.idle_timeout
        ]
        for session in idle:
            await self.shutdown(session)
        return idle

    def _ensure_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.get_running_loop().create_task(self._reap_forever())

    async def _reap_forever(self) -> None:
        period = max(0.05, min(self.idle_timeout / 4, 30.0))
        while self._kernels:
            await asyncio.sleep(period)
            try:
                await self.reap()
            except Exception:
                log.exception("shutting down idle kernels failed")

    async def aclose(self) -> None:
        """Shut every kernel down (server stop); the pool takes no more work."""
        self._closed = True
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        for task in list(self._starting.values()):
            with contextlib.suppress(BaseException):
                await task
        for session in list(self._kernels):
            await self.shutdown(session)
        self.sandbox.close()
        if self._short_root is not None:
            shutil.rmtree(self._short_root, ignore_errors=True)
