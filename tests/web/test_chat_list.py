"""The sidebar: titles, tags and follow-ups from the background tasks as they arrive;
paging through more chats than one page; a search over all of them on the server."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import orjson
import pytest
from playwright.sync_api import APIResponse, Page, Playwright, Route, expect

from tests.patience import HANG
from tests.web.conftest import Web, serving
from tests.web.test_page import send
from toolrelay.testing.fake_server import RecordedRequest, Reply, SSEReply
from toolrelay.testing.wire import chat_chunks

pytestmark = pytest.mark.xdist_group("web")

TASKS = {
    "title": "Zebra stripes",
    "tags": ["animals", "biology"],
    "follow_ups": ["Why are zebras striped?", "Do zebras sleep standing?"],
}
PAGE = 30  # chat_list.js


@pytest.fixture(scope="module")
def web(playwright: Playwright, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Web]:
    """This module's server runs the background tasks on the fake model, and holds only
    this module's chats."""
    with serving(playwright, tmp_path_factory.mktemp("web-list"), top='task_model = "fake"') as w:
        yield w


def _model(request: RecordedRequest) -> Reply:
    """A task call (its system prompt asks for JSON) gets every task's answer, whichever
    task asks first; a turn gets an answer naming the question."""
    messages = request.json["messages"]
    first = messages[0]
    if first["role"] == "system" and "Reply with JSON only" in first["content"]:
        return SSEReply(chat_chunks(text=orjson.dumps(TASKS).decode()))
    return SSEReply(chat_chunks(text=f"About: {messages[-1]['content']}"))


def test_title_tags_and_follow_ups_arrive_live_and_a_follow_up_sends(page: Page, web: Web) -> None:
    web.upstream.set_default(_model)
    send(page, "tell me about zebras")
    current = page.locator("#chat-list .chat-link[aria-current=page]")
    expect(current.locator(".chat-name")).to_have_text("Zebra stripes")
    expect(current.locator(".chat-tags")).to_have_text("animals · biology")
    expect(page.locator("#chat-title")).to_have_text("Zebra stripes")
    expect(page.locator("#chat-tags")).to_have_text("animals · biology")
    follow_ups = page.locator("article.assistant .follow-ups button.follow-up")
    expect(follow_ups).to_have_text(TASKS["follow_ups"])
    chat_id = current.get_attribute("data-chat-id")
    follow_ups.nth(0).click()
    expect(page.locator("article.user")).to_have_count(2)
    expect(page.locator("article.user").nth(1)).to_have_text("Why are zebras striped?")
    answers = page.locator("article.assistant .answer")
    expect(answers.nth(1)).to_have_text("About: Why are zebras striped?")
    turns = [r for r in web.upstream.requests if r.json["messages"][0]["role"] != "system"]
    assert turns[-1].json["messages"][-1]["content"] == "Why are zebras striped?"
    # in the same chat, not a new one
    assert page.evaluate("new URLSearchParams(location.hash.slice(1)).get('chat')") == chat_id
    expect(current).to_have_attribute("data-chat-id", chat_id or "")


def _paged(page: Page, newest: list[str], at_least: int) -> None:
    """The "Paged" chats listed are the newest ones, in order, at least `at_least` of them
    (another test's chat may be updated meanwhile by its background tasks: it moves up)."""
    names = page.locator("#chat-list .chat-name").all_text_contents()
    paged = [n for n in names if n.startswith("Paged ")]
    assert paged == newest[: len(paged)] and len(paged) >= at_least, names


def test_the_sidebar_pages_newest_first_and_searches_every_chat(page: Page, web: Web) -> None:
    count = 2 * PAGE + 5
    with web.api() as api:
        for i in range(count):
            assert api.post("/api/chats", json={"title": f"Paged {i:02}"}).status_code == 201
        total = api.get("/api/chats?source=chat&limit=1").json()["total"]
    others = total - count  # this module's other tests' chats
    newest = [f"Paged {i:02}" for i in reversed(range(count))]
    page.reload()
    links = page.locator("#chat-list .chat-link")
    expect(links).to_have_count(PAGE)
    _paged(page, newest, PAGE - others)
    # a search covers the chats not loaded yet: the server searches them all
    page.fill("#search", "Paged 03")
    expect(links).to_have_text(["Paged 03"])
    page.fill("#search", "paged 0")
    expect(links).to_have_text([f"Paged 0{i}" for i in reversed(range(10))])
    page.fill("#search", "no such chat")
    expect(links).to_have_count(0)
    expect(page.locator("#chat-list-empty")).to_contain_text("no such chat")
    page.fill("#search", "")
    expect(links).to_have_count(PAGE)
    _paged(page, newest, PAGE - others)
    # scrolling to the end of the list loads the next page, and the next
    scroller = page.locator("#chat-scroller")
    scroller.evaluate("(n) => { n.scrollTop = n.scrollHeight; }")
    expect(links).to_have_count(2 * PAGE)
    _paged(page, newest, 2 * PAGE - others)
    page.locator("#more-chats").click()  # the button too (the keyboard's way)
    expect(links).to_have_count(total)
    _paged(page, newest, count)
    expect(page.locator("#more-chats")).to_be_hidden()


def test_a_page_asked_for_before_a_delete_does_not_bring_the_chat_back(
    page: Page, web: Web
) -> None:
    with web.api() as api:
        doomed = api.post("/api/chats", json={"title": "Doomed chat"}).json()["id"]
    page.reload()
    page.click(f"#chat-list [data-chat-id='{doomed}']")
    expect(page.locator("#chat-title")).to_have_text("Doomed chat")
    # a search's page is answered before the delete, and reaches the page after it
    held: list[tuple[Route, APIResponse]] = []
    page.route(re.compile(r"/api/chats\?"), lambda route: held.append((route, route.fetch())))
    page.fill("#search", "Doomed")
    deadline = time.monotonic() + HANG
    while not held:
        assert time.monotonic() < deadline, "the search never asked the server"
        page.wait_for_timeout(20)
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#delete-chat")
    expect(page.locator("#chat-title")).to_have_text("New chat")
    route, answer = held.pop()
    assert doomed in answer.text()  # the answer still lists it
    route.fulfill(response=answer)
    expect(page.locator("#chat-list-empty")).to_contain_text("Doomed")  # the answer arrived
    expect(page.locator(f"#chat-list [data-chat-id='{doomed}']")).to_have_count(0)
