"""One `toolrelay chat` run: a conversation kept in memory and saved in the server's store.

Owns what outlives a single turn: the relay (its tool servers start once),
the history, the saved chat (created at the first turn, titled by its first
prompt; `-c` picks the owner's most recently updated chat, `--cid` a given
one), and switching the model (`/model`). Each turn saves the user message,
then the relay's `Finisher` saves the assistant turn — completed, failed or
cancelled, as the server does — through the same `ChatStore` interface.

The store is optional: without the server extra, or with `--no-save`, the
conversation lives in memory only.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolrelay.cli.chat_setup import ChatSetup, ModelChoice, build_setup, close_sources
from toolrelay.cli.outputs import Output
from toolrelay.cli.store import can_save, local_owner, open_store, where
from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.core.ids import new_id
from toolrelay.engine.interfaces import Message, Tool, ToolSource
from toolrelay.errors import ConfigError

if TYPE_CHECKING:
    from toolrelay.adapters.stores.sql import SQLStore
    from toolrelay.engine.conversation import Conversation

__all__ = ["LAST", "ChatRun", "Resume", "run_turn"]

LAST = "\x00last"
"""`Resume.chat_id` for `-c`: the most recently updated conversation."""
TITLE_CHARS = 60


@dataclass(frozen=True, slots=True)
class Resume:
    """Where a run's conversation comes from and goes to."""

    chat_id: str | None = None
    """None starts a new conversation; `LAST` continues the latest; else that chat."""
    save: bool = True
    database_url: str | None = None


