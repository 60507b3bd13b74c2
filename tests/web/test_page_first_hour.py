"""What a newcomer saw wrong in the page: a red error on Stop, newlines lost, the no-model card."""

from __future__ import annotations

import orjson
import pytest
from playwright.sync_api import Page, Route, expect

from tests.web.conftest import CHAT, Web
from toolrelay.config.registry import setup_hint
from toolrelay.testing.fake_server import SSEReply
from toolrelay.testing.wire import chat_chunks

pytestmark = pytest.mark.xdist_group("web")


def send(page: Page, text: str) -> None:
    page.fill("#input", text)
    page.press("#input", "Enter")


def test_a_stopped_turn_shows_as_stopped_with_no_error(page: Page, web: Web) -> None:
    web.upstream.route(
        CHAT, SSEReply(chat_chunks(text=["Partial ", "words ", "then ", "silence"]), stall_after=3)
    )
    send(page, "talk")
    turn = page.locator("article.assistant")
    expect(turn.locator(".answer")).to_contain_text("Partial words")
    page.press("#input", "Escape")
    expect(turn.locator(".badge.stopped")).to_have_text("Stopped")
    expect(turn.locator(".answer")).to_contain_text("Partial words")
    expect(turn.locator(".error-box")).to_have_count(0)
    page.reload()  # the saved turn: stopped, its text, no error either
    expect(page.locator("article.assistant .badge.stopped")).to_have_text("Stopped")
    expect(page.locator("article.assistant .answer")).to_contain_text("Partial words")
    expect(page.locator("article.assistant .error-box")).to_have_count(0)


def test_single_newlines_in_an_answer_are_line_breaks(page: Page, web: Web) -> None:
    web.upstream.route(CHAT, SSEReply(chat_chunks(text=["1\n2\n", "3"])))
    send(page, "count")
    answer = page.locator("article.assistant .answer")
    expect(answer.locator("br")).to_have_count(2)
    assert answer.inner_text().strip().splitlines() == ["1", "2", "3"]


def test_the_no_model_card_says_it_once_and_keeps_its_toml_lines_whole(web: Web) -> None:
    context = web.context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    info = {"version": "x", "models": [], "setup_hint": setup_hint(), "image_hosts": []}

    def no_model(route: Route) -> None:
        route.fulfill(status=200, body=orjson.dumps(info), content_type="application/json")

    page.route("**/api/info", no_model)
    page.goto("/")
    hint = page.locator("#setup-hint")
    expect(hint).to_be_visible()
    text = hint.inner_text()
    assert text.count("No model is configured") == 1, text
    line = 'base_url = "https://api.openai.com/v1"'
    assert any(row.strip() == line for row in text.splitlines())
    # its lines are never wrapped (a wide card, a scroll bar on a narrow screen)
    white_space = "getComputedStyle(document.getElementById('setup-hint')).whiteSpace"
    assert page.evaluate(white_space) == "pre"
    context.close()
