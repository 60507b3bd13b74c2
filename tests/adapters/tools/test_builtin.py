"""The built-in tools (`get_time`, `calculator`) and how they are offered: by default,
switchable off, and giving way to any tool of the same name."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.envs import load
from toolrelay.adapters.tools import tool
from toolrelay.adapters.tools.builtin import BUILTIN, BuiltinTools
from toolrelay.adapters.tools.builtin.calculator import MAX_BITS, CalcError, evaluate, shown
from toolrelay.adapters.tools.builtin.clock import now_in, zone_named
from toolrelay.cli.main import app
from toolrelay.config import build_registry
from toolrelay.engine.interfaces import Tool, ToolContext
from toolrelay.engine.toolbox import Toolbox, ToolSubset
from toolrelay.errors import ConfigError, ToolError

pytestmark = pytest.mark.anyio

MOMENT = datetime(2026, 12, 6, 2, 30, 5, tzinfo=UTC)
TOKYO = "Sunday 6 December 2026, 11:30:05 in Asia/Tokyo (2026-12-06T11:30:05+09:00)"
NEW_YORK = "Saturday 5 December 2026, 21:30:05 in America/New_York (2026-12-05T21:30:05-05:00)"
IN_UTC = "Sunday 6 December 2026, 02:30:05 in UTC (2026-12-06T02:30:05+00:00)"


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("17*23", "391"),
        ("17 × 23 =", "391"),
        ("2 * (3 + 4)", "14"),
        ("2**10", "1024"),
        ("7 // 2", "3"),
        ("7 % 4", "3"),
        ("1/4", "0.25"),
        ("-3 + +5", "2"),
        ("sqrt(16) + log(8, 2)", "7"),
        ("round(pi, 3)", "3.142"),
        ("max(1, 5, 3) - min(4, 2)", "3"),
        ("factorial(20)", "2432902008176640000"),
        ("comb(10, 3)", "120"),
        ("2**-2", "0.25"),
        ("+".join(["1"] * 200), "200"),
    ],
)
def test_arithmetic(expression: str, value: str) -> None:
    assert shown(evaluate(expression)) == value


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("__import__('os')", "unknown name '__import__'"),
        ("__import__('os').system('id')", "only numbers"),
        ("().__class__.__bases__", "only numbers"),
        ("x + 1", "unknown name 'x'"),
        ("'a' * 3", "only numbers"),
        ("[1] * 3", "only numbers"),
        ("(lambda: 1)()", "only numbers"),
        ("math.sqrt(4)", "only numbers"),
        ("sqrt(x=4)", "only numbers"),
        ("True + 1", "not True/False"),
        ("1j * 2", "only numbers"),
        ("2 ^ 10", "write 2**10"),
        ("1 / 0", "division by zero"),
        ("sqrt(-1)", "math domain error"),
        ("(-8) ** 0.5", "not a real number"),
        ("10.0 ** 400", "too large"),
        ("1e999", "not a finite number"),
        ("", "empty"),
        ("1 +", "not an arithmetic expression"),
    ],
)
def test_refused(expression: str, reason: str) -> None:
    with pytest.raises(CalcError, match=reason.replace("(", r"\(").replace("*", r"\*")):
        evaluate(expression)


@pytest.mark.parametrize(
    "expression",
    [
        "9**9**9",  # 9**387420489: refused from its operands, never computed
        "2**4097",
        "(2**4000)**2",
        "2**4000 * 2**4000",
        "factorial(10**6)",
        "comb(10**9, 10**6)",
        "round(1, -10**9)",
        "1" + "+1" * 300,  # longer than MAX_LENGTH
        "-" * 400 + "1",  # deeper than MAX_DEPTH
    ],
)
def test_work_is_bounded_before_it_is_done(expression: str) -> None:
    """Each of these would take minutes or gigabytes if computed: each is refused."""
    with pytest.raises(CalcError):
        evaluate(expression)


def test_the_largest_allowed_integer() -> None:
    assert int(shown(evaluate(f"2**{MAX_BITS - 1}"))) == 2 ** (MAX_BITS - 1)


async def test_calculator_tool_errors_are_results_for_the_model() -> None:
    calculator = BUILTIN["calculator"]
    assert await calculator.call({"expression": "17*23"}, ToolContext()) == "391"
    with pytest.raises(ToolError, match="calculator: division by zero"):
        await calculator.call({"expression": "1/0"}, ToolContext())
    assert calculator.spec.idempotent and "expression" in calculator.spec.parameters["required"]


@pytest.mark.parametrize(
    ("name", "shown_as"),
    [
        ("Asia/Tokyo", TOKYO),
        ("asia/tokyo", TOKYO),
        ("Tokyo", TOKYO),
        ("new york", NEW_YORK),
        ("America/New_York", NEW_YORK),
        ("UTC", IN_UTC),
        ("", IN_UTC),
    ],
)
def test_time_zones_as_a_model_names_them(name: str, shown_as: str) -> None:
    assert now_in(zone_named(name), MOMENT) == shown_as


@pytest.mark.parametrize("name", ["Atlantis", "../../etc/passwd", "/etc/localtime", "Europe"])
def test_unknown_time_zones(name: str) -> None:
    with pytest.raises(ToolError, match="unknown time zone"):
        zone_named(name)


async def test_get_time_tool() -> None:
    answer = await BUILTIN["get_time"].call({"timezone": "Asia/Tokyo"}, ToolContext())
    words, stamp = answer.removesuffix(")").split(" (")
    assert datetime.fromisoformat(stamp).utcoffset().total_seconds() == 9 * 3600  # type: ignore[union-attr]
    assert words.endswith(" in Asia/Tokyo")
    assert await BUILTIN["get_time"].call({}, ToolContext())  # UTC by default


def test_choosing_some() -> None:
    assert [t.spec.name for t in BuiltinTools(["calculator"]).tools] == ["calculator"]
    with pytest.raises(ConfigError, match="builtin_tools: unknown tool 'weather'"):
        BuiltinTools(["weather"])


class Listing:
    def __init__(self, name: str, tools: Sequence[Tool]) -> None:
        self.name = name
        self.tools = tools

    async def list(self) -> Sequence[Tool]:
        return self.tools

    async def call(self, name: str, arguments: dict[str, Any], context: ToolContext) -> Any:
        raise AssertionError("not called")

    async def aclose(self) -> None:
        return None


@tool
def get_time() -> str:
    """The user's own clock."""
    return "teatime"


