"""The page in a real browser: Debian's chromium driven by Playwright, against a real
`toolrelay serve` child on a real port, the fake model server behind it, and a proxy
in between that a test can use to cut the browser's connections.

Chromium is found at /usr/bin/chromium (`make test` installs it with apt-get); when it
is missing these tests fail and say how to install it. Playwright's own browser
download is never used.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import jsonschema
import orjson
import pytest
from benchmarks.harness import ServerProcess
from playwright.sync_api import (
    Browser,
    BrowserContext,
    Page,
    Playwright,
    expect,
    sync_playwright,
)

from tests.web.proxy import DroppingProxy
from toolrelay.core.stream.framing import SSEDecoder
from toolrelay.events import schema
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
PAGE_PROBES = """
window.__longTasks = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) window.__longTasks.push([e.startTime, e.duration]);
}).observe({ type: "longtask", buffered: true });
window.__messages = [];
window.addEventListener("message", (e) => window.__messages.push(String(e.data)));
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => window.__cspViolations.push(e.violatedDirective));
"""
"""Installed in every page before its scripts: long tasks, messages posted to the page
(an embed reaching its parent), CSP violations (something tried to run and was stopped)."""

STREAM_TAP = """
(() => {
  const fetch0 = window.fetch.bind(window);
  const open = new Map();
  let count = 0;
  const send = (id, more) => {  // what came since the last send; `more`: it goes on
    if (!open.has(id)) return;
    window.__sseTap(id, open.get(id));
    if (more) open.set(id, ""); else open.delete(id);
  };
  window.__sseOpen = () => { for (const id of [...open.keys()]) send(id, true); };
  window.fetch = async (input, init) => {
    const response = await fetch0(input, init);
    const url = String(input && input.url ? input.url : input);
    const path = new URL(url, location.href).pathname;
    const chatStream = path.startsWith("/api/chats/") && path.endsWith("/events");
    if (!chatStream || !response.body) return response;
    const [mine, tap] = response.body.tee();
    const id = `${Date.now()}-${++count}`;
    open.set(id, "");
    (async () => {
      const reader = tap.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        if (open.has(id)) open.set(id, open.get(id) + value);
      }
    })().catch(() => {}).finally(() => send(id));
    const { status, statusText, headers } = response;
    return new Response(mine, { status, statusText, headers });
  };
})();
"""
"""The page's chat streams, as it receives them: each `/api/chats/{id}/events` body is
teed, its text kept and handed to `__sseTap` when it ends (or when asked: `__sseOpen`)."""


class StreamTap:
    """Every chat stream a page received (`STREAM_TAP`), validated against the event
    protocol's JSON Schema (`toolrelay.events.schema()`), as tests/server's
    test_event_protocol does for the server's own reads."""

    def __init__(self, context: BrowserContext) -> None:
        self.streams: dict[str, str] = {}
        context.expose_function("__sseTap", self._add)
        context.add_init_script(STREAM_TAP)

    def _add(self, key: str, text: str) -> None:
        self.streams[key] = self.streams.get(key, "") + text

    def check(self, page: Page) -> int:
        """Validate every whole frame received so far; how many there were."""
        with contextlib.suppress(Exception):  # a closed page: what came is checked
            page.evaluate("window.__sseOpen && window.__sseOpen()")
        validator = jsonschema.Draft202012Validator(schema())
        frames = 0
        for text in self.streams.values():
            for frame in SSEDecoder().feed(text.encode()):
                sent = orjson.loads(frame.data)
                validator.validate(sent)
                assert sent.get("type", frame.event) == frame.event, frame
                frames += 1
        return frames


@dataclass
class Web:
    """The running server (through the proxy), its upstream and the browser."""

    url: str
    direct: str
    upstream: FakeModelServer
    proxy: DroppingProxy
    browser: Browser
    playwright: Playwright

    def fresh_browser(self) -> Browser:
        """A browser of its own (a fresh renderer: nothing left from earlier tests)."""
        return self.playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)

    def api(self) -> httpx2.Client:
        headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
        return httpx2.Client(base_url=self.direct, headers=headers, timeout=30)

    def context(self, browser: Browser | None = None, **options: Any) -> BrowserContext:
        context = (browser or self.browser).new_context(base_url=self.url, **options)
        context.set_default_timeout(20_000)
        context.add_init_script(PAGE_PROBES)
        return context


def _config(tmp: Path, upstream: FakeModelServer, extra: str = "", top: str = "") -> Path:
    text = f"""
admin_key = "{ADMIN_KEY}"
data_dir = "{tmp / "data"}"
tools = ["{TOOLS}"]
{top}

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
    path.write_text(text + extra)
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
    with serving(playwright, tmp_path_factory.mktemp("web")) as running:
        yield running


@contextlib.contextmanager
def serving(playwright: Playwright, tmp: Path, extra: str = "", top: str = "") -> Iterator[Web]:
    """The server (its config plus `extra` TOML tables and `top` top-level keys), the proxy
    and a browser."""
    with FakeModelServer() as upstream:
        server = ServerProcess(_config(tmp, upstream, extra, top), tmp / "server.log")
        server.start()
        try:
            port = int(server.base_url.rsplit(":", 1)[1])
            with DroppingProxy("127.0.0.1", port) as proxy:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                try:
                    yield Web(proxy.url, server.base_url, upstream, proxy, browser, playwright)
                finally:
                    browser.close()
        finally:
            server.stop()


expect.set_options(timeout=20_000)  # a loaded machine: waits end on events, these only bound them


@pytest.fixture(autouse=True)
def _fresh_upstream(web: Web) -> Iterator[None]:
    """Each test scripts its own replies; none left over from another test."""
    web.upstream.reset()
    yield
    web.upstream.reset()


@pytest.fixture
def page(web: Web) -> Iterator[Page]:
    """A signed-in page in a fresh browser context (its own cookies)."""
    context = web.context()
    tap = StreamTap(context)
    page = context.new_page()
    sign_in(page)
    yield page
    tap.check(page)  # every chat stream it received keeps to the event schema
    context.close()


def prioritise_renderers() -> int:
    """Give this test run's chromium threads (renderers, compositor, browser) a higher CPU
    priority (nice -19).

    The Long Tasks API measures wall time: on a machine loaded far past its cores a
    3 ms task can wait tens of ms to be scheduled again, so the page's own work is
    only seen when its renderer is not preempted by every other process. Chromium is
    started in a session of its own, so its scheduler autogroup gets the same nice.
    Only our own descendants are touched; without the right to raise priority nothing
    changes.
    """
    ours = _descendants(os.getpid())
    changed = 0
    for pid in ours:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            tasks = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
        if b"chromium" not in cmdline and b"chrome" not in cmdline:
            continue
        for tid in tasks:
            try:
                os.setpriority(os.PRIO_PROCESS, tid, -19)
                changed += 1
            except OSError:
                pass
        # chromium runs in a session of its own: its autogroup competes with other sessions
        with contextlib.suppress(OSError):
            Path(f"/proc/{pid}/autogroup").write_text("-19")
    return changed


def _descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def sign_in(page: Page, key: str = ADMIN_KEY) -> None:
    page.goto("/")
    page.fill("#signin-key", key)
    page.click("#signin-form button[type=submit]")
    page.wait_for_selector("#app:not([hidden])")
