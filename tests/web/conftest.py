"""The page in a real browser: Debian's chromium driven by Playwright, against a real
`toolrelay serve` child on a real port, the fake model server behind it, and a proxy
in between that a test can use to cut the browser's connections.

Chromium is found at /usr/bin/chromium (`make test` installs it with apt-get); when it
is missing these tests fail and say how to install it. Playwright's own browser
download is never used.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from benchmarks.harness import ServerProcess
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, sync_playwright

from tests.web.proxy import DroppingProxy
from toolrelay.testing.fake_server import FakeModelServer

CHROMIUM = "/usr/bin/chromium"
ADMIN_KEY = "tr-web-admin-key-0123456789abcdef"
CHAT = "/v1/chat/completions"
TOOLS = Path(__file__).parent / "web_tools.py"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
LONG_TASKS = """
window.__longTasks = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) window.__longTasks.push(e.duration);
}).observe({ type: "longtask", buffered: true });
"""


@dataclass
class Web:
    """The running server (through the proxy), its upstream and the browser."""

    url: str
    direct: str
    upstream: FakeModelServer
    proxy: DroppingProxy
    browser: Browser

    def api(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
        return httpx.Client(base_url=self.direct, headers=headers, timeout=30)

    def context(self, **options: Any) -> BrowserContext:
        context = self.browser.new_context(base_url=self.url, **options)
        context.set_default_timeout(20_000)
        context.add_init_script(LONG_TASKS)
        return context


def _config(tmp: Path, upstream: FakeModelServer) -> Path:
    text = f"""
admin_key = "{ADMIN_KEY}"
data_dir = "{tmp / "data"}"
tools = ["{TOOLS}"]

[limits]
coalesce_ms = 0
client_tool_timeout = 60

[[models]]
name = "fake"
kind = "openai-chat"
base_url = "{upstream.base_url}"
model = "fake-model"

[[models]]
name = "other"
kind = "openai-chat"
base_url = "{upstream.base_url}"
model = "other-model"
"""
    path = tmp / "toolrelay.toml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    if not Path(CHROMIUM).is_file():
        pytest.fail(
            f"chromium is missing ({CHROMIUM}): the web page tests need it. "
            "Install it with `apt-get install -y chromium` (make test does this)."
        )
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def web(playwright: Playwright, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Web]:
    tmp = tmp_path_factory.mktemp("web")
    with FakeModelServer() as upstream:
        server = ServerProcess(_config(tmp, upstream), tmp / "server.log")
        server.start()
        try:
            port = int(server.base_url.rsplit(":", 1)[1])
            with DroppingProxy("127.0.0.1", port) as proxy:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                try:
                    yield Web(proxy.url, server.base_url, upstream, proxy, browser)
                finally:
                    browser.close()
        finally:
            server.stop()


@pytest.fixture
def page(web: Web) -> Iterator[Page]:
    """A signed-in page in a fresh browser context (its own cookies)."""
    context = web.context()
    page = context.new_page()
    sign_in(page)
    yield page
    context.close()


def sign_in(page: Page, key: str = ADMIN_KEY) -> None:
    page.goto("/")
    page.fill("#signin-key", key)
    page.click("#signin-form button[type=submit]")
    page.wait_for_selector("#app:not([hidden])")
