"""toolrelay.core must stay sans-IO (STYLE habit 1)."""

from __future__ import annotations

import subprocess
import sys


def test_core_imports_no_network_db_or_asyncio() -> None:
    code = (
        "import sys, pkgutil, importlib, toolrelay.core as c\n"
        "for m in pkgutil.walk_packages(c.__path__, 'toolrelay.core.'): importlib.import_module(m.name)\n"
        "bad = [m for m in ('httpx', 'httpx2', 'aiohttp', 'asyncio', 'sqlalchemy', 'anyio', 'socket', 'redis') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""
