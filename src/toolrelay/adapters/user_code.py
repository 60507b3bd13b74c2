"""Importing a user's Python: tool files, filter files, dotted modules.

The one place a user's file is imported. Each file gets a fresh module name
(two files called `tools.py` never collide, and loading one twice gives two
modules), registered in `sys.modules` while it runs because pydantic and
dataclasses look their module up there. Every failure is a `ConfigError`
whose message starts with the caller's `label` (the file or config key).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

from toolrelay.core.ids import new_id
from toolrelay.errors import ConfigError

__all__ = ["import_user_file", "import_user_module", "load_error"]


def load_error(label: str, exc: BaseException) -> ConfigError:
    """`<label> failed to load: <Type>: <message>`, the one wording for user code that broke."""
    return ConfigError(f"{label} failed to load: {type(exc).__name__}: {exc}")


def import_user_file(path: str | Path, *, label: str, prefix: str) -> ModuleType:
    """Run a Python file as a new module named `<prefix>_<stem>_<unique>`."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"{label}: no such file")
    stem = re.sub(r"\W", "_", file.stem)
    name = f"{prefix}_{stem}_{new_id('m')}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{label}: not importable as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        sys.modules.pop(name, None)
        raise load_error(label, exc) from exc
    return module


def import_user_module(name: str, *, label: str) -> ModuleType:
    """Import a module by dotted name; a failure names `label`."""
    try:
        return importlib.import_module(name)
    except (Exception, SystemExit) as exc:
        raise load_error(label, exc) from exc
