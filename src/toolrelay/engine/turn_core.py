"""What one turn holds, and the steps every path through it takes (`engine.loop.Turn`).

`TurnCore` owns a turn's state (history, output, usage, steps, the tools on
offer) and the I/O around it: building the next request, reading a response
into the output, saving a checkpoint, pausing for an answer and ending the turn
(saved whatever happened: completed, failed, cancelled). `engine.loop.Turn`
adds the loop that decides what to do next and does it; the two are apart so
that each reads on its own.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from typing import Any

from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.core.formats.transcript import ChatReplay
from toolrelay.core.items import (
    Item,
    is_call,
    is_call_output,
    updated,
)
from toolrelay.core.prompt.rag import inject, take_snapshot
from toolrelay.core.stream.reader import ReadResult
from toolrelay.core.text_calls.parse import callable_names
from toolrelay.core.turn.budget import turn_cost
from toolrelay.core.turn.status import TurnStatus
from toolrelay.core.turn.usage import merge_usage
from toolrelay.engine.checkpoint import (
    Saver,
    TurnPaused,
    TurnState,
)
from toolrelay.engine.coalesce import Coalescer
from toolrelay.engine.context_fit import ContextFit
from toolrelay.engine.continuation import joined
from toolrelay.engine.finish import RunResult, TurnEnd
from toolrelay.engine.interfaces import ModelRequest
from toolrelay.engine.interpreter import (
    CodeBudget,
    without_code_images,
)
from toolrelay.engine.observer import ModelCall, TurnObserver, TurnSummary
from toolrelay.engine.response_read import ResponseReading, error_event
from toolrelay.engine.setup import TurnSetup
from toolrelay.engine.text_call_rounds import text_call_request
from toolrelay.engine.tool_runner import ToolEnv
from toolrelay.engine.tool_select import (
    all_picked_ran,
    calling_params,
    only,
)

log = logging.getLogger(__name__)

INVENTED_KEPT = 2000
"""Characters of a call to a made-up tool kept in the turn's steps (it is never shown)."""


