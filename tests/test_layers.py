"""The front doors and the config layer keep to their imports (docs/architecture.md).

`config` imports neither front door; the CLI starts from `config`, and only
`cli/serve.py` reaches into `server` (to start it); `server` never imports the
CLI. Checked on the source (every `import`, also the lazy ones inside functions).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Set as AbstractSet
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "toolrelay"


def imported(path: Path) -> set[str]:
    """Every module an `import` or `from … import` in the file names (absolute imports)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def offenders(
    layer: str, forbidden: tuple[str, ...], allowed: AbstractSet[str] = frozenset()
) -> list[str]:
    found = []
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        if rel in allowed:
            continue
        for name in sorted(imported(path)):
            if name.startswith(forbidden):
                found.append(f"{rel} imports {name}")
    return found


@pytest.mark.parametrize(
    ("layer", "forbidden", "allowed"),
    [
        ("config", ("toolrelay.server", "toolrelay.cli"), set()),
        ("cli", ("toolrelay.server",), {"cli/serve.py"}),
        ("server", ("toolrelay.cli",), set()),
    ],
)
def test_layer_imports(layer: str, forbidden: tuple[str, ...], allowed: set[str]) -> None:
    assert offenders(layer, forbidden, allowed) == []


def test_the_check_sees_lazy_imports(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from toolrelay.server.app import create_app\n")
    assert imported(source) == {"toolrelay.server.app"}


def test_a_chat_from_a_config_route_loads_no_server_module() -> None:
    code = (
        "import sys\n"
        "from toolrelay.cli import main, chat\n"
        "import toolrelay.config\n"
        "print(','.join(sorted(m for m in sys.modules if m.startswith(('toolrelay.server', 'fastapi', 'sqlalchemy')))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""
