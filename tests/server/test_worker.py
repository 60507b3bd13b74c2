"""One worker process (`python -m toolrelay.server.processes.worker`), driven as its parent drives it.

The worker's own SO_REUSEPORT socket is the only one on its port, so a
connection made right after it said "ready" on the control socket proves it
said so once it listened, not before (a socket bound but not listening
refuses connections).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx2

from tests.patience import HANG
from toolrelay.config.settings import Settings
from toolrelay.server.processes.supervisor import WORKER_ENV, reserve_port
from toolrelay.server.processes.workers import SETTINGS_ENV


def test_a_worker_says_ready_once_it_listens_and_stops_when_its_parent_goes(
    tmp_path: Path,
) -> None:
    settings = Settings(data_dir=tmp_path / "data", admin_key="tr-worker-test-0123456789")
    with reserve_port("127.0.0.1", 0) as reserved:
        port = reserved.getsockname()[1]
        ours, theirs = socket.socketpair()
        orders = {"host": "127.0.0.1", "port": port, "backlog": 64, "control": theirs.fileno()}
        env = {
            **os.environ,
            SETTINGS_ENV: settings.model_dump_json(),
            WORKER_ENV: json.dumps(orders),
        }
        worker = subprocess.Popen(
            [sys.executable, "-m", "toolrelay.server.processes.worker"],
            env=env,
            pass_fds=[theirs.fileno()],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        theirs.close()
        try:
            ours.settimeout(4 * HANG)  # a fresh interpreter imports the whole server
            assert ours.recv(64) == b"ready\n"
            answer = httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=HANG)
            assert answer.status_code == 200
            ours.close()  # the parent is gone: the worker stops as if sent SIGTERM
            assert (
                worker.wait(timeout=HANG) == -signal.SIGTERM
            )  # uvicorn re-raises it, once stopped
        finally:
            ours.close()
            if worker.poll() is None:
                worker.send_signal(signal.SIGKILL)
                worker.wait()
            assert worker.stderr is not None
            worker.stderr.close()
