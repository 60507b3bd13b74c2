"""The `serve --workers N` supervisor with stand-in workers (tiny real processes).

What each stand-in does is scripted: die at once, say "ready" and exit, or say
"ready" and wait for a signal; the real worker is covered end to end by
tests/reliability/test_workers.py.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from tests.patience import HANG
from toolrelay.server.processes.supervisor import WORKER_ENV, Supervisor

PRELUDE = (
    "import json, os, signal, socket, sys, time\n"
    f"orders = json.loads(os.environ[{WORKER_ENV!r}])\n"
    "control = socket.socket(fileno=orders['control'])\n"
    "def ready(): control.sendall(b'ready\\n')\n"
    "def idle(): time.sleep(300); os._exit(9)  # bounded: a broken test leaves no process\n"
)


def supervisor(script: str, count: int, **options: object) -> Supervisor:
    env = {WORKER_ENV: json.dumps({"host": "127.0.0.1", "port": 0, "backlog": 1})}
    command = [sys.executable, "-c", PRELUDE + script]
    return Supervisor(count, env, command=command, **options)  # type: ignore[arg-type]


def run(sup: Supervisor) -> int:
    return asyncio.run(asyncio.wait_for(sup.run(), 4 * HANG))


def test_workers_that_never_start_make_it_give_up_with_exit_code_1() -> None:
    exits: list[int] = []
    sup = supervisor("sys.exit(3)", 2, on_exit=exits.append, first_backoff=0.001)
    assert run(sup) == 1
    # three tries per worker, with a backoff between them (the other's next try may be
    # under way when the sixth failure gives up: it is stopped, not left behind)
    assert len(exits) in (6, 7)


def test_a_worker_that_was_ready_is_replaced_without_backoff() -> None:
    exits: list[int] = []
    readies: list[int] = []

    def exited(pid: int) -> None:
        exits.append(pid)
        if len(exits) == 5:
            sup.stop()

    # with a 1,000 s backoff, any wait between these lives would hang the test
    sup = supervisor(
        "ready(); sys.exit(0)", 1, on_exit=exited, on_ready=readies.append, first_backoff=1000
    )
    assert run(sup) == 0
    assert len(set(exits)) == 5  # five lives, five processes
    assert readies == exits


def test_stop_sends_sigterm_and_waits_for_every_worker(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    script = (
        "def bye(*_):\n"
        f"    open({str(marks)!r}, 'a').write('term\\n'); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        f"open({str(marks)!r}, 'a').write('up\\n')\n"
        "ready()\n"
        "idle()\n"
    )
    exits: list[int] = []

    async def main() -> int:
        both = asyncio.Event()
        readies: list[int] = []

        def ready(pid: int) -> None:  # it handles SIGTERM by then
            readies.append(pid)
            if len(readies) == 2:
                both.set()

        sup = supervisor(script, 2, on_exit=exits.append, on_ready=ready)
        task = asyncio.create_task(sup.run())
        await asyncio.wait_for(both.wait(), 4 * HANG)
        sup.stop()
        return await asyncio.wait_for(task, HANG)

    assert asyncio.run(main()) == 0
    assert sorted(marks.read_text().splitlines()) == ["term", "term", "up", "up"]
    assert len(exits) == 2  # stopped, not replaced


def test_a_worker_that_ignores_sigterm_is_killed_after_the_stop_limit() -> None:
    exits: list[int] = []
    script = "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nready()\nidle()\n"

    async def main() -> int:
        up = asyncio.Event()
        # a hung worker: the parent must not wait on it for ever
        sup = supervisor(
            script, 1, on_exit=exits.append, on_ready=lambda _: up.set(), stop_limit=0.2
        )
        task = asyncio.create_task(sup.run())
        await asyncio.wait_for(up.wait(), 4 * HANG)
        sup.stop()
        return await asyncio.wait_for(task, HANG)

    assert asyncio.run(main()) == 0
    assert len(exits) == 1
