"""run_turn(): stream → accumulate → decide → run tools → repeat (SPEC R7, R12–R22).

The loop is a short `match` over the pure decision in `core.turn.decide`; reading
a response, running a batch and finishing are separate units. Invariants:

1. Every event goes out through the coalescer, in order.
2. The turn is saved at the end, also when it fails or is cancelled (the
   save is shielded from the cancellation, which then propagates); background
   tasks run after the final event and may add follow-ups to the saved turn.
3. Nothing raises out of the loop except cancellation: upstream faults,
   malformed bodies and tool failures become an error event, status `failed`
   (or a result for the model), with the partial output kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Any, assert_never, cast

from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.core.formats.transcript import ChatReplay, used_call_ids
from toolrelay.core.items import (
    CodeInterpreterItem,
    FunctionCallItem,
    Item,
    is_call,
    is_call_output,
    updated,
)
from toolrelay.core.prompt.rag import inject, take_snapshot
from toolrelay.core.stream.deltas import ErrorDelta
from toolrelay.core.stream.reader import BodyReader, ReadResult
from toolrelay.core.text_calls.parse import callable_names
from toolrelay.core.turn.budget import over_budget, turn_cost
from toolrelay.core.turn.decide import (
    Capped,
    Failed,
    Final,
    Interrupted,
    Outcome,
    RunCode,
    RunTools,
    Step,
    decide,
)
from toolrelay.core.turn.status import TurnStatus
from toolrelay.core.turn.usage import merge_usage
from toolrelay.engine.checkpoint import (
    Saver,
    TurnPaused,
    TurnState,
    ordered_outputs,
    plan_resume,
)
from toolrelay.engine.coalesce import Coalescer
from toolrelay.engine.context_fit import ContextFit
from toolrelay.engine.continuation import joined
from toolrelay.engine.finish import RunResult, TurnEnd
from toolrelay.engine.interfaces import Message, ModelRequest, ModelStream, Tool
from toolrelay.engine.interpreter import (
    CodeBudget,
    CodeJob,
    code_output,
    code_session,
    without_code_images,
)
from toolrelay.engine.observer import ModelCall, TurnObserver, TurnStart, TurnSummary
from toolrelay.engine.setup import TurnSetup
from toolrelay.engine.text_call_rounds import answered_again, text_call_request
from toolrelay.engine.tool_runner import BatchOutcome, RepeatsStopped, ToolEnv, run_batch
from toolrelay.engine.tool_select import (
    all_picked_ran,
    calling_params,
    not_started,
    only,
    select_tools,
)
from toolrelay.errors import ProviderError

log = logging.getLogger(__name__)

INVENTED_KEPT = 2000
"""Characters of a call to a made-up tool kept in the turn's steps (it is never shown)."""


