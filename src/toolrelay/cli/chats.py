"""`toolrelay chats list|show|export|rm`: the saved conversations, from the shell.

Owns reading the chats the server and `toolrelay chat` save (one database,
`cli.store`) and writing them out: `list` as tab-separated lines, `export`
as JSON (every stored field) or Markdown, `show` as that Markdown rendered on
a terminal (plain Markdown through a pipe). The chats are those of one user,
`admin` by default (the owner of the CLI's conversations); `--user` picks
another. These commands only read (`rm` deletes): a missing database is an
error, never created.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.markdown import Markdown

from toolrelay.cli.admin import ConfigPath, DatabaseURL, fail
from toolrelay.cli.render import parts_text
from toolrelay.cli.store import OWNER, with_store
from toolrelay.errors import ConfigError

if TYPE_CHECKING:
    from toolrelay.adapters.stores import Chat, StoredMessage
    from toolrelay.adapters.stores.sql import SQLStore

__all__ = ["chats_app", "to_json", "to_markdown"]

chats_app = typer.Typer(
    help="Saved conversations (the server's chats and toolrelay chat's); alone: list them.",
    invoke_without_command=True,
    epilog="Examples:\n\n  toolrelay chats\n\n  toolrelay chats list --search paris\n\n  toolrelay chats show chat_0a1b…\n\n"
    "  toolrelay chats export chat_0a1b… --format markdown > chat.md\n\n"
    "  toolrelay chats rm chat_0a1b…",
)

User = Annotated[
    str,
    typer.Option("--user", metavar="NAME", help="Whose chats (default: the CLI's, 'admin')."),
]
ChatId = Annotated[
    str, typer.Argument(metavar="CHAT_ID", help="A chat id, as 'toolrelay chats list' shows it.")
]


class Format(StrEnum):
    json = "json"
    markdown = "markdown"


@chats_app.callback()
def chats_default(ctx: typer.Context) -> None:
    """`toolrelay chats` alone lists the chats, as `chats list` does with its defaults."""
    if ctx.invoked_subcommand is None:
        list_chats()


def _say(message: str) -> None:
    Console(stderr=True, soft_wrap=True).print(message, markup=False, highlight=False)


def _read(
    url: str | None,
    config: Path | None,
    user: str,
    chat_id: str | None,
    *,
    limit: int = 0,
    search: str | None = None,
) -> tuple[list[Chat], dict[str, list[StoredMessage]]]:
    """The user's chats (all up to `limit`, or the one named) and, for one, its messages."""

    async def work(store: SQLStore) -> tuple[list[Chat], dict[str, list[StoredMessage]]]:
        owner = await store.user_named(user)
        if owner is None:
            raise ConfigError(f"no user named {user!r}")
        if chat_id is None:
            chats, _ = await store.list_chats(owner.id, limit=limit, query=search)
            return chats, {}
        chat = await store.get_chat(chat_id, user_id=owner.id)
        if chat is None:
            raise ConfigError(f"no chat {chat_id!r} of user {user!r}")
        return [chat], {chat.id: await store.get_messages(chat.id)}

    try:
        return with_store(url, config, work, create=False, what="toolrelay chats", say=_say)
    except ConfigError as exc:
        raise fail(str(exc)) from None


@chats_app.command(
    "list",
    epilog="Examples:\n\n  toolrelay chats list --limit 10 --search paris\n\n  toolrelay chats list --user ann | cut -f1,4",
)
def list_chats(
    limit: Annotated[int, typer.Option("--limit", metavar="N", help="At most N chats.")] = 50,
    search: Annotated[
        str | None,
        typer.Option(
            "--search", "-s", metavar="TEXT", help="Only chats whose title or a message has it."
        ),
    ] = None,
    user: User = OWNER,
    url: DatabaseURL = None,
    config: ConfigPath = None,
) -> None:
    """List chats, most recently updated first, as tab-separated lines."""
    chats, _ = _read(url, config, user, None, limit=limit, search=search)
    if not chats:
        _say("no chats")
        return
    typer.echo("id\tupdated\tmodel\ttitle")
    for chat in chats:
        when = chat.updated_at.strftime("%Y-%m-%d %H:%M")
        typer.echo(f"{chat.id}\t{when}\t{chat.model or ''}\t{chat.title or ''}")


@chats_app.command(
    "show",
    epilog="Examples:\n\n  toolrelay chats show chat_0a1b…\n\n  toolrelay chats show chat_0a1b… | less",
)
def show_chat(
    chat_id: ChatId, user: User = OWNER, url: DatabaseURL = None, config: ConfigPath = None
) -> None:
    """Print a chat: Markdown, rendered on a terminal."""
    chats, messages = _read(url, config, user, chat_id)
    text = to_markdown(chats[0], messages[chats[0].id])
    if sys.stdout.isatty():
        Console().print(Markdown(text))
    else:
        sys.stdout.write(text)


