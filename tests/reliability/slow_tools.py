"""A server-side tool that runs until the test releases it (loaded by path)."""

import asyncio
import os

from toolrelay import tool


@tool
async def wait_for_file(path: str) -> str:
    """Wait until a file exists (tests release a slow tool by creating it)."""
    for _ in range(3000):  # at most ~30 s, so a broken test cannot hang the server
        if os.path.exists(path):  # noqa: ASYNC240 (a test tool: a stat per 10 ms)
            return "released"
        await asyncio.sleep(0.01)
    return "never released"