class Turn:
    """One assistant turn; `run()` returns its result or re-raises cancellation."""

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
        self._reader: BodyReader | None = None
        self._finishing = False
        """Set once the finisher runs: a failure there (the save) is its caller's to report."""
        self._started = setup.clock()
        self.steps: list[dict[str, Any]] = []
        """Per model call and tool batch: what it took (saved in the turn's timings)."""
        limits = setup.limits
        self.emitter = Coalescer(
            setup.sink, window=limits.coalesce_ms / 1000, max_chunks=limits.coalesce_chunks
        )
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
        self._ids_of: Sequence[Message] | None = None
        self._history_ids: set[str] = set()
        self._output_ids: set[str] = set()
        self._ids_seen = 0
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

    async def run(self) -> RunResult:
        observer = self.setup.observer
        if observer is None:
            return await self._run()
        ctx = self.setup.tools.context
        start = TurnStart(ctx.message_id or "", ctx.chat_id, self.setup.finisher.model_name)
        with observer.turn(start) as watch:
            self.watch = self.tool_env.watch = watch
            return await self._run()

    async def _run(self) -> RunResult:
        try:
            result = await self._loop()
        except asyncio.CancelledError:
            await _until_done(asyncio.ensure_future(self._cancelled()))
            raise
        except TurnPaused:  # saved, waiting for answers: its caller's to resume
            raise
        except Exception as exc:  # invariant 3 holds for bugs too: a failed turn, never a crash
            if self._finishing:  # finishing again would fail the same way (a failed save)
                raise
            log.exception("turn %s crashed", self.setup.tools.context.message_id)
            return await self._crashed(exc)
        finally:
            self.tool_env.timer.close()
        return await self._after(result)

    async def _after(self, result: RunResult) -> RunResult:
        """Background tasks once the final event is out; a cancel here keeps the saved turn."""
        result = await self.setup.finisher.after(self.messages, result, self.emitter.emit)
        await self.emitter.flush()
        return result

    async def _loop(self) -> RunResult:
        new_from = 0
        await self._begin()
        with_tools = not self._picked_all_ran()  # a resumed turn may be past its tools
        while True:
            read, with_tools = await self._next(new_from, with_tools)
            outcome = self._decide(read)
            spent = over_budget(self.setup.limits.budget, self.usage)
            if spent is not None and isinstance(outcome, RunTools | RunCode):
                return await self._over_budget(outcome, spent)
            match outcome:
                case Final():
                    return await self._finish(TurnStatus.COMPLETED, None)
                case RunTools(calls):
                    new_from = len(self.output)
                    if self.setup.model.text_tool_calls and await self._answered_again(calls):
                        with_tools = False  # answer now (`engine.text_call_rounds`, rule 2)
                        continue
                    batch = await self._run_tools(calls)
                    if isinstance(batch, RepeatsStopped):
                        return await self._finish(TurnStatus.FAILED, batch.error)
                    if self._picked_all_ran():
                        with_tools = False  # answer now (`engine.tool_select`, rule 3)
                case RunCode(item):
                    new_from = self.output.index(item)  # the block, now with its output
                    await self._run_code(item)
                    await self._checkpoint()
                case Capped(calls):
                    return await self._capped(calls)
                case Failed(error):
                    return await self._finish(TurnStatus.FAILED, error)
                case Interrupted():
                    return await self._finish(
                        TurnStatus.COMPLETED, None, finish_reason="tool_calls"
                    )
                case _:
                    assert_never(outcome)

    async def _next(self, new_from: int, with_tools: bool) -> tuple[ReadResult, bool]:
        """The next response, and whether tools stay offered: a response that was a call to
        a tool not offered is asked again without tools (`engine.tool_select`, rule 8)."""
        await self._refilter()
        read = await self._read(self._request(new_from, with_tools=with_tools))
        if read.invented:
            with_tools = False
            await self._refilter()
            read = await self._read(self._request(new_from, with_tools=False))
        return read, with_tools

    async def _begin(self) -> None:
        """A new turn may first pick its tools; a resumed one goes on from its saved state,
        with the tools picked before it stopped (picked now if it stopped before that)."""
        resume = self.setup.request.resume
        if self.setup.model.tool_choice_step and (resume is None or not_started(resume)):
            await self._select_tools()
        if resume is not None:
            await self._resume(resume)

    async def _select_tools(self) -> None:
        """Offer the turn only the tools the model says it needs (`engine.tool_select`)."""
        setup, model = self.setup, self.setup.model
        if not self._tool_specs or model.params.get("tool_choice", "auto") != "auto":
            return
        start = setup.clock()
        chosen = await select_tools(
            setup.client,
            self.messages,
            self._tool_specs,
            model.params,
            model.max_tools_per_call,
        )
        if not chosen.fallback:
            self._offer_only(chosen.names)
        step = {"step": "select_tools", "s": round(setup.clock() - start, 4)}
        self.steps.append({**step, "tools": chosen.names, "fallback": chosen.fallback})

    def _offer_only(self, names: Sequence[str]) -> None:
        self._choice = list(names)
        self._tool_specs, self._offered = only(self._tool_specs, names), frozenset(names)

    def _picked_all_ran(self) -> bool:
        """Every tool the selection step picked has a result this turn: ask for the answer."""
        return self._choice is not None and all_picked_ran(self._choice, self.output)

    async def _refilter(self) -> None:
        """Inlets on each later model call (`Relay`'s `_Inlets`): from the client's history."""
        refilter = self.setup.refilter
        calls = sum(1 for s in self.steps if s["step"] == "model")
        if refilter is not None and calls > 0:
            self.messages = await refilter(calls)

    def _decide(self, read: ReadResult) -> Outcome:
        limits = self.setup.limits
        budget = self.code_budget
        code_limit = budget.limit if self.setup.code.runner is not None else 0
        return decide(
            Step(
                output=read.output,
                calls=[i for i in read.output if is_call(i)],
                error=read.error,
                iterations=self.iterations,
                max_iterations=limits.max_iterations,
                deferred_names=self._deferred,
                code_runs=budget.used,
                code_limit=code_limit,
            )
        )

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
        setup = self.setup
        opened = setup.clock() if call is not None else 0.0
        try:
            stream = await setup.client.open(request)
        except ProviderError as exc:
            await self.emitter.emit(_error_event(exc.message))
            return ReadResult([], None, None, exc.message, None, True)
        if call is not None:
            call.ttfb_s = setup.clock() - opened
        reader = self._reader = BodyReader(
            stream.format,
            tags=setup.model.tags,
            clock=setup.clock,
            offset=len(self.output),
            quiet=self.emitter.quiet,
            call_ids=self._used_call_ids(request.messages),
            text_tools=callable_names(self._offered, request.params.get("tool_choice"))
            if setup.model.text_tool_calls and request.tools
            else (),
            made_up_calls=self._choice is not None,
        )
        dropped = False
        emit_many, feed, acc = self.emitter.emit_many, reader.feed, reader.acc
        quiet, runs_code = self.emitter.quiet, setup.code.runner is not None
        try:
            async for chunk in stream:
                events = feed(chunk)
                if events and not quiet:
                    await emit_many(events)
                if runs_code and acc.code_closed:
                    reader.stop()  # run the block now; the rest of the stream is not read
                    break
                if reader.stopped:
                    await _read_end(stream)
                    break
        except ProviderError as exc:
            dropped = True
            await self.emitter.emit_many(reader.acc.feed(ErrorDelta(exc.message)))
        finally:
            await stream.aclose()
        await self.emitter.emit_many(reader.finish(dropped=dropped))
        self._reader = None
        return self._absorb(reader.result())

    def _used_call_ids(self, messages: Sequence[Message]) -> set[str]:
        """`used_call_ids(messages, self.output)`, kept up to date instead of made anew per
        model call (the scan grew with every round): the history's ids once per messages
        object, the output's as items are added (a replaced item keeps its call id)."""
        if messages is not self._ids_of:
            self._ids_of, self._history_ids = messages, used_call_ids(messages, ())
        output, ids = self.output, self._output_ids
        for item in output[self._ids_seen :]:
            call_id = item.get("call_id") if isinstance(item, Mapping) else None
            if isinstance(call_id, str) and call_id:
                ids.add(call_id)
        self._ids_seen = len(output)
        return self._history_ids | ids

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

    async def _run_tools(self, calls: Sequence[FunctionCallItem]) -> BatchOutcome:
        self.iterations += 1
        start = self.setup.clock()
        if self._saver is not None:  # the response asking for them, and what may act now
            tools = self.setup.tools.tools
            self._batch.running = [c["call_id"] for c in calls if not _waits(tools, c)]
            await self._checkpoint()
        batch = await run_batch(calls, self.tool_env, base_index=len(self.output))
        self._batch = TurnState()
        elapsed = round(self.setup.clock() - start, 4)
        self.steps.append({"step": "tools", "s": elapsed, "calls": len(calls)})
        by_id = {c["id"]: c for c in batch.calls}
        self.output = [by_id.get(i["id"], i) if is_call(i) else i for i in self.output]
        if self.tool_env.waiting:
            await self._pause(batch.outputs)
        self.output.extend(batch.outputs)
        self.output.extend(batch.text)  # what the tools wrote (`engine.tool_events`)
        return batch.outcome

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

    async def _resume(self, state: TurnState) -> None:
        """Go on from a checkpoint: clients get its output, the calls it left unanswered
        get their kept result, an `interrupted` one, or are run (`engine.checkpoint`)."""
        await self.emitter.emit(ev.event(ev.TURN_RESUMED, {"output": list(self.output)}))
        for call_id, answer in state.answers.items():  # what paused it: the calls read them
            self.setup.tools.pending.resolve(state.answer_key(call_id), answer)
        plan = plan_resume(state, self.setup.tools.tools)
        base = len(self.output)
        kept = ordered_outputs(self.output, plan.kept)
        for i, item in enumerate(kept):
            done: ev.ItemData = {"output_index": base + i, "item": item}
            await self.emitter.emit(ev.event(ev.OUTPUT_ITEM_DONE, done))
        results, text = dict(plan.kept), []
        if plan.rerun:
            batch = await run_batch(plan.rerun, self.tool_env, base_index=base + len(kept))
            results.update({o["call_id"]: o for o in batch.outputs})
            text = batch.text
            if self.tool_env.waiting:  # still waiting for an answer: pause again
                await self._pause(list(results.values()))
        self.output.extend(ordered_outputs(self.output, results))
        self.output.extend(text)
        if plan.kept or plan.rerun:
            await self._checkpoint()

    async def _answered_again(self, calls: Sequence[FunctionCallItem]) -> bool:
        """Calls that all repeat answered ones get the earlier results, not run (a text-call
        route: `engine.text_call_rounds`, rule 2); False when there is something to run."""
        results = answered_again(calls, self.output, self.setup.tools.tools)
        if results is None:
            return False
        self.iterations += 1  # a round all the same: the cap still bounds the turn
        base = len(self.output)
        self.output.extend(results)
        if not self.emitter.quiet:
            for i, item in enumerate(results):
                done: ev.ItemData = {"output_index": base + i, "item": item}
                await self.emitter.emit(ev.event(ev.OUTPUT_ITEM_DONE, done))
        return True

    async def _run_code(self, item: CodeInterpreterItem) -> None:
        runner = self.setup.code.runner
        assert runner is not None
        self.code_budget.take()  # `decide` ran this block only while runs were left
        call_id = item["id"]

        async def live(data: dict[str, Any]) -> None:
            output = cast(ev.CodeOutputData, {"call_id": call_id, **data})  # a runner's `kind`, …
            await self.emitter.emit(ev.event(ev.CODE_OUTPUT, output))

        context = self.setup.tools.context
        job = CodeJob(
            session=code_session(context.chat_id, context.user), call_id=call_id, on_output=live
        )
        try:
            result = await runner.run(
                str(item.get("code", "")), str(item.get("lang") or "python"), job
            )
        except Exception as exc:  # a runner that cannot run (pool full …): the model reads it
            error = str(exc) or type(exc).__name__
            result = {"stdout": "", "stderr": error, "error": error}
        index = next(i for i, it in enumerate(self.output) if it.get("id") == item["id"])
        # the turn keeps the images' data (the model sees them, R12); the client, by name
        self.output[index] = updated(item, output=result, status="completed")
        done = updated(item, output=code_output(result), status="completed")
        await self.emitter.emit(
            ev.event(ev.OUTPUT_ITEM_DONE, {"output_index": index, "item": done})
        )

    async def _over_budget(self, outcome: RunTools | RunCode, error: str) -> RunResult:
        """A budget reached while the model wants more (`core.turn.budget`): no further call;
        the calls it asked for are left unrun (`incomplete`), as at the iteration cap."""
        ids = {c["id"] for c in outcome.calls} if isinstance(outcome, RunTools) else set()
        self.output = [
            updated(i, status="incomplete") if i.get("id") in ids else i for i in self.output
        ]
        await self.emitter.emit(_error_event(error))
        return await self._finish(TurnStatus.CAPPED, error)

    async def _capped(self, calls: Sequence[FunctionCallItem]) -> RunResult:
        ids = {c["id"] for c in calls}
        self.output = [
            updated(i, status="incomplete") if i.get("id") in ids else i for i in self.output
        ]
        cap = self.setup.limits.max_iterations
        if self.setup.limits.on_cap == "final_answer":
            read = await self._read(self._request(0, with_tools=False))
            return await self._finish(
                TurnStatus.CAPPED, read.error, note=f"capped after {cap} tool rounds"
            )
        error = f"Tool-call limit reached: stopped after {cap} rounds of tool calls."
        await self.emitter.emit(_error_event(error))
        return await self._finish(TurnStatus.CAPPED, error)

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
        await self.emitter.emit(_error_event(error))
        return await self._finish(TurnStatus.FAILED, error)

    def _salvage(self) -> None:
        """Keep what the open response produced so far; mark unanswered calls incomplete."""
        reader, self._reader = self._reader, None
        if reader is not None:
            try:
                reader.finish(dropped=True)
                self.output.extend(reader.result().output)
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


