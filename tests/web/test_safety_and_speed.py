"""Hostile model and tool output executes nothing; a 5,000-chunk answer streams smoothly."""

from __future__ import annotations

import os
import re

import orjson
import pytest
from playwright.sync_api import Page, expect

from tests.web.conftest import CHAT, PAGE_PROBES, Web, prioritise_renderers, sign_in
from tests.web.test_page import send
from toolrelay.testing.fake_server import SSEReply
from toolrelay.testing.wire import ToolCallSpec, chat_chunks

pytestmark = pytest.mark.xdist_group("web")  # one server and one browser for the page tests


HOSTILE_MARKDOWN = [
    "Look: <script>window.__pwned = 'script'</script>\n\n",
    "<img src=x onerror=\"window.__pwned = 'onerror'\">\n\n",
    "[click me](javascript:window.__pwned='link') and ",
    "<a href=\"javascript:window.__pwned='a'\">this</a> and ",
    '<a href="https://example.org/ok" onclick="window.__pwned=\'onclick\'">fine</a>\n\n',
    "<iframe src=\"javascript:parent.__pwned='iframe'\"></iframe>\n\n",
    "<svg onload=\"window.__pwned='svg'\"><circle r=1 /></svg>\n\n",
    "<details open ontoggle=\"window.__pwned='toggle'\"><summary>x</summary>y</details>\n\n",
    "![img](javascript:window.__pwned='img') <form action=\"javascript:1\"><button>go</button></form>\n\n",
    "<style>body{display:none}</style>the end",
]


def test_hostile_markdown_html_and_tool_results_execute_nothing(page: Page, web: Web) -> None:
    web.upstream.route(
        CHAT,
        SSEReply(
            chat_chunks(
                reasoning=["<img src=x onerror=\"window.__pwned='reasoning'\">"],
                tool_calls=[ToolCallSpec("hostile_text", {}), ToolCallSpec("show_chart", {})],
            )
        ),
        SSEReply(chat_chunks(text=HOSTILE_MARKDOWN)),
    )
    send(page, "<img src=x onerror=\"window.__pwned='user'\">")
    turn = page.locator("article.assistant")
    expect(turn).to_have_class(re.compile("status-completed"))
    expect(turn.locator(".answer")).to_contain_text("the end")
    embed = turn.locator(".embeds iframe")
    expect(embed).to_have_count(1)
    expect(embed.content_frame.locator("h3")).to_have_text("chart")  # shown, but inert
    turn.locator(".answer a", has_text="click me").click()
    turn.locator(".answer a", has_text="this").click()
    page.wait_for_function("document.querySelectorAll('.md-block').length > 3")
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("window.__messages") == []  # the embed could not reach the page
    assert page.title() == "toolrelay"
    answer = turn.locator(".answer")
    assert answer.locator("script, iframe, svg, form, style, button:not(.copy)").count() == 0
    assert answer.locator("[onerror], [onclick], [onload], [ontoggle]").count() == 0
    assert answer.locator("a[href^='javascript'], img[src^='javascript']").count() == 0
    hrefs = answer.locator("a[href]").evaluate_all("(as) => as.map((a) => a.getAttribute('href'))")
    assert hrefs == ["https://example.org/ok"]
    sandbox = embed.get_attribute("sandbox")
    assert sandbox is not None and "allow-same-origin" not in sandbox
    # the tool's hostile result and the user's own text are shown as text
    expect(turn.locator("details.tool .tool-output").first).to_contain_text("<script>")
    expect(page.locator("article.user")).to_contain_text("onerror")
    expect(turn.locator(".reasoning-text")).to_contain_text("onerror")


def test_a_5000_chunk_answer_has_no_long_task_and_matches_the_saved_answer(web: Web) -> None:
    browser = web.fresh_browser()  # measured alone: no renderer shared with earlier tests
    try:
        page = browser.new_context(base_url=web.url).new_page()
        page.context.add_init_script(PAGE_PROBES)
        sign_in(page)
        _long_answer(page, web)
    finally:
        browser.close()


