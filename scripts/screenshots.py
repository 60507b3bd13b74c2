"""Make the README's screenshots of the web page from a running `toolrelay serve`.

    python scripts/screenshots.py      # writes docs/screenshots/{light,dark,phone}.png

A scripted model (toolrelay.testing's fake server) answers one question with
reasoning, two tool calls (a sum and a web search) and a cited Markdown answer;
a real `toolrelay serve` runs the loop, and Debian's chromium (driven by
Playwright) signs in and shows it in the light and dark themes and at phone width.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2
from playwright.sync_api import Page, expect, sync_playwright

from toolrelay.testing import FakeModelServer, SSEReply, ToolCallSpec
from toolrelay.testing.wire import chat_chunks

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "screenshots"
KEY = "tr-screenshots-0123456789abcdef"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
LISTENING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")

TOOLS = '''
import json
from toolrelay import tool

@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b

@tool
def search_web(query: str) -> str:
    """Search the web."""
    return json.dumps([
        {"title": "Relay race (Wikipedia)", "link": "https://en.wikipedia.org/wiki/Relay_race",
         "snippet": "A relay race is a racing competition where members of a team take turns."},
        {"title": "4 × 100 metres relay", "link": "https://worldathletics.org/disciplines/relays/4x100-metres-relay",
         "snippet": "The baton must be passed within a 30 m takeover zone."},
    ])
'''

ANSWER = [
    "A relay team has **4 runners** (2 + 2), and each hands the baton on ",
    "inside a 30 m takeover zone [2]. The race is a team event where members ",
    "take turns [1].\n\n",
    "| leg | runner |\n|---|---|\n| 1 | starter |\n| 4 | anchor |\n\n",
    "```python\nlegs = 2 + 2\nprint(legs)  # 4\n```\n",
]


def script(upstream: FakeModelServer) -> None:
    upstream.route(
        "/v1/chat/completions",
        SSEReply(
            chat_chunks(
                reasoning=[
                    "The user wants the team size; ",
                    "add 2 and 2, then look up the rules.",
                ],
                tool_calls=[ToolCallSpec("add", {"a": 2, "b": 2})],
                usage={"prompt_tokens": 182, "completion_tokens": 41, "total_tokens": 223},
            ),
            delay=0.02,
        ),
        SSEReply(
            chat_chunks(tool_calls=[ToolCallSpec("search_web", {"query": "relay race rules"})])
        ),
        SSEReply(
            chat_chunks(
                text=ANSWER,
                usage={"prompt_tokens": 460, "completion_tokens": 96, "total_tokens": 556},
            ),
            delay=0.02,
        ),
    )


def serve(tmp: Path, upstream: FakeModelServer) -> tuple[subprocess.Popen[bytes], str]:
    (tmp / "tools.py").write_text(TOOLS)
    config = tmp / "toolrelay.toml"
    config.write_text(
        f'admin_key = "{KEY}"\ndata_dir = "{tmp / "data"}"\ntools = ["{tmp / "tools.py"}"]\n\n'
        f'[[models]]\nname = "gpt-mini"\nbase_url = "{upstream.base_url}"\nmodel = "m"\n\n'
        f'[[models]]\nname = "qwen3"\nbase_url = "{upstream.base_url}"\nmodel = "q"\n'
    )
    log = (tmp / "serve.log").open("wb")
    command = [sys.executable, "-m", "toolrelay.cli.main", "serve", "--config", str(config)]
    process = subprocess.Popen([*command, "--port", "0"], stdout=log, stderr=log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = LISTENING.search((tmp / "serve.log").read_text())
        if found:
            return process, f"http://127.0.0.1:{found.group(1)}"
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.terminate()
    raise SystemExit("toolrelay serve did not start:\n" + (tmp / "serve.log").read_text())


def ask(page: Page, url: str) -> None:
    page.goto(url)
    page.fill("#signin-key", KEY)
    page.click("#signin-form button[type=submit]")
    page.fill("#input", "How many runners are in a relay team of 2 + 2? What are the rules?")
    page.press("#input", "Enter")
    expect(page.locator("article.assistant")).to_have_class(re.compile("status-completed"))
    expect(page.locator("article.assistant .sources li")).to_have_count(2)
    page.locator("details.reasoning").evaluate("(d) => { d.open = true; }")
    chat_id = page.evaluate("new URLSearchParams(location.hash.slice(1)).get('chat')")
    headers = {"Authorization": f"Bearer {KEY}"}
    httpx2.patch(f"{url}/api/chats/{chat_id}", json={"title": "Relay team size"}, headers=headers)
    page.reload()
    expect(page.locator("article.assistant .sources li")).to_have_count(2)
    page.locator("details.reasoning").evaluate("(d) => { d.open = true; }")
    page.locator("details.tool").first.evaluate("(d) => { d.open = true; }")
    page.locator("#messages").evaluate("(m) => { m.scrollTop = m.scrollHeight; }")


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as name, FakeModelServer() as upstream:
        process, url = serve(Path(name), upstream)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                for shot, options in {
                    "light": {"color_scheme": "light", "viewport": {"width": 1200, "height": 860}},
                    "dark": {"color_scheme": "dark", "viewport": {"width": 1200, "height": 860}},
                    "phone": {"color_scheme": "light", "viewport": {"width": 390, "height": 844}},
                }.items():
                    script(upstream)
                    context = browser.new_context(**options)  # type: ignore[arg-type]
                    context.set_default_timeout(30_000)
                    expect.set_options(timeout=30_000)
                    page = context.new_page()
                    ask(page, url)
                    page.screenshot(path=str(OUT / f"{shot}.png"))
                    sys.stdout.write(f"{OUT / f'{shot}.png'}\n")
                    context.close()
                browser.close()
        finally:
            process.terminate()
            process.wait(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
