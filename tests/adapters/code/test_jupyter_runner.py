"""`JupyterRunner` on a real ipykernel: state, output kinds, timeouts, cancel, the pool."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.patience import HANG
from toolrelay.adapters.code import JupyterRunner, PoolFull, SandboxLimits
from toolrelay.adapters.code.kernels import SandboxedKernelManager
from toolrelay.adapters.code.sandbox import Isolation
from toolrelay.engine.interpreter import CodeJob
from toolrelay.errors import ToolError

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def runner(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[JupyterRunner]:
    """One runner for the whole module; tests that only read their own output share the
    `shared` session (one kernel), those about state or interrupts have their own."""
    run = JupyterRunner(tmp_path_factory.mktemp("code"), timeout=HANG)
    yield run
    await run.aclose()


async def test_state_persists_in_a_session_and_not_across_sessions(runner: JupyterRunner) -> None:
    first = await runner.run("total = 40\nprint('set')", "python", CodeJob(session="state"))
    second = await runner.run("total + 2", "python", CodeJob(session="state"))
    other = await runner.run("total", "python", CodeJob(session="state-other"))
    assert first["stdout"] == "set\n" and "error" not in first
    assert second["result"] == "42"
    assert other["error"] == "NameError: name 'total' is not defined"


async def test_outputs_stream_live_with_their_kinds(runner: JupyterRunner) -> None:
    seen: list[dict[str, Any]] = []

    async def live(event: dict[str, Any]) -> None:
        seen.append(event)

    code = "import sys\nprint('out')\nprint('err', file=sys.stderr)\n6 * 7"
    out = await runner.run(code, "python", CodeJob(session="shared", on_output=live))
    assert out == {"stdout": "out\n", "stderr": "err\n", "result": "42"}
    streams = sorted((e["kind"], e["text"]) for e in seen[:2])  # two streams: any order
    assert streams == [("stderr", "err\n"), ("stdout", "out\n")]
    assert seen[2:] == [{"kind": "result", "text": "42"}]


async def test_an_error_gives_a_plain_traceback(runner: JupyterRunner) -> None:
    out = await runner.run("def f():\n    return 1 / 0\nf()", "python", CodeJob(session="shared"))
    assert out["error"] == "ZeroDivisionError: division by zero"
    assert "\x1b[" not in out["stderr"]  # IPython colours it; we strip the ANSI codes
    assert "----> 3 f()" in out["stderr"] and "return 1 / 0" in out["stderr"]


async def test_a_matplotlib_figure_becomes_an_image_file(runner: JupyterRunner) -> None:
    seen: list[dict[str, Any]] = []

    async def live(event: dict[str, Any]) -> None:
        seen.append(event)

    code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()\n"
    out = await runner.run(code, "python", CodeJob(session="shared", on_output=live))
    [image] = out["files"]
    assert image["mime_type"] == "image/png" and image["url"].startswith("data:image/png;base64,")
    saved = runner.workdir("shared") / image["name"]
    assert saved.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert {"kind": "display", "mime": "image/png", "name": image["name"]} in seen
    gone = await runner.run(
        f"import os; os.remove({image['name']!r})", "python", CodeJob(session="shared")
    )
    assert "error" not in gone and not saved.exists()  # the cell owns the images it showed


async def test_svg_and_html_displays(runner: JupyterRunner) -> None:
    code = (
        "from IPython.display import SVG, HTML, display\n"
        'display(SVG(\'<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>\'))\n'
        "display(HTML('<b>bold</b>'))\n"
    )
    out = await runner.run(code, "python", CodeJob(session="shared"))
    [svg] = out["files"]
    assert svg["mime_type"] == "image/svg+xml" and svg["name"].endswith(".svg")
    assert b"<svg" in (runner.workdir("shared") / svg["name"]).read_bytes()
    assert out["embeds"] == ["<b>bold</b>"]


async def test_a_timeout_interrupts_and_the_next_cell_works(runner: JupyterRunner) -> None:
    await runner.run("kept = 'yes'", "python", CodeJob(session="interrupts"))
    code = "import time\nprint('before', flush=True)\ntime.sleep(600)\nprint('never')"
    out = await runner.run(code, "python", CodeJob(session="interrupts", timeout=1))
    assert out["stdout"] == "before\n"
    assert out["error"].startswith("timed out after 1 s (interrupted; variables are kept)")
    assert "KeyboardInterrupt" in out["stderr"]
    after = await runner.run("kept", "python", CodeJob(session="interrupts"))
    assert after["result"] == "'yes'"


async def test_a_run_asks_for_at_most_max_timeout(tmp_path: Path) -> None:
    run = JupyterRunner(tmp_path, timeout=5, max_timeout=1)
    try:
        out = await run.run("import time; time.sleep(600)", "python", CodeJob(timeout=100))
    finally:
        await run.aclose()
    assert out["error"].startswith("timed out after 1 s")


async def test_cancelling_a_run_interrupts_the_cell(runner: JupyterRunner) -> None:
    started = asyncio.Event()

    async def live(event: dict[str, Any]) -> None:
        started.set()

    await runner.run("n = 1", "python", CodeJob(session="interrupts"))
    code = "import time\nprint('go', flush=True)\nwhile True:\n    time.sleep(0.01)"
    task = asyncio.get_running_loop().create_task(
        runner.run(code, "python", CodeJob(session="interrupts", on_output=live))
    )
    async with asyncio.timeout(HANG):
        await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # the kernel is free again (the loop was interrupted, not left running) and kept `n`
    async with asyncio.timeout(HANG):
        after = await runner.run("n + 1", "python", CodeJob(session="interrupts"))
    assert after["result"] == "2"


async def test_other_languages_are_refused(runner: JupyterRunner) -> None:
    out = await runner.run("echo hi", "bash", CodeJob(session="lang"))
    assert out["error"] == "Unsupported language: bash"


async def test_the_pool_is_limited_reaps_idle_kernels_and_closes(tmp_path: Path) -> None:
    run = JupyterRunner(tmp_path, max_kernels=1, idle_timeout=60)
    now = [0.0]
    run.pool.clock = lambda: now[0]
    try:
        await run.run("a = 1", "python", CodeJob(session="one"))
        first = run.pool._kernels["one"].manager
        with pytest.raises(PoolFull, match="all 1 code kernels are in use"):
            await run.run("1", "python", CodeJob(session="two"))
        assert await run.pool.reap() == []  # not idle long enough yet
        now[0] = 61.0
        assert await run.pool.reap() == ["one"]
        assert not await first.is_alive()
        second = await run.run("1 + 1", "python", CodeJob(session="two"))
        assert second["result"] == "2"
        manager = run.pool._kernels["two"].manager
        assert await manager.is_alive()
    finally:
        await run.aclose()
    assert run.pool.running() == []
    assert not await manager.is_alive()


async def test_the_basic_level_without_namespaces_keeps_the_limits_and_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLRELAY_TEST_SECRET", "leak")
    limits = SandboxLimits(memory_bytes=1024**3)
    run = JupyterRunner(tmp_path, limits=limits, timeout=HANG, level="basic")
    run.sandbox.host = Isolation(full=False, missing="root", no_network=False)  # allows neither
    code = (
        "import os, resource\n"
        "print(os.environ.get('TOOLRELAY_TEST_SECRET'), resource.getrlimit(resource.RLIMIT_AS)[0])"
    )
    try:
        out = await run.run(code, "python", CodeJob(session="plain"))
    finally:
        await run.aclose()
    assert out["stdout"] == f"None {1024**3}\n"


async def test_a_kernel_that_cannot_start_says_why(tmp_path: Path) -> None:
    run = JupyterRunner(tmp_path, python="/nonexistent/python3", startup_timeout=HANG)
    try:
        with pytest.raises(ToolError, match="the code kernel did not start: .*nonexistent"):
            await run.run("1", "python", CodeJob(session="broken"))
        assert run.pool.running() == []
    finally:
        await run.aclose()


def _too_deep(base: Path) -> Path:
    """A directory under `base` whose `.kernels/<uid>/k-1` is longer than a Unix socket's path."""
    deep = base / ("d" * 60) / ("e" * 60)
    assert len(str(deep / ".kernels" / "1234567000" / "k-1")) > 107
    return deep


