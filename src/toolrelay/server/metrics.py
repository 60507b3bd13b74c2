"""Prometheus metrics (`prometheus_client`): what the server did, scraped at `/metrics`.

Owns the metric definitions (one registry per app, so several apps in one
process never share numbers), the observer that feeds them from the engine's
hooks, and the separate listener when `metrics_port` is set.

Several workers (`serve --workers N`, `shared_across_workers`): every worker
writes its numbers to one per-run directory (prometheus_client's multiprocess
mode, `PROMETHEUS_MULTIPROC_DIR`), and `/metrics` on any worker, like the
`metrics_port` listener (then run by the parent process, so it outlives any
worker), adds them up: counters and histograms summed over every worker that
ran, gauges summed over the live ones. The directory is removed when the
server stops, or by the next one if it was killed (`run_dirs.py`); one given in
`PROMETHEUS_MULTIPROC_DIR` is emptied at start.

| metric | labels |
|---|---|
| `toolrelay_turns_total` | route, status (completed, failed, capped, cancelled) |
| `toolrelay_model_calls_total` | route, status (ok, error, cancelled) |
| `toolrelay_tool_calls_total` | tool (`(unknown)` for names no tool has), status |
| `toolrelay_upstream_ttfb_seconds` | route: until the upstream's response headers |
| `toolrelay_turn_duration_seconds` | route |
| `toolrelay_tokens_total` | route, direction (in, out) |
| `toolrelay_cost_total` | route: spend (the route's `prices`, else the provider's `cost`) |
| `toolrelay_budget_refusals_total` | scope (user, key): requests refused, a daily budget spent |
| `toolrelay_active_turns` | |
| `toolrelay_sse_subscribers` | chat event streams open now |
| `toolrelay_event_bus_lag_seconds` | publish → an SSE reader got it |
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

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
from toolrelay.server.processes import run_dirs

__all__ = ["CONTENT_TYPE", "MULTIPROC_ENV", "Metrics", "shared_across_workers", "worker_exited"]

log = logging.getLogger("toolrelay.server")

CONTENT_TYPE = CONTENT_TYPE_LATEST
_TURN_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5)
UNKNOWN_TOOL = "(unknown)"
"""The label of calls to a tool that does not exist (a model's invention must not add series)."""
MULTIPROC_ENV: Final = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus_client's own: set, every process writes its numbers there (read at import)."""
PARENT_LISTENS_ENV: Final = "TOOLRELAY_METRICS_IN_PARENT"
"""Set by the parent of the workers when it serves `metrics_port` itself."""


def _shared_dir() -> str | None:
    return os.environ.get(MULTIPROC_ENV) or None


def _all_workers(path: str) -> CollectorRegistry:
    """A registry that reads every worker's numbers from `path` at each scrape."""
    from prometheus_client import multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=path)  # type: ignore[no-untyped-call]
    return registry


@contextmanager
def shared_across_workers(host: str, metrics_port: int | None) -> Iterator[str]:
    """Around the workers, in the parent: the workers' shared directory (in the
    environment they inherit), and the `metrics_port` listener over all of them."""
    given = _shared_dir()
    path = given or run_dirs.make("metrics")
    if given:  # a previous run's numbers would be added in
        for old in Path(given).glob("*.db"):
            old.unlink(missing_ok=True)
    os.environ[MULTIPROC_ENV] = path
    listener: Any = None
    if metrics_port is not None:
        listener, thread = start_http_server(metrics_port, addr=host, registry=_all_workers(path))
        os.environ[PARENT_LISTENS_ENV] = "1"
        log.info("metrics listening on http://%s:%s/metrics (all workers)", host, metrics_port)
    log.info("metrics: the workers share %s", path)
    try:
        yield path
    finally:
        if listener is not None:
            listener.shutdown()
            listener.server_close()
            thread.join(5)
            os.environ.pop(PARENT_LISTENS_ENV, None)
        if given is None:
            os.environ.pop(MULTIPROC_ENV, None)
            shutil.rmtree(path, ignore_errors=True)


def worker_exited(path: str, pid: int) -> None:
    """In the parent, once a worker has exited: its live gauges stop counting (a worker
    killed with SIGKILL could not say so itself); its counters stay in the sums."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid, path=path)  # type: ignore[no-untyped-call]


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
        self.cost = Counter(
            "toolrelay_cost", "Spend by route: the routes' prices, else the providers' cost.",
            ["route"], registry=r,
        )  # fmt: skip
        self.budget_refusals = Counter(
            "toolrelay_budget_refusals", "Requests refused: a daily budget was spent.",
            ["scope"], registry=r,
        )  # fmt: skip
        # with several workers: the sum over the live ones (module doc)
        self.active_turns = Gauge(
            "toolrelay_active_turns", "Turns running now.", registry=r, multiprocess_mode="livesum"
        )
        self.sse_subscribers = Gauge(
            "toolrelay_sse_subscribers",
            "Chat event streams open now.",
            registry=r,
            multiprocess_mode="livesum",
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
        """The text format: this process's numbers, or every worker's (module doc)."""
        shared = _shared_dir()
        return generate_latest(self.registry if shared is None else _all_workers(shared))

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
        shared = _shared_dir()
        if shared is not None:  # this worker's live gauges stop counting
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(os.getpid(), path=shared)  # type: ignore[no-untyped-call]
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
        cost = usage.get("cost")
        if isinstance(cost, int | float) and cost > 0:
            m.child(m.cost, route).inc(cost)
