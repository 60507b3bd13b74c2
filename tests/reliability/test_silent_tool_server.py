"""A configured MCP server that never answers, over real sockets (issue 24 item 4):
turns go on without its tools, `GET /api/tools` and `/readyz` answer and say it is
down, the log says why, and the server stops at once."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from tests.adapters.tools.test_mcp_silent import SILENT
from tests.server.conftest import Running, ServerThread, make_settings
from tests.server.test_chats_api import new_chat, wait_saved
from toolrelay.config.tool_servers import ToolServer
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks

CHAT = "/v1/chat/completions"


@pytest.mark.parametrize("until", ["initialize", "tools/list"])
def test_a_silent_mcp_server_costs_only_its_own_tools(
    until: str, tmp_path: Path, upstream: FakeModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    upstream.route(CHAT, SSEReply(chat_chunks(text=["All", " good."])))
    silent = ToolServer(
        name="silent",
        kind="mcp-stdio",
        command=sys.executable,
        args=[str(SILENT), until],
        start_timeout=0.5,
    )
    settings = make_settings(tmp_path, upstream, tool_servers=[silent], tool_probe_s=0.1)
    caplog.set_level(logging.INFO)
    with ServerThread(settings) as base_url, Running(base_url, upstream, settings).client() as c:
        chat_id = new_chat(c, model="fake")
        assert c.post(f"/api/chats/{chat_id}/messages", json={"content": "hi"}).status_code == 202
        assert wait_saved(c, chat_id)["content"] == "All good."
        tools = c.get("/api/tools")
        assert tools.status_code == 200
        assert "within 0.5 s" in tools.text, tools.text
        ready = c.get("/readyz").json()
        assert ready["status"] == "ok" and ready["tool_servers"] == {"silent": "error"}
    assert f"no answer to {until} within 0.5 s" in caplog.text
