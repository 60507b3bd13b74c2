"""The code interpreter's cost: first cell (kernel start) and a warm `print(1)`.

Three ways, in the same run on the same machine:

- `jupyter_client`: an `AsyncKernelManager` started directly (same `ipc`
  transport, no sandbox), `execute`, read IOPub until idle (the least any
  Jupyter-based interpreter can do);
- `JupyterRunner`: our runner (the full sandbox: bubblewrap, prlimit,
  setpriv, a user per kernel; a kernel per chat; output collected);
- `Relay loop`: a whole turn through `Relay.run` with an in-process scripted
  model that calls `execute_code` then answers (what a chat pays).

Wall time is the median of the runs (first cell: of `starts` fresh kernels);
CPU is this process's (`time.process_time`) plus the kernel's own (from
/proc/<pid>/stat), per run.

Then the sandbox's own start-up cost: `true` run bare, through util-linux's
`unshare --pid --fork` (the other way to a PID namespace, with the same
limits and user), and through our full command line, best of N, alternated.
"""

from __future__ import annotations

import asyncio
import functools
import os
import queue
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager

from benchmarks.timing import interleaved
from toolrelay import Relay
from toolrelay.adapters.code import JupyterRunner
from toolrelay.adapters.code.sandbox import Sandbox
from toolrelay.adapters.code.users import processes_of
from toolrelay.engine.interpreter import CodeJob
from toolrelay.testing.scripted_model import ScriptedModel, reply

_TICK = os.sysconf("SC_CLK_TCK")


def kernel_cpu(pid: int) -> float:
    """Seconds of CPU the kernel process has used (user + system)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


async def direct_run(client: Any, code: str) -> None:
    msg_id = client.execute(code)
    while True:
        try:
            msg = await client.get_iopub_msg(timeout=30)
        except queue.Empty:
            raise RuntimeError("kernel silent") from None
        mine = msg["parent_header"].get("msg_id") == msg_id
        if mine and msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    await client.get_shell_msg(timeout=30)


class Direct:
    name = "jupyter_client"

    async def start(self) -> None:
        where = tempfile.mkdtemp(prefix="bench-direct-")  # Unix sockets, as JupyterRunner uses
        self.km = AsyncKernelManager(transport="ipc", ip=f"{where}/k")
        await self.km.start_kernel()
        self.client = self.km.client()
        self.client.start_channels()
        await self.client.wait_for_ready(timeout=60)
        await direct_run(self.client, "print(1)")

    async def warm(self) -> None:
        await direct_run(self.client, "print(1)")

    def pid(self) -> int:
        return int(self.km.provisioner.pid)

    async def stop(self) -> None:
        self.client.stop_channels()
        await self.km.shutdown_kernel(now=True)


class Runner:
    name = "JupyterRunner"

    async def start(self) -> None:
        self.runner = JupyterRunner(tempfile.mkdtemp(prefix="bench-code-"))
        out = await self.runner.run("print(1)", "python", CodeJob(session="bench"))
        assert out["stdout"] == "1\n", out

    async def warm(self) -> None:
        await self.runner.run("print(1)", "python", CodeJob(session="bench"))

    def pid(self) -> int:
        """The kernel's own process (the provisioner's pid is bubblewrap's)."""
        uid = self.runner.pool._kernels["bench"].uid
        assert uid is not None
        return min(processes_of([uid])[uid])

    async def stop(self) -> None:
        await self.runner.aclose()


class Loop(Runner):
    name = "Relay loop"

    async def start(self) -> None:
        self.runner = JupyterRunner(tempfile.mkdtemp(prefix="bench-loop-"))
        self.model = ScriptedModel()
        self.relay = Relay(self.model, code_interpreter=self.runner, tags=None)
        await self.warm()

    async def warm(self) -> None:
        self.model.add(reply(calls=[("execute_code", {"code": "print(1)"})]), reply("ok"))
        result = await self.relay.run("print one", chat_id="bench")
        assert result.text == "ok", result.error


async def timed(
    step: Callable[[], Awaitable[None]], pid: Callable[[], int] | None
) -> tuple[float, float]:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    kernel0 = kernel_cpu(pid()) if pid is not None else 0.0
    await step()
    kernel = kernel_cpu(pid()) - kernel0 if pid is not None else 0.0
    return time.perf_counter() - wall0, time.process_time() - cpu0 + kernel


async def measure(kind: type[Direct] | type[Runner], starts: int, warm: int) -> dict[str, float]:
    firsts, warm_walls, warm_cpus = [], [], []
    for _ in range(starts):
        bench = kind()
        wall, cpu = await timed(bench.start, None)
        firsts.append((wall, cpu + kernel_cpu(bench.pid())))
        for _ in range(warm):
            wall, cpu = await timed(bench.warm, bench.pid)
            warm_walls.append(wall)
            warm_cpus.append(cpu)
        await bench.stop()
    return {
        "first_wall": statistics.median(w for w, _ in firsts),
        "first_cpu": statistics.median(c for _, c in firsts),
        "warm_wall": statistics.median(warm_walls),
        "warm_cpu": statistics.median(warm_cpus),
    }


async def main(quick: bool) -> None:
    starts, warm = (1, 10) if quick else (3, 50)
    rows = {k.name: await measure(k, starts, warm) for k in (Direct, Runner, Loop)}
    base = rows["jupyter_client"]
    print(f"code interpreter: {starts} kernel start(s), {warm} warm print(1) runs each")
    print(
        f"{'':16} {'first wall':>11} {'first CPU':>10} {'warm wall':>10} {'warm CPU':>9} {'warm ×':>7}"
    )
    for name, row in rows.items():
        ratio = row["warm_wall"] / base["warm_wall"]
        print(
            f"{name:16} {row['first_wall'] * 1000:9.0f}ms {row['first_cpu'] * 1000:8.0f}ms "
            f"{row['warm_wall'] * 1000:8.1f}ms {row['warm_cpu'] * 1000:7.1f}ms {ratio:6.2f}×"
        )


def wrappers(repeat: int) -> None:
    """Start-up cost of each way to a PID namespace with limits and a user (module doc)."""
    root = Path(tempfile.mkdtemp(prefix="bench-sandbox-"))
    work = root / "work"
    work.mkdir()
    sandbox = Sandbox(root=root)
    uid = sandbox.take_user()
    assert uid is not None
    sandbox.own(work, uid)
    true = [shutil.which("true") or "/bin/true"]
    tail = sandbox.command(true, work, uid)
    limits_and_user = tail[tail.index("prlimit") :]
    unshare = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--net"]
    commands = {
        "bare": true,
        "unshare --pid --fork": [*unshare, "--ipc", "--uts", "--mount", *limits_and_user],
        "bwrap (ours)": tail,
    }
    for cmd in commands.values():
        subprocess.run(cmd, check=True)
    best = interleaved(
        {k: functools.partial(subprocess.run, c) for k, c in commands.items()}, repeat
    )
    print(f"sandbox start-up: best of {repeat}, `true` as the command")
    for name, seconds in best.items():
        print(f"{name:22} {seconds * 1000:7.1f}ms  +{(seconds - best['bare']) * 1000:6.1f}ms")
    asyncio.run(sandbox.give_back(uid))
    sandbox.close()
    shutil.rmtree(root)


def run(*, quick: bool = False) -> None:
    asyncio.run(main(quick))
    wrappers(5 if quick else 50)


if __name__ == "__main__":
    run()
