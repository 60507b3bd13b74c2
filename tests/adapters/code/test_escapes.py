"""The escapes of issue 24 (items 2 and 3), each tried on real kernels and processes.

Alice's code outliving her chat (a `setsid` child, a double fork) and a kill
of the server; a leftover reading Bob's files through `/proc/<pid>/root` and
dropping them where Alice's next chat finds them; a fork loop starving other
kernels; the host's Unix sockets (PostgreSQL's) with `network = false`; the
server following a symlink the code planted. Every wait polls a condition
under a generous deadline (`hostview.until`).

These need root, bubblewrap and Linux namespaces (CI has them); without them
the runner refuses to start and the tests fail saying so.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path

import pytest

from tests.adapters.code.hostview import kill_all, processes_of, until
from tests.patience import HANG
from toolrelay.adapters.code import JupyterRunner, SandboxLimits
from toolrelay.adapters.code.subprocess import SandboxedSubprocess
from toolrelay.config import load_settings
from toolrelay.config.registry import build_registry
from toolrelay.engine.interpreter import CodeJob

pytestmark = pytest.mark.anyio

LIMITS = SandboxLimits(cpu_seconds=120, memory_bytes=1024**3, processes=40, network=False)
PG_SOCKET = "/var/run/postgresql/.s.PGSQL.5432"

SPAWN = """
import os, subprocess, sys
print(os.getuid())
forever = "import time\\nwhile True:\\n    time.sleep(3600)"
subprocess.Popen([sys.executable, "-c", forever], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
child = os.fork()
if child == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", forever])
    os._exit(0)
os.waitpid(child, 0)
print("spawned")
"""
"""A `setsid` child and a double-forked grandchild that would run for an hour."""


@pytest.fixture
def uids() -> Iterator[set[int]]:
    """User ids the test's cells reported: whatever still runs under them at the end is
    killed, so a failing test leaves nothing behind for the next."""
    seen: set[int] = set()
    yield seen
    kill_all(seen)


@pytest.fixture
async def runner(tmp_path: Path) -> AsyncIterator[JupyterRunner]:
    run = JupyterRunner(tmp_path / "code", limits=LIMITS, timeout=HANG, max_timeout=4 * HANG)
    yield run
    await run.aclose()


async def cell(runner: JupyterRunner, code: str, session: str, seconds: float = HANG) -> str:
    out = await runner.run(code, "python", CodeJob(session=session, timeout=seconds))
    assert "error" not in out, out
    return str(out["stdout"])


async def spawn_leftovers(runner: JupyterRunner, session: str, uids: set[int]) -> int:
    """Start Alice's two would-be survivors; her kernel's user id."""
    uid_line, said = (await cell(runner, SPAWN, session)).split()
    uid = int(uid_line)
    uids.add(uid)
    assert said == "spawned"
    assert uid != 0
    await until(lambda: len(processes_of([uid])) >= 3, "the kernel and both children run")
    return uid


async def test_setsid_and_double_fork_children_die_with_the_chat(
    runner: JupyterRunner, uids: set[int]
) -> None:
    uid = await spawn_leftovers(runner, "alice", uids)
    await runner.forget("alice")
    await until(lambda: not processes_of([uid]), f"nothing runs as {uid} after the chat's deletion")


async def test_setsid_and_double_fork_children_die_with_the_runner(
    runner: JupyterRunner, uids: set[int]
) -> None:
    uid = await spawn_leftovers(runner, "alice", uids)
    await runner.aclose()
    await until(lambda: not processes_of([uid]), f"nothing runs as {uid} after the runner closed")


SERVER = """
import asyncio, sys
from toolrelay.adapters.code import JupyterRunner
from toolrelay.engine.interpreter import CodeJob

async def main():
    runner = JupyterRunner(sys.argv[1], timeout=60)
    out = await runner.run(sys.argv[2], "python", CodeJob(session="alice"))
    print(out.get("stdout", "").split()[0] if "error" not in out else out, flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


async def test_a_killed_server_leaves_no_kernel_or_child_behind(
    tmp_path: Path, uids: set[int]
) -> None:
    """kill -9 of the process that runs the kernels: no clean-up code runs in it."""
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SERVER, str(tmp_path / "code"), SPAWN, stdout=subprocess.PIPE
    )
    try:
        assert server.stdout is not None
        async with asyncio.timeout(4 * HANG):
            line = await server.stdout.readline()
        uid = int(line)
        uids.add(uid)
        await until(lambda: len(processes_of([uid])) >= 3, "the kernel and both children run")
    finally:
        server.kill()
        await server.wait()
    await until(lambda: not processes_of([uid]), f"nothing runs as {uid} after kill -9")
    # a restarted server on the same directory runs code as before
    run = JupyterRunner(tmp_path / "code", limits=LIMITS, timeout=HANG)
    try:
        assert await cell(run, "print('again')", "alice") == "again\n"
    finally:
        await run.aclose()


READER = """
import glob, os, sys, subprocess
print(os.getuid())
steal = '''
import glob, sys, time
while True:
    for path in glob.glob("/proc/[0-9]*/root/tmp/work/bob.txt") + glob.glob("/proc/[0-9]*/cwd/bob.txt"):
        try:
            data = open(path).read()
        except OSError:
            continue
        for where in ("/run/lock", "/tmp", "/dev/shm", "/var/tmp"):
            try:
                open(where + "/" + sys.argv[1], "w").write(data)
            except OSError:
                pass
    time.sleep(0.02)
'''
subprocess.Popen([sys.executable, "-c", steal, TOKEN], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""


async def test_a_leftover_cannot_carry_the_next_chats_files_to_a_later_chat(
    runner: JupyterRunner, uids: set[int]
) -> None:
    """The issue's chain: Alice's setsid process outlives her chat, reads Bob's file
    through /proc/<Bob's kernel>/root and drops it in /run/lock; Alice's next chat reads
    it back."""
    token = f"loot-{uuid.uuid4().hex}"
    host_loot = Path("/run/lock") / token
    try:
        alice = int(await cell(runner, READER.replace("TOKEN", repr(token)), "alice"))
        uids.add(alice)
        await runner.forget("alice")
        bob = int(await cell(runner, "import os\nprint(os.getuid())", "bob"))
        uids.add(bob)
        await cell(runner, "open('bob.txt', 'w').write('bob-secret')", "bob")
        await until(
            lambda: host_loot.exists() or not processes_of([alice]),
            "the thief stole or died",
        )
        assert not host_loot.exists(), "Alice's leftover read Bob's file and left it in /run/lock"
        later = await cell(
            runner,
            "import os\n"
            f"for where in ('/run/lock', '/tmp', '/dev/shm', '/var/tmp'):\n"
            f"    print(os.path.exists(where + '/' + {token!r}))\n",
            "alice-again",
        )
        assert later == "False\n" * 4
    finally:
        host_loot.unlink(missing_ok=True)


async def test_files_dropped_in_shared_directories_do_not_reach_a_later_chat(
    runner: JupyterRunner, uids: set[int]
) -> None:
    token = f"drop-{uuid.uuid4().hex}"
    places = ("/run/lock", "/tmp", "/var/tmp", "/dev/shm")
    drop = (
        "import os\n"
        "print(os.getuid())\n"
        f"for where in {places!r}:\n"
        "    try:\n"
        f"        open(where + '/' + {token!r}, 'w').write('from alice')\n"
        "    except OSError:\n"
        "        pass\n"
    )
    try:
        uids.add(int(await cell(runner, drop, "alice")))
        await runner.forget("alice")
        look = f"import os\nfor where in {places!r}:\n    print(os.path.exists(where + '/' + {token!r}))"
        assert await cell(runner, look, "bob") == "False\n" * len(places)
    finally:
        assert _remove(Path(p, token) for p in places) == []  # and nothing on the host


WRITABLE = """
import os
token = TOKEN
found = []
for base, dirs, files in os.walk("/"):
    if base == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys")]
    if os.access(base, os.W_OK | os.X_OK):
        try:
            with open(os.path.join(base, token), "x"):
                pass
            found.append(base)
        except OSError:
            pass
print("\\n".join(found))
"""


async def test_no_host_directory_outside_the_chats_own_is_writable(
    runner: JupyterRunner, uids: set[int]
) -> None:
    """Every directory the code can write into, found by walking all it sees: a marker it
    leaves there must not appear on the host, but in the chat's own directory."""
    token = f"mark-{uuid.uuid4().hex}"
    uids.add(int(await cell(runner, "import os\nprint(os.getuid())", "walker")))
    listed = await cell(runner, WRITABLE.replace("TOKEN", repr(token)), "walker", 4 * HANG)
    found = listed.split()
    # its chat's directory and its kernel's socket directory (under the root, or the pool's
    # short temporary directory when the root is too deep for a socket path)
    own = [runner.root.resolve(), runner.pool.sockets_root().resolve()]
    landed = _remove(Path(p, token) for p in found)
    assert "/tmp/work" in found  # the walk did write where it may
    assert [p for p in landed if not any(p.resolve().is_relative_to(o) for o in own)] == []


def _remove(paths: Iterable[Path]) -> list[Path]:
    """Remove the files of `paths` that exist on the host; those it found."""
    found = [p for p in paths if p.exists()]
    for path in found:
        path.unlink()
    return found


async def test_a_fork_loop_does_not_starve_other_kernels_now_or_later(
    runner: JupyterRunner, uids: set[int]
) -> None:
    hold = (
        "import os, time\n"
        "print(os.getuid())\n"
        "held = 0\n"
        "try:\n"
        "    while True:\n"
        "        if os.fork() == 0:\n"
        "            os.setsid()\n"
        "            time.sleep(3600)\n"
        "            os._exit(0)\n"
        "        held += 1\n"
        "except OSError:\n"
        "    pass\n"
        "print(held)\n"
    )
    busy = (
        "import os, subprocess, sys, threading\n"
        "print(os.getuid())\n"
        "ts = [threading.Thread(target=lambda: None) for _ in range(8)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "print(subprocess.run([sys.executable, '-c', 'print(1)'], capture_output=True).stdout)\n"
    )
    uid_line, held = (await cell(runner, hold, "alice")).split()
    alice = int(uid_line)
    uids.add(alice)
    assert int(held) < LIMITS.processes  # the loop met its own kernel's limit
    bob_uid, bob_out = (await cell(runner, busy, "bob")).split()
    uids.add(int(bob_uid))
    assert bob_out == "b'1\\n'"
    await runner.forget("alice")
    carol_uid, carol_out = (await cell(runner, busy, "carol")).split()
    uids.add(int(carol_uid))
    assert carol_out == "b'1\\n'"
    await until(lambda: not processes_of([alice]), "the fork loop's children are gone")


async def test_another_kernels_files_are_not_reachable_through_proc(
    runner: JupyterRunner, uids: set[int]
) -> None:
    bob = int(await cell(runner, "import os\nprint(os.getuid())", "bob"))
    uids.add(bob)
    await cell(runner, "open('bob.txt', 'w').write('bob-secret')", "bob")
    bob_pids = processes_of([bob])
    assert bob_pids
    probe = (
        "import glob, os\n"
        "print(os.getuid())\n"
        f"pids = {bob_pids!r} + [int(p) for p in os.listdir('/proc') if p.isdigit()]\n"
        "got = []\n"
        "for pid in pids:\n"
        "    for path in (f'/proc/{pid}/root/tmp/work/bob.txt', f'/proc/{pid}/cwd/bob.txt'):\n"
        "        try:\n"
        "            got.append(open(path).read())\n"
        "        except OSError:\n"
        "            pass\n"
        "print(len(got))\n"
    )
    alice, got = (await cell(runner, probe, "alice")).split()
    uids.add(int(alice))
    assert int(alice) != bob
    assert got == "0"


CONNECT = """
import errno, socket
for path in PATHS:
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET):
        s = socket.socket(socket.AF_UNIX, kind)
        try:
            s.connect(path)
            print("connected", flush=True)
            break
        except OSError as e:
            if e.errno == errno.EPROTOTYPE:
                continue  # the socket is of another type
            print(type(e).__name__)
            break
        finally:
            s.close()
"""


def _host_socket_paths(root: Path) -> list[str]:
    """Every Unix socket bound to a path in the host's network namespace (/proc/net/unix),
    and the kernels' sockets under `root` (bound in their own namespaces)."""
    with open("/proc/net/unix") as table:
        rows = [line.split() for line in table.read().splitlines()[1:]]
    found = {r[7] for r in rows if len(r) > 7 and r[7].startswith("/")}
    found |= {str(p) for p in root.rglob("*") if p.is_socket()}
    return sorted(found)


async def test_postgresqls_unix_socket_is_out_of_reach_without_network(
    runner: JupyterRunner, uids: set[int]
) -> None:
    with socket.socket(socket.AF_UNIX) as host:
        try:
            host.connect(PG_SOCKET)  # the host reaches it: the sandbox must not
        except OSError as exc:
            raise AssertionError(f"PostgreSQL must run here, its socket at {PG_SOCKET}") from exc
    out = await cell(runner, CONNECT.replace("PATHS", repr([PG_SOCKET])), "pg")
    assert out == "FileNotFoundError\n"


async def test_no_host_unix_socket_is_reachable_without_network(
    runner: JupyterRunner, uids: set[int], tmp_path: Path
) -> None:
    """Each socket the host has bound to a path, another kernel's included, is hidden;
    an abstract socket of the host is in another network namespace."""
    await cell(runner, "1", "bob")  # another kernel, with its own sockets
    abstract = f"\0toolrelay-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(abstract)
        listener.listen()
        sockets = runner.pool.sockets_root()
        paths = _host_socket_paths(sockets)
        assert any(Path(p).is_relative_to(sockets) for p in paths)  # Bob's
        assert PG_SOCKET in paths or "/run/postgresql/.s.PGSQL.5432" in paths
        out = await cell(runner, CONNECT.replace("PATHS", repr([*paths, abstract])), "alice")
    said = out.split()
    assert len(said) == len(paths) + 1
    assert said[:-1] == ["FileNotFoundError"] * len(paths), dict(zip(paths, said, strict=False))
    assert said[-1] == "ConnectionRefusedError"


async def test_the_server_does_not_follow_a_symlink_planted_for_its_images(
    runner: JupyterRunner, tmp_path: Path, uids: set[int]
) -> None:
    """`outputs` made a symlink to a host directory: the image the server saves for the
    cell must not land there, nor may the directory change owner."""
    victim = Path(tempfile.mkdtemp(dir=tmp_path))
    (victim / "keep.txt").write_text("host file")
    before = _owners(victim)
    code = (
        "import os\n"
        f"os.symlink({str(victim)!r}, 'outputs')\n"
        "import matplotlib.pyplot as plt\n"
        "plt.plot([1, 2])\n"
        "plt.show()\n"
    )
    await runner.run(code, "python", CodeJob(session="planter", timeout=HANG))
    assert _owners(victim) == before


def _owners(folder: Path) -> dict[str, tuple[int, int]]:
    """Each entry of `folder` (and itself) with its owner and group."""
    return {p.name: (p.stat().st_uid, p.stat().st_gid) for p in [folder, *folder.iterdir()]}


async def test_a_config_file_outside_the_data_directory_is_unreadable(
    tmp_path: Path, uids: set[int]
) -> None:
    """A world-readable toolrelay.toml under /etc (which the code sees) holds `admin_key`."""
    folder = Path(tempfile.mkdtemp(prefix="toolrelay-test-", dir="/etc"))
    try:
        config = _world_readable_config(folder, tmp_path / "data")
        registry = build_registry(load_settings(config))
        try:
            read = (
                "import os\nprint(os.getuid())\n"
                f"try:\n    print(open({str(config)!r}).read())\n"
                "except OSError as e:\n    print(type(e).__name__)\n"
            )
            out = await registry.code_runner.run(read, "python", CodeJob(session="cfg"))
        finally:
            await registry.aclose()
    finally:
        shutil.rmtree(folder)
    uid, said = str(out["stdout"]).split(maxsplit=1)
    uids.add(int(uid))
    assert "tr-admin-secret" not in said
    assert said.strip() in ("FileNotFoundError", "PermissionError", "")


def _world_readable_config(folder: Path, data_dir: Path) -> Path:
    folder.chmod(0o755)
    config = folder / "toolrelay.toml"
    config.write_text(
        'admin_key = "tr-admin-secret-in-config"\n'
        f'data_dir = "{data_dir}"\n'
        "[code_interpreter]\n"
        'engine = "jupyter"\n'
        "[[models]]\n"
        'name = "m"\nkind = "openai-chat"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
    )
    config.chmod(0o644)
    return config


def _plant(uid: int) -> subprocess.Popen[bytes]:
    """A process of `uid` in its own session, as a dead server's kernel would leave."""
    return subprocess.Popen(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "sleep", "3600"],
        start_new_session=True,
    )


