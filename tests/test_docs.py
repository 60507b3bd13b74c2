"""Every block of README.md and docs/*.md a user would copy runs, or at least parses, as written.

Blocks are read by their fence's language:

- `python`: run as a script in a directory of its own, against a fake model server
  (the blocks' `http://localhost:11434/v1`) or a real `toolrelay serve` on it (their
  `http://127.0.0.1:8080/v1` with the key `tr-…`); it must exit 0.
- `toml`: loaded through the settings loader (`load_settings`), as `toolrelay.toml`.
- `sh` and `console` (its `$ ` lines): `bash -n` parses them, and every `toolrelay …`
  command in them is a valid command line of our CLI: its subcommand exists and click
  accepts its options and arguments (not run: most need a model or a server).

A block that is deliberately not runnable (a template with `...`) sits under a
`<!-- not run: why -->` line; the marker count stays small (`MAX_NOT_RUN`). Fences
without a language (diagrams, output) are not checked.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer.main
from benchmarks.harness import ServerProcess

from tests.envs import load
from tests.patience import HANG
from toolrelay.cli.main import app
from toolrelay.testing import FakeModelServer, SSEReply, ToolCallSpec
from toolrelay.testing.fake_server import RecordedRequest
from toolrelay.testing.wire import chat_chunks

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(
    r"^(?P<marker><!-- not run: [^>]+-->\n)?```(?P<lang>\w*)[^\n]*\n(?P<body>.*?)^```",
    re.M | re.S,
)
CHECKED = {"python", "toml", "sh", "console"}
MAX_NOT_RUN = 3
OLLAMA = "http://localhost:11434/v1"
SERVER = "http://127.0.0.1:8080/v1"
KEY = "tr-docs-admin-key-0123456789abcdef"
SEPARATORS = {"|", "||", "&&", ";", "&", "(", ")"}
REDIRECTS = {">", ">>", "<", "2>", "&>"}


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    body: str
    not_run: bool

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start("lang")) + 1
            found.append(
                Block(
                    str(page.relative_to(ROOT)),
                    line,
                    match["lang"],
                    match["body"],
                    match["marker"] is not None,
                )
            )
    return found


def of(*langs: str) -> list[Any]:
    return [pytest.param(b, id=str(b)) for b in blocks() if b.lang in langs and not b.not_run]


def test_the_blocks_not_run_are_few_and_every_block_has_a_checked_language() -> None:
    found = blocks()
    assert sum(b.not_run for b in found) <= MAX_NOT_RUN, [str(b) for b in found if b.not_run]
    unknown = {(str(b), b.lang) for b in found if b.lang and b.lang not in CHECKED}
    assert not unknown  # a new language needs its check here
    assert {"python", "toml", "sh", "console"} <= {b.lang for b in found}


# ---------------------------------------------------------------- toml


@pytest.mark.parametrize("block", of("toml"))
def test_toml_blocks_load(block: Block, tmp_path: Path) -> None:
    path = tmp_path / "toolrelay.toml"
    path.write_text(block.body, encoding="utf-8")
    load(path, env={})  # a ConfigError names the key that is wrong


# ---------------------------------------------------------------- shell


def commands(line: str) -> Iterator[list[str]]:
    """The simple commands of a shell line, env assignments dropped, redirects left out."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    current: list[str] = []
    skip = False
    for token in lexer:
        if skip:
            skip = False
        elif token in SEPARATORS:
            yield current
            current = []
        elif token in REDIRECTS:
            skip = True
        elif not current and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", token):
            continue
        else:
            current.append(token)
    yield current


def shell_lines(block: Block) -> list[str]:
    if block.lang == "console":
        return [line[2:] for line in block.body.splitlines() if line.startswith("$ ")]
    return block.body.replace("\\\n", " ").splitlines()


