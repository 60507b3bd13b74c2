"""`toolrelay serve --workers 2` as a child process, and which worker served what.

Each worker's log lines carry `worker=<pid>` and every response an
`X-Request-ID`, so a request's access line in the shared log names the worker
that served it: the tests check that fresh connections really reach both.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
from benchmarks.harness import ADMIN_KEY, ServerProcess, write_config

from tests.patience import HANG
from tests.reliability.conftest import database
from toolrelay.events import ChatStreamReader
from toolrelay.testing.fake_server import FakeModelServer

READY = re.compile(rb"Application startup complete\.\s.*worker=(\d+)")


class Workers:
    """A running two-worker server: its workers' pids, who served a request, its metrics."""

    def __init__(self, server: ServerProcess, metrics_dir: Path) -> None:
        self.server = server
        self.metrics_dir = metrics_dir

    def ready(self) -> set[int]:
        """Workers that have logged their start-up and are alive."""
        found = {int(pid) for pid in READY.findall(self.server.log.read_bytes())}
        return {pid for pid in found if pid in self.children()}

    def children(self) -> set[int]:
        """The parent's live worker processes (zombies, already dead, excluded)."""
        found: set[int] = set()
        for task in Path(f"/proc/{self.server.pid}/task").iterdir():
            try:
                listed = (task / "children").read_text().split()
            except FileNotFoundError:  # the thread ended between the listing and the read
                continue
            for pid in listed:
                if _alive(int(pid)) and b"toolrelay.server.processes.worker" in _cmdline(int(pid)):
                    found.add(int(pid))
        return found

    def wait_ready(self, count: int, *, besides: set[int] = frozenset()) -> set[int]:  # type: ignore[assignment]
        """`count` live, started workers not in `besides` (spawning imports everything
        again, under load: generous bound)."""
        deadline = time.monotonic() + 4 * HANG
        while len(found := self.ready() - besides) < count:
            assert time.monotonic() < deadline, self.server.log.read_text()[-3000:]
            time.sleep(0.05)
        return found

    def worker_of(self, response: httpx2.Response) -> int:
        """The pid of the worker that served `response` (its access line in the log)."""
        request_id = response.headers["x-request-id"]
        line = re.compile(rb"request_id=" + request_id.encode() + rb"\b.*?worker=(\d+)")
        deadline = time.monotonic() + HANG
        while not (found := line.search(self.server.log.read_bytes())):
            assert time.monotonic() < deadline, f"no log line for {request_id}"
            time.sleep(0.02)
        return int(found.group(1))

    @contextmanager
    def client_on(self, wanted: Any) -> Iterator[tuple[httpx2.Client, int]]:
        """A fresh keep-alive connection that landed on a worker `wanted(pid)` accepts
        (learned from a first cheap request; the next ones reuse the connection)."""
        for _ in range(60):
            with self.server.client() as client:
                pid = self.worker_of(client.get("/healthz"))
                if wanted(pid):
                    yield client, pid
                    return
        raise AssertionError("60 fresh connections never reached the wanted worker")

    def stream_events(
        self, chat_id: str, *, last: int, limit: int, avoid: int
    ) -> tuple[int, list[tuple[int, dict[str, Any]]]]:
        """`limit` events after `last`, read from a worker other than `avoid`."""
        for _ in range(60):
            with self.server.client() as client:
                headers = {"Last-Event-ID": str(last)}
                with client.stream("GET", f"/api/chats/{chat_id}/events", headers=headers) as r:
                    assert r.status_code == 200
                    pid = self.worker_of(r)
                    if pid == avoid:
                        continue
                    out: list[tuple[int, dict[str, Any]]] = []
                    decoder = ChatStreamReader()
                    for chunk in r.iter_bytes():
                        for frame_id, whole in decoder.feed(chunk):
                            out.append((int(frame_id or 0), whole.to_dict()))
                            if len(out) >= limit:
                                return pid, out
                    return pid, out
        raise AssertionError("60 fresh connections never reached another worker")

    def concurrent_posts(self, chat_id: str, count: int) -> list[tuple[int, int]]:
        """`count` posts to the chat at once, each on its own new connection:
        (status, serving worker) each."""
        start = threading.Barrier(count)
        results: list[tuple[int, int]] = []

        def post() -> None:
            with self.server.client() as client:
                start.wait(HANG)
                response = client.post(f"/api/chats/{chat_id}/messages", json={"content": "go"})
                results.append((response.status_code, self.worker_of(response)))

        threads = [threading.Thread(target=post) for _ in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(HANG)
        assert len(results) == count
        return results

    def metric(self, name: str, **labels: str) -> float:
        """One sample from the main port's `/metrics` (all workers, summed)."""
        with self.server.client() as client:
            text = client.get("/metrics").text
        want = {f'{k}="{v}"' for k, v in labels.items()}
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                head, value = line.rsplit(" ", 1)
                inside = head[len(name) :].strip("{}")
                if want <= set(inside.split(",")) if inside else not want:
                    total += float(value)
        return total


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@contextmanager
def two_workers(
    tmp_path: Path,
    upstream: FakeModelServer,
    store_kind: str,
    events_url: str | None,
    **settings: Any,
) -> Iterator[Workers]:
    """`toolrelay serve --workers 2` on `store_kind` (sqlite, postgres) and `events_url`
    (None: the parent's inter-process bus), both workers up."""
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
    with database(store_kind, tmp_path) as url:
        config = write_config(
            tmp_path / "toolrelay.toml",
            upstream.base_url,
            admin_key=ADMIN_KEY,
            data_dir=str(tmp_path / "data"),
            database_url=url,
            events_url=events_url,
            local=False,
            **settings,
        )
        server = ServerProcess(config, tmp_path / "server.log", env=env, args=["--workers", "2"])
        with server:
            workers = Workers(server, metrics_dir)
            workers.wait_ready(2)
            yield workers
