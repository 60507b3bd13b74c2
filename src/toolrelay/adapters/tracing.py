"""OpenTelemetry spans for turns, model calls and tool calls (an `engine.observer.Observer`).

Depends on `opentelemetry-api` only; which provider and exporter the spans go
to is the caller's choice (the server: `otel_endpoint`, or the process's
global provider). Names and attributes follow the OpenTelemetry GenAI
semantic conventions:

- a turn: `invoke_agent {route}` — `gen_ai.operation.name=invoke_agent`,
  `gen_ai.conversation.id` (the chat), `toolrelay.turn.id`, and at its end
  the status, iterations and the turn's usage;
- a model call: `chat {model}` (kind CLIENT) — `gen_ai.request.model`,
  `gen_ai.provider.name`, `gen_ai.usage.input_tokens` / `output_tokens`,
  `gen_ai.response.finish_reasons`, an error status when the call failed;
- a tool call: `execute_tool {name}` — `gen_ai.tool.name`,
  `gen_ai.tool.call.id`, an error status when the call failed.

Every span is made current for the work it wraps, so a tool's own spans
(an HTTP call to an MCP server, say) nest under its `execute_tool` span, and
parallel calls of one batch, each in its own task, are siblings under the turn.

Use it from Python too: `Relay(model, tools, observer=Tracing())`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider

from toolrelay.engine.observer import ModelCall, ToolCall, TurnStart, TurnSummary

__all__ = ["Tracing", "tracer_is_configured"]

_PROVIDERS = {"openai-chat": "openai", "openai-responses": "openai", "ollama": "ollama"}


def tracer_is_configured() -> bool:
    """Whether the process has a real tracer provider (not the API's no-op default)."""
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


class Tracing:
    """Spans for every turn; `models` maps a route name to `(upstream model, API kind)`."""

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        *,
        models: Mapping[str, tuple[str, str]] | None = None,
    ) -> None:
        from toolrelay import __version__

        self.tracer: Tracer = trace.get_tracer("toolrelay", __version__, tracer_provider)
        self.models = dict(models or {})

    @contextmanager
    def turn(self, start: TurnStart) -> Iterator[_TurnSpans]:
        route = start.route or "relay"
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": route,
            "toolrelay.turn.id": start.turn_id,
        }
        if start.chat_id:
            attributes["gen_ai.conversation.id"] = start.chat_id
        with self.tracer.start_as_current_span(
            f"invoke_agent {route}", attributes=attributes
        ) as span:
            yield _TurnSpans(self, span, route)


class _TurnSpans:
    __slots__ = ("model", "provider", "span", "tracer")

    def __init__(self, tracing: Tracing, span: Span, route: str) -> None:
        self.tracer = tracing.tracer
        self.span = span
        self.model, kind = tracing.models.get(route, (route, ""))
        self.provider = _PROVIDERS.get(kind)

    @contextmanager
    def model_call(self, call: ModelCall) -> Iterator[object]:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": self.model,
            "toolrelay.iteration": call.iteration,
        }
        if self.provider:
            attributes["gen_ai.provider.name"] = self.provider
        with self.tracer.start_as_current_span(
            f"chat {self.model}", kind=SpanKind.CLIENT, attributes=attributes
        ) as span:
            yield call
            _usage(span, call.usage or {})
            if call.finish_reason:
                span.set_attribute("gen_ai.response.finish_reasons", [call.finish_reason])
            if call.ttfb_s is not None:
                span.set_attribute("toolrelay.ttfb_s", call.ttfb_s)
            if call.error is not None:
                span.set_attribute("error.type", "upstream_error")
                span.set_status(Status(StatusCode.ERROR, call.error))

    @contextmanager
    def tool_call(self, call: ToolCall) -> Iterator[object]:
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.call_id,
            "gen_ai.tool.type": "function",
        }
        with self.tracer.start_as_current_span(
            f"execute_tool {call.name}", attributes=attributes
        ) as span:
            yield call
            if call.status != "completed":
                span.set_attribute("error.type", "tool_error" if call.known else "unknown_tool")
                span.set_status(Status(StatusCode.ERROR, call.error or call.status))

    def finished(self, summary: TurnSummary) -> None:
        span = self.span
        span.set_attribute("toolrelay.turn.status", summary.status)
        span.set_attribute("toolrelay.iterations", summary.iterations)
        span.set_attribute("toolrelay.tool_calls", summary.tool_calls)
        _usage(span, summary.usage)
        if summary.status == "failed":
            span.set_status(Status(StatusCode.ERROR, summary.error or "failed"))


def _usage(span: Span, usage: Mapping[str, Any]) -> None:
    for key in ("input_tokens", "output_tokens"):
        value = usage.get(key)
        if isinstance(value, int):
            span.set_attribute(f"gen_ai.usage.{key}", value)