async def test_a_new_runner_kills_what_a_dead_one_left_under_its_users(
    tmp_path: Path, uids: set[int]
) -> None:
    first = JupyterRunner(tmp_path / "code", limits=LIMITS)
    uid = first.sandbox.base_uid + 3
    await first.aclose()
    uids.add(uid)
    leftover = _plant(uid)
    try:
        await until(lambda: processes_of([uid]) == [leftover.pid], "the planted leftover runs")
        second = JupyterRunner(tmp_path / "code", limits=LIMITS)
        try:
            await until(lambda: leftover.poll() is not None, "the leftover is killed")
            assert leftover.returncode == -signal.SIGKILL
        finally:
            await second.aclose()
    finally:
        if leftover.poll() is None:
            leftover.kill()
        leftover.wait()


async def test_with_the_network_on_the_hosts_unix_sockets_stay_hidden(
    tmp_path: Path, uids: set[int]
) -> None:
    """`network = true` opens TCP and the host's abstract sockets (docs say so), not files."""
    run = JupyterRunner(tmp_path / "code", limits=SandboxLimits(network=True), timeout=HANG)
    try:
        uids.add(int(await cell(run, "import os\nprint(os.getuid())", "pg")))
        out = await cell(run, CONNECT.replace("PATHS", repr([PG_SOCKET])), "pg")
    finally:
        await run.aclose()
    assert out == "FileNotFoundError\n"


async def test_the_subprocess_engine_leaves_nothing_behind(tmp_path: Path, uids: set[int]) -> None:
    run = SandboxedSubprocess(tmp_path / "code", limits=LIMITS, timeout=HANG)
    try:
        out = await run.run(SPAWN, "python", CodeJob(session="alice"))
        uid_line, said = str(out["stdout"]).split()
        uids.add(int(uid_line))
        assert said == "spawned" and int(uid_line) != 0
        await until(lambda: not processes_of([int(uid_line)]), "nothing of the run is left")
        second = await run.run("import os\nprint(os.getuid())", "python", CodeJob(session="b"))
        uids.add(int(second["stdout"]))
    finally:
        await run.aclose()
