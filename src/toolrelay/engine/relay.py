"""`Relay`: the Python front door — `await relay.run(messages)`, `relay.stream(messages)`,
and `relay.chat()` for a conversation that remembers its turns."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, Iterable, Iterator, Mapping, Sequence
from typing import Any, Unpack, cast

from toolrelay.core import events as ev
from toolrelay.core.events import Event, as_source
from toolrelay.core.formats.transcript import repair_history
from toolrelay.core.ids import new_id
from toolrelay.core.stream.think_tags import TagConfig
from toolrelay.core.tools.code_gates import code_interpreter_allowed
from toolrelay.engine.code_tool import CODE_TOOL_NAME, CodeTool
from toolrelay.engine.conversation import Conversation
from toolrelay.engine.durable_runs import (
    LEASE_S,
    RunCheckpoints,
    RunHeld,
    RunStore,
    claimed,
    keeps_runs,
    library_owner,
    recorded,
    run_request,
    state_of,
    unfinished_run,
)
from toolrelay.engine.filters import has_inlets, run_inlets
from toolrelay.engine.finish import Finisher, RunResult
from toolrelay.engine.interfaces import (
    ChatStore,
    EventSink,
    Message,
    ModelClient,
    Tool,
    ToolContext,
    ToolLike,
)
from toolrelay.engine.interpreter import CodeBudget, CodeRunner
from toolrelay.engine.limits import RunLimits
from toolrelay.engine.loop import Turn
from toolrelay.engine.observer import Observer
from toolrelay.engine.options import CodeOptions, LegacyOptions, ModelOptions, TaskOptions, grouped
from toolrelay.engine.pending import PendingCalls
from toolrelay.engine.request import TurnRequest
from toolrelay.engine.setup import TurnCode, TurnSetup, TurnTools
from toolrelay.engine.sinks import NullSink, stream_events
from toolrelay.engine.toolbox import CheckedTools, ToolOffer, checked_toolbox
from toolrelay.errors import ToolError


class Relay:
    """A model, its tools and the rules of the loop; runs any number of turns."""

    run_lease_s: float = LEASE_S
    """How long this process holds a durable turn's run without renewing it: another
    process resumes it (`resume`) only once that long has passed since this one died."""

    def __init__(
        self,
        model: ModelClient,
        tools: Iterable[ToolLike] = (),
        *,
        limits: RunLimits | None = None,
        store: ChatStore | None = None,
        filters: Sequence[Any] = (),
        observer: Observer | None = None,
        model_options: ModelOptions | None = None,
        code: CodeOptions | None = None,
        background: TaskOptions | None = None,
        **options: Unpack[LegacyOptions],
    ) -> None:
        """`tools` are `Tool`s (`@tool` makes one of a function) and `ToolSource`s
        (`MCPServer`, `OpenAPIServer`, `ToolFile`); names must differ.

        The rest comes in groups (`engine.options`): `model_options` (its name, params,
        inline tags, the code-interpreter gates' settings, tool-call quirks, context size,
        prices), `code` (the runner of the model's `<code_interpreter>` blocks and, with
        `tool`, the native `execute_code` tool, both behind the same five gates) and
        `background` (title, tags, follow-ups and their model). `observer` watches each
        turn (logs, metrics, traces: `engine.observer`). The older form, each option its
        own keyword (`name=`, `tags=`, `code_interpreter=` or `code_runner=`,
        `text_tool_calls=`, `tasks=`, `task_model=`, …), still works and wins over a group.
        """
        opts, code, background = grouped(model_options, code, background, options)
        self.model = model
        self.toolbox = (
            tools.toolbox
            if isinstance(tools, CheckedTools)
            else checked_toolbox(tools, self.coerce)
        )
        """Fixed tools plus the sources' tools, offered before each turn; a `CheckedTools`
        (a server route's, built once) brings its toolbox, checked already."""
        self.tools = self.toolbox.fixed
        self.limits = limits or RunLimits()
        self.store = store
        self.filters = list(filters)
        self.observer = observer
        self.options, self.code, self.background = opts, code, background
        self.task_model = background.model
        self.tasks = tuple(background.tasks)
        self.tags = opts.tags
        self.code_runner = code.runner
        self.code_tool = code.tool
        self.params = dict(opts.params)
        self.name = opts.name
        self.capabilities = opts.capabilities
        self.builtin_tools = opts.builtin_tools
        self.text_tool_calls = opts.text_tool_calls
        self.tool_choice_step = opts.tool_choice_step
        self.max_tools_per_call = opts.max_tools_per_call
        self.context_tokens = (
            opts.context_tokens
            if opts.context_tokens is not None
            else getattr(model, "context_tokens", None)
        )
        self.pending = PendingCalls()
        self.prices = dict(opts.prices) if opts.prices else None
        """Per million tokens (`input`, `output`): each turn's `usage.cost` (`core.turn.budget`)."""

    def coerce(self, item: object) -> object:
        """What a user put in `tools`, as a `Tool` or `ToolSource`: as given here (the
        engine knows no adapters); `toolrelay.Relay` also takes functions and paths."""
        return item

    async def run(
        self,
        messages: TurnRequest | Sequence[Message] | str,
        *,
        sink: EventSink | None = None,
        **options: Any,
    ) -> RunResult:
        """Run one turn to its end. Cancelling the task saves the partial turn, then re-raises.

        `messages` is a `TurnRequest` (`engine.request`: the messages and every
        per-request option, one value), or the messages alone with the options as
        keywords of the same names (`chat_id=`, `user=`, `features=`, `pause=`, …).
        `sink` receives the turn's events.
        """
        turn = _as_request(messages, options)
        return await self._run(turn, sink or NullSink())

    async def _run(self, turn: TurnRequest, sink: EventSink) -> RunResult:
        """One turn of `turn` (see `TurnRequest` for what each field does)."""
        chat_id, user, files, sources = turn.chat_id, turn.user, turn.files, turn.sources
        features, request, params = turn.features, turn.request, turn.params
        raw = _as_messages(turn.messages)
        message_id = turn.message_id or new_id("msg")
        checkpoints = turn.checkpoints
        runs = self._run_store(chat_id) if turn.durable else None
        if runs is not None:
            if turn.resume is None:
                wanted = run_request(raw, user, features, pause=turn.pause)
                started = await runs.start_run(
                    str(chat_id),
                    message_id,
                    owner=library_owner(),
                    request=wanted,
                    lease=self.run_lease_s,
                )
                if not started:
                    raise RunHeld(f"another process runs a durable turn of chat {chat_id!r}")
            checkpoints = RunCheckpoints(runs, message_id)
        offer = await self.toolbox.offer()
        code_runner, tags = self._code_path(features, user)
        budget = CodeBudget(self.limits.interpreter_retries)
        added = {t.spec.name: t for t in turn.extra_tools}
        if code_runner is not None and self.code_tool and CODE_TOOL_NAME not in offer.tools:
            added.setdefault(CODE_TOOL_NAME, CodeTool(code_runner, budget=budget))
        tools, specs = _with_added(offer, added)
        tools_param = _ToolsParam(tools)
        info = dict(turn.model_info or {"id": self.name or "model", "name": self.name or "model"})
        info.setdefault("owned_by", "toolrelay")
        meta: dict[str, Any] = {
            "chat_id": chat_id,
            "message_id": message_id,
            "user_id": user.get("id") if user else None,
            "model": info,
            "tool_ids": list(tools),
            "features": dict(features or {}),
            "files": [dict(f) for f in files],
            **dict(turn.metadata or {}),
        }
        emitter = _emitter(sink)
        extra: dict[str, Any] = {
            "__request__": request,
            "__tools__": tools_param,
            "__model__": info,
            "__metadata__": meta,
            "__event_emitter__": emitter,
            "__task__": None,
            "__task_body__": None,
        }
        history = raw
        refilter = None
        if has_inlets(self.filters):
            inlets = _Inlets(self.filters, raw, info, meta, user, extra)
            history = await inlets.run(0)
            refilter = inlets.run
        else:
            history = repair_history(history)
        setup = TurnSetup(
            client=self.model,
            messages=history,
            sink=sink,
            finisher=Finisher(
                store=self.store,
                chat_id=chat_id,
                message_id=message_id,
                filters=self.filters,
                task_model=self.task_model,
                tasks=self.tasks,
                user=user,
                model_name=self.name,
                extra=extra,
            ),
            request=turn.but(checkpoints=checkpoints) if runs is not None else turn,
            model=dataclasses.replace(
                self.options,
                params={**self.params, **(params or {})},
                tags=tags,
                context_tokens=self.context_tokens,
                prices=self.prices,
            ),
            tools=TurnTools(
                tools=tools,
                specs=specs,
                context=ToolContext(
                    messages=history,
                    files=files,
                    user=user,
                    metadata=meta,
                    chat_id=chat_id,
                    message_id=message_id,
                    event_emitter=emitter,
                    event_call=self._caller(sink),
                    model=info,
                    request=request,
                    tools=tools_param,
                ),
                pending=self.pending,
            ),
            code=TurnCode(runner=code_runner, budget=budget),
            limits=self.limits,
            observer=self.observer,
            refilter=refilter,
        )
        if sources and not isinstance(sink, NullSink):  # the sources shown with the answer
            for source in sources:
                await sink.emit(ev.event(ev.SOURCE, as_source(source)))
        running = Turn(setup).run()
        if runs is None:
            return await running
        return await recorded(runs, message_id, running, lease=self.run_lease_s)

    async def resume(self, chat_id: str, *, sink: EventSink | None = None) -> RunResult:
        """Go on with the chat's durable turn (`run(..., durable=True)`) from its last
        checkpoint, in this process or a new one: a paused turn with the answers given
        to this relay (`approve`, `submit_tool_result`) before this call, one cut by
        its process's end as the checkpoint rules say (`engine.checkpoint`). Raises
        `NoRunToResume` when the chat has none, `RunHeld` when another live process runs
        it (`engine.durable_runs`), `TurnPaused` when it pauses again."""
        store = self._run_store(chat_id)
        run = await claimed(store, chat_id, await unfinished_run(store, chat_id), self.run_lease_s)
        state = state_of(run)
        request = run.request
        return await self.run(
            list(request.get("history") or []),
            sink=sink,
            chat_id=chat_id,
            message_id=run.message_id,
            user=request.get("user"),
            features=request.get("features"),
            resume=state,
            pause=bool(request.get("pause")),
            durable=True,
        )

    def _run_store(self, chat_id: str | None) -> RunStore:
        if chat_id is None or self.store is None or not keeps_runs(self.store):
            raise ValueError("a durable turn needs a chat_id and a store that keeps runs")
        return cast(RunStore, self.store)

    def stream(
        self, messages: Sequence[Message] | str, **kwargs: Any
    ) -> AsyncGenerator[Event, None]:
        """Events of one turn as they happen, until the turn's task ends.

        `chat:completion` with `done: true` ends the answer; background-task
        events (title, tags, follow-ups) may follow it. Leaving the loop early
        cancels the turn (its partial output is still saved).
        """
        return stream_events(lambda sink: self.run(messages, sink=sink, **kwargs))

    def chat(self, *, system: str | None = None, history: Sequence[Message] = ()) -> Conversation:
        """A conversation that remembers: each turn's messages and output feed the next."""
        return Conversation(self, system=system, history=history)

    def submit_tool_result(
        self, call_id: str, result: Any, *, headers: Mapping[str, str] | None = None
    ) -> bool:
        """The result of a client-side tool call (`execute:tool`).

        `headers` mark an HTTP-style result, as a `[data, headers]` answer does
        (inline HTML or a `Location` becomes an embed, R10).
        """
        answer = [result, dict(headers)] if isinstance(headers, Mapping) else result
        return self.pending.resolve(f"tool:{call_id}", answer)

    def approve(self, call_id: str, approved: bool = True, *, reason: str | None = None) -> bool:
        """Approve or reject a call that waits in `tool:approval`."""
        return self.pending.resolve(f"approval:{call_id}", {"approved": approved, "reason": reason})

    async def aclose(self) -> None:
        """Close the model clients, the tool sources, the code runner (its kernels) and any
        filter holding a connection pool."""
        await self.toolbox.aclose()
        for f in self.filters:
            close = getattr(f, "aclose", None)
            if callable(close):
                await close()
        close = getattr(self.code_runner, "aclose", None)
        if callable(close):  # its kernels stop with the relay that owns them
            await close()
        await self.model.aclose()
        if self.task_model is not None and self.task_model is not self.model:
            await self.task_model.aclose()

    async def __aenter__(self) -> Relay:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _code_path(
        self, features: Mapping[str, Any] | None, user: Mapping[str, Any] | None
    ) -> tuple[CodeRunner | None, TagConfig | None]:
        """The runner and tag config of one turn: code runs only when all five gates agree.

        A closed gate turns the `<code_interpreter>` tag off, so the model's
        block stays text. A turn without a user is the library owner's own.
        """
        tags = self.tags
        requested = True if features is None else features.get("code_interpreter") is True
        allowed = code_interpreter_allowed(
            requested=requested,
            globally_enabled=self.code_runner is not None,
            builtin_tools=self.builtin_tools,
            capabilities=self.capabilities,
            user=user if user is not None else {"role": "admin"},
        )
        if tags is not None and tags.code_interpreter != allowed:
            tags = dataclasses.replace(tags, code_interpreter=allowed)
        return (self.code_runner if allowed else None), tags

    def _caller(self, sink: EventSink) -> Any:
        """A tool's `__event_call__`: an event the client answers like `execute:tool`.

        The answer arrives through `submit_tool_result(id, …)` (the server's
        tool-results endpoint); ids are fresh, so they never meet a call id.
        """
        limit = self.limits.client_tool_timeout

        async def call(event: dict[str, Any]) -> Any:
            key = new_id("evc")
            kind = str(event.get("type", "event_call"))
            await sink.emit(Event(kind, {**event, "id": key}))
            try:
                return await self.pending.wait(f"tool:{key}", limit)
            except TimeoutError:
                raise ToolError(
                    f"no answer to the `{kind}` event call after {limit:g} s."
                ) from None

        return call


def _emitter(sink: EventSink) -> Any:
    async def emit(event: dict[str, Any]) -> None:
        data = event.get("data")
        await sink.emit(
            Event(str(event.get("type", "status")), data if isinstance(data, dict) else {})
        )

    return emit


class _Inlets:
    """Inlet filters on every model call of a turn, as Open WebUI's request filters run on
    each continuation: always on the history as the client sent it, so what a filter
    adds never stacks up; `__metadata__["model_call"]` says which call (0 first)."""

    def __init__(
        self,
        filters: Sequence[Any],
        raw: list[Message],
        info: Mapping[str, Any],
        meta: Mapping[str, Any],
        user: Mapping[str, Any] | None,
        extra: Mapping[str, Any],
    ) -> None:
        self.filters, self.raw, self.info, self.meta = filters, raw, info, meta
        self.user, self.extra = user, extra

    async def run(self, call: int) -> list[Message]:
        meta = {**self.meta, "model_call": call}
        body = {
            "model": self.info.get("id"),
            "messages": [dict(m) for m in self.raw],
            "chat_id": self.meta.get("chat_id"),
            "metadata": meta,
        }
        changed = await run_inlets(
            self.filters, body, self.user, {**self.extra, "__metadata__": meta}
        )
        found = changed.get("messages")
        return repair_history(list(found) if isinstance(found, list) else self.raw)


class _ToolsParam(Mapping[str, Any]):
    """`__tools__`: name → `{spec, callable}` (the function spec, and a callable running
    the tool with keyword arguments and no turn context), as Open WebUI hands its tools to
    filters and tools; made on access, so a turn that never reads it costs nothing."""

    def __init__(self, tools: Mapping[str, Tool]) -> None:
        self._tools = tools

    def __getitem__(self, name: str) -> dict[str, Any]:
        tool = self._tools[name]

        async def call(**kwargs: Any) -> Any:
            return await tool.call(dict(kwargs), ToolContext())

        return {"spec": dict(tool.spec.openai_spec()["function"]), "callable": call}

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)


def _with_added(
    offer: ToolOffer, added: Mapping[str, Tool]
) -> tuple[Mapping[str, Tool], Sequence[Mapping[str, Any]]]:
    """The turn's tools and specs: the shared offer as is, or a copy with the turn's own
    tools (client tools, `execute_code`) in it, a same-named one replacing the offer's."""
    if not added:
        return offer.tools, offer.specs
    tools = {**offer.tools, **added}
    if any(name in offer.tools for name in added):
        return tools, [t.spec.openai_spec() for t in tools.values()]
    return tools, [*offer.specs, *(t.spec.openai_spec() for t in added.values())]


def _as_request(messages: TurnRequest | Sequence[Message] | str, options: Any) -> TurnRequest:
    """The turn's request: as given, or made of the messages and the older keywords."""
    if isinstance(messages, TurnRequest):
        if options:
            return messages.but(**options)
        return messages
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    return TurnRequest(messages=messages, **options)


def _as_messages(messages: Sequence[Message]) -> list[Message]:
    return [dict(m) for m in messages]
