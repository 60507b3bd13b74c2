"""A code cell's image on the page, live and after a reload.

Live events carry images with their base64 cut out, so the page must not build an
image from that stub; it loads the file the cell wrote from `/api/chats/{id}/files`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, Playwright, expect

from tests.web.conftest import CHAT, Web, serving
from toolrelay.testing.fake_server import SSEReply
from toolrelay.testing.wire import ToolCallSpec, chat_chunks

pytestmark = pytest.mark.xdist_group("web")

KERNEL_START_MS = 120_000
PLOT = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()"


@pytest.fixture(scope="module")
def web(playwright: Playwright, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Web]:
    """This module's server runs code in Jupyter kernels."""
    extra = '\n[code_interpreter]\nengine = "jupyter"\ntimeout = 60\n'
    with serving(playwright, tmp_path_factory.mktemp("web-code"), extra) as running:
        yield running


def _loaded_images(page: Page) -> list[str]:
    images: list[str] = page.eval_on_selector_all(
        ".tool-image", "els => els.filter(i => i.complete && i.naturalWidth > 0).map(i => i.src)"
    )
    return images


def test_a_plot_from_a_cell_shows_live_and_after_a_reload(page: Page, web: Web) -> None:
    web.upstream.route(
        CHAT,
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec("execute_code", {"code": PLOT})])),
        SSEReply(chat_chunks(text="A line.")),
    )
    page.fill("#input", "plot something")
    page.press("#input", "Enter")
    # the cell starts a Jupyter kernel and imports matplotlib: on a loaded box that alone
    # can take longer than the page tests' usual bound (it only stops a hang)
    expect(page.locator("article.assistant")).to_have_class(
        re.compile("status-completed"), timeout=KERNEL_START_MS
    )
    image = page.locator(".tool-image")
    expect(image).to_have_count(1)
    expect(image).to_have_attribute("src", re.compile(r"/api/chats/[^/]+/files/outputs/"))
    page.wait_for_function(
        "() => [...document.querySelectorAll('.tool-image')].some(i => i.naturalWidth > 0)"
    )
    assert len(_loaded_images(page)) == 1
    page.reload()  # the saved turn keeps the image's data: shown from it
    expect(page.locator("article.assistant")).to_have_class(re.compile("status-completed"))
    page.wait_for_function(
        "() => [...document.querySelectorAll('.tool-image')].some(i => i.naturalWidth > 0)"
    )
    assert len(_loaded_images(page)) == 1
