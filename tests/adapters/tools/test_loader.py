"""Tool sources: files by path, modules by name, mixed lists."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from toolrelay.adapters.tools import PythonTool, as_tools, tool
from toolrelay.adapters.tools.loader import load_tools_from_file, load_tools_from_module
from toolrelay.engine.interfaces import ToolContext, ToolSpec
from toolrelay.errors import ConfigError

TOOLS_FILE = '''
from __future__ import annotations

from pydantic import BaseModel

from toolrelay.adapters.tools import tool


class Place(BaseModel):
    city: str


@tool
def weather(place: Place, days: int = 1) -> str:
    """Forecast for a place.

    Args:
        place: Where.
        days: How many days.
    """
    return f"{place.city}:{days}"


@tool(sequential=True)
async def shout(text: str) -> str:
    return text.upper()


def helper(x: int) -> int:
    return x
'''

OWUI_FILE = '''
"""
title: Example
version: 0.1
"""

from pydantic import BaseModel


class Tools:
    class Valves(BaseModel):
        api_key: str = ""

    def __init__(self):
        self.valves = self.Valves()
        self.citation = True

    def get_time(self, zone: str, __user__: dict = {}) -> str:
        """
        Get the time in a zone.
        :param zone: IANA zone name.
        """
        return f"{zone} for {__user__.get('name')}"

    async def add(self, a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    def _private(self) -> None:
        pass
'''


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_file_tools_in_definition_order(tmp_path: Path) -> None:
    tools = load_tools_from_file(write(tmp_path, "tools.py", TOOLS_FILE))

    assert [t.spec.name for t in tools] == ["weather", "shout"]
    weather, shout = tools
    assert weather.spec.description == "Forecast for a place."
    assert weather.spec.parameters == {
        "type": "object",
        "properties": {
            "place": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "description": "Where.",
            },
            "days": {"type": "integer", "default": 1, "description": "How many days."},
        },
        "required": ["place"],
    }
    assert shout.spec.sequential is True
    assert asyncio.run(weather.call({"place": {"city": "Oslo"}}, ToolContext())) == "Oslo:1"
    assert asyncio.run(shout.call({"text": "hi"}, ToolContext())) == "HI"


def test_same_file_name_twice_gets_separate_modules(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = load_tools_from_file(write(tmp_path / "a", "tools.py", TOOLS_FILE))
    second = load_tools_from_file(write(tmp_path / "b", "tools.py", TOOLS_FILE))

    assert first[0].fn.__module__ != second[0].fn.__module__
    assert first[0].fn is not second[0].fn


def test_owui_tools_class(tmp_path: Path) -> None:
    tools = load_tools_from_file(write(tmp_path, "owui.py", OWUI_FILE))

    assert [t.spec.name for t in tools] == ["get_time", "add"]
    get_time, add = tools
    assert get_time.spec == ToolSpec(
        name="get_time",
        description="Get the time in a zone.",
        parameters={
            "type": "object",
            "properties": {"zone": {"type": "string", "description": "IANA zone name."}},
            "required": ["zone"],
        },
        validates_arguments=True,
    )
    assert get_time.context_params == frozenset({"__user__"})
    context = ToolContext(user={"name": "ada"})
    assert asyncio.run(get_time.call({"zone": "UTC"}, context)) == "UTC for ada"
    assert asyncio.run(add.call({"a": 2, "b": "3"}, context)) == 5


def test_all_restricts_module_level_tools(tmp_path: Path) -> None:
    text = TOOLS_FILE + '\n__all__ = ["shout"]\n'
    tools = load_tools_from_file(write(tmp_path, "some.py", text))
    assert [t.spec.name for t in tools] == ["shout"]


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.py"
    with pytest.raises(ConfigError, match="nope.py.*no such file"):
        load_tools_from_file(path)


def test_broken_file_names_path_and_error(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.py", "import definitely_not_a_module_xyz\n")
    with pytest.raises(ConfigError) as info:
        load_tools_from_file(path)
    message = str(info.value)
    assert str(path) in message
    assert "ModuleNotFoundError: No module named 'definitely_not_a_module_xyz'" in message
    assert not [m for m in sys.modules if "broken" in m and "toolrelay_user_tools" in m]


def test_syntax_error_file(tmp_path: Path) -> None:
    path = write(tmp_path, "syntax.py", "def f(:\n")
    with pytest.raises(ConfigError, match=r"syntax\.py.*SyntaxError"):
        load_tools_from_file(path)


def test_duplicate_names_in_a_file(tmp_path: Path) -> None:
    text = TOOLS_FILE + "\n\nclass Tools:\n    def weather(self) -> str:\n        return ''\n"
    with pytest.raises(ConfigError, match="two tools named 'weather'"):
        load_tools_from_file(write(tmp_path, "dup.py", text))


def test_load_from_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "relay_test_tools_mod.py", TOOLS_FILE)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        tools = load_tools_from_module("relay_test_tools_mod")
        assert [t.spec.name for t in tools] == ["weather", "shout"]
    finally:
        sys.modules.pop("relay_test_tools_mod", None)


def test_load_from_missing_module() -> None:
    with pytest.raises(ConfigError, match="'no_such_tools_module_abc' failed to load"):
        load_tools_from_module("no_such_tools_module_abc")


class Custom:
    """A hand-written Tool-protocol object."""

    spec = ToolSpec(name="custom")

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        return "custom"


def plain(x: int) -> int:
    """Return x."""
    return x


def test_as_tools_mixed() -> None:
    @tool
    def decorated() -> str:
        return "d"

    custom = Custom()
    tools = as_tools([decorated, custom, plain])

    assert tools[0] is decorated
    assert tools[1] is custom
    assert isinstance(tools[2], PythonTool)
    assert tools[2].spec.name == "plain"
    assert tools[2].spec.description == "Return x."
    assert [t.spec.name for t in tools] == ["decorated", "custom", "plain"]


def test_as_tools_duplicate_and_bad_objects() -> None:
    with pytest.raises(ConfigError, match="'tools' defines two tools named 'plain'"):
        as_tools([plain, tool(plain)])
    with pytest.raises(TypeError, match="not a tool or a callable: 42"):
        as_tools([42])
    assert as_tools([]) == []