TRACE = ["toplevel", "disabled-by-default-devtools.timeline"]


def _main_thread_cpu_ms(trace: bytes) -> list[float]:
    """CPU milliseconds of each top-level task on the renderers' main threads."""
    events = orjson.loads(trace)
    events = events["traceEvents"] if isinstance(events, dict) else events
    main = {
        (e["pid"], e["tid"])
        for e in events
        if e.get("ph") == "M"
        and e.get("name") == "thread_name"
        and e.get("args", {}).get("name") == "CrRendererMain"
    }
    return [
        e["tdur"] / 1000
        for e in events
        if e.get("ph") == "X"
        and "tdur" in e
        and (e["pid"], e["tid"]) in main
        and e.get("name") in ("RunTask", "ThreadControllerImpl::RunTask")
    ]


def _long_answer(page: Page, web: Web) -> None:
    paragraphs = []
    for i in range(60):
        paragraphs.append(f"## Part {i}\n\nSome **bold** words and `code` in paragraph {i}.")
        paragraphs.append(f"- item {i}.a\n- item {i}.b with [a link](https://example.org/{i})")
        if i % 6 == 0:
            paragraphs.append(f"```python\ndef f{i}(x):\n    return x * {i}\n```")
        if i % 10 == 0:
            paragraphs.append("| a | b |\n|---|---|\n| 1 | 2 |")
    text = "\n\n".join(paragraphs) + "\n"
    size = len(text) // 5000 + 1
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    assert len(pieces) >= 4000
    while len(pieces) < 5000:  # exactly 5,000 chunks: split the longest ones further
        longest = max(range(len(pieces)), key=lambda j: len(pieces[j]))
        piece = pieces[longest]
        pieces[longest : longest + 1] = [piece[: len(piece) // 2], piece[len(piece) // 2 :]]
    assert len(pieces) == 5000 and "".join(pieces) == text
    web.upstream.route(CHAT, SSEReply(chat_chunks(text=pieces)))
    assert prioritise_renderers() > 0 or os.geteuid() != 0
    started = page.evaluate("performance.now()")
    page.context.browser.start_tracing(page=page, categories=TRACE)  # type: ignore[union-attr]
    send(page, "write a lot")
    # wait with one cheap query every 250 ms: Playwright's own polling of a large DOM
    # would add main-thread tasks of its own to what is measured
    page.wait_for_function(
        "() => !!document.querySelector('article.status-completed .answer[aria-busy=false]')",
        polling=250,
        timeout=60_000,
    )
    trace = page.context.browser.stop_tracing()  # type: ignore[union-attr]
    turn = page.locator("article.assistant")
    long_tasks = [d for t, d in page.evaluate("window.__longTasks") if t >= started]
    # The Long Tasks API measures wall time: a short task preempted on a loaded machine
    # looks long. A long one is the page's fault only if it also took that much CPU
    # time, which the trace gives per task (`tdur`) on the renderer's main thread.
    cpu = _main_thread_cpu_ms(trace)
    assert cpu, "the trace has no task of the renderer's main thread"
    assert max(cpu) <= 50, (sorted(cpu)[-5:], long_tasks)
    expect(turn.locator(".answer h2")).to_have_count(60)
    live = turn.locator(".answer").inner_html()
    chat_id = page.evaluate("new URLSearchParams(location.hash.slice(1)).get('chat')")
    with web.api() as api:
        saved = api.get(f"/api/chats/{chat_id}").json()["messages"][-1]
    assert saved["content"] == text.strip() or saved["content"] == text
    # the page rendered from the saved chat is the page the stream built
    page.reload()
    reloaded = page.locator("article.assistant .answer")
    expect(reloaded.locator("h2")).to_have_count(60)
    page.wait_for_function(
        "document.querySelector('article.assistant .answer').getAttribute('aria-busy') === 'false'"
    )
    assert reloaded.inner_html() == live
