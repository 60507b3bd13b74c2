"""`toolrelay serve --workers 2`: `/metrics` counts the turns of every worker.

The server runs as a child process exactly as a user starts it (two uvicorn
workers, Redis as the bus). Turns are sent until both workers have served
some (each worker's numbers live in a file named by its pid in the run's
directory); then the `metrics_port`, served by the parent, counts all of them,
and the directory is gone once the server stops.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2
import orjson
import pytest

from tests.server.observe.test_metrics import parse, value
from tests.server.test_faults import closed_port
from tests.server.test_openai_api import text_reply
from toolrelay.testing.fake_server import FakeModelServer

pytestmark = pytest.mark.redis

ADMIN = "tr-metrics-workers-0123456789"
START = 180.0
"""Seconds two workers may take to import and start on a loaded machine (a hang bound)."""
MOST_TURNS = 120


def wait_port(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    for _ in range(int(START / 0.05)):
        if process.poll() is not None:
            raise RuntimeError("the server exited: " + log.read_text())
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            threading.Event().wait(0.05)
    raise RuntimeError("the server did not start")


def shared_dir(log: Path) -> Path:
    for _ in range(int(START / 0.05)):
        for line in log.read_text().splitlines():
            found = re.match(r"metrics: the workers share (.+)$", orjson.loads(line)["msg"])
            if found:
                return Path(found.group(1))
        threading.Event().wait(0.05)
    raise RuntimeError("the shared directory was not logged")


def worker_pids(directory: Path) -> set[str]:
    """Workers that counted a turn (prometheus_client: one `counter_<pid>.db` each)."""
    return {p.stem.split("_", 1)[1] for p in directory.glob("counter_*.db")}


def test_metrics_count_the_turns_of_every_worker(tmp_path: Path) -> None:
    port, metrics_port = closed_port(), closed_port()
    with FakeModelServer() as upstream:
        upstream.route("/v1/chat/completions", *[text_reply("ok") for _ in range(MOST_TURNS)])
        config = tmp_path / "toolrelay.toml"
        config.write_text(
            f"""
data_dir = {str(tmp_path / "data")!r}
port = {port}
metrics_port = {metrics_port}
events_url = "redis://127.0.0.1:6379/0"
local = false

[[models]]
name = "fake"
base_url = "{upstream.base_url}"
model = "fake-model"
"""
        )
        root = Path(__file__).parents[3]
        env = {
            **{k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"},
            "PYTHONPATH": f"{root}{os.pathsep}{root / 'src'}",
            "TOOLRELAY_ADMIN_KEY": ADMIN,
        }
        log = tmp_path / "server.log"
        args = ["serve", "--config", str(config), "--workers", "2", "--log-format", "json"]
        with log.open("wb") as sink:
            process = subprocess.Popen(
                [sys.executable, "-c", "from toolrelay.cli.main import app; app()", *args],
                env=env,
                stderr=sink,
                cwd=tmp_path,
            )
            try:
                wait_port(port, process, log)
                directory = shared_dir(log)
                url = f"http://127.0.0.1:{port}"
                body = {"model": "fake", "messages": [{"role": "user", "content": "hi"}]}
                headers = {"Authorization": f"Bearer {ADMIN}"}

                def turn(_: int) -> int:  # a connection of its own: either worker may take it
                    with httpx2.Client(timeout=START) as client:
                        return client.post(
                            url + "/v1/chat/completions", json=body, headers=headers
                        ).status_code

                sent = 0
                with ThreadPoolExecutor(4) as pool:
                    while len(worker_pids(directory)) < 2 and sent < MOST_TURNS:
                        assert list(pool.map(turn, range(4))) == [200] * 4
                        sent += 4
                assert len(worker_pids(directory)) == 2, "one worker served every turn"
                scraped = parse(
                    httpx2.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=START).text
                )
                on_main = httpx2.get(url + "/metrics", headers=headers, timeout=START)
            finally:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=START)
    assert value(scraped, "toolrelay_turns_total", route="fake", status="completed") == sent
    assert value(scraped, "toolrelay_model_calls_total", route="fake", status="ok") == sent
    assert value(scraped, "toolrelay_active_turns") == 0
    assert on_main.status_code == 404  # with metrics_port set, never on the public port
    assert not directory.exists()  # the run's numbers went with it