async def _until_done(save: asyncio.Future[None]) -> None:
    """Wait for the cancelled turn's save through further cancels: a shutdown cancels the
    task that is cancelling turns, and a plain shield would then stop waiting while the
    store is being closed under the save (the turn stayed `in_progress`)."""
    while not save.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(save)
    save.result()


END_GRACE_S = 0.25
"""How long the end of a body that said it was over (`[DONE]`) is waited for."""


async def _read_end(stream: ModelStream) -> None:
    """Read the rest of a body that said it was over: a body closed before its end costs
    its connection (the next call opens a new one, TLS included), one read to the end
    puts it back in the pool. A server that keeps the body open after `[DONE]` delays
    the turn by `END_GRACE_S` at most; what it sends then is ignored. A stream with a
    `drain(grace)` (`UpstreamBody`) does it on the timer it already has."""
    drain = getattr(stream, "drain", None)
    if drain is not None:
        await drain(END_GRACE_S)
        return
    with contextlib.suppress(TimeoutError, ProviderError):
        async with asyncio.timeout(END_GRACE_S):
            async for _ in stream:
                pass


def _waits(tools: Mapping[str, Tool], call: FunctionCallItem) -> bool:
    """A call that does nothing before someone answers (an approval, a client)."""
    tool = tools.get(str(call.get("name") or ""))
    return tool is not None and (tool.spec.requires_approval or tool.spec.kind == "client")


def _error_event(message: str) -> Event:
    return ev.event(ev.CHAT_MESSAGE_ERROR, {"error": {"content": message}})
