"""Issue 29 item 8 on the page, in Chromium: versions of a message shown as ‹ 1/2 ›,
switching between them, regenerating an answer and editing a question from the page."""

from __future__ import annotations

import time
from typing import Any

import httpx2
import pytest
from playwright.sync_api import Page, expect

from tests.patience import HANG
from tests.web.conftest import CHAT, Web
from toolrelay.testing.fake_server import SSEReply
from toolrelay.testing.wire import chat_chunks

pytestmark = pytest.mark.xdist_group("web")


def _saved(api: httpx2.Client, chat_id: str, count: int) -> list[dict[str, Any]]:
    """The chat's branch once its last answer is saved and it has `count` messages."""
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline:
        messages = api.get(f"/api/chats/{chat_id}").json()["messages"]
        last = messages[-1] if messages else {}
        if len(messages) == count and last.get("status") not in (None, "in_progress"):
            return list(messages)
        time.sleep(0.05)
    raise AssertionError(f"never saved: {messages}")


def test_versions_switch_and_a_regenerate_and_an_edit_from_the_page(page: Page, web: Web) -> None:
    web.upstream.route(
        CHAT,
        SSEReply(chat_chunks(text="First.")),
        SSEReply(chat_chunks(text="Second.")),
        SSEReply(chat_chunks(text="Third.")),
        SSEReply(chat_chunks(text="Edited answer.")),
    )
    with web.api() as api:
        chat_id = api.post("/api/chats", json={"model": "fake"}).json()["id"]
        assert api.post(f"/api/chats/{chat_id}/messages", json={"content": "hi"}).is_success
        _saved(api, chat_id, 2)
        assert api.post(f"/api/chats/{chat_id}/regenerate", json={}).is_success
        _saved(api, chat_id, 2)
    page.goto(f"/#chat={chat_id}")
    page.reload()  # the same document: a new hash alone is not a new load
    answer = page.locator("article.assistant .answer")
    bar = page.locator(".assistant-bar")
    expect(answer).to_have_text("Second.")
    expect(bar.locator(".branch-count")).to_have_text("2/2")
    expect(bar.locator(".branch-next")).to_be_disabled()
    bar.locator(".branch-prev").click()
    expect(answer).to_have_text("First.")
    expect(bar.locator(".branch-count")).to_have_text("1/2")
    bar.locator(".regenerate").click()  # a third version, beside the others
    expect(answer).to_have_text("Third.")
    expect(bar.locator(".branch-count")).to_have_text("3/3")
    assert web.upstream.requests[-1].json["messages"] == [{"role": "user", "content": "hi"}]
    page.locator(".user-bar .edit").click()
    page.fill(".branch-edit textarea", "hello instead")
    page.locator(".branch-edit .edit-send").click()
    expect(answer).to_have_text("Edited answer.")
    expect(page.locator("article.user")).to_have_text("hello instead")
    expect(page.locator(".user-bar .branch-count")).to_have_text("2/2")
    expect(bar.locator(".branch-count")).to_have_count(0)  # the new question's one answer
    page.locator(".user-bar .branch-prev").click()  # the first question, its answers
    expect(page.locator("article.user")).to_have_text("hi")
    expect(answer).to_have_text("Third.")
    expect(bar.locator(".branch-count")).to_have_text("3/3")
