"""`Relay`: the Python front door — `await relay.run(messages)`, `relay.stream(messages)`,
and `relay.chat()` for a conversation that remembers its turns."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, Iterable, Iterator, Mapping, Sequence
from typing import Any, cast

from toolrelay.core import events as ev
from toolrelay.core.events import Event, as_source
from toolrelay.core.formats.transcript import repair_history
from toolrelay.core.ids import new_id
from toolrelay.core.prompt.rag import take_snapshot
from toolrelay.core.stream.think_tags import TagConfig
from toolrelay.core.tools.code_gates import code_interpreter_allowed
from toolrelay.engine.checkpoint import Checkpoints, TurnState
from toolrelay.engine.code_tool import CODE_TOOL_NAME, CodeTool
from toolrelay.engine.conversation import Conversation
from toolrelay.engine.durable_runs import (
    RunCheckpoints,
    RunStore,
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
from toolrelay.engine.loop import Turn, TurnSetup
from toolrelay.engine.observer import Observer
from toolrelay.engine.pending import PendingCalls
from toolrelay.engine.sinks import NullSink, stream_events
from toolrelay.engine.tasks import BackgroundTask
from toolrelay.engine.toolbox import CheckedTools, ToolOffer, checked_toolbox
from toolrelay.errors import ToolError


class Relay:
    """A model, its tools and the rules of the loop; runs any number of turns."""

    def __init__(
        self,
        model: ModelClient,
        tools: Iterable[ToolLike] = (),
        *,
        limits: RunLimits | None = None,
        store: ChatStore | None = None,
        filters: Sequence[Any] = (),
        task_model: ModelClient | None = None,
        tasks: Sequence[str | BackgroundTask] = ("title", "tags", "follow_ups"),
        tags: TagConfig | None = TagConfig(),
        code_interpreter: CodeRunner | None = None,
        code_runner: CodeRunner | None = None,
        code_tool: bool = True,
        params: Mapping[str, Any] | None = None,
        name: str | None = None,
        capabilities: Mapping[str, Any] | None = None,
        builtin_tools: Mapping[str, Any] | None = None,
        text_tool_calls: bool = False,
        tool_choice_step: bool = False,
        max_tools_per_call: int = 2,
        observer: Observer | None = None,
        context_tokens: int | None = None,
        prices: Mapping[str, float] | None = None,
    ) -> None:
        """`tools` are `Tool`s (`@tool` makes one of a function) and `ToolSource`s
        (`MCPServer`, `OpenAPIServer`, `ToolFile`); names must differ.

        `name` is what the saved turn records as its model (a server route name).
        `capabilities` and `builtin_tools` are the model's settings that two of
        the code-interpreter gates read (SPEC R5). `code_interpreter` (older name:
        `code_runner`) runs code: the model's `<code_interpreter>` blocks and, with
        `code_tool`, the native `execute_code` tool, both behind the same five gates.
        `text_tool_calls`: a model that writes its tool calls as JSON text in its
        answer (small local models) gets them run as real calls (`core.text_calls.parse`).
        `tool_choice_step`: before each turn's first model call the model is asked which
        tools (at most `max_tools_per_call`, or none) the user's message needs, and only
        those are offered (`engine.tool_select`; for small models offered many tools).
        `observer` watches each turn (logs, metrics, traces: `engine.observer`).
        `context_tokens`: how many tokens the model reads (unset: the client's own
        `context_tokens`, a route's setting, if any); a longer history is trimmed by
        `core.prompt.context`'s policy before each model call, and the turn says so.
        """
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
        self.task_model = task_model
        self.tasks = tuple(tasks)
        self.tags = tags
        self.code_runner = code_interpreter if code_interpreter is not None else code_runner
        self.code_tool = code_tool
        self.params = dict(params or {})
        self.name = name
        self.capabilities = capabilities
        self.builtin_tools = builtin_tools
        self.text_tool_calls = text_tool_calls
        self.tool_choice_step = tool_choice_step
        self.max_tools_per_call = max_tools_per_call
        self.observer = observer
        self.context_tokens = (
            context_tokens if context_tokens is not None else getattr(model, "context_tokens", None)
        )
        self.pending = PendingCalls()
        self.prices = dict(prices) if prices else None
        """Per million tokens (`input`, `output`): each turn's `usage.cost` (`core.turn.budget`)."""

    def coerce(self, item: object) -> object:
        """What a user put in `tools`, as a `Tool` or `ToolSource`: as given here (the
        engine knows no adapters); `toolrelay.Relay` also takes functions and paths."""
        return item

    async def run(
        self,
        messages: Sequence[Message] | str,
        *,
        sink: EventSink | None = None,
        chat_id: str | None = None,
        message_id: str | None = None,
        user: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        files: Sequence[Mapping[str, Any]] = (),
        sources: Sequence[Mapping[str, Any]] = (),
        extra_tools: Iterable[Tool] = (),
        deferred: Iterable[str] = (),
        params: Mapping[str, Any] | None = None,
        features: Mapping[str, Any] | None = None,
        checkpoints: Checkpoints | None = None,
        resume: TurnState | None = None,
        model_info: Mapping[str, Any] | None = None,
        request: Any = None,
        pause: bool = False,
        continues: str | None = None,
        durable: bool = False,
    ) -> RunResult:
        """Run one turn to its end. Cancelling the task saves the partial turn, then re-raises.

        `features` are what the chat asked for (`{"code_interpreter": True}`);
        None means the library default: a configured code runner is requested.
        `checkpoints` receives the turn's state at each step boundary; `resume` is such
        a state to go on from (the same `messages` as its start): `engine.checkpoint`.
        `model_info` is `__model__` (default `{id, name, owned_by}` from `name`),
        `request` is `__request__` (a request-like object; the server's has no secrets).
        `metadata` is added to what `__metadata__` always holds: `chat_id`,
        `message_id`, `user_id`, `model`, `tool_ids`, `features`, `files`.
        `pause` (with `checkpoints`): a call that needs an answer (an approval, a client's
        result) not given yet saves the turn and raises `TurnPaused` instead of waiting;
        `resume` it later with the answers in its state (`TurnState.answers`).
        `continues` (with `resume`: a cut answer's items) names its last message item,
        which the model's next text goes on (`engine.continuation`).
        `durable` (with a `store` that keeps runs, and `chat_id`): the turn is recorded
        and checkpointed in the store, so `resume(chat_id)` goes on with it in this
        process or a new one, paused or cut by its process's end (`engine.durable_runs`).
        """
        raw = _as_messages(messages)
        message_id = message_id or new_id("msg")
        runs = self._run_store(chat_id) if durable else None
        if runs is not None:
            if resume is None:
                wanted = run_request(raw, user, features, pause=pause)
                await runs.start_run(
                    str(chat_id), message_id, owner=library_owner(), request=wanted
                )
            checkpoints = RunCheckpoints(runs, message_id)
        sink = sink or NullSink()
        offer = await self.toolbox.offer()
        code_runner, tags = self._code_path(features, user)
        budget = CodeBudget(self.limits.interpreter_retries)
        added = {t.spec.name: t for t in extra_tools}
        if code_runner is not None and self.code_tool and CODE_TOOL_NAME not in offer.tools:
            added.setdefault(CODE_TOOL_NAME, CodeTool(code_runner, budget=budget))
        tools, specs = _with_added(offer, added)
        tools_param = _ToolsParam(tools)
        info = dict(model_info or {"id": self.name or "model", "name": self.name or "model"})
        info.setdefault("owned_by", "toolrelay")
        meta: dict[str, Any] = {
            "chat_id": chat_id,
            "message_id": message_id,
            "user_id": user.get("id") if user else None,
            "model": info,
            "tool_ids": list(tools),
            "features": dict(features or {}),
            "files": [dict(f) for f in files],
            **dict(metadata or {}),
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
            model=self.model,
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
            tools=tools,
            tool_specs=specs,
            limits=self.limits,
            pending=self.pending,
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
            params={**self.params, **(params or {})},
            tags=tags,
            code_runner=code_runner,
            code_budget=budget,
            rag=take_snapshot(history, sources) if sources else None,
            deferred=frozenset(deferred),
            text_tool_calls=self.text_tool_calls,
            tool_choice_step=self.tool_choice_step,
            max_tools_per_call=self.max_tools_per_call,
            observer=self.observer,
            context_tokens=self.context_tokens,
            checkpoints=checkpoints,
            resume=resume,
            refilter=refilter,
            prices=self.prices,
            pause=pause,
            continues=continues,
        )
        if sources and not isinstance(sink, NullSink):  # the sources shown with the answer
            for source in sources:
                await sink.emit(ev.event(ev.SOURCE, as_source(source)))
        turn = Turn(setup).run()
        return await (turn if runs is None else recorded(runs, message_id, turn))

    async def resume(self, chat_id: str, *, sink: EventSink | None = None) -> RunResult:
        """Go on with the chat's durable turn (`run(..., durable=True)`) from its last
        checkpoint, in this process or a new one: a paused turn with the answers given
        to this relay (`approve`, `submit_tool_result`) before this call, one cut by
        its process's end as the checkpoint rules say (`engine.checkpoint`). Raises
        `NoRunToResume` when the chat has none, `TurnPaused` when it pauses again."""
        store = self._run_store(chat_id)
        run = await unfinished_run(store, chat_id)
        state = state_of(run)
        await store.claim_run(run.message_id, owner=library_owner(), resumed=run.status != "paused")
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


def _as_messages(messages: Sequence[Message] | str) -> list[Message]:
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    return [dict(m) for m in messages]
