"""What durable turns cost: CPU and store writes per turn, with and without checkpoints.

One process, no network: `Relay` over `ScriptedModel` (a tool-calling turn of ROUNDS
rounds of CALLS calls each, then an answer of TEXT_CHUNKS chunks), run with no
checkpoints and with `engine.checkpoint` saving into a store's `turn_runs` row
(as the server does: one write before each batch, one per finished call): the
memory store (the JSON copy only), SQLite (a real UPDATE per checkpoint, through
the one writer) and PostgreSQL when it is up. Reported per turn: CPU, checkpoint
writes, bytes written, and the CPU added per tool step against no checkpoints, in
one run (ratios: the machine is shared). Token deltas never write.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from toolrelay import Relay, tool
from toolrelay.adapters.stores import MemoryStore, SQLStore, Store
from toolrelay.testing.scripted_model import ScriptedModel, reply

ROUNDS, CALLS, TEXT_CHUNKS = 3, 2, 200
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
"""PostgreSQL's admin database: a scratch database is made beside it, dropped after."""


@tool(idempotent=True)
async def lookup(q: str) -> str:
    """Look something up."""
    return f"result for {q}: " + "x" * 400


class Counted:
    """`Checkpoints` into a store's run row, counting writes and bytes."""

    def __init__(self, store: Store, message_id: str) -> None:
        self.store, self.message_id = store, message_id
        self.writes = 0
        self.bytes = 0

    async def save(self, state: Mapping[str, Any]) -> None:
        self.writes += 1
        self.bytes += len(orjson.dumps(state))
        await self.store.save_run_state(self.message_id, state)


def script() -> ScriptedModel:
    rounds = [
        reply(calls=[("lookup", {"q": f"r{r}c{c}"}) for c in range(CALLS)]) for r in range(ROUNDS)
    ]
    return ScriptedModel(*rounds, reply([f"w{i} " for i in range(TEXT_CHUNKS)]))


async def turns(store: Store | None, count: int) -> tuple[float, int, int]:
    """CPU seconds per turn, writes per turn, bytes per turn."""
    chat_id = ""
    if store is not None:
        user = await store.create_user(f"bench{time.monotonic_ns()}")
        chat_id = (await store.create_chat(user.id)).id
    writes = written = 0
    cpu = 0.0
    for i in range(count):
        relay = Relay(script(), [lookup], tasks=())
        target = None
        if store is not None:
            message_id = f"msg_bench_{i}"
            await store.start_run(chat_id, message_id, owner="bench", request={"route": "b"})
            target = Counted(store, message_id)
        start = time.process_time()
        await relay.run("go", checkpoints=target)
        cpu += time.process_time() - start
        if target is not None:
            writes += target.writes
            written += target.bytes
            assert store is not None
            await store.end_run(target.message_id)
    return cpu / count, writes // count, written // count


@contextlib.asynccontextmanager
async def opened(kind: str, folder: Path) -> AsyncIterator[Store | None]:
    if kind == "none":
        yield None
    elif kind == "memory":
        yield MemoryStore()
    elif kind == "sqlite":
        store = await SQLStore.open(f"sqlite+aiosqlite:///{folder / 'bench.db'}")
        try:
            yield store
        finally:
            await store.close()
    else:
        import asyncpg

        name = f"toolrelay_bench_{time.monotonic_ns()}"
        admin = await asyncpg.connect(PG_ADMIN)
        try:
            await admin.execute(f'CREATE DATABASE "{name}"')
            store = await SQLStore.open(f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}")
            try:
                yield store
            finally:
                await store.close()
                await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


async def measure(quick: bool) -> None:
    count = 20 if quick else 200
    steps = ROUNDS * CALLS
    print(
        f"checkpoints: {count} turns of {ROUNDS} tool rounds x {CALLS} calls "
        f"({steps} tool steps) + a {TEXT_CHUNKS}-chunk answer; CPU per turn, one run"
    )
    print(f"{'store':<10}{'CPU ms/turn':>12}{'× none':>8}{'+ms/step':>10}{'writes':>8}{'KB':>7}")
    base = 0.0
    with tempfile.TemporaryDirectory() as folder:
        for kind in ("none", "memory", "sqlite", "postgres"):
            try:
                async with opened(kind, Path(folder)) as store:
                    await turns(store, 3)  # warm-up
                    cpu, writes, written = await turns(store, count)
            except OSError as exc:
                print(f"  ({kind}: not reachable, {type(exc).__name__}; left out)")
                continue
            if kind == "none":
                base = cpu
            added = (cpu - base) * 1000 / steps
            print(
                f"{kind:<10}{cpu * 1000:>12.2f}{cpu / base:>8.2f}{added:>10.3f}"
                f"{writes:>8}{written / 1024:>7.1f}"
            )


def run(*, quick: bool = False) -> None:
    asyncio.run(measure(quick))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    run(quick=parser.parse_args().quick)
