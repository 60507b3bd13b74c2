"""Open WebUI `UserValves` persist per user and tool (issue 26 item 3): set on one
server, they are read by another on the same database (a second worker, a restart),
`GET` answers beside `PUT`, a bad value is refused naming the field, never the value,
and no value reaches the log."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.reliability.conftest import database
from tests.server.conftest import Running, ServerThread, make_settings
from tests.server.test_chats_api import new_chat, wait_saved
from tests.server.test_openai_api import call_reply, text_reply
from toolrelay.config.tool_servers import ToolServer
from toolrelay.testing.fake_server import FakeModelServer

CHAT = "/v1/chat/completions"
WEATHER = Path(__file__).parents[1] / "adapters" / "tools" / "owui_files" / "weather_tool.py"
VALVES = "/api/tools/weather/user-valves"


@pytest.mark.parametrize(
    "store_kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_user_valves_outlive_the_server_that_set_them(
    store_kind: str, tmp_path: Path, upstream: FakeModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)  # aiosqlite logs every statement at DEBUG
    weather = ToolServer(name="weather", kind="python", path=str(WEATHER))
    with database(store_kind, tmp_path) as url:
        settings = make_settings(tmp_path, upstream, database_url=url, tool_servers=[weather])
        with (
            ServerThread(settings) as base_url,
            Running(base_url, upstream, settings).client() as c,
        ):
            assert c.get(VALVES).json() == {"server": "weather", "valves": {}}
            put = c.put(VALVES, json={"city_alias": "home-s3cret"})
            assert put.status_code == 200, put.text
            bad = c.put(VALVES, json={"city_alias": ["not-a-string-s3cret"]})
            assert bad.status_code == 400
            assert "city_alias" in bad.text and "s3cret" not in bad.text
            assert c.get("/api/tools/nope/user-valves").status_code == 404
        # another server on the same database: a second worker, or this one restarted
        upstream.route(CHAT, call_reply("get_weather", {"city": "Oslo"}), text_reply("Done."))
        with (
            ServerThread(settings) as base_url,
            Running(base_url, upstream, settings).client() as c,
        ):
            assert c.get(VALVES).json() == {
                "server": "weather",
                "valves": {"city_alias": "home-s3cret"},
            }
            chat_id = new_chat(c, model="fake")
            assert (
                c.post(f"/api/chats/{chat_id}/messages", json={"content": "w?"}).status_code == 202
            )
            turn = wait_saved(c, chat_id)
            [result] = [i for i in turn["output"] if i["type"] == "function_call_output"]
            assert "Oslo (home-s3cret)" in str(result["output"])
    assert "s3cret" not in caplog.text
