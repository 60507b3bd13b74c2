"""Runs one batch of tool calls (SPEC R8–R12): parse, check, call, normalise.

Every failure becomes a result for the model, never an exception out of the
loop: unknown tool, unreadable or invalid arguments, a tool raising or timing
out, a client that never answers, a rejected approval. Calls run
concurrently (bounded), `sequential` tools alone; results keep call order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from toolrelay.core import events as ev
from toolrelay.core.events import Event, as_source
from toolrelay.core.items import (
    FunctionCallItem,
    FunctionCallOutputItem,
    Item,
    function_call_output_item,
    updated,
)
from toolrelay.core.tools.calls import (
    ArgumentsError,
    filter_to_schema,
    parse_arguments,
    validate_arguments,
)
from toolrelay.core.tools.citations import CITATION_TOOLS, citation_sources, terminal_event
from toolrelay.core.tools.result_cap import cap_output
from toolrelay.core.tools.result_status import reads_as_error
from toolrelay.core.tools.results import (
    NormalisedResult,
    normalise_result,
    result_output_parts,
    strip_base64,
)
from toolrelay.core.turn.decide import Repeats
from toolrelay.engine.interfaces import Tool, ToolContext
from toolrelay.engine.limits import RunLimits
from toolrelay.engine.observer import ToolCall, TurnObserver
from toolrelay.engine.pending import PendingCalls
from toolrelay.engine.tool_events import BatchEvents
from toolrelay.engine.tool_timer import ToolTimer

Emit = Callable[[Event], Awaitable[None]]


class Waits(Exception):
    """A call needs an answer (an approval, a client's result) that a pausing turn does not
    hold its task for (`ToolEnv.pausable`): the call is left unanswered, its batch goes on."""

    def __init__(self, call_id: str, kind: str) -> None:
        super().__init__(call_id)
        self.call_id = call_id
        self.kind = kind


@dataclass(slots=True)
class ToolEnv:
    """What running tools needs from the turn."""

    tools: Mapping[str, Tool]
    limits: RunLimits
    context: ToolContext
    emit: Emit
    pending: PendingCalls
    repeats: Repeats = field(default_factory=Repeats)
    quiet: bool = False
    """Nobody is listening: skip building the events only a client would read."""
    watch: TurnObserver | None = None
    """The turn's observer (`engine.observer`); None: no hook is called."""
    timer: ToolTimer = field(default_factory=ToolTimer)
    """The calls' timeouts, on one timer for the turn (the turn closes it)."""
    whole: dict[str, str] = field(default_factory=dict)
    """Whole texts of the results cut for the model, by output item id (`core.tools.result_cap`)."""
    events: BatchEvents | None = None
    """What the running batch's tools emit (`engine.tool_events`); set by `run_batch`."""
    on_started: Callable[[str], Awaitable[None]] | None = None
    """Called with a call id when an approved call starts (a checkpoint: it may now act)."""
    on_finished: Callable[[FunctionCallOutputItem], Awaitable[None]] | None = None
    """Called with each call's result as it is ready (a checkpoint: it is not run again)."""
    pausable: bool = False
    """A call waiting for an answer not given yet is left waiting (`waiting`) instead of
    held: the turn then pauses (`engine.checkpoint`)."""
    waiting: dict[str, str] = field(default_factory=dict)
    """Calls of the batch left waiting: call id -> `approval` or `tool`."""


@dataclass(slots=True)
class _Prepared:
    call: FunctionCallItem
    args: dict[str, Any]
    tool: Tool | None
    verdict: str | None
    """A result decided without running the tool (bad arguments, unknown tool, repeats)."""


@dataclass(frozen=True, slots=True)
class BatchDone:
    """The batch ran: the loop asks the model again."""


@dataclass(frozen=True, slots=True)
class RepeatsStopped:
    """Identical calls repeated long enough: the turn fails with `error`."""

    error: str


BatchOutcome = BatchDone | RepeatsStopped


@dataclass(frozen=True, slots=True)
class BatchResult:
    calls: list[FunctionCallItem]
    """The calls, arguments canonical, status final."""
    outputs: list[FunctionCallOutputItem]
    """One function_call_output per call, in call order."""
    outcome: BatchOutcome
    text: list[Item] = field(default_factory=list)
    """The message item the tools wrote (`message`/`replace` events), after the outputs."""


async def run_batch(
    calls: Sequence[FunctionCallItem], env: ToolEnv, *, base_index: int
) -> BatchResult:
    prepared = [_prepare(call, env) for call in calls]
    outcome: BatchOutcome = BatchDone()
    if env.repeats.count >= env.limits.stop_after_repeats > 0:
        name = env.repeats.signature[0] if env.repeats.signature else "?"
        outcome = RepeatsStopped(
            f"Stopped: the model called `{name}` with the same arguments "
            f"{env.repeats.count} times in a row."
        )
    results: list[FunctionCallOutputItem | None] = [None] * len(prepared)
    events = env.events = BatchEvents(env.emit, base_index + len(prepared))

    async def one(i: int) -> None:
        try:
            results[i] = await _run_one(prepared[i], env, base_index + i)
        except Waits as waits:  # paused, not held: no result yet
            env.waiting[waits.call_id] = waits.kind

    group: list[int] = []
    for i, prep in enumerate(prepared):
        if prep.tool is not None and prep.tool.spec.sequential and prep.verdict is None:
            await _gather(group, one, env.limits.max_concurrency)
            group = []
            await one(i)
        else:
            group.append(i)
    await _gather(group, one, env.limits.max_concurrency)
    outputs = [r for r in results if r is not None]
    text = await events.close()
    return BatchResult([p.call for p in prepared], outputs, outcome, text)


async def _gather(
    indexes: list[int], one: Callable[[int], Coroutine[Any, Any, None]], limit: int
) -> None:
    """The calls at `indexes` at once, at most `limit` at a time (a gate only when more)."""
    if len(indexes) == 1:
        await one(indexes[0])
    elif indexes:
        run = _gated(one, asyncio.Semaphore(limit)) if len(indexes) > limit else one
        async with asyncio.TaskGroup() as tg:
            for i in indexes:
                tg.create_task(run(i))


def _gated(
    one: Callable[[int], Coroutine[Any, Any, None]], gate: asyncio.Semaphore
) -> Callable[[int], Coroutine[Any, Any, None]]:
    async def run(i: int) -> None:
        async with gate:
            await one(i)

    return run


def _prepare(call: FunctionCallItem, env: ToolEnv) -> _Prepared:
    name = str(call.get("name") or "")
    call = updated(call)  # a copy: the loop's own item is replaced, not edited
    parsed = parse_arguments(name, call.get("arguments"))
    if isinstance(parsed, ArgumentsError):
        env.repeats = env.repeats.observe(name, str(call.get("arguments")))
        return _Prepared(call, {}, None, parsed.message)
    call["arguments"] = parsed.canonical
    env.repeats = env.repeats.observe(name, parsed.canonical)
    tool = env.tools.get(name)
    if tool is None:
        return _Prepared(call, parsed.value, None, f'Error: Tool "{name}" not found.')
    spec = tool.spec
    filtering = spec.filter_arguments and spec.kind != "mcp"  # an MCP server validates (R8)
    args = filter_to_schema(parsed.value, spec.parameters) if filtering else parsed.value
    problem = None if spec.validates_arguments else validate_arguments(name, args, spec.parameters)
    if problem is not None:
        return _Prepared(call, args, tool, problem)
    if env.repeats.count >= env.limits.repeat_warn > 0:
        return _Prepared(call, args, tool, _repeat_text(name, env.repeats.count))
    return _Prepared(call, args, tool, None)


def _repeat_text(name: str, count: int) -> str:
    return (
        f"Error: you have called `{name}` with exactly these arguments {count} times in a row; "
        "the result will not change. Use the results you already have, change the "
        "arguments, or answer the user."
    )


async def _run_one(prep: _Prepared, env: ToolEnv, index: int) -> FunctionCallOutputItem:
    call = prep.call
    name = str(call.get("name"))
    if env.watch is not None:
        result, status = await _watched(prep, name, env, env.watch)
    elif prep.verdict is not None:
        result, status = NormalisedResult(prep.verdict), "failed"
    else:
        assert prep.tool is not None
        result, status = await _invoke(prep.tool, name, prep.args, call, env)
        await _side_events(name, prep.args, result, env, cite=status == "completed")
    output = function_call_output_item(
        str(call.get("call_id")), result_output_parts(result), status=status
    )
    if result.files:
        output["files"] = list(result.files)
    if result.embeds:
        output["embeds"] = list(result.embeds)
    if env.events is not None:
        output = env.events.marked(output)
    output, whole = cap_output(output, env.limits.tool_result_max_bytes)
    if whole is not None:
        env.whole[output["id"]] = whole
    if env.on_finished is not None:
        await env.on_finished(output)
    if not env.quiet:
        shown = strip_base64(output)
        await env.emit(ev.event(ev.OUTPUT_ITEM_DONE, {"output_index": index, "item": shown}))
    return output


async def _watched(
    prep: _Prepared, name: str, env: ToolEnv, watch: TurnObserver
) -> tuple[NormalisedResult, str]:
    """The call inside its observer's context (a tracing span is current while it runs)."""
    record = ToolCall(name, str(prep.call.get("call_id")), known=name in env.tools)
    with watch.tool_call(record):
        if prep.verdict is not None:
            result, status = NormalisedResult(prep.verdict), "failed"
        else:
            assert prep.tool is not None
            result, status = await _invoke(prep.tool, name, prep.args, prep.call, env)
            await _side_events(name, prep.args, result, env, cite=status == "completed")
        record.status = status
        if status != "completed":
            record.error = result.text
    return result, status


async def _invoke(
    tool: Tool, name: str, args: dict[str, Any], call: FunctionCallItem, env: ToolEnv
) -> tuple[NormalisedResult, str]:
    spec = tool.spec
    call_id = str(call.get("call_id"))
    if spec.requires_approval:
        refusal = await _approval(call_id, name, args, env, started=spec.kind != "client")
        if refusal is not None:
            return NormalisedResult(refusal), "failed"
    if spec.kind == "client":
        try:
            raw = await _client_call(call_id, name, args, env)
        except TimeoutError:
            return _timed_out(name, env.limits.client_tool_timeout)
        except (asyncio.CancelledError, Waits):
            raise
        except Exception as exc:  # a tool's failure is a result for the model (R9)
            return NormalisedResult(_error_text(exc)), "failed"
        return _judged(normalise_result(raw, direct=True))
    timeout = spec.timeout if spec.timeout is not None else env.limits.tool_timeout
    # a tool that reads no context (a `@tool` function declaring none) gets the turn's own
    context = env.context if _reads_no_context(tool) else _call_context(env, call_id)
    timer = env.timer
    guard = timer.start(timeout)
    try:
        raw = await tool.call(args, context)
    except asyncio.CancelledError:
        if timer.end(guard):
            return _timed_out(name, timeout)
        raise
    except TimeoutError:  # the tool's own, said as the runner's was (as it always was)
        timer.end(guard)
        return _timed_out(name, timeout)
    except Exception as exc:  # a tool's failure is a result for the model (R9)
        timer.end(guard)
        return NormalisedResult(_error_text(exc)), "failed"
    except BaseException:
        timer.end(guard)
        raise
    timer.end(guard)
    return _judged(normalise_result(raw, direct=False))


def _call_context(env: ToolEnv, call_id: str) -> ToolContext:
    """The context of one call: its id, and an `__event_emitter__` whose events land on it."""
    if env.events is None or env.context.event_emitter is None:
        return replace(env.context, call_id=call_id)
    return replace(env.context, call_id=call_id, event_emitter=env.events.emitter(call_id))


def _judged(result: NormalisedResult) -> tuple[NormalisedResult, str]:
    """A result whose text reads as an error (`Error: …`) is `failed`; the model reads it
    all the same (`core.tools.result_status`)."""
    return result, "failed" if reads_as_error(result.text) else "completed"


def _reads_no_context(tool: Tool) -> bool:
    params = getattr(tool, "context_params", None)
    return isinstance(params, frozenset) and not params


def _timed_out(name: str, waited: float) -> tuple[NormalisedResult, str]:
    return NormalisedResult(f"Error: Tool `{name}` timed out after {waited:g} s."), "failed"


def _error_text(exc: BaseException) -> str:
    message = str(exc) or type(exc).__name__
    return message if message.startswith("Error") else f"Error: {message}"


async def _approval(
    call_id: str, name: str, args: dict[str, Any], env: ToolEnv, *, started: bool
) -> str | None:
    """None when the user approved (then `env.on_started`, when `started`), else why not."""
    if not env.pending.ready(f"approval:{call_id}"):  # answered already: asked before
        await env.emit(ev.event(ev.TOOL_APPROVAL, {"id": call_id, "name": name, "arguments": args}))
        if env.pausable:
            raise Waits(call_id, "approval")
    try:
        answer = await env.pending.wait(f"approval:{call_id}", env.limits.client_tool_timeout)
    except TimeoutError:
        return f"Error: the call to `{name}` was not approved in time; it was not run."
    if answer is True or (isinstance(answer, Mapping) and answer.get("approved") is True):
        if started and env.on_started is not None:
            await env.on_started(call_id)
        return None
    reason = answer.get("reason") if isinstance(answer, Mapping) else None
    text = f"The user rejected the call to `{name}`; it was not run."
    return f"{text} Reason: {reason}" if reason else text


async def _client_call(call_id: str, name: str, args: dict[str, Any], env: ToolEnv) -> Any:
    if not env.pending.ready(f"tool:{call_id}"):  # answered already: asked before
        await env.emit(ev.event(ev.EXECUTE_TOOL, {"id": call_id, "name": name, "params": args}))
        if env.pausable:
            raise Waits(call_id, "tool")
    return await env.pending.wait(f"tool:{call_id}", env.limits.client_tool_timeout)


async def _side_events(
    name: str, args: dict[str, Any], result: NormalisedResult, env: ToolEnv, *, cite: bool
) -> None:
    """Citations (successful results only, R11) and `terminal:*` events."""
    if cite and name in CITATION_TOOLS:
        for source in citation_sources(name, args, result.text):
            await env.emit(ev.event(ev.SOURCE, as_source(source)))
    terminal = terminal_event(name, args)
    if terminal is not None:
        await env.emit(terminal)
