"""The page shows what a tool emits (issue 29 item 2): its status on its card, its text
(replaced) in the answer, its citation in the sources; and the same after a reload."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.web.conftest import CHAT, Web
from tests.web.test_page import send
from toolrelay.testing.fake_server import SSEReply
from toolrelay.testing.wire import ToolCallSpec, chat_chunks

pytestmark = pytest.mark.xdist_group("web")  # one server and one browser for the page tests


def test_a_tools_events_show_live_and_after_a_reload(page: Page, web: Web) -> None:
    web.upstream.route(
        CHAT,
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec("inspect_argon", {})])),
        SSEReply(chat_chunks(text="It is inert.")),
    )
    send(page, "argon?")
    turn = page.locator("article.assistant").last

    def shown() -> None:
        expect(turn.locator("details.tool .tool-progress")).to_have_text("Checked 1 source")
        expect(turn.locator(".answer").first).to_have_text("Argon: found.")  # replaced
        expect(turn.locator(".answer").last).to_have_text("It is inert.")
        expect(turn.locator(".sources li")).to_contain_text("Argon handbook")

    shown()
    page.reload()
    turn = page.locator("article.assistant").last
    shown()
