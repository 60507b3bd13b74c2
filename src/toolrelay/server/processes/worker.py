"""One worker of `serve --workers N` (`python -m toolrelay.server.processes.worker`, started by the
parent's `Supervisor`): a whole server on its own SO_REUSEPORT listener.

uvicorn runs through its public API only (`Config`, `Server.run`); the "ready"
below comes from its `callback_notify` hook, not from an override of its start-up.
The own listener per worker, rather than uvicorn's multi-process mode (all
workers on one inherited socket, what `serve` falls back to without a balancing
SO_REUSEPORT), is kept on a measured gain (`benchmarks/worker_listeners.py`,
`--workers 2` on Redis, two runs on the 2-core machine under other work, load
15-22): the busiest worker's share of the CPU was 0.50-0.53 against 0.57-0.59,
and at 1,000 chats the added first-token time was lower (p50 6.1-7.1 s against
7.6-8.3 s, p99 6.8-7.6 s against 8.3-8.6 s); at 200 the shared socket's p50 was
lower (293-620 ms against 481-975 ms) and the p99s level (456-1,048 against
484-1,069 ms). CPU per chat was the same (3.6-4.7 ms both).

Every line it logs carries `worker=<pid>`. Its orders come in the environment: the settings the parent checked
(`workers.SETTINGS_ENV`) and `supervisor.WORKER_ENV` (host, port, backlog, the
control socket's fd, the shared bus's url). The control socket tells the parent
when this worker listens ("ready"), and its EOF tells this worker that the
parent died: it then stops as if sent SIGTERM (graceful), instead of serving on
as an orphan nobody supervises.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

import uvicorn

from toolrelay.server.processes.supervisor import STOP_MARGIN_S, WORKER_ENV, worker_socket
from toolrelay.server.processes.workers import SETTINGS_ENV, worker_settings


class _Ready:
    """Says "ready" to the parent once the server listens: uvicorn's `callback_notify` (its
    public heartbeat hook, gunicorn's worker uses it) is called from the server's main loop,
    which starts when the start-up is done, and with `timeout_notify=0` on its first turn."""

    def __init__(self, control: socket.socket) -> None:
        self.control = control
        self.said = False

    async def __call__(self) -> None:
        if not self.said:
            self.said = True
            with contextlib.suppress(OSError):  # the parent is gone: the watcher stops us
                self.control.sendall(b"ready\n")


class _WorkerField(logging.Filter):
    """`worker=<pid>` on every line this process logs: the workers share one stderr, and an
    access line (with its request id) then says which worker served the request."""

    def __init__(self) -> None:
        super().__init__()
        self.pid = os.getpid()

    def filter(self, record: logging.LogRecord) -> bool:
        given = getattr(record, "fields", None)
        record.fields = (
            {**given, "worker": self.pid} if isinstance(given, Mapping) else {"worker": self.pid}
        )
        return True


def _watch_parent(control: socket.socket, limit: float, app: Any) -> None:
    """Block until the parent's end closes (it exited or died), then stop gracefully; if
    still here `limit` seconds later (hung: nobody else will kill it), exit at once.
    Running turns are left for a take-over first (`TurnManager.leave`): the bus the
    parent hosted is gone with it."""
    with contextlib.suppress(OSError):
        while control.recv(64):
            pass
    services = getattr(app.state, "services", None)  # None before start-up ends
    if services is not None:
        services.turns.leave()
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(limit)  # a daemon thread: a normal exit does not wait for it
    os._exit(1)


def main() -> None:
    from toolrelay.server.app import create_app
    from toolrelay.server.logs import configure_logging
    from toolrelay.server.resume import default_node
    from toolrelay.server.startup_log import config_secrets

    orders = json.loads(os.environ.pop(WORKER_ENV))
    settings = worker_settings(orders.get("events_url"))
    os.environ.pop(SETTINGS_ENV)  # its secrets are no business of the tools this worker starts
    configure_logging(settings.log_level, settings.log_format, secrets=config_secrets(settings))
    for handler in logging.getLogger().handlers:
        if handler.get_name() == "toolrelay":
            handler.addFilter(_WorkerField())
    control = socket.socket(fileno=int(orders["control"]))
    control.set_inheritable(False)  # its EOF must mean this process, not a tool it started
    listener = worker_socket(orders["host"], int(orders["port"]))  # uvicorn listens on it
    app = create_app(  # as a one-process server (server/gc_tuning.py)
        settings,
        tune_gc=True,
        node=default_node(settings.data_dir, orders["port"], orders.get("slot", "")),
    )
    config = uvicorn.Config(
        app,
        host=orders["host"],
        port=int(orders["port"]),
        backlog=int(orders["backlog"]),
        log_config=None,  # through toolrelay's handler (format, masking)
        log_level=settings.log_level.lower(),
        callback_notify=_Ready(control),
        timeout_notify=0,
    )
    limit = settings.shutdown_grace_s + STOP_MARGIN_S
    threading.Thread(target=_watch_parent, args=(control, limit, app), daemon=True).start()
    uvicorn.Server(config).run(sockets=[listener])


if __name__ == "__main__":
    main()
