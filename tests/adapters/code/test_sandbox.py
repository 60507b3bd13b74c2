"""Each limit of the sandbox, proved on a real kernel (docs/code-interpreter.md).

These need what CI has: root, bubblewrap and Linux namespaces. Without them
the tests fail and say so, since the isolation they check would be missing.
`test_escapes.py` has the attacks of issue 24.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.patience import HANG
from toolrelay.adapters.code import JupyterRunner, SandboxLimits, isolation
from toolrelay.engine.interpreter import CodeJob

pytestmark = pytest.mark.anyio

LIMITS = SandboxLimits(
    cpu_seconds=60, memory_bytes=1024**3, open_files=160, processes=40, network=False
)
SECRET = "sk-server-secret-do-not-leak"


@pytest.fixture(scope="module")
def secret_env() -> Iterator[None]:
    os.environ["TOOLRELAY_TEST_API_KEY"] = SECRET
    yield
    del os.environ["TOOLRELAY_TEST_API_KEY"]


@pytest.fixture(scope="module")
def data_dir() -> Iterator[Path]:
    """A stand-in for the server's data directory, outside the kernel's private /tmp,
    /var/tmp and /dev/shm (which would hide it anyway) and open to other users (the kernel
    has its own): beside this file, or under /var/lib when the checkout itself is in one
    of those (a clone in /tmp)."""
    here = Path(__file__).parent.resolve()
    parent = here
    if any(here.is_relative_to(p) for p in ("/tmp", "/var/tmp", "/dev/shm")):
        parent = Path("/var/lib/toolrelay-tests")
        parent.mkdir(mode=0o755, exist_ok=True)
    made = Path(tempfile.mkdtemp(prefix=".data-", dir=parent))
    (made / "toolrelay.db").write_text("server data")
    made.chmod(0o755)
    (made / "toolrelay.db").chmod(0o644)  # readable by anyone on the host: hiding must do it
    yield made
    shutil.rmtree(made)


@pytest.fixture(scope="module")
async def runner(
    tmp_path_factory: pytest.TempPathFactory, secret_env: None, data_dir: Path
) -> AsyncIterator[JupyterRunner]:
    host = isolation()
    assert host.full, f"the sandbox tests need root, bubblewrap and namespaces: {host.missing}"
    root = tmp_path_factory.mktemp("sandboxed")
    run = JupyterRunner(root, limits=LIMITS, timeout=HANG, hide=[data_dir])
    yield run
    await run.aclose()


async def cell(runner: JupyterRunner, code: str, session: str = "jail") -> dict[str, object]:
    return await runner.run(code, "python", CodeJob(session=session))


async def test_the_server_environment_does_not_reach_the_code(runner: JupyterRunner) -> None:
    code = (
        "import os\n"
        "print(sorted(k for k in os.environ if 'KEY' in k or 'DATABASE' in k))\n"
        f"try:\n    print(open('/proc/{os.getpid()}/environ', 'rb').read().count(b'sk-server'))\n"
        "except OSError as e:\n    print(type(e).__name__)\n"
    )
    out = await cell(runner, code)
    assert os.environ["TOOLRELAY_TEST_API_KEY"] == SECRET  # it was there to leak
    # not even there: the server is outside the kernel's PID namespace
    assert out["stdout"] == "[]\nFileNotFoundError\n"


async def test_a_memory_bomb_raises_memory_error_and_the_kernel_lives(
    runner: JupyterRunner,
) -> None:
    out = await cell(runner, "hog = bytearray(2 * 1024**3)")
    assert out["error"] == "MemoryError"
    after = await cell(runner, "1 + 1")
    assert after["result"] == "2"


async def test_a_fork_bomb_stops_at_the_process_limit(runner: JupyterRunner) -> None:
    code = (
        "import os, time\n"
        "children = []\n"
        "try:\n"
        "    for _ in range(500):\n"
        "        pid = os.fork()\n"
        "        if pid == 0:\n"
        "            time.sleep(30)\n"
        "            os._exit(0)\n"
        "        children.append(pid)\n"
        "    print('unlimited')\n"
        "except BlockingIOError:\n"
        "    print('stopped', len(children) < 40)\n"
        "for pid in children:\n"
        "    os.kill(pid, 9)\n"
        "    os.waitpid(pid, 0)\n"
    )
    out = await cell(runner, code)
    assert out["stdout"] == "stopped True\n"


async def test_open_files_are_limited(runner: JupyterRunner) -> None:
    code = (
        "held, why = [], None\n"
        "try:\n"
        "    for _ in range(1000):\n"
        "        held.append(open('/dev/null'))\n"
        "except OSError as e:\n"
        "    why = e.strerror\n"
        "for f in held:\n"
        "    f.close()\n"
        "print(why, len(held) < 160)\n"
    )
    out = await cell(runner, code)
    assert out["stdout"] == "Too many open files True\n"


async def test_the_code_writes_only_in_its_own_directory(
    runner: JupyterRunner, tmp_path: Path, data_dir: Path
) -> None:
    await cell(runner, "open('mine.txt', 'w').write('ok')", session="neighbour")
    neighbour = runner.workdir("neighbour")
    code = (
        "import os\n"
        "def attempt(path):\n"
        "    try:\n"
        "        open(path, 'w').write('x')\n"
        "        return 'wrote'\n"
        "    except OSError as e:\n"
        "        return type(e).__name__\n"
        f"print(attempt('/etc/toolrelay-escape'))\n"
        f"print(attempt({str(tmp_path / 'escape')!r}))\n"
        f"print(attempt({str(neighbour / 'mine.txt')!r}))\n"
        f"print(os.path.exists({str(data_dir)!r}) and os.listdir({str(data_dir)!r}))\n"
        "print(attempt('here.txt'), os.getcwd())\n"
    )
    out = await cell(runner, code)
    lines = str(out["stdout"]).splitlines()
    assert lines[0] in ("PermissionError", "OSError")  # EACCES, or EROFS: /etc is read-only
    assert lines[1] in ("PermissionError", "FileNotFoundError", "wrote")
    assert not (tmp_path / "escape").exists()  # whatever it did, the host's file is not there
    assert lines[2] in ("PermissionError", "FileNotFoundError")
    assert (neighbour / "mine.txt").read_text() == "ok"
    assert lines[3] in ("[]", "False")  # the hidden data directory: empty or absent
    assert lines[4] == "wrote /tmp/work"
    assert (runner.workdir("jail") / "here.txt").read_text() == "x"


async def test_no_network_even_to_the_host_loopback(runner: JupyterRunner) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        code = (
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=5)\n"
            "    print('connected')\n"
            "except OSError as e:\n"
            "    print(type(e).__name__)\n"
        )
        out = await cell(runner, code)
    assert out["stdout"] in ("ConnectionRefusedError\n", "OSError\n")  # never 'connected'


async def test_network_is_there_when_allowed(tmp_path: Path) -> None:
    run = JupyterRunner(tmp_path, limits=SandboxLimits(network=True), timeout=HANG)
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5)\n'ok'"
        try:
            out = await run.run(code, "python", CodeJob(session="net"))
        finally:
            await run.aclose()
    assert out["result"] == "'ok'"


async def test_the_cpu_limit_ends_the_kernel_and_the_next_run_starts_anew(
    tmp_path: Path,
) -> None:
    run = JupyterRunner(tmp_path, limits=SandboxLimits(cpu_seconds=2), timeout=HANG)
    try:
        await cell(run, "state = 1", session="spin")
        out = await cell(run, "while True:\n    pass", session="spin")
        after = await cell(run, "'state' in globals()", session="spin")
    finally:
        await run.aclose()
    assert str(out["error"]).startswith("the kernel died")
    assert after["result"] == "False"


async def test_the_code_has_no_privileges(runner: JupyterRunner) -> None:
    """No capabilities (not even in the bounding set), no groups, `no_new_privs`: a setuid
    program under /usr/bin raises nothing."""
    code = (
        "import os, subprocess\n"
        "status = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines())\n"
        "print(*(status[k].strip() for k in ('CapEff', 'CapPrm', 'CapBnd', 'NoNewPrivs')))\n"
        "print(os.getuid() != 0, os.getgroups())\n"
        "su = subprocess.run(['/usr/bin/su', '-c', 'id -u'], capture_output=True, text=True)\n"
        "print(su.stdout.strip() != '0')\n"
    )
    out = await cell(runner, code)
    zero = "0000000000000000"
    assert out["stdout"] == f"{zero} {zero} {zero} 1\nTrue []\nTrue\n"
