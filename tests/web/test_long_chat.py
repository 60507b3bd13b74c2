"""A long chat on the page: its last messages first, earlier ones a page at a time; a tool
result the model read cut links to the whole of it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from playwright.sync_api import Page, Playwright, expect

from tests.web.conftest import CHAT, Web, serving
from tests.web.test_page import send
from toolrelay.adapters.stores.sql import SQLStore
from toolrelay.server.routes.chats import SNAPSHOT_MESSAGES
from toolrelay.testing.fake_server import SSEReply
from toolrelay.testing.wire import ToolCallSpec, chat_chunks

pytestmark = pytest.mark.xdist_group("web")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("web-long")


@pytest.fixture(scope="module")
def web(playwright: Playwright, folder: Path) -> Iterator[Web]:
    with serving(playwright, folder) as w:
        yield w


async def _fill(url: str, chat_id: str, count: int) -> None:
    store = await SQLStore.open(url, migrate=False)
    try:
        for i in range(count):
            await store.add_message(chat_id, {"role": "user", "content": f"note {i:03d}"})
    finally:
        await store.close()


def test_earlier_messages_come_a_page_at_a_time(page: Page, web: Web, folder: Path) -> None:
    count = SNAPSHOT_MESSAGES + 30
    with web.api() as api:
        chat_id = api.post("/api/chats", json={"title": "Long notes"}).json()["id"]
    url = f"sqlite+aiosqlite:///{folder / 'data' / 'toolrelay.db'}"
    with ThreadPoolExecutor(1) as thread:  # playwright's loop runs in this one
        thread.submit(asyncio.run, _fill(url, chat_id, count)).result()
    page.goto(f"/#chat={chat_id}")
    page.reload()  # the same document: a new hash alone is not a new load
    notes = page.locator("#messages article.user")
    expect(notes).to_have_count(SNAPSHOT_MESSAGES)
    expect(notes.first).to_have_text(f"note {count - SNAPSHOT_MESSAGES:03d}")
    expect(notes.last).to_have_text(f"note {count - 1:03d}")
    earlier = page.locator("#messages button.earlier")
    expect(earlier).to_have_count(1)
    earlier.click()
    expect(notes).to_have_count(count)
    expect(notes.first).to_have_text("note 000")
    expect(earlier).to_have_count(0)  # nothing before the first page


def test_a_cut_tool_result_links_to_the_whole_of_it(page: Page, web: Web) -> None:
    web.upstream.route(
        CHAT,
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec("long_report", {})])),
        SSEReply(chat_chunks(text="It is long.")),
    )
    send(page, "report")
    expect(page.locator("article.assistant .answer")).to_have_text("It is long.")
    link = page.locator("article.assistant a.whole-result")
    expect(link).to_contain_text("Show the whole result")
    href = link.get_attribute("href")
    assert href and "/outputs/" in href
    whole = page.request.get(href)  # the page's own session, as a click would send
    assert whole.status == 200
    text = whole.text()
    assert text.startswith("line 000000 of the report") and text.endswith(
        "line 005999 of the report\n"
    )
