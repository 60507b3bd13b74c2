"""The parent of `serve --workers N`: N worker processes, each listening on the port itself.

Why not uvicorn's supervisor: its workers share one listening socket, and the
worker that wakes first accepts a whole burst of connections (one wave's CPU
split 1 : 1.5-2.1 between two workers). Here every worker
binds its own socket to host:port with SO_REUSEPORT, and the kernel spreads new
connections over the listening ones by a hash of their addresses. A dead
worker's socket leaves the group: new connections go to the live workers until
it is back (the few it had queued but not accepted are reset, as any crash's).

The parent:

- reserves the port (`reserve_port`): a bound socket that never listens keeps
  host:port ours while workers come and go, and turns port 0 into one real
  port for all of them. A probe bind without SO_REUSEPORT comes first: another
  server already listening there would otherwise share its port with us.
- starts each worker as `python -m toolrelay.server.processes.worker` (a fresh
  interpreter, like `spawn`) holding one end of a socket pair: the worker
  writes "ready" once it listens, and reads EOF when the parent dies (it then
  stops itself, so no orphan keeps the port).
- replaces a worker that exits: at once if it had been ready, else after a
  backoff (0.5 s doubling to 30 s; one that cannot start must not spin). A
  worker is never killed for being slow, to start or later: only its exit
  counts (a loaded machine made uvicorn's 5 s start-up ping kill every worker,
  forever: `cli/serve.py` WORKER_HEALTHCHECK_S). With no worker serving and
  3 failed starts per worker in a row, it gives up (exit code 1).
- on SIGTERM or SIGINT sends SIGTERM to every worker, so each runs its
  graceful shutdown (`server/processes/shutdown.py`), and returns once all have exited;
  a second signal is passed on as SIGINT, which uvicorn takes as "now". A
  worker still there `STOP_MARGIN_S` past the shutdown grace is hung: SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

__all__ = [
    "REUSEPORT",
    "WORKER_ENV",
    "Supervisor",
    "reserve_port",
    "worker_socket",
]

log = logging.getLogger("toolrelay.server")

WORKER_ENV: Final = "TOOLRELAY_WORKER"
"""A worker's orders (JSON: host, port, backlog, control fd, events url), from its parent."""
FIRST_BACKOFF_S: Final = 0.5
MAX_BACKOFF_S: Final = 30.0
GIVE_UP_AFTER: Final = 3
"""Failed starts in a row, per worker, with none serving, before the parent gives up."""
STOP_MARGIN_S: Final = 30.0
"""Seconds past the shutdown grace after which a stopping worker is taken as hung (SIGKILL:
its running turns are left `in_progress` and repaired like a crash's)."""


def _reuseport_option() -> int | None:
    """The socket option that spreads connections over several listeners, where one does:
    Linux's SO_REUSEPORT, FreeBSD's SO_REUSEPORT_LB. macOS's SO_REUSEPORT does not balance."""
    balanced = getattr(socket, "SO_REUSEPORT_LB", None)
    if balanced is not None:
        return int(balanced)
    if sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT"):
        return int(socket.SO_REUSEPORT)
    return None


REUSEPORT: Final = _reuseport_option()


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET  # as uvicorn chooses


