"""`TurnSetup`: what one `Turn` runs with, in the groups the front doors already build.

A new option is one field in one place: a per-request one in `TurnRequest`
(`setup.request.x`), a model one in `ModelOptions` (`setup.model.y`); the loop reads
it there and nothing between the front door and the loop names it again. `Relay`
hands each group with the turn's effective values (the request's params over the
route's, the tags the code gates left, the client's context size when the route
names none).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolrelay.engine.finish import Finisher
from toolrelay.engine.interfaces import EventSink, Message, ModelClient, Tool, ToolContext
from toolrelay.engine.interpreter import CodeBudget, CodeRunner
from toolrelay.engine.limits import RunLimits
from toolrelay.engine.observer import Observer
from toolrelay.engine.options import ModelOptions
from toolrelay.engine.pending import PendingCalls
from toolrelay.engine.request import TurnRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnTools:
    """The tools this turn offers and what their calls run with."""

    tools: Mapping[str, Tool] = field(default_factory=dict)
    specs: Sequence[Mapping[str, Any]] | None = None
    """The tools' specs for the model, in `tools` order; None: made from `tools` (a
    `Toolbox` hands the ones it made once, so a turn does not remake them)."""
    context: ToolContext = field(default_factory=ToolContext)
    pending: PendingCalls = field(default_factory=PendingCalls)
    """Where client results and approvals arrive (`Relay.submit_tool_result`, …)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnCode:
    """Running the model's code blocks: the runner the gates left (None: code stays text)."""

    runner: CodeRunner | None = None
    budget: CodeBudget | None = None
    """Code runs left this turn, shared with `execute_code`; None: `interpreter_retries`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnSetup:
    """Everything one turn needs; built by `Relay`."""

    client: ModelClient
    messages: Sequence[Message]
    """The history the model reads: `request.messages` through the inlet filters."""
    sink: EventSink
    finisher: Finisher
    request: TurnRequest = TurnRequest(messages=())
    """The per-request options the loop reads: `sources`, `deferred`, `checkpoints` (the
    durable run's when the relay keeps it), `resume`, `pause`, `continues`."""
    model: ModelOptions = ModelOptions()
    """The turn's effective model options: `params`, `tags`, `text_tool_calls`, …"""
    tools: TurnTools = TurnTools()
    code: TurnCode = TurnCode()
    limits: RunLimits = field(default_factory=RunLimits)
    observer: Observer | None = None
    """Logs, metrics, traces (`engine.observer`); None skips every hook."""
    refilter: Callable[[int], Awaitable[Sequence[Message]]] | None = None
    """The history for model call N (N > 0) through the inlet filters again; None: as is."""
    clock: Callable[[], float] = time.monotonic
