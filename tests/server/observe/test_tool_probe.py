"""Tool servers are started at start-up and the start-up log says how each one is.

Real MCP servers (our Python SDK test server as a child process), one whose
command does not exist, and one that answers only once the test lets it: it
shows that start-up does not wait for a slow server and logs it again when it
answers.
"""

from __future__ import annotations

import logging
import sys
import threading
from pathlib import Path

import httpx2
import pytest

from tests.adapters.tools.conftest import TEST_SERVER
from tests.patience import HANG
from tests.server.conftest import ADMIN_KEY, ServerThread, make_settings
from toolrelay.config.tool_servers import ToolServer
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks

HEADERS = {"Authorization": f"Bearer {ADMIN_KEY}"}


def ours(name: str = "ours", **extra: object) -> ToolServer:
    return ToolServer(
        name=name,
        kind="mcp-stdio",
        command=sys.executable,
        args=[str(TEST_SERVER), "stdio"],
        allow=["pid", "weather"],
        **extra,
    )


def server_lines(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().startswith(f"tool server {name}:")]


def test_start_up_logs_each_tool_server_once_with_its_state(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="toolrelay")
    servers = [ours(), ToolServer(name="broken", kind="mcp-stdio", command="/nonexistent/server")]
    with FakeModelServer() as upstream:
        # a generous wait (not a timing check): both answer long before it on a loaded box
        settings = make_settings(tmp_path, upstream, tool_servers=servers, tool_probe_s=HANG)
        with ServerThread(settings) as url:
            up = [r for r in caplog.records if r.getMessage().startswith("toolrelay is up")]
            ready = httpx2.get(url + "/readyz", timeout=HANG).json()
            upstream.script(SSEReply(chat_chunks(text="hi")))  # a turn lists the servers again
            body = {"model": "fake", "messages": [{"role": "user", "content": "hi"}]}
            turn = httpx2.post(
                url + "/v1/chat/completions", json=body, headers=HEADERS, timeout=HANG
            )
    assert turn.status_code == 200, turn.text
    assert up, "the start-up summary was not logged"
    [ok] = server_lines(caplog, "ours")
    assert ok.getMessage() == "tool server ours: ok, 2 tools"
    assert ok.created <= up[0].created  # in the start-up summary, not after it
    [broken] = server_lines(caplog, "broken")  # once, though the turn met it failing again
    assert broken.levelno == logging.WARNING
    assert broken.getMessage().startswith("tool server broken: cannot start: MCP server")
    assert "FileNotFoundError" in broken.getMessage()
    assert not [r for r in caplog.records if "is unavailable" in r.getMessage()]
    assert ready["status"] == "ok"
    assert ready["tool_servers"] == {"ours": "ok", "broken": "error"}


GATED = """
import pathlib, runpy, sys, time
gate = pathlib.Path(sys.argv[1])
while not gate.exists():
    time.sleep(0.05)
sys.argv = [sys.argv[2], "stdio"]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_a_slow_tool_server_does_not_hold_start_up_and_is_logged_when_it_answers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="toolrelay")
    gate = tmp_path / "go"
    script = tmp_path / "gated.py"
    script.write_text(GATED)
    slow = ToolServer(
        name="slow",
        kind="mcp-stdio",
        command=sys.executable,
        args=[str(script), str(gate), str(TEST_SERVER)],
        allow=["pid"],
    )
    answered = threading.Event()

    class Seen(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "after start-up" in record.getMessage():
                answered.set()

    seen = Seen()
    logging.getLogger("toolrelay").addHandler(seen)
    try:
        with FakeModelServer() as upstream:
            settings = make_settings(tmp_path, upstream, tool_servers=[slow], tool_probe_s=0.2)
            with ServerThread(settings) as url:  # up while the server cannot have answered
                starting = [r.getMessage() for r in server_lines(caplog, "slow")]
                before = httpx2.get(url + "/readyz", timeout=HANG).json()["tool_servers"]
                gate.touch()
                assert answered.wait(HANG), "the late answer was not logged"
                after = httpx2.get(url + "/readyz", timeout=HANG).json()["tool_servers"]
    finally:
        logging.getLogger("toolrelay").removeHandler(seen)
    assert starting == [
        "tool server slow: still starting after 0.2 s (logged again when it answers)"
    ]
    assert before == {"slow": "not started"}
    assert after == {"slow": "ok"}
    late = [r.getMessage() for r in server_lines(caplog, "slow")][1:]
    assert late == ["tool server slow: ok, 1 tools (after start-up)"]
