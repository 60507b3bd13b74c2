"""The engine's layering (issue 9 item 3): it sees interfaces, never IO libraries or adapters."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import toolrelay.engine

ENGINE = Path(toolrelay.engine.__file__).parent
FORBIDDEN = (
    "httpx",
    "aiohttp",
    "sqlalchemy",
    "fastapi",
    "redis",
    "toolrelay.adapters",
    "toolrelay.server",
)


def imported_names(path: Path) -> set[str]:
    """Every module a file imports, at the top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def forbidden_in(names: set[str]) -> list[str]:
    return sorted(n for n in names if any(n == f or n.startswith(f + ".") for f in FORBIDDEN))


def test_no_engine_module_imports_io_libraries_or_adapters() -> None:
    bad = {p.name: forbidden_in(imported_names(p)) for p in sorted(ENGINE.glob("*.py"))}
    assert {name: found for name, found in bad.items() if found} == {}


def test_importing_the_engine_loads_no_io_library() -> None:
    code = (
        "import sys, pkgutil, importlib, toolrelay.engine as e\n"
        "for m in pkgutil.iter_modules(e.__path__):\n"
        "    importlib.import_module('toolrelay.engine.' + m.name)\n"
        f"bad = [m for m in sys.modules if m.split('.')[0] in {FORBIDDEN[:4]!r}\n"
        f"       or m.startswith({FORBIDDEN[4:]!r})]\n"
        "print(','.join(sorted(bad)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_the_finisher_and_the_loop_do_not_import_each_other() -> None:
    finisher = imported_names(ENGINE / "finish.py")
    assert "toolrelay.engine.loop" not in finisher
    assert "toolrelay.engine.turn_core" not in finisher
    assert "toolrelay.engine.finish" in imported_names(ENGINE / "turn_core.py")
