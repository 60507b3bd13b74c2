"""run_turn(): stream → accumulate → decide → run tools → repeat (SPEC R7, R12–R22).

The loop is a short `match` over the pure decision in `core.turn.decide`; the turn's
state, its requests, reads, checkpoints and its end live in `engine.turn_core`, reading
one body in `engine.response_read`, running a batch in `engine.tool_runner`. Invariants:

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
from collections.abc import Mapping, Sequence
from typing import Any, assert_never, cast

from toolrelay.core import events as ev
from toolrelay.core.items import (
    CodeInterpreterItem,
    FunctionCallItem,
    is_call,
    updated,
)
from toolrelay.core.stream.reader import ReadResult
from toolrelay.core.turn.budget import over_budget
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
from toolrelay.engine.checkpoint import (
    TurnPaused,
    TurnState,
    ordered_outputs,
    plan_resume,
)
from toolrelay.engine.finish import RunResult
from toolrelay.engine.interfaces import Tool
from toolrelay.engine.interpreter import (
    CodeJob,
    code_output,
    code_session,
)
from toolrelay.engine.observer import TurnStart
from toolrelay.engine.response_read import error_event
from toolrelay.engine.text_call_rounds import answered_again
from toolrelay.engine.tool_runner import BatchOutcome, RepeatsStopped, run_batch
from toolrelay.engine.tool_select import (
    not_started,
    select_tools,
)
from toolrelay.engine.turn_core import TurnCore

log = logging.getLogger(__name__)


class Turn(TurnCore):
    """One assistant turn; `run()` returns its result or re-raises cancellation."""

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
        await self.emitter.emit(error_event(error))
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
        await self.emitter.emit(error_event(error))
        return await self._finish(TurnStatus.CAPPED, error)


async def _until_done(save: asyncio.Future[None]) -> None:
    """Wait for the cancelled turn's save through further cancels: a shutdown cancels the
    task that is cancelling turns, and a plain shield would then stop waiting while the
    store is being closed under the save (the turn stayed `in_progress`)."""
    while not save.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(save)
    save.result()


def _waits(tools: Mapping[str, Tool], call: FunctionCallItem) -> bool:
    """A call that does nothing before someone answers (an approval, a client)."""
    tool = tools.get(str(call.get("name") or ""))
    return tool is not None and (tool.spec.requires_approval or tool.spec.kind == "client")
