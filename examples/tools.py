"""Example tools for `toolrelay serve`: list this file under `tools` in toolrelay.toml.

Each function decorated with `@tool` becomes a tool; its docstring and type
hints become the description and JSON schema the model sees.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from toolrelay import tool

_OPS: dict[type[ast.AST], Callable[..., float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}

_WEATHER = {
    "paris": ("light rain", 14),
    "london": ("overcast", 12),
    "tokyo": ("clear", 22),
    "new york": ("sunny", 18),
}


@tool
def get_time(timezone_name: str = "UTC") -> str:
    """Return the current date and time.

    Args:
        timezone_name: An IANA time zone such as "Europe/Paris".
    """
    try:
        zone = ZoneInfo(timezone_name)
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone {timezone_name!r}"
    return datetime.now(UTC).astimezone(zone).isoformat(timespec="seconds")


def _eval(node: ast.AST) -> float:
    """Walk the expression tree: numbers and arithmetic only, never `eval`."""
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return float(_OPS[type(node.op)](_eval(node.left), _eval(node.right)))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return float(_OPS[type(node.op)](_eval(node.operand)))
    raise ValueError("only numbers and + - * / % ** are allowed")


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression such as "2 * (3 + 4)".

    Args:
        expression: Numbers, parentheses and + - * / % **.
    """
    try:
        value = _eval(ast.parse(expression, mode="eval"))
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError) as exc:
        return f"error: {exc}"
    return str(int(value)) if value.is_integer() else str(value)


@tool
def get_weather(city: str) -> dict[str, object]:
    """Get the current weather for a city (fake data, for demos).

    Args:
        city: The city name, e.g. "Paris".
    """
    conditions, celsius = _WEATHER.get(city.strip().lower(), ("partly cloudy", 20))
    return {"city": city, "conditions": conditions, "temperature_c": celsius}