class TurnCore:
    """One turn's state and the steps around it (module doc); `engine.loop.Turn` runs it."""

    def __init__(self, setup: TurnSetup) -> None:
        self.setup = setup
        self.messages = setup.messages
        """The history the model reads; the inlets may make it anew per model call."""
        self.output: list[Item] = []
        self.usage: dict[str, Any] = {}
        self.iterations = 0
        self.code_budget = setup.code.budget or CodeBudget(setup.limits.interpreter_retries)
        self.response_id: str | None = None
        self.finish_reason: str | None = None
        self.sources: list[dict[str, Any]] = []
        self._finishing = False
        """Set once the finisher runs: a failure there (the save) is its caller's to report."""
        self._started = setup.clock()
        self.steps: list[dict[str, Any]] = []
        """Per model call and tool batch: what it took (saved in the turn's timings)."""
        limits = setup.limits
        self.emitter = Coalescer(
            setup.sink, window=limits.coalesce_ms / 1000, max_chunks=limits.coalesce_chunks
        )
        self._responses = ResponseReading(setup, self.emitter)
        tools = setup.tools
        self.tool_env = ToolEnv(
            tools.tools,
            limits,
            tools.context,
            self._emit_tool,
            tools.pending,
            quiet=self.emitter.quiet,
        )
        self._tool_specs = (
            [t.spec.openai_spec() for t in tools.tools.values()]
            if tools.specs is None
            else tools.specs
        )
        self._offered: Collection[str] = tools.tools.keys()
        """Names a call written as text may use: every tool, or the selection's."""
        self._choice: list[str] | None = None
        """The tools the selection step chose (`engine.tool_select`); None: no choice."""
        self._replay = ChatReplay()
        model = setup.model
        self._fit = (
            ContextFit(model.context_tokens, specs=self._tool_specs, params=model.params)
            if model.context_tokens
            else None
        )
        request = setup.request
        self._rag = take_snapshot(self.messages, request.sources) if request.sources else None
        self._deferred = frozenset(request.deferred)
        self._continues = request.continues
        """The cut message item the first response goes on writing (`engine.continuation`)."""
        self.watch: TurnObserver | None = None
        checkpoints = request.checkpoints
        self._saver = Saver(checkpoints) if checkpoints is not None else None
        self._batch = TurnState()
        """The running batch's call ids and finished results (only `running`, `results`)."""
        if self._saver is not None:
            self.tool_env.on_started = self._call_started
            self.tool_env.on_finished = self._call_finished
            self.tool_env.pausable = request.pause
        if request.resume is not None:
            state = request.resume
            self.output, self.usage = list(state.output), dict(state.usage)
            self.iterations, self.steps = state.iterations, list(state.steps)
            if state.picked is not None:  # the step's choice, kept with the turn
                self._offer_only(state.picked)

    def _offer_only(self, names: Sequence[str]) -> None:
        self._choice = list(names)
        self._tool_specs, self._offered = only(self._tool_specs, names), frozenset(names)

    def _picked_all_ran(self) -> bool:
        """Every tool the selection step picked has a result this turn: ask for the answer."""
        return self._choice is not None and all_picked_ran(self._choice, self.output)

    def _request(self, new_from: int, *, with_tools: bool = True) -> ModelRequest:
        """The next request. It always names the previous response of this turn: a stateful
        client continues from it (R14), any other ignores it (the flag lives on the client)."""
        model = self.setup.model
        messages = self.messages
        if self.sources and self._rag is None:  # tool citations: re-inject them as markers (R11)
            self._rag = take_snapshot(messages, ())
        if self._rag is not None:
            messages = inject(messages, self._rag, tool_sources=self.sources)
        if self._fit is not None:
            messages = self._fit.fit(messages, self.output)
        continues = with_tools and self.response_id is not None
        calling = with_tools and self._choice is not None and bool(self._tool_specs)
        request = ModelRequest(
            messages=messages,
            output=list(self.output),
            tools=self._tool_specs if with_tools else [],
            params=calling_params(model.params) if calling else model.params,
            previous_response_id=self.response_id if continues else None,
            new_items_from=new_from if continues else 0,
            replay=self._replay,
        )
        return text_call_request(request) if model.text_tool_calls else request

    async def _read(self, request: ModelRequest) -> ReadResult:
        """Read one response to its end; faults become the result's error."""
        trimmed = self._fit.event() if self._fit is not None else None
        if trimmed is not None:  # what the request's history lost to the context
            await self.emitter.emit(trimmed)
        start = self.setup.clock()
        if self.watch is None:
            read = await self._read_body(request, None)
        else:
            call = ModelCall(self.iterations)
            with self.watch.model_call(call):
                read = await self._read_body(request, call)
                call.error, call.usage, call.finish_reason = (
                    read.error,
                    read.usage,
                    read.finish_reason,
                )
        step: dict[str, Any] = {"step": "model", "s": round(self.setup.clock() - start, 4)}
        if read.usage:
            step["usage"] = read.usage
        if read.finish_reason:
            step["finish_reason"] = read.finish_reason
        if read.invented:  # not shown, not in the output: kept here
            step["invented"] = read.invented[:INVENTED_KEPT]
        self.steps.append(step)
        return read

    async def _read_body(self, request: ModelRequest, call: ModelCall | None) -> ReadResult:
        model = self.setup.model
        text_tools = (
            callable_names(self._offered, request.params.get("tool_choice"))
            if model.text_tool_calls and request.tools
            else ()
        )
        read = await self._responses.read(
            request,
            call,
            self.output,
            text_tools=text_tools,
            made_up_calls=self._choice is not None,
        )
        return self._absorb(read)

    def _absorb(self, read: ReadResult) -> ReadResult:
        continues, self._continues = self._continues, None  # the first response
        whole = joined(self.output, read.output, continues) if continues else None
        if whole is None:
            self.output.extend(read.output)
        else:
            self.output[:] = whole
        if read.usage:
            self.usage = merge_usage(self.usage, read.usage)
            prices = self.setup.model.prices
            if prices:  # the route's price table says what it cost
                self.usage["cost"] = turn_cost(self.usage, prices)
        if read.response_id:
            self.response_id = read.response_id
        self.finish_reason = read.finish_reason
        return read

    async def _emit_tool(self, event: Event) -> None:
        if event.type == ev.SOURCE:
            self.sources.append(event.data)
        await self.emitter.emit(event)

    async def _checkpoint(self) -> None:
        if self._saver is not None:
            batch = self._batch
            state = TurnState(
                self.output,
                self.usage,
                self.iterations,
                self.steps,
                batch.running,
                batch.results,
                batch.waiting,
                picked=self._choice,
            )
            await self._saver.save(state)

    async def _pause(self, done: Sequence[Item]) -> None:
        """Save the batch's results and the calls left waiting, then stop (`TurnPaused`)."""
        waiting, self.tool_env.waiting = dict(self.tool_env.waiting), {}
        results = {o["call_id"]: o for o in done if is_call_output(o)}
        self._batch = TurnState(results=results, waiting=waiting)
        await self._checkpoint()
        await self.emitter.flush()
        raise TurnPaused(waiting)

    async def _call_started(self, call_id: str) -> None:
        self._batch.running = [*self._batch.running, call_id]
        await self._checkpoint()

    async def _call_finished(self, output: Item) -> None:
        if is_call_output(output):
            self._batch.results = {**self._batch.results, output["call_id"]: output}
            await self._checkpoint()

    async def _finish(
        self,
        status: TurnStatus,
        error: str | None,
        *,
        finish_reason: str | None = None,
        note: str | None = None,
    ) -> RunResult:
        self._finishing = True
        await self.emitter.flush()
        timings: dict[str, Any] = {
            "total_s": round(self.setup.clock() - self._started, 4),
            "steps": self.steps,
        }
        if note:
            timings["note"] = note
        if self.watch is not None:
            reason = finish_reason or self.finish_reason
            self.watch.finished(self._summary(status, error, timings["total_s"], reason))
        end = TurnEnd(
            messages=self.messages,
            output=without_code_images(self.output),
            usage=self.usage,
            status=status,
            error=error,
            finish_reason=finish_reason or self.finish_reason,
            timings=timings,
            quiet=self.emitter.quiet,
            whole_outputs=self.tool_env.whole,
        )
        result = await self.setup.finisher.finish(end, self.emitter.emit)
        await self.emitter.flush()
        return result

    def _summary(
        self, status: TurnStatus, error: str | None, duration: float, reason: str | None
    ) -> TurnSummary:
        steps = self.steps
        return TurnSummary(
            status=status.value,
            iterations=self.iterations,
            model_calls=sum(1 for s in steps if s["step"] == "model"),
            tool_calls=sum(s.get("calls", 0) for s in steps if s["step"] == "tools"),
            usage=dict(self.usage),
            duration_s=duration,
            error=error,
            finish_reason=reason,
        )

    async def _crashed(self, exc: Exception) -> RunResult:
        error = f"Internal error ({type(exc).__name__}) in this turn; the server log has details."
        self._salvage()
        await self.emitter.emit(error_event(error))
        return await self._finish(TurnStatus.FAILED, error)

    def _salvage(self) -> None:
        """Keep what the open response produced so far; mark unanswered calls incomplete."""
        try:
            self.output.extend(self._responses.salvage())
        except Exception:  # the reader is what broke: keep the items it had closed
            log.exception("partial output of a crashed response lost")
        answered = {i["call_id"] for i in self.output if is_call_output(i)}
        self.output = [
            updated(i, status="incomplete") if is_call(i) and i["call_id"] not in answered else i
            for i in self.output
        ]

    async def _cancelled(self) -> None:
        self._salvage()
        await self.emitter.emit(ev.event(ev.CHAT_TASKS_CANCEL, {}))
        await self._finish(TurnStatus.CANCELLED, "Cancelled.")
