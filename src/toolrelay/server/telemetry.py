"""What watches the server's turns: the log lines, the metrics and, when set up, the traces.

Built once per app; `start(registry)` builds `observer`, what every turn's
`Relay` gets (`engine.observer`). Traces are on when a tracer provider is
given (tests, an embedding app), when `otel_endpoint` names an OTLP/HTTP
collector (the `otel` extra), or when the process already has a provider
(`opentelemetry-instrument`); otherwise no tracing observer exists at all,
so the turns pay nothing for it.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from toolrelay.config.registry import Registry
from toolrelay.config.settings import Settings
from toolrelay.engine.observer import Observer, Observers
from toolrelay.server.metrics import PARENT_LISTENS_ENV, Metrics
from toolrelay.server.turn_log import TurnLog

__all__ = ["Telemetry"]

log = logging.getLogger("toolrelay.server")


class Telemetry:
    def __init__(self, settings: Settings, *, tracer_provider: Any = None) -> None:
        self.settings = settings
        self.metrics = Metrics()
        self.tracer_provider = tracer_provider
        self._owned_provider: Any = None
        self.observer: Observer = Observers([TurnLog(), self.metrics])

    def start(self, registry: Registry) -> None:
        parts: list[Observer] = [TurnLog(), self.metrics]
        tracing = self._tracing(registry)
        if tracing is not None:
            parts.append(tracing)
        self.observer = Observers(parts)
        self._listen()

    def _tracing(self, registry: Registry) -> Observer | None:
        from toolrelay.adapters.tracing import Tracing, tracer_is_configured

        provider = self.tracer_provider
        endpoint = self.settings.otel_endpoint
        if provider is None and endpoint:
            provider = self._owned_provider = _otlp_provider(endpoint)
            log.info("traces: OTLP/HTTP to %s", endpoint)
        elif provider is None and not tracer_is_configured():
            return None
        models = {name: (route.model, route.kind) for name, route in registry.routes.items()}
        return Tracing(provider, models=models)

    def _listen(self) -> None:
        """The metrics listener, when `metrics_port` is set (a port in use is logged, not
        fatal); with several workers their parent runs it (`metrics.shared_across_workers`)."""
        port = self.settings.metrics_port
        if port is None or os.environ.get(PARENT_LISTENS_ENV):  # the workers' parent serves it
            return
        try:
            self.metrics.serve(self.settings.host, port)
        except OSError as exc:
            log.error("metrics_port %s: cannot listen: %s", port, exc)

    def close(self) -> None:
        self.metrics.close()
        if self._owned_provider is not None:
            self._owned_provider.shutdown()  # flushes the spans still batched


def _otlp_provider(endpoint: str) -> Any:
    """An SDK provider exporting over OTLP/HTTP in batches (the `otel` extra; serve checks it)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "toolrelay"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return provider
