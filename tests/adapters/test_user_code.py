"""Importing a user's file: one place, fresh module names, failures as one-line ConfigErrors."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from toolrelay.adapters.user_code import import_user_file, import_user_module
from toolrelay.errors import ConfigError


def test_two_files_with_one_name_become_two_modules(tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "tools.py", tmp_path / "b" / "tools.py"
    for file, value in ((first, 1), (second, 2)):
        file.parent.mkdir()
        file.write_text(f"VALUE = {value}\n", encoding="utf-8")
    one = import_user_file(first, label="one", prefix="test_user_code")
    two = import_user_file(second, label="two", prefix="test_user_code")
    assert (one.VALUE, two.VALUE) == (1, 2)
    assert one.__name__ != two.__name__
    assert one.__name__.startswith("test_user_code_tools_")
    assert sys.modules[one.__name__] is one  # pydantic and dataclasses look it up there


def test_failures_name_the_label(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("raise SystemExit(3)\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^my file: no such file$"):
        import_user_file(tmp_path / "missing.py", label="my file", prefix="p")
    with pytest.raises(ConfigError, match=r"^my file failed to load: SystemExit: 3$"):
        import_user_file(broken, label="my file", prefix="p")
    assert not [name for name in sys.modules if name.startswith("p_broken_")]
    with pytest.raises(ConfigError, match=r"^mod failed to load: ModuleNotFoundError: "):
        import_user_module("no_such_module_for_user_code", label="mod")
