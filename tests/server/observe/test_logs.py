"""`toolrelay serve --log-format json --log-level DEBUG`: the log of a full run, read back.

The server runs as a child process exactly as a user starts it, with secrets
everywhere they can be (admin key, an upstream key, a tool server's header
and URL password, a key minted at run time, Authorization headers on every
request); the test runs turns that succeed and fail, stops the server and
reads its whole log: every line JSON, the start-up summary, one line per turn
with the id the client saw, and none of the secrets.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest

from tests.server.conftest import TOOLS
from tests.server.test_faults import closed_port
from tests.server.test_openai_api import call_reply, text_reply
from toolrelay.testing.fake_server import FakeModelServer, RawReply

CHAT = "/v1/chat/completions"
HANG = 60.0


class Served:
    def __init__(self, tmp_path: Path, upstream: FakeModelServer) -> None:
        self.secrets = {
            "admin": "tr-" + secrets.token_urlsafe(30),
            "upstream": "upkey" + secrets.token_hex(12),
            "header": "hdrval" + secrets.token_hex(12),
            "url_password": "urlpw" + secrets.token_hex(12),
        }
        self.port = closed_port()
        dead = closed_port()
        config = tmp_path / "toolrelay.toml"
        config.write_text(
            f"""
data_dir = {str(tmp_path / "data")!r}
port = {self.port}
tools = [{str(TOOLS)!r}]

[[models]]
name = "fake"
base_url = "{upstream.base_url}"
model = "fake-model"
api_key_env = "OBSERVE_UPSTREAM_KEY"

[[tool_servers]]
name = "remote"
kind = "openapi"
url = "http://someone:{self.secrets["url_password"]}@127.0.0.1:{dead}"
headers = {{ "X-Api-Token" = "{self.secrets["header"]}" }}
"""
        )
        root = Path(__file__).parents[3]
        env = {
            **os.environ,
            "PYTHONPATH": f"{root}{os.pathsep}{root / 'src'}",
            "TOOLRELAY_ADMIN_KEY": self.secrets["admin"],
            "OBSERVE_UPSTREAM_KEY": self.secrets["upstream"],
        }
        command = "from toolrelay.cli.main import app; app()"
        args = ["serve", "--config", str(config), "--log-format", "json", "--log-level", "DEBUG"]
        args += ["--workers", "1"]  # one process's lines (several: test_metrics_workers.py)
        self.log_path = tmp_path / "server.log"
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-c", command, *args], env=env, stderr=self._log, cwd=tmp_path
        )
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._wait_ready()

    def _wait_ready(self) -> None:
        for _ in range(int(HANG / 0.05)):
            if self.process.poll() is not None:
                raise RuntimeError("the server exited: " + self.log_path.read_text())
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                threading.Event().wait(0.05)
        raise RuntimeError("the server did not start")

    def client(self, key: str | None = None) -> httpx2.Client:
        auth = {"Authorization": f"Bearer {key or self.secrets['admin']}"}
        return httpx2.Client(base_url=self.base_url, headers=auth, timeout=HANG)

    def stop(self) -> list[dict[str, Any]]:
        """SIGTERM, wait, and the log as parsed lines (each must be one JSON object)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=HANG)
        self._log.close()
        text = self.log_path.read_text()
        self.text = text
        return [orjson.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with FakeModelServer() as upstream:
        server = Served(tmp_path, upstream)
        server.upstream = upstream  # type: ignore[attr-defined]
        try:
            yield server
        finally:
            if server.process.poll() is None:
                server.process.kill()
                server.process.wait()


def _wait_turn(client: httpx2.Client, chat_id: str) -> dict[str, Any]:
    for _ in range(int(HANG / 0.05)):
        messages = client.get(f"/api/chats/{chat_id}").json()["messages"]
        last: dict[str, Any] = messages[-1]
        if last["role"] == "assistant" and last["status"] != "in_progress":
            return last
        threading.Event().wait(0.05)
    raise AssertionError("the chat turn did not end")


def test_a_full_run_logs_json_lines_per_turn_and_no_secret(served: Served) -> None:
    upstream: FakeModelServer = served.upstream  # type: ignore[attr-defined]
    upstream.route(
        CHAT,
        call_reply("add", {"a": 2, "b": 3}),
        text_reply("The sum is 5."),
        call_reply("nope", {}, call_id="call_bad"),
        text_reply("No such tool."),
        RawReply(400, b'{"error": {"message": "upstream exploded"}}'),
        text_reply("Hello from the chat API."),
    )
    body = {"model": "fake", "messages": [{"role": "user", "content": "2+3?"}]}
    with served.client() as admin:
        minted = admin.post("/api/admin/keys", json={"user": "alice", "name": "k"}).json()["key"]
        with served.client(minted) as client:
            ok = client.post(CHAT, json=body)
            bad_tool = client.post(CHAT, json=body)
            failed = client.post(CHAT, json=body)
            chat = client.post("/api/chats", json={"model": "fake"}).json()
            client.post(f"/api/chats/{chat['id']}/messages", json={"content": "hi"})
            chat_turn = _wait_turn(client, chat["id"])
    lines = served.stop()
    secret_values = [*served.secrets.values(), minted]

    assert ok.status_code == 200 and bad_tool.status_code == 200, (ok.text, bad_tool.text)
    assert chat_turn["status"] == "completed"
    assert upstream.requests[0].headers["authorization"] == f"Bearer {served.secrets['upstream']}"
    # the failed turn's id is in the error the client saw and in the log's lines about it
    failed_id = failed.headers["x-request-id"]
    assert failed.status_code == 502 and failed_id in failed.json()["error"]["message"]

    messages = [line["msg"] for line in lines]
    assert "route fake" in messages
    assert "tools: add, shout" in messages
    # started at start-up: its port is closed, so it is reported (once) with why
    [remote] = [m for m in messages if m.startswith("tool server remote: ")]
    assert remote.startswith("tool server remote: cannot start: ")
    assert any(m.startswith("store: sqlite+aiosqlite:///") for m in messages)
    assert "event bus: memory" in messages
    assert f"toolrelay is up: open http://127.0.0.1:{served.port}/" in messages

    turns = {
        line["turn"]: line
        for line in lines
        if line["logger"] == "toolrelay.turn" and "status" in line
    }
    first = turns[ok.headers["x-request-id"]]
    assert (first["model"], first["status"], first["iterations"], first["tool_calls"]) == (
        "fake",
        "completed",
        1,
        1,
    )
    assert (first["tokens_in"], first["tokens_out"]) == (30, 12)
    assert first["duration_s"] >= 0 and first["chat"] is None
    assert turns[failed_id]["status"] == "failed" and turns[failed_id]["level"] == "WARNING"
    assert turns[chat_turn["id"]]["chat"] == chat["id"]
    upstream_errors = [line for line in lines if line["msg"] == "upstream error"]
    assert [e["turn"] for e in upstream_errors] == [failed_id]
    tool_failures = [line for line in lines if line["msg"] == "tool call failed"]
    assert [(t["turn"], t["tool"], t["call_id"]) for t in tool_failures] == [
        (bad_tool.headers["x-request-id"], "nope", "call_bad")
    ]
    # uvicorn's access lines go through the same handler (JSON, with the request id)
    assert any(line["logger"] == "uvicorn.access" for line in lines)

    leaked = [s for s in secret_values if s in served.text]
    assert leaked == []
    assert "Bearer tr-" not in served.text
