"""The built-in `calculator` tool: arithmetic read with `ast`, never `eval`.

Owns what an expression may hold and how big its work may get. Allowed: numbers,
`+ - * / // % **`, parentheses, the constants `pi`, `e`, `tau`, and a fixed set
of `math` functions (`sqrt`, `log`, `sin` …, plus `abs`, `round`, `min`, `max`).
Anything else (names, attributes, subscripts, comprehensions, strings, `^`) is
refused with a message the model can act on. Work is bounded before it is done:
the expression's length, its nesting, the size of a power's result (estimated from
its operands' bits) and of any integer made, and `factorial`'s argument — so one
call costs microseconds, whatever the model writes.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from toolrelay.adapters.tools.python import tool
from toolrelay.errors import ToolError

__all__ = ["MAX_BITS", "MAX_LENGTH", "CalcError", "calculator", "evaluate", "shown"]

MAX_LENGTH = 500
"""Characters of an expression; longer ones are refused unread."""
MAX_DEPTH = 250
"""Nesting of operations (each operator, call or sign is a level; `1+1+…` at the length
bound is 250 deep): keeps the walk far from Python's recursion limit."""
MAX_BITS = 4096
"""Bits of any integer made (about 1,200 digits): a power, product or factorial past it
is refused before it is computed."""
MAX_COUNT = 1000
"""The largest argument of `factorial`, `comb` and `perm` (computed, then held to
`MAX_BITS`), and of `round`'s digits."""

Number = int | float

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}
_MATH = (
    "sqrt cbrt exp log log10 log2 sin cos tan asin acos atan atan2 sinh cosh tanh degrees "
    "radians hypot floor ceil trunc gcd lcm comb perm factorial"
)
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    name: getattr(math, name) for name in _MATH.split() if hasattr(math, name)
} | {"abs": abs, "round": round, "min": min, "max": max}
_COUNTING = frozenset({"factorial", "comb", "perm"})
"""Functions whose cost grows with their arguments' values, not their size."""
_TYPOS = {
    ast.BitXor: "'^' is not a power here: write 2**10 for 2 to the 10th",
    ast.BitAnd: "'&' is not arithmetic",
    ast.BitOr: "'|' is not arithmetic",
    ast.LShift: "'<<' is not arithmetic",
    ast.RShift: "'>>' is not arithmetic",
    ast.MatMult: "'@' is not arithmetic",
}
_SPELLINGS = str.maketrans({"×": "*", "÷": "/", "−": "-", "–": "-"})


class CalcError(ValueError):
    """An expression refused or failed; its text is what the model reads."""


def evaluate(expression: str) -> Number:
    """The value of an arithmetic expression; `CalcError` says why there is none."""
    text = expression.strip().translate(_SPELLINGS).rstrip("=").strip()
    if not text:
        raise CalcError("the expression is empty")
    if len(text) > MAX_LENGTH:
        raise CalcError(f"the expression is longer than {MAX_LENGTH} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        reason = exc.msg if isinstance(exc, SyntaxError) else "too complex"
        raise CalcError(f"not an arithmetic expression: {reason}") from None
    try:
        return _value(tree.body, 0)
    except ZeroDivisionError:
        raise CalcError("division by zero") from None
    except RecursionError:
        raise CalcError("the expression is too deeply nested") from None
    except OverflowError:
        raise CalcError("the result is too large") from None
    except CalcError:
        raise
    except (ValueError, TypeError) as exc:  # math domain errors, wrong argument counts
        raise CalcError(str(exc)) from None


def _value(node: ast.AST, depth: int) -> Number:
    if depth > MAX_DEPTH:
        raise CalcError(f"the expression nests deeper than {MAX_DEPTH} levels")
    match node:
        case ast.Constant(value=bool()):
            raise CalcError("only numbers are allowed, not True/False")
        case ast.Constant(value=int() | float() as number):
            return _checked(number)
        case ast.Name(id=name) if name in _CONSTANTS:
            return _CONSTANTS[name]
        case ast.BinOp(left=left, op=ast.Pow(), right=right):
            return _power(_value(left, depth + 1), _value(right, depth + 1))
        case ast.BinOp(left=left, op=op, right=right) if type(op) in _BINARY:
            result = _BINARY[type(op)](_value(left, depth + 1), _value(right, depth + 1))
            return _checked(result)
        case ast.BinOp(op=op) if type(op) in _TYPOS:
            raise CalcError(_TYPOS[type(op)])
        case ast.UnaryOp(op=op, operand=operand) if type(op) in _UNARY:
            return _checked(_UNARY[type(op)](_value(operand, depth + 1)))
        case ast.Call(func=ast.Name(id=name), args=args, keywords=[]) if name in _FUNCTIONS:
            values = [_value(arg, depth + 1) for arg in args]
            counted = values if name in _COUNTING else values[1:] if name == "round" else []
            if any(abs(v) > MAX_COUNT for v in counted):
                raise CalcError(f"{name}'s arguments are allowed up to {MAX_COUNT}")
            return _checked(_FUNCTIONS[name](*values))
        case ast.Name(id=name) | ast.Call(func=ast.Name(id=name)) if name not in _FUNCTIONS:
            raise CalcError(f"unknown name {name!r}; allowed: {_allowed()}")
    raise CalcError(
        "only numbers, + - * / // % ** (power), parentheses, pi, e, tau and math "
        "functions (sqrt, log, sin, round, …) are allowed"
    )


def _power(base: Number, exponent: Number) -> Number:
    """`base ** exponent`, refused when an integer result would pass `MAX_BITS`."""
    if (
        isinstance(base, int)
        and isinstance(exponent, int)
        and _power_bits(base, exponent) > MAX_BITS
    ):
        raise CalcError(f"the result would have more than {MAX_BITS} bits")
    result: Any = base**exponent
    if isinstance(result, complex):
        raise CalcError("the result is not a real number")
    return _checked(result)


def _power_bits(base: int, exponent: int) -> int:
    """A lower bound of the bits of `base ** exponent` (0 when it is small anyway)."""
    return (abs(base).bit_length() - 1) * exponent if exponent > 0 and abs(base) > 1 else 0


def _checked(value: Any) -> Number:
    if isinstance(value, int) and value.bit_length() > MAX_BITS:
        raise CalcError(f"the result would have more than {MAX_BITS} bits")
    if isinstance(value, float) and not math.isfinite(value):
        raise CalcError("the result is not a finite number")
    if not isinstance(value, int | float):
        raise CalcError("the result is not a real number")
    return value


def _allowed() -> str:
    return ", ".join([*_CONSTANTS, *sorted(_FUNCTIONS)])


def shown(value: Number) -> str:
    """A float that holds a whole number is shown without `.0`; others as Python does."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return str(value)


@tool(inline=True, idempotent=True)
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression exactly, e.g. "17 * 23" or "sqrt(2) * (3 + 4)**2".

    Use it for any arithmetic instead of working it out yourself.

    Args:
        expression: Numbers, parentheses, + - * / // % ** (power), pi, e and math
            functions such as sqrt, log, sin, round, min, max, factorial.
    """
    try:
        return shown(evaluate(expression))
    except CalcError as exc:
        raise ToolError(f"calculator: {exc}") from None
