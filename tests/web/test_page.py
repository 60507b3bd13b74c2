"""The chat page in a real browser: sign-in, a streamed answer, the loop's items live."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.web.conftest import ADMIN_KEY, CHAT, Web, sign_in
from toolrelay.server.session import COOKIE
from toolrelay.testing.fake_server import SSEReply
from toolrelay.testing.wire import chat_chunks


def send(page: Page, text: str) -> None:
    page.fill("#input", text)
    page.press("#input", "Enter")


def test_sign_in_keeps_only_an_httponly_cookie_and_a_streamed_answer_renders(
    web: Web,
) -> None:
    context = web.context()
    page = context.new_page()
    page.goto("/")
    expect(page.locator("#signin")).to_be_visible()
    page.fill("#signin-key", "tr-wrong")
    page.click("#signin-form button[type=submit]")
    expect(page.locator("#signin-error")).to_contain_text("not valid")
    sign_in(page)
    (cookie,) = [c for c in context.cookies() if c["name"] == COOKIE]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert ADMIN_KEY not in cookie["value"]
    assert page.evaluate("document.cookie") == ""  # the page's scripts cannot read it
    stored = page.evaluate(
        "JSON.stringify({...localStorage}) + JSON.stringify({...sessionStorage})"
    )
    assert ADMIN_KEY not in stored
    expect(page.locator("#model option")).to_have_count(2)

    words = ["**Hello**", " from", " the", " relay", ".\n\n", "- one\n", "- two\n"]
    web.upstream.route(CHAT, SSEReply(chat_chunks(text=words), delay=0.02))
    send(page, "hi")
    answer = page.locator("article.assistant .answer")
    expect(answer.locator("strong")).to_have_text("Hello")
    expect(answer.locator("li")).to_have_count(2)
    expect(page.locator("article.assistant .meta")).to_contain_text("s")
    expect(page.locator("#send")).to_be_visible()
    assert page.locator("article.user").inner_text() == "hi"
    # the new chat is in the sidebar and the address names it: a reload shows it again
    expect(page.locator("#chat-list .chat-link")).to_have_count(1, timeout=5000)
    page.reload()
    expect(page.locator("article.assistant .answer strong")).to_have_text("Hello")
    context.close()
