"""`--help` on every command: examples, and no Python type names (`<str>`, `<list[Path]>`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from toolrelay.cli.help import plain_label, relabel
from toolrelay.cli.main import app

TYPE_LABEL = re.compile(r"<[A-Za-z_][\w\[\], |.]*>")


def commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from commands(sub, (*path, name))


ALL = list(commands(get_command(app)))


def test_the_tree_has_every_command() -> None:
    names = {" ".join(p) for p in ALL}
    expected = {"chat", "chats list", "chats show", "chats export", "chats rm", "models"}
    assert expected | {"tools list", "keys create", "keys list", "serve", "db upgrade"} <= names


@pytest.mark.parametrize("path", ALL, ids=lambda p: " ".join(p) or "toolrelay")
def test_help_has_examples_and_no_type_names(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Examples:" in result.stdout
    assert TYPE_LABEL.findall(result.stdout) == []


def test_brackets_in_help_survive_rich_markup() -> None:
    result = CliRunner().invoke(app, ["chat", "--help"], env={"COLUMNS": "200"})
    assert "[code_interpreter]" in result.stdout


def test_chat_help_documents_the_api_key() -> None:
    result = CliRunner().invoke(app, ["chat", "--help"], env={"COLUMNS": "200"})
    line = next(x for x in result.stdout.splitlines() if "--api-key" in x)
    assert "Authorization: Bearer" in line and "OPENAI_API_KEY" in result.stdout


@pytest.mark.parametrize(
    ("typed", "plain"),
    [
        ("<str>", "TEXT"),
        ("<int>", "N"),
        ("<float>", "NUMBER"),
        ("<list[Path]>", "PATH"),
        ("<list[str]>", "TEXT"),
        ("<path>", "PATH"),
        ("<chat|responses>", "chat|responses"),
        ("<str>...", "TEXT..."),
        (None, None),
    ],
)
def test_plain_labels(typed: str | None, plain: str | None) -> None:
    assert plain_label(typed) == plain


def test_relabelling_a_tree_again_wraps_no_parameter_twice() -> None:
    def params(command: Any) -> Iterator[Any]:
        yield from command.params
        for sub in getattr(command, "commands", {}).values():
            yield from params(sub)

    tree = get_command(app)  # relabelled once as it was built
    before = [(p, p.display_type_rich) for p in params(tree)]
    relabel(tree)
    assert before and all(p.display_type_rich is shown for p, shown in before)
