"""`toolrelay.adapters.stores` only re-exports: the API lives in base, keys and records."""

from __future__ import annotations

import ast
from pathlib import Path

import toolrelay.adapters.stores as stores


def test_the_package_init_defines_nothing_but_the_lazy_backend_import() -> None:
    tree = ast.parse(Path(stores.__file__).read_text(encoding="utf-8"))
    defined = [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    ]
    assert defined == ["__getattr__"]


def test_every_exported_name_resolves() -> None:
    missing = [name for name in stores.__all__ if getattr(stores, name, None) is None]
    assert missing == []