def _socket(host: str, *, share: bool) -> socket.socket:
    sock = socket.socket(_family(host), socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if share:
        assert REUSEPORT is not None
        sock.setsockopt(socket.SOL_SOCKET, REUSEPORT, 1)
    return sock


def reserve_port(host: str, port: int) -> socket.socket:
    """Bound, never listening: host:port stays ours for the run (its port is the real one
    when `port` is 0). Raises OSError (EADDRINUSE) when someone else listens there."""
    with _socket(host, share=False) as probe:  # fails if anyone holds the port
        probe.bind((host, port))
        port = int(probe.getsockname()[1])
    return _bound(host, port)


def worker_socket(host: str, port: int) -> socket.socket:
    """A worker's own socket on the shared port, bound but not listening yet: the server
    listens once the app has started, so the kernel sends it no connection before (a
    restarted worker's start-up takes seconds; connections queued on it would wait)."""
    sock = _bound(host, port)
    sock.set_inheritable(False)
    return sock


def _bound(host: str, port: int) -> socket.socket:
    """A `SO_REUSEPORT` socket bound to host:port (closed again if the bind fails)."""
    sock = _socket(host, share=True)
    try:
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


@dataclass(slots=True)
class _Slot:
    index: int
    process: asyncio.subprocess.Process | None = None
    ready: bool = False
    failures: int = 0
    """Deaths before ready, in a row."""


class Supervisor:
    """Keeps `count` workers running until asked to stop; see the module doc."""

    def __init__(
        self,
        count: int,
        env: Mapping[str, str],
        *,
        on_exit: Callable[[int], None] = lambda pid: None,
        on_ready: Callable[[int], None] = lambda pid: None,
        first_backoff: float = FIRST_BACKOFF_S,
        stop_limit: float = STOP_MARGIN_S,
        command: Sequence[str] = (sys.executable, "-m", "toolrelay.server.processes.worker"),
    ) -> None:
        """`env`: the workers' environment, `WORKER_ENV` without its `control` field
        (added per start); `on_ready(pid)` runs when a worker says it listens,
        `on_exit(pid)` after each worker's exit; `stop_limit`: seconds a stopping worker
        has to exit (the shutdown grace plus `STOP_MARGIN_S`) before it is killed."""
        self._command = list(command)
        self._stop_limit = stop_limit
        self._slots = [_Slot(i) for i in range(count)]
        self._env = dict(env)
        self._on_exit = on_exit
        self._on_ready = on_ready
        self._first_backoff = first_backoff
        self._stopping: asyncio.Event | None = None
        self._signals = 0
        self._failed_starts = 0
        self.exit_code = 0

    def pids(self) -> list[int]:
        return [s.process.pid for s in self._slots if s.process and s.process.returncode is None]

    async def run(self) -> int:
        """Start the workers and keep them; returns the exit code once all have stopped."""
        self._stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)
        try:
            await asyncio.gather(*(self._keep(slot) for slot in self._slots))
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
        return self.exit_code

    def stop(self) -> None:
        """SIGTERM to every worker (their graceful shutdown); a second call sends SIGINT."""
        assert self._stopping is not None
        self._signals += 1
        first = not self._stopping.is_set()
        self._stopping.set()
        if first:
            log.info("stopping %d worker(s)", len(self.pids()))
            asyncio.get_running_loop().call_later(self._stop_limit, self._kill_stragglers)
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM if first else signal.SIGINT)

    def _kill_stragglers(self) -> None:
        """A worker still there this long after SIGTERM is hung: the parent must not wait on
        it forever (an orchestrator would kill everything, less cleanly)."""
        for pid in self.pids():
            log.error("worker (pid %d) did not stop in %.0f s: killing it", pid, self._stop_limit)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    async def _keep(self, slot: _Slot) -> None:
        stopping = self._stopping
        assert stopping is not None
        while not stopping.is_set():
            if slot.failures:
                delay = min(MAX_BACKOFF_S, self._first_backoff * 2 ** (slot.failures - 1))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), delay)
                if stopping.is_set():
                    return
            code = await self._run_once(slot)
            if stopping.is_set():
                return
            if slot.ready:
                slot.failures = 0
                log.warning("worker %d exited (%s); starting another", slot.index, _how(code))
            else:
                slot.failures += 1
                self._failed_starts += 1
                serving = any(s.ready and s.process for s in self._slots)
                if not serving and self._failed_starts >= GIVE_UP_AFTER * len(self._slots):
                    log.error("no worker could start (%d tries); giving up", self._failed_starts)
                    self.exit_code = 1
                    self.stop()
                    return
                log.warning("worker %d exited while starting (%s)", slot.index, _how(code))
            slot.ready = False

    async def _run_once(self, slot: _Slot) -> int:
        """One life of a worker: start it, note when it is ready, wait for its exit."""
        ours, theirs = socket.socketpair()
        try:
            spec = _with_control(self._env[WORKER_ENV], theirs.fileno(), slot.index)
            env = {**self._env, WORKER_ENV: spec}
            process = await asyncio.create_subprocess_exec(
                *self._command, env=env, pass_fds=[theirs.fileno()]
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()  # the worker's copy is the only one: EOF here means it is gone
        slot.process = process
        assert self._stopping is not None
        if self._stopping.is_set():  # asked to stop while it was being started
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        reader, writer = await asyncio.open_unix_connection(sock=ours)
        try:
            while line := await reader.readline():
                if line.strip() == b"ready" and not slot.ready:
                    slot.ready = True
                    self._failed_starts = 0
                    self._on_ready(process.pid)
        except OSError:
            pass  # the worker is gone all the same
        finally:
            writer.close()
        code = await process.wait()
        slot.process = None
        self._on_exit(process.pid)
        return code


def _with_control(spec: str, fd: int, slot: int) -> str:
    """The worker's orders with its control socket and its slot (the replacement of a dead
    worker has its slot, so it takes the dead one's turns back at start)."""
    import json

    return json.dumps({**json.loads(spec), "control": fd, "slot": slot})


def _how(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