def check_cli(args: list[str]) -> None:
    """`toolrelay ARGS` names a command and click accepts its options and arguments (the
    click typer carries: its objects are used through their own methods, duck-typed)."""
    command: Any = typer.main.get_command(app)
    name = "toolrelay"
    rest = list(args)
    while hasattr(command, "get_command") and rest and not rest[0].startswith("-"):
        sub = command.get_command(command.context_class(command), rest[0])
        assert sub is not None, f"toolrelay has no command {' '.join([name, rest[0]])!r}"
        name, command, rest = rest[0], sub, rest[1:]
    if hasattr(command, "get_command") and not rest:
        assert command.invoke_without_command, f"{name!r} needs a subcommand"
        return
    with command.make_context(name, rest):
        pass


def cli_error(exc: Exception) -> str | None:
    """The usage error click raised (it has `format_message`), else None."""
    format_message = getattr(exc, "format_message", None)
    return format_message() if callable(format_message) else None


@pytest.mark.parametrize("block", of("sh", "console"))
def test_shell_blocks_parse_and_name_real_commands(block: Block) -> None:
    lines = shell_lines(block)
    parsed = subprocess.run(["bash", "-n"], input="\n".join(lines), capture_output=True, text=True)
    assert parsed.returncode == 0, parsed.stderr
    for line in lines:
        for command in commands(line):
            if command[:1] == ["toolrelay"]:
                try:
                    check_cli(command[1:])
                except Exception as exc:
                    if cli_error(exc) is None:
                        raise
                    pytest.fail(f"{block}: {shlex.join(command)}: {cli_error(exc)}")


def test_the_cli_check_refuses_what_click_refuses() -> None:
    """The check above fails on a typo (it would let any doc line through otherwise)."""
    check_cli(["chat", "hi", "--tools", "examples/tools.py"])
    for wrong in (["chat", "hi", "--no-such-flag"], ["chats", "show"], ["serve", "--port", "x"]):
        with pytest.raises(Exception) as info:
            check_cli(wrong)
        assert cli_error(info.value), wrong
    with pytest.raises(AssertionError, match="no command"):
        check_cli(["chatz", "hi"])


# ---------------------------------------------------------------- python


def reply(request: RecordedRequest) -> SSEReply:
    """The model of the docs' scripts: it runs code when it may (the code interpreter's
    example), then answers with what it read; else it says hello."""
    body = request.json or {}
    messages = body.get("messages") or []
    offered = {t["function"]["name"] for t in body.get("tools") or []}
    if messages and messages[-1].get("role") == "tool":
        return SSEReply(chat_chunks(text=f"The result: {messages[-1]['content']}"))
    if "execute_code" in offered:
        return SSEReply(chat_chunks(tool_calls=[ToolCallSpec("execute_code", {"code": "2**100"})]))
    return SSEReply(chat_chunks(text="Hello from the fake model."))


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        server.set_default(reply)
        yield server


@pytest.fixture(scope="module")
def server(upstream: FakeModelServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`toolrelay serve` with route `local` (as a default server has it) on the fake model."""
    tmp = tmp_path_factory.mktemp("docs-server")
    config = tmp / "toolrelay.toml"
    config.write_text(
        f'admin_key = "{KEY}"\ndata_dir = "{tmp / "data"}"\n\n'
        f'[[models]]\nname = "local"\nbase_url = "{upstream.base_url}"\nmodel = "qwen"\n'
    )
    process = ServerProcess(config, tmp / "server.log")
    process.start()
    try:
        yield process.base_url
    finally:
        process.stop()


@pytest.mark.parametrize("block", of("python"))
def test_python_blocks_run(block: Block, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    upstream: FakeModelServer = request.getfixturevalue("upstream")
    script = block.body.replace(OLLAMA, upstream.base_url)
    if SERVER in script:
        script = script.replace(SERVER, request.getfixturevalue("server") + "/v1")
        script = script.replace("tr-…", KEY)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TOOLRELAY_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG * 4,
    )
    assert done.returncode == 0, f"{block}\n{done.stderr}"
    assert "Hello from the fake model." in done.stdout or "The result:" in done.stdout
    if "JupyterRunner" in script:  # the code ran in a kernel, in ./code
        assert "1267650600228229401496703205376" in done.stdout.partition("The result:")[2]
        assert (tmp_path / "code").is_dir()