async def test_a_data_directory_too_deep_for_a_socket_path_still_runs_code(
    tmp_path: Path,
) -> None:
    run = JupyterRunner(_too_deep(tmp_path), timeout=HANG)
    try:
        out = await run.run("6 * 7", "python", CodeJob(session="deep"))
        rundir = run.pool._kernels["deep"].rundir
        short = run.pool.sockets_root()
    finally:
        await run.aclose()
    assert out["result"] == "42"
    assert not rundir.is_relative_to(run.root)
    assert rundir.is_relative_to(short) and len(str(rundir / "k-65535")) <= 107
    assert not short.exists()  # removed with the pool


async def test_a_kernel_whose_sockets_cannot_be_bound_leaves_nothing_running_or_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The start fails after the kernel process started (its control socket cannot
    connect): the process is stopped and its ZeroMQ context and sockets are closed now,
    not left to a garbage collection that warns about them in some later test."""
    root = _too_deep(tmp_path)
    run = JupyterRunner(root, timeout=HANG, startup_timeout=HANG)
    monkeypatch.setattr(run.pool, "sockets_root", lambda: root / ".kernels")  # as before
    try:
        with pytest.raises(ToolError, match="did not start: File name too long") as caught:
            await run.run("1", "python", CodeJob(session="unbound"))
        assert run.pool.running() == []
    finally:
        await run.aclose()
    manager = _manager_of(caught.value)
    assert manager.context.closed
    assert not await manager.is_alive()


def _manager_of(error: BaseException) -> SandboxedKernelManager:
    """The kernel manager of a failed start, from the frames its error's cause went through."""
    tb = error.__cause__.__traceback__ if error.__cause__ is not None else None
    while tb is not None:
        found = tb.tb_frame.f_locals.get("manager")
        if isinstance(found, SandboxedKernelManager):
            return found
        tb = tb.tb_next
    raise AssertionError(f"no kernel manager in the traceback of {error!r}")


