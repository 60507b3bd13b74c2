"""What watches the server's turns: the log lines, the metrics and (when set up) the traces.

Built once per app from the settings; `observer` is what every turn's
`Relay` gets (`engine.observer`), `metrics` what `/metrics` renders.
"""

from __future__ import annotations

import logging

from toolrelay.config.settings import Settings
from toolrelay.engine.observer import Observer, Observers
from toolrelay.server.metrics import Metrics
from toolrelay.server.turn_log import TurnLog

__all__ = ["Telemetry"]

log = logging.getLogger("toolrelay.server")


class Telemetry:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.metrics = Metrics()
        parts: list[Observer] = [TurnLog(), self.metrics]
        self.observer: Observer = Observers(parts)

    def start(self) -> None:
        """The metrics listener, when `metrics_port` is set (a port in use is logged, not fatal:
        with several workers only the first one binds it)."""
        port = self.settings.metrics_port
        if port is None:
            return
        try:
            self.metrics.serve(self.settings.host, port)
        except OSError as exc:
            log.error("metrics_port %s: cannot listen: %s", port, exc)

    def close(self) -> None:
        self.metrics.close()
