"""`--help` in the words of a shell user, not of Python's type hints.

typer labels each value with its annotation (`<str>`, `<list[Path]>`,
`<bool>` even on flags, which take no value). `PlainHelp`, the root
command's class, relabels every option and argument of every subcommand
when the command tree is built (so options other modules add later are
covered too): flags show nothing, a declared `metavar` is kept (an
argument's is its name), anything else gets a plain word (TEXT, N, NUMBER,
PATH; choices as `a|b|c`).
"""

from __future__ import annotations

import re
import weakref
from typing import Any

from typer import Context
from typer.core import TyperArgument, TyperGroup

__all__ = ["PlainHelp", "plain_label"]

_WORDS = {"str": "TEXT", "int": "N", "float": "NUMBER", "path": "PATH", "Path": "PATH"}
_TYPED = re.compile(r"^<(?:list\[)?([^\]>]*)\]?>(\.\.\.)?$")
_RELABELLED: weakref.WeakSet[Any] = weakref.WeakSet()
"""Parameters relabelled already: each is wrapped once, however often a tree holding it is walked."""


def plain_label(typed: str | None) -> str | None:
    """`<str>` → `TEXT`, `<list[Path]>` → `PATH`, `<a|b>` → `a|b`; None stays None."""
    if not typed:
        return typed
    match = _TYPED.match(typed)
    if match is None:
        return typed
    inner = match.group(1)
    word = _WORDS.get(inner)
    if word is None:
        word = inner if "|" in inner else inner.upper()
    return word + (match.group(2) or "")


def _relabel(param: Any) -> None:
    if param in _RELABELLED:
        return
    _RELABELLED.add(param)
    flag = bool(getattr(param, "is_flag", False) or getattr(param, "count", False))
    shown = getattr(param, "display_type_rich", None)
    if shown is None:
        return

    def display_type_rich(ctx: Any) -> str | None:
        if flag or (param.metavar is not None and isinstance(param, TyperArgument)):
            return None  # a flag takes no value; an argument's metavar is its name already
        if param.metavar is not None:
            return str(param.metavar)
        return plain_label(shown(ctx))

    # the instance attribute shadows typer's method for this one parameter
    param.display_type_rich = display_type_rich


def relabel(command: Any) -> None:
    """Relabel `command`'s parameters (its help option included) and its subcommands'."""
    help_option = command.get_help_option(Context(command))
    for param in [*command.params, *([help_option] if help_option is not None else [])]:
        _relabel(param)
    for sub in getattr(command, "commands", {}).values():
        relabel(sub)


class PlainHelp(TyperGroup):
    """The root group: every parameter of the tree relabelled once it is built."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        relabel(self)