async def test_a_run_waiting_on_a_kernel_that_is_shut_down_starts_a_new_one(
    runner: JupyterRunner,
) -> None:
    started = asyncio.Event()

    async def live(event: dict[str, Any]) -> None:
        started.set()

    loop = asyncio.get_running_loop()
    spin = "import time\nprint('busy', flush=True)\ntime.sleep(600)"
    first = loop.create_task(runner.run(spin, "python", CodeJob(session="swap", on_output=live)))
    async with asyncio.timeout(HANG):
        await started.wait()
    second = loop.create_task(
        runner.run("'fresh' if 'time' not in dir() else 'old'", "python", CodeJob(session="swap"))
    )
    await asyncio.sleep(0)  # `second` now waits for the kernel's lock
    await runner.shutdown("swap")
    async with asyncio.timeout(HANG):
        died, fresh = await first, await second
    assert str(died["error"]).startswith("the kernel died")
    assert fresh["result"] == "'fresh'"


def test_a_chat_id_never_names_the_pools_own_directories(tmp_path: Path) -> None:
    """`.kernels` (sockets) and `.users` (user leases) are the pool's; a chat id that
    starts with a dot gets a hashed directory instead."""
    run = JupyterRunner(tmp_path)
    names = {run.pool.workdir(chat).name for chat in (".kernels", ".users", ".", "..", "")}
    assert all(n.startswith("s-") for n in names) and len(names) == 5
    assert run.workdir("chat-1") == tmp_path / "chat-1"


async def test_a_relative_root_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`JupyterRunner("./code")` as docs/code-interpreter.md writes it: the sandbox binds the
    chat's directory by an absolute path, so a relative root is resolved when it is given
    (it failed with "Can't find source path code/default")."""
    monkeypatch.chdir(tmp_path)
    relative = JupyterRunner("./code", timeout=HANG)
    try:
        assert relative.root == tmp_path / "code"
        out = await relative.run("open('made.txt', 'w').write('x')", "python")
        assert out == {"stdout": "", "stderr": "", "result": "1"}
        assert (tmp_path / "code" / "default" / "made.txt").read_text() == "x"
    finally:
        await relative.aclose()
