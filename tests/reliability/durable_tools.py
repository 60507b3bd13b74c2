"""Server-side tools for the durable-turn tests (loaded by path): each notes every run
in a file, then waits until the test releases it (a file appears), so a test can kill
the server while it runs and count how often it ran."""

import asyncio
import os
from pathlib import Path

from toolrelay import tool


async def _run(name: str, where: str) -> str:
    folder = Path(where)
    with (folder / f"{name}.runs").open("a") as runs:
        runs.write(f"{os.getpid()}\n")
    for _ in range(6000):  # at most ~60 s, so a broken test cannot hang the server
        if (folder / "release").exists():
            return f"{name} done"
        await asyncio.sleep(0.01)
    return "never released"


@tool
async def charge(where: str) -> str:
    """Charge a card (running it twice charges twice)."""
    return await _run("charge", where)


@tool(idempotent=True)
async def fetch(where: str) -> str:
    """Read a record (running it twice is harmless)."""
    return await _run("fetch", where)


@tool(requires_approval=True)
async def wire(where: str) -> str:
    """Wire money, once the user approves."""
    return await _run("wire", where)