class ChatRun:
    """Open with `await ChatRun.open(...)`; `turn` as often as needed; then `aclose`."""

    def __init__(
        self,
        choice: ModelChoice,
        file_tools: list[Tool | ToolSource],
        system: str | None,
        approve: Callable[..., Any] | None,
    ) -> None:
        self.choice = choice
        self.file_tools = file_tools
        self.system = system
        self.approve = approve
        self.store: SQLStore | None = None
        self.where = ""
        """The database the conversation is saved in (empty: not saved)."""
        self.owner_id = ""
        self.warning: str | None = None
        """Why the conversation is not saved although it should be (said once, on stderr)."""
        self.chat_id: str | None = None
        self.history: list[Message] = []
        self.setup: ChatSetup | None = None
        self.conversation: Conversation | None = None
        self.code_runner: Any = None
        """`--code`: one runner for the whole run, whatever model `/model` picks."""

    @classmethod
    async def open(
        cls,
        choice: ModelChoice,
        file_tools: list[Tool | ToolSource],
        *,
        system: str | None = None,
        resume: Resume = Resume(),
        approve: Callable[..., Any] | None = None,
    ) -> ChatRun:
        """Find the conversation (`ConfigError` when it is missing) and build the model."""
        run = cls(choice, file_tools, system, approve)
        try:
            await run._load(resume)
            if choice.code:
                run.code_runner = code_runner(choice)
            run._use(build_setup(run.choice, file_tools))
        except BaseException:
            await run.aclose()
            raise
        return run

    async def _load(self, resume: Resume) -> None:
        reading = resume.chat_id is not None
        if not resume.save or not (reading or can_save()):
            if reading:
                raise ConfigError("-c and --cid need saved conversations (not with --no-save)")
            return
        from toolrelay.config import load_settings

        url = resume.database_url or load_settings(self.choice.config).database_url
        try:
            self.store = await open_store(url, create=not reading, what="toolrelay chat -c/--cid")
        except ConfigError:
            raise
        except Exception as exc:  # an unwritable data dir, a database that is down …
            if reading:
                raise ConfigError(f"cannot open {where(url)}: {exc}") from None
            self.warning = f"not saving this conversation: cannot open {where(url)}: {exc}"
            return
        self.where = where(url)
        owner = await local_owner(self.store, create=not reading)
        self.owner_id = owner.id if owner is not None else ""
        if not reading:
            return
        chat = await self._find(resume.chat_id or "")
        self.chat_id = chat.id
        self.history = await self.store.load_messages(chat.id)
        if self.choice.model is None and self.choice.base_url is None and chat.model:
            self.choice = self.choice.with_model(chat.model)

    async def _find(self, chat_id: str) -> Any:
        assert self.store is not None
        if chat_id == LAST:
            chats, _ = await self.store.list_chats(self.owner_id, limit=1)
            if not chats:
                raise ConfigError(f"no conversation to continue in {self.where}")
            return chats[0]
        chat = await self.store.get_chat(chat_id, user_id=self.owner_id)
        if chat is None:
            raise ConfigError(f"no conversation {chat_id!r} in {self.where}")
        return chat

    def _use(self, setup: ChatSetup) -> None:
        from toolrelay.engine.options import CodeOptions, ModelOptions, TaskOptions
        from toolrelay.engine.relay import Relay

        setup.approve = self.approve
        relay = Relay(
            setup.model,
            setup.tools,
            limits=setup.limits,
            filters=setup.filters,
            store=self.store,
            model_options=ModelOptions(
                name=setup.name,
                tags=setup.tags,
                text_tool_calls=setup.text_tool_calls,
                tool_choice_step=setup.tool_choice_step,
                max_tools_per_call=setup.max_tools_per_call,
            ),
            code=CodeOptions(runner=self.code_runner),
            background=TaskOptions(tasks=()),
        )
        history = self.conversation.messages if self.conversation is not None else self.history
        self.setup = setup
        self.conversation = relay.chat(history=history)

    @property
    def model_name(self) -> str:
        return self.setup.name if self.setup is not None else ""

    async def switch(self, model: str) -> None:
        """`/model NAME`: the same conversation goes on with another model."""
        setup = build_setup(self.choice.with_model(model), self.file_tools)
        self.choice = self.choice.with_model(model)
        if self.setup is not None:
            await self.setup.close()
        self._use(setup)

    async def turn(self, text: str, output: Output) -> str | None:
        """Ask `text`, show the turn in `output`, save it; the final status (None: none came).

        `--system` joins the conversation (and the saved chat) before the run's first turn.
        """
        assert self.conversation is not None and self.setup is not None
        system, self.system = self.system, None
        if system:
            self.conversation.messages.append({"role": "system", "content": system})
        kwargs: dict[str, Any] = {}
        if self.store is not None:
            chat_id = await self._save_prompt(text, system)
            kwargs = {"chat_id": chat_id, "message_id": new_id("msg")}
        stream = self.conversation.stream(text, **kwargs)
        try:
            return await run_turn(stream, self.conversation.relay, self.setup, output)
        finally:
            if self.store is not None and self.chat_id is not None:
                # what was saved, a cancelled turn's partial answer included, as the server
                # and `-c` see it
                self.conversation.messages = await self.store.load_messages(self.chat_id)

    async def _save_prompt(self, text: str, system: str | None) -> str:
        """The chat (created at its first turn) with the new messages saved; its id."""
        assert self.store is not None
        if self.chat_id is None:
            title = " ".join(text.split())[:TITLE_CHARS] or None
            chat = await self.store.create_chat(self.owner_id, title=title, model=self.model_name)
            self.chat_id = chat.id
        if system:
            await self.store.add_message(self.chat_id, {"role": "system", "content": system})
        await self.store.add_message(self.chat_id, {"role": "user", "content": text})
        return self.chat_id

    async def aclose(self) -> None:
        try:
            if self.setup is not None:
                await self.setup.close()
            await close_sources(self.file_tools)
            if self.code_runner is not None:
                await self.code_runner.aclose()
        finally:
            if self.store is not None:
                await self.store.close()


def code_runner(choice: ModelChoice) -> Any:
    """The `--code` runner: `[code_interpreter]`'s engine and limits (Jupyter when it is off)."""
    from toolrelay.config import load_settings
    from toolrelay.config.code import build_code_runner

    settings = load_settings(choice.config)
    config = settings.code_interpreter
    if not config.enabled:
        config = config.model_copy(update={"engine": "jupyter"})
    return build_code_runner(config, settings.data_dir, settings.config_file)


async def run_turn(
    events: AsyncIterator[Event], relay: Any, setup: ChatSetup, output: Output
) -> str | None:
    """A turn's `events` into `output`, answering approvals on `relay`; its final status."""
    status: str | None = None
    with output:
        async for event in events:
            output.feed(event)
            if event.type == ev.TOOL_APPROVAL:
                await _answer_approval(relay, setup, event)
            if event.type == ev.CHAT_COMPLETION and event.data.get("done"):
                status = str(event.data.get("status", "completed"))
    return status


async def _answer_approval(relay: Any, setup: ChatSetup, event: Event) -> None:
    data = event.data
    if setup.approve is None:
        relay.approve(data["id"], False, reason="nobody to ask")
        return
    arguments = data.get("arguments") or {}
    ok, reason = await asyncio.to_thread(setup.approve, str(data.get("name")), arguments)
    relay.approve(data["id"], ok, reason=reason)
