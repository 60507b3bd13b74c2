"""Prometheus metrics (`prometheus_client`): what the server did, scraped at `/metrics`.

Owns the metric definitions (one registry per app, so several apps in one
process never share numbers), the observer that feeds them from the engine's
hooks, and the separate listener when `metrics_port` is set. The numbers are
this process's: with several workers, scrape each one (its own
`metrics_port`) or accept that `/metrics` shows the worker that answered.

| metric | labels |
|---|---|
| `toolrelay_turns_total` | route, status (completed, failed, capped, cancelled) |
| `toolrelay_model_calls_total` | route, status (ok, error, cancelled) |
| `toolrelay_tool_calls_total` | tool (`(unknown)` for names no tool has), status |
| `toolrelay_upstream_ttfb_seconds` | route: until the upstream's response headers |
| `toolrelay_turn_duration_seconds` | route |
| `toolrelay_tokens_total` | route, direction (in, out) |
| `toolrelay_active_turns` | |
| `toolrelay_sse_subscribers` | chat event streams open now |
| `toolrelay_event_bus_lag_seconds` | publish → an SSE reader got it |
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    start_http_server,
)

from toolrelay.engine.observer import ModelCall, ToolCall, TurnStart, TurnSummary

__all__ = ["CONTENT_TYPE", "Metrics"]

log = logging.getLogger("toolrelay.server")

CONTENT_TYPE = CONTENT_TYPE_LATEST
_TURN_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5)
UNKNOWN_TOOL = "(unknown)"
"""The label of calls to a tool that does not exist (a model's invention must not add series)."""


class Metrics:
    """The server's metrics; `observer` feeds the turn ones, routes feed the rest."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.turns = Counter(
            "toolrelay_turns", "Turns by how they ended.", ["route", "status"], registry=r
        )
        self.model_calls = Counter(
            "toolrelay_model_calls", "Model calls by route and outcome.", ["route", "status"],
            registry=r,
        )  # fmt: skip
        self.tool_calls = Counter(
            "toolrelay_tool_calls", "Tool calls by tool and status.", ["tool", "status"], registry=r
        )
        self.ttfb = Histogram(
            "toolrelay_upstream_ttfb_seconds",
            "Seconds until a model server's response began (its headers).",
            ["route"],
            registry=r,
        )
        self.turn_duration = Histogram(
            "toolrelay_turn_duration_seconds",
            "Seconds a turn took, model calls and tools included.",
            ["route"],
            buckets=_TURN_BUCKETS,
            registry=r,
        )
        self.tokens = Counter(
            "toolrelay_tokens", "Tokens by route, in (prompt) and out (completion).",
            ["route", "direction"], registry=r,
        )  # fmt: skip
        self.active_turns = Gauge("toolrelay_active_turns", "Turns running now.", registry=r)
        self.sse_subscribers = Gauge(
            "toolrelay_sse_subscribers", "Chat event streams open now.", registry=r
        )
        self.bus_lag = Histogram(
            "toolrelay_event_bus_lag_seconds",
            "Seconds from an event's publish to an SSE reader receiving it.",
            buckets=_LAG_BUCKETS,
            registry=r,
        )
        self._listener: Any = None
        self._thread: threading.Thread | None = None
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}

    def child(self, metric: Any, *labels: str) -> Any:
        """`metric.labels(*labels)`, remembered: the per-call lookup is a dict hit (the label
        sets are bounded: routes, tools (invented names pooled) and a few statuses)."""
        key = (id(metric), labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found

    def render(self) -> bytes:
        return generate_latest(self.registry)

    @contextmanager
    def turn(self, start: TurnStart) -> Iterator[_TurnMetrics]:
        """The engine's `Observer` hook: counts the turn as active while it runs."""
        self.active_turns.inc()
        try:
            yield _TurnMetrics(self, start.route or "")
        finally:
            self.active_turns.dec()

    def subscribed(self) -> float:
        """An SSE reader starts; returns the time from which its events count as live."""
        self.sse_subscribers.inc()
        return time.time()

    def delivered(self, published_at: float | None, since: float) -> None:
        """A live event reached a reader (backlog replayed on resume is not lag)."""
        if published_at is not None and published_at >= since:
            self.bus_lag.observe(max(0.0, time.time() - published_at))

    def unsubscribed(self) -> None:
        self.sse_subscribers.dec()

    def serve(self, host: str, port: int) -> None:
        """Answer `GET /metrics` on its own port (a thread; no key there)."""
        self._listener, self._thread = start_http_server(port, addr=host, registry=self.registry)
        log.info("metrics listening on http://%s:%s/metrics", host, self.port)

    @property
    def port(self) -> int | None:
        return None if self._listener is None else int(self._listener.server_port)

    def close(self) -> None:
        if self._listener is not None:
            self._listener.shutdown()
            self._listener.server_close()
            self._listener = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None


class _TurnMetrics:
    __slots__ = ("m", "route")

    def __init__(self, metrics: Metrics, route: str) -> None:
        self.m = metrics
        self.route = route

    @contextmanager
    def model_call(self, call: ModelCall) -> Iterator[object]:
        status = "cancelled"
        try:
            yield call
            status = "ok" if call.error is None else "error"
        finally:
            m = self.m
            m.child(m.model_calls, self.route, status).inc()
            if call.ttfb_s is not None:
                m.child(m.ttfb, self.route).observe(call.ttfb_s)

    @contextmanager
    def tool_call(self, call: ToolCall) -> Iterator[object]:
        status = "cancelled"
        try:
            yield call
            status = call.status
        finally:
            tool = call.name if call.known else UNKNOWN_TOOL
            self.m.child(self.m.tool_calls, tool, status).inc()

    def finished(self, summary: TurnSummary) -> None:
        m, route = self.m, self.route
        m.child(m.turns, route, summary.status).inc()
        m.child(m.turn_duration, route).observe(summary.duration_s)
        usage = summary.usage
        tokens_in, tokens_out = usage.get("input_tokens"), usage.get("output_tokens")
        if isinstance(tokens_in, int) and tokens_in > 0:
            m.child(m.tokens, route, "in").inc(tokens_in)
        if isinstance(tokens_out, int) and tokens_out > 0:
            m.child(m.tokens, route, "out").inc(tokens_out)