@tool
def calculator(expression: str) -> str:
    """The user's own calculator."""
    return "42"


async def test_a_tool_of_the_same_name_replaces_a_builtin_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Listed first or last, fixed or from a source: the user's tool wins, no warning, and
    the replaced built-in is not listed."""
    caplog.set_level(logging.INFO, logger="toolrelay.tools")
    server = Listing("server", [get_time])
    box = Toolbox([calculator], [ToolSubset(BuiltinTools()), ToolSubset(server)])
    offered = await box.tools()
    assert offered == {"calculator": calculator, "get_time": get_time}
    assert caplog.records == []
    described = {(i.name, i.source, i.status) for i in await box.describe()}
    assert described == {("calculator", "python", "ok"), ("get_time", "server", "ok")}
    alone = await Toolbox(sources=[ToolSubset(BuiltinTools())]).describe()
    assert {(i.name, i.source, i.status) for i in alone} == {
        ("get_time", "builtin", "ok"),
        ("calculator", "builtin", "ok"),
    }


def settings_from(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "toolrelay.toml"
    path.write_text(text + '\n[[models]]\nname = "m"\nbase_url = "http://127.0.0.1:9/v1"\n')
    return load(path, env={})


@pytest.mark.parametrize(
    ("setting", "offered"),
    [
        ("", {"get_time", "calculator"}),
        ("builtin_tools = true", {"get_time", "calculator"}),
        ("builtin_tools = false", set()),
        ("builtin_tools = []", set()),
        ('builtin_tools = ["calculator"]', {"calculator"}),
    ],
)
async def test_the_setting(tmp_path: Path, setting: str, offered: set[str]) -> None:
    registry = build_registry(settings_from(tmp_path, setting), env={})
    try:
        assert set(await registry.tools_for("m").toolbox.tools()) == offered
        assert {i.name for i in await registry.describe_tools()} == offered
    finally:
        await registry.aclose()


async def test_a_route_picks_builtins_by_name(tmp_path: Path) -> None:
    text = (
        '[[models]]\nname = "a"\nbase_url = "http://127.0.0.1:9/v1"\ntools = ["get_time"]\n'
        '[[models]]\nname = "b"\nbase_url = "http://127.0.0.1:9/v1"\ntools = ["builtin"]\n'
        '[[models]]\nname = "c"\nbase_url = "http://127.0.0.1:9/v1"\ntools = []\n'
    )
    (tmp_path / "toolrelay.toml").write_text(text)
    registry = build_registry(load(tmp_path / "toolrelay.toml", env={}), env={})
    try:
        assert set(await registry.tools_for("a").toolbox.tools()) == {"get_time"}
        assert set(await registry.tools_for("b").toolbox.tools()) == {"get_time", "calculator"}
        assert set(await registry.tools_for("c").toolbox.tools()) == set()
    finally:
        await registry.aclose()


def test_unknown_builtin_in_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown tool 'clock'"):
        build_registry(settings_from(tmp_path, 'builtin_tools = ["clock"]'), env={})


def test_tools_list_shows_them_with_nothing_configured(tmp_path: Path) -> None:
    env = {"TOOLRELAY_DATA_DIR": str(tmp_path)}
    result = CliRunner().invoke(app, ["tools", "list", "--no-config"], env=env)
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines()]
    assert ["│", "get_time", "│", "builtin", "│", "ok", "│"] in rows
    assert ["│", "calculator", "│", "builtin", "│", "ok", "│"] in rows
    off = CliRunner().invoke(
        app, ["tools", "list", "--no-config"], env={**env, "TOOLRELAY_BUILTIN_TOOLS": "false"}
    )
    assert off.exit_code == 0 and "get_time" not in off.stdout