@chats_app.command(
    "export",
    epilog="Examples:\n\n  toolrelay chats export chat_0a1b… > chat.json\n\n"
    "  toolrelay chats export chat_0a1b… -f markdown -o chat.md",
)
def export_chat(
    chat_id: ChatId,
    format: Annotated[
        Format, typer.Option("--format", "-f", help="json: every stored field; markdown: to read.")
    ] = Format.json,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", metavar="FILE", help="Write here instead of stdout."),
    ] = None,
    user: User = OWNER,
    url: DatabaseURL = None,
    config: ConfigPath = None,
) -> None:
    """Write a chat out as JSON or Markdown."""
    chats, messages = _read(url, config, user, chat_id)
    chat = chats[0]
    if format is Format.json:
        body = orjson.dumps(to_json(chat, messages[chat.id]), option=orjson.OPT_INDENT_2) + b"\n"
    else:
        body = to_markdown(chat, messages[chat.id]).encode()
    if output is None:
        sys.stdout.buffer.write(body)
        sys.stdout.flush()
        return
    try:
        output.write_bytes(body)
    except OSError as exc:
        raise fail(f"cannot write {output}: {exc.strerror or exc}", code=1) from None
    _say(f"wrote {output}")


@chats_app.command("rm", epilog="Examples:\n\n  toolrelay chats rm chat_0a1b… chat_2c3d…")
def remove_chats(
    chat_ids: Annotated[
        list[str], typer.Argument(metavar="CHAT_ID...", help="One or more chat ids.")
    ],
    user: User = OWNER,
    url: DatabaseURL = None,
    config: ConfigPath = None,
) -> None:
    """Delete chats and their messages (exit 1 if one was not found)."""

    async def work(store: SQLStore) -> list[str]:
        owner = await store.user_named(user)
        if owner is None:
            raise ConfigError(f"no user named {user!r}")
        return [cid for cid in chat_ids if not await store.delete_chat(cid, user_id=owner.id)]

    try:
        missing = with_store(url, config, work, create=False, what="toolrelay chats", say=_say)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    for cid in chat_ids:
        if cid not in missing:
            typer.echo(f"deleted {cid}")
    if missing:
        raise fail(f"no chat {', '.join(map(repr, missing))} of user {user!r}", code=1)


def to_json(chat: Chat, messages: list[StoredMessage]) -> dict[str, Any]:
    """The chat and its messages with every stored field (times in ISO 8601)."""
    return {
        "id": chat.id,
        "title": chat.title,
        "model": chat.model,
        "tags": chat.tags,
        "created_at": chat.created_at.isoformat(),
        "updated_at": chat.updated_at.isoformat(),
        "messages": [
            {
                "id": m.id,
                "role": m.role,
                "content": m.content,
                "output": m.output,
                "status": m.status,
                "error": m.error,
                "usage": m.usage,
                "model": m.model,
                "created_at": m.created_at.isoformat(),
            }
            for m in messages
        ],
    }


def to_markdown(chat: Chat, messages: list[StoredMessage]) -> str:
    """A readable transcript: a heading per message, tool calls with their results."""
    lines = [f"# {chat.title or chat.id}", "", f"`{chat.id}` · {chat.model or 'no model'}", ""]
    for message in messages:
        if message.role == "assistant":
            head = f"## assistant ({message.model})" if message.model else "## assistant"
            lines += [head, "", *_assistant(message)]
        else:
            lines += [f"## {message.role}", "", _content(message.content), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def _assistant(message: StoredMessage) -> list[str]:
    out: list[str] = []
    for item in message.output or []:
        out += _item(item)
    if not message.output and message.content:
        out += [str(message.content), ""]
    if message.status not in (None, "completed"):
        error = message.error.get("content") if isinstance(message.error, dict) else message.error
        out += [f"*turn {message.status}{': ' + str(error) if error else ''}*", ""]
    return out


def _item(item: dict[str, Any]) -> list[str]:
    kind = item.get("type")
    if kind == "message":
        return [parts_text(item.get("content")), ""]
    if kind == "reasoning":
        text = parts_text(item.get("content")) or parts_text(item.get("summary"))
        return ["> *thinking:* " + " ".join(text.split()), ""]
    if kind == "function_call":
        return [f"**tool call** `{item.get('name')}({item.get('arguments') or ''})`", ""]
    if kind == "function_call_output":
        return ["```", _content(item.get("output")), "```", ""]
    if kind == "code_interpreter":
        return ["```python", str(item.get("code", "")), "```", ""]
    return []


def _content(content: Any) -> str:
    """A message's content: a string, or text parts (other parts shown by kind)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", "")) if "text" in p else f"[{p.get('type', 'part')}]"
            for p in content
            if isinstance(p, dict)
        )
    return orjson.dumps(content).decode()
