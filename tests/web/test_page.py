"""The chat page in a real browser: sign-in, a streamed answer, the loop's items live."""

from __future__ import annotations

import re
import threading
import time

import orjson
import pytest
from playwright.sync_api import FilePayload, Page, Route, expect

from tests.patience import HANG
from tests.web.conftest import ADMIN_KEY, CHAT, Web, sign_in
from toolrelay.server.session import COOKIE
from toolrelay.testing.fake_server import RawReply, SSEReply
from toolrelay.testing.wire import ToolCallSpec, chat_chunks

pytestmark = pytest.mark.xdist_group("web")  # one server and one browser for the page tests


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
    expect(page.locator("#chat-list .chat-link[aria-current=page]")).to_have_count(1)
    page.reload()
    expect(page.locator("article.assistant .answer strong")).to_have_text("Hello")
    context.close()


def test_the_tools_the_model_may_call_are_listed(page: Page) -> None:
    """Under the model picker: the configured tools and the built-in ones (GET /api/tools)."""
    summary = page.locator("#tools-summary")
    expect(summary).to_contain_text("get_time")
    expect(summary).to_contain_text("calculator")
    expect(summary).to_contain_text("add")
    summary.click()
    clock = page.locator("#tools-list li", has_text="get_time")
    expect(clock).to_contain_text("builtin")
    assert "time" in (clock.get_attribute("title") or "")  # the description, on hover


def test_the_composer_waits_for_the_models_and_never_sends_without_one(web: Web) -> None:
    """Typing and pressing Enter as soon as the page shows must not post a turn with no
    model (the server's "You must provide a model."): the composer opens once the
    models are there, and a send with no model is refused in place, the text kept."""
    context = web.context()
    page = context.new_page()
    held: list[Route] = []
    page.route("**/v1/models", lambda route: held.append(route))  # answered when the test says
    sign_in(page)
    deadline = time.monotonic() + HANG
    while not held:  # the page asked for the models: now it waits for them
        assert time.monotonic() < deadline, "the page never asked for /v1/models"
        page.wait_for_timeout(20)
    expect(page.locator("#input")).to_be_disabled()
    expect(page.locator("#send")).to_be_disabled()
    # a submit that gets through anyway (a script, an old browser) is refused in place
    page.evaluate(
        "document.getElementById('input').value = 'too early';"
        "document.getElementById('compose').requestSubmit()"
    )
    expect(page.locator("#compose-note")).to_contain_text("model")
    expect(page.locator("#input")).to_have_value("too early")
    expect(page.locator("article.user")).to_have_count(0)
    assert not [r for r in web.upstream.requests if r.path == CHAT]
    assert len(held) == 1
    held[0].continue_()
    expect(page.locator("#input")).to_be_enabled()
    expect(page.locator("#model option")).to_have_count(2)
    web.upstream.route(CHAT, SSEReply(chat_chunks(text="On time.")))
    page.press("#input", "Enter")
    expect(page.locator("article.assistant .answer")).to_have_text("On time.")
    expect(page.locator("#compose-note")).to_be_hidden()
    assert page.locator("article.user").inner_text() == "too early"
    assert web.upstream.requests[-1].json["model"] == "fake-model"
    context.close()


WATCH = """
window.__argSnaps = [];
window.__order = [];
new MutationObserver(() => {
  for (const pre of document.querySelectorAll("#messages .tool-args")) window.__argSnaps.push(pre.textContent);
  const kinds = [...document.querySelectorAll("#messages article.assistant .items > *")]
    .map((n) => n.classList.contains("tool") ? "tool:" + n.querySelector(".tool-name").textContent
      : n.classList.contains("reasoning") ? "reasoning" : "answer");
  const last = window.__order[window.__order.length - 1];
  if (kinds.join() !== (last || []).join()) window.__order.push(kinds);
}).observe(document.getElementById("messages"), { subtree: true, childList: true, characterData: true });
"""


def test_a_two_round_tool_turn_renders_item_by_item(page: Page, web: Web) -> None:
    long_text = "x" * 40
    # the first round's stream waits for the test: once before the tool call (chunk 3,
    # after the reasoning), once halfway through its arguments (chunk 8)
    after_reasoning, mid_arguments = threading.Event(), threading.Event()
    web.upstream.route(
        CHAT,
        SSEReply(
            chat_chunks(
                reasoning=["Adding ", "first."],
                tool_calls=[ToolCallSpec("add", {"a": 1, "b": 2, "note": long_text})],
                args_pieces=10,
                usage={"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
            ),
            holds={3: after_reasoning, 8: mid_arguments},
        ),
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec("search_web", {"query": "relay"})])),
        SSEReply(
            chat_chunks(
                text=[
                    "The sum is **3**",
                    " and a relay race [1]",
                    " is a team race.\n\n",
                    "```python\nprint(3)\n```\n",
                ],
                usage={"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49},
            )
        ),
    )
    page.evaluate(WATCH)
    send(page, "add 1 and 2, then search")
    turn = page.locator("article.assistant")
    expect(turn.locator("details.reasoning .reasoning-text")).to_have_text("Adding first.")
    expect(turn.locator("details.tool")).to_have_count(0)
    after_reasoning.set()
    expect(turn.locator("details.tool .tool-args")).to_contain_text('"note":"')  # still coming
    expect(turn).not_to_have_class(re.compile("status-completed"))
    mid_arguments.set()
    expect(turn.locator(".answer strong")).to_have_text("3")
    expect(turn).to_have_class(re.compile("status-completed"))
    # reasoning: collapsed, with how long it took
    reasoning = turn.locator("details.reasoning")
    expect(reasoning.locator("summary")).to_have_text(re.compile(r"Thought for (<1|\d+) s"))
    assert reasoning.get_attribute("open") is None
    assert reasoning.locator(".reasoning-text").text_content() == "Adding first."
    # one card per call, in order, each with its arguments and result
    cards = turn.locator("details.tool")
    expect(cards).to_have_count(2)
    expect(cards.nth(0).locator(".tool-name")).to_have_text("add")
    expect(cards.nth(0).locator(".tool-output")).to_have_text("3")
    assert '"note": "' + long_text in (cards.nth(0).locator(".tool-args").text_content() or "")
    expect(cards.nth(1).locator(".tool-name")).to_have_text("search_web")
    expect(cards.nth(1).locator(".tool-output")).to_contain_text("Baton passing")
    # citations, numbered, opening in a new tab without an opener
    sources = turn.locator(".sources li a")
    expect(sources).to_have_count(2)
    assert sources.nth(0).get_attribute("href") == "https://example.org/relay"
    assert sources.nth(0).get_attribute("target") == "_blank"
    assert "noopener" in (sources.nth(0).get_attribute("rel") or "")
    # code block with a copy button; usage and timings under the answer
    expect(turn.locator("pre.code button.copy")).to_have_count(1)
    expect(turn.locator(".meta .usage")).to_contain_text("2 tool calls")
    expect(turn.locator(".meta .usage")).to_contain_text("51 in · 16 out")  # the turn's total
    # item by item: the card was there while its arguments were still streaming, and
    # each item appeared before the next one
    snaps = page.evaluate("window.__argSnaps")
    final_args = snaps[-1]
    assert any(s and s != final_args and not s.startswith("{\n") for s in snaps), snaps[:20]
    order = page.evaluate("window.__order")
    assert order[0] == ["reasoning"]
    assert ["reasoning", "tool:add"] in order
    assert order[-1] == ["reasoning", "tool:add", "tool:search_web", "answer"]
    # the saved turn shows the same after a reload, citations included
    page.reload()
    expect(page.locator("article.assistant .sources li a")).to_have_count(2)
    expect(page.locator("article.assistant details.tool")).to_have_count(2)
    expect(page.locator("article.assistant .meta .usage")).to_contain_text("2 tool calls")


def test_stop_keeps_the_partial_answer_marked_stopped(page: Page, web: Web) -> None:
    web.upstream.route(
        CHAT,
        SSEReply(chat_chunks(text=["Partial ", "words ", "then ", "silence"]), stall_after=3),
    )
    send(page, "talk")
    answer = page.locator("article.assistant .answer")
    expect(answer).to_contain_text("Partial words")
    expect(page.locator("#stop")).to_be_visible()
    page.press("#input", "Escape")
    turn = page.locator("article.assistant")
    expect(turn.locator(".badge.stopped")).to_have_text("Stopped")
    expect(answer).to_contain_text("Partial words")
    expect(page.locator("#send")).to_be_visible()
    chat_id = page.evaluate("new URLSearchParams(location.hash.slice(1)).get('chat')")
    with web.api() as api:
        saved = api.get(f"/api/chats/{chat_id}").json()["messages"][-1]
    assert saved["status"] == "cancelled" and saved["content"].startswith("Partial words")
    page.reload()  # the saved, stopped turn looks the same after a reload
    expect(page.locator("article.assistant .badge.stopped")).to_have_text("Stopped")


def _approval_turn(web: Web, answer: str) -> None:
    web.upstream.route(
        CHAT,
        SSEReply(
            chat_chunks(
                reasoning=["Must ", "delete."],
                tool_calls=[ToolCallSpec("delete_file", {"path": "/tmp/old.txt"})],
            )
        ),
        SSEReply(chat_chunks(text=[answer, " done."])),
    )


def test_approval_survives_a_reload_and_a_second_tab_sees_the_live_turn(
    page: Page, web: Web
) -> None:
    _approval_turn(web, "Deleted")
    send(page, "delete the old file")
    card = page.locator("details.tool")
    expect(card.locator(".approval button.approve")).to_be_visible()
    expect(card.locator(".tool-state")).to_have_text("waiting for approval")
    # reload mid-turn: the snapshot, then the turn's events again, the question too
    page.reload()
    expect(page.locator("article.user")).to_have_text("delete the old file")
    expect(card.locator(".approval button.approve")).to_be_visible()
    expect(page.locator("details.tool")).to_have_count(1)
    expect(page.locator("details.reasoning")).to_have_count(1)
    # a second tab on the same chat sees the same live turn
    other = page.context.new_page()
    other.goto(page.url)
    expect(other.locator("details.tool .approval button.approve")).to_be_visible()
    card.locator(".approval input").fill("it is old")
    card.locator(".approval button.approve").click()
    for tab in (page, other):
        expect(tab.locator("article.assistant .answer")).to_have_text("Deleted done.")
        expect(tab.locator("details.tool .tool-output")).to_have_text("deleted /tmp/old.txt")
        expect(tab.locator("details.tool")).to_have_count(1)
    other.close()


def test_a_rejected_call_is_not_run_and_the_model_hears_why(page: Page, web: Web) -> None:
    _approval_turn(web, "Kept")
    send(page, "delete it")
    page.locator("details.tool .approval input").fill("I still need it")
    page.locator("details.tool .approval button.reject").click()
    expect(page.locator("article.assistant .answer")).to_have_text("Kept done.")
    output = page.locator("details.tool .tool-output")
    expect(output).to_contain_text("rejected")
    expect(page.locator("details.tool")).to_have_class(re.compile("failed"))
    tool_message = web.upstream.requests[-1].json["messages"][-1]
    assert tool_message["role"] == "tool" and "I still need it" in tool_message["content"]


def test_client_tools_run_in_the_browser(page: Page, web: Web) -> None:
    web.upstream.route(
        CHAT,
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec("browser_time", {})])),
        SSEReply(
            chat_chunks(tool_calls=[ToolCallSpec("read_user_file", {"purpose": "to summarise it"})])
        ),
        SSEReply(chat_chunks(text="Read it.")),
    )
    send(page, "what time is it, and read my notes")
    picker = page.locator("details.tool .file-pick")
    expect(page.locator("details.tool .client-tool")).to_contain_text("to summarise it")
    notes = FilePayload(name="notes.txt", mimeType="text/plain", buffer=b"buy milk\n")
    picker.set_input_files(files=[notes])
    expect(page.locator("article.assistant .answer")).to_have_text("Read it.")
    time_result = orjson.loads(web.upstream.requests[1].json["messages"][-1]["content"])
    zone = page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone")
    assert time_result["time_zone"] == zone and time_result["iso"].endswith("Z")
    file_result = orjson.loads(web.upstream.requests[2].json["messages"][-1]["content"])
    assert file_result["name"] == "notes.txt" and file_result["text"] == "buy milk\n"
    declared = [t["function"]["name"] for t in web.upstream.requests[0].json["tools"]]
    assert {"browser_time", "read_user_file"} <= set(declared)


def test_a_dropped_connection_resumes_without_gaps_or_repeats(page: Page, web: Web) -> None:
    pieces = [f"w{i} " for i in range(30)]
    web.upstream.route(
        CHAT,
        SSEReply(
            chat_chunks(
                reasoning=["Deleting."], tool_calls=[ToolCallSpec("delete_file", {"path": "/x"})]
            )
        ),
        SSEReply(chat_chunks(text=pieces), delay=0.03),
    )
    send(page, "go")
    approve = page.locator("details.tool .approval button.approve")
    expect(approve).to_be_visible()
    page.evaluate("document.querySelector('article.user').dataset.kept = 'yes'")
    seen = len(web.proxy.requests)
    assert web.proxy.drop() >= 1  # the event stream was open: now it is cut
    approve.click()  # a new connection; the stream reconnects with Last-Event-ID
    answer = page.locator("article.assistant .answer")
    expect(answer).to_contain_text("w5 ")
    web.proxy.drop()  # and once more while the answer streams
    expect(page.locator("article.assistant")).to_have_class(re.compile("status-completed"))
    assert (answer.text_content() or "").strip() == "".join(pieces).strip()
    expect(page.locator("details.tool")).to_have_count(1)
    expect(page.locator("details.reasoning")).to_have_count(1)
    expect(page.locator("#banner")).to_be_hidden()
    # resumed, not rebuilt: the same DOM, and every reconnect named the last event seen
    expect(page.locator("article.user[data-kept=yes]")).to_have_count(1)
    reconnects = [h for h in web.proxy.requests[seen:] if b"/events" in h.split(b"\r\n")[0]]
    assert len(reconnects) >= 2
    assert all(b"\r\nlast-event-id: " in h.lower() for h in reconnects), reconnects


def test_errors_show_in_place_with_what_to_do(page: Page, web: Web) -> None:
    web.upstream.route(CHAT, RawReply(503, b'{"error": {"message": "overloaded"}}'))
    web.upstream.set_default(RawReply(503, b'{"error": {"message": "overloaded"}}'))
    send(page, "hello?")
    box = page.locator("article.assistant .error-box")
    expect(box).to_be_visible()
    expect(box).to_have_attribute("role", "alert")
    expect(box.locator(".hint")).to_contain_text("model server")
    expect(page.locator("article.assistant .badge.failed")).to_be_visible()
    expect(page.locator("#send")).to_be_visible()
    # the session ends (cookie gone): the next action asks to sign in again, saying why
    page.context.clear_cookies()
    page.fill("#input", "again")
    page.press("#input", "Enter")
    expect(page.locator("#signin")).to_be_visible()
    expect(page.locator("#signin-error")).to_contain_text("sign in")


def test_rename_search_and_delete_chats(page: Page, web: Web) -> None:
    web.upstream.set_default(SSEReply(chat_chunks(text="ok")))
    with web.api() as api:  # a /v1 call is kept in the request log, not in the sidebar
        body = {"model": "fake", "messages": [{"role": "user", "content": "api"}]}
        assert api.post("/v1/chat/completions", json=body).status_code == 200
        deadline = time.monotonic() + HANG  # saved in the background: wait for it
        while not (logged := api.get("/api/chats?source=api&limit=1").json()["data"]):
            assert time.monotonic() < deadline, "the /v1 turn was never saved"
            threading.Event().wait(0.05)
        api_chat = logged[0]["id"]
    page.reload()
    for text in ("first", "second"):
        page.click("#new-chat")
        send(page, text)
        expect(page.locator("article.assistant")).to_have_class(re.compile("status-completed"))
    page.once("dialog", lambda dialog: dialog.accept("Zebra facts"))
    page.click("#rename-chat")
    expect(page.locator("#chat-title")).to_have_text("Zebra facts")
    expect(page.locator("#chat-list .chat-link[aria-current=page]")).to_have_text("Zebra facts")
    page.fill("#search", "zebra")
    expect(page.locator("#chat-list .chat-link")).to_have_count(1)
    page.fill("#search", "")
    expect(page.locator(f"#chat-list [data-chat-id='{api_chat}']")).to_have_count(0)
    chat_id = page.evaluate("new URLSearchParams(location.hash.slice(1)).get('chat')")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#delete-chat")
    expect(page.locator("#chat-title")).to_have_text("New chat")
    expect(page.locator(f"#chat-list [data-chat-id='{chat_id}']")).to_have_count(0)
    with web.api() as api:
        assert api.get(f"/api/chats/{chat_id}").status_code == 404


def test_an_idle_tab_shows_a_turn_started_in_another(page: Page, web: Web) -> None:
    web.upstream.route(
        CHAT, SSEReply(chat_chunks(text="First.")), SSEReply(chat_chunks(text="Second."))
    )
    send(page, "one")
    expect(page.locator("article.assistant")).to_have_class(re.compile("status-completed"))
    idle = page.context.new_page()
    idle.goto(page.url)
    expect(idle.locator("article.assistant .answer")).to_have_text("First.")
    send(page, "two")
    expect(idle.locator("article.user")).to_have_count(2)
    expect(idle.locator("article.user").nth(1)).to_have_text("two")
    expect(idle.locator("article.assistant .answer").nth(1)).to_have_text("Second.")
    expect(idle.locator("article.assistant")).to_have_count(2)
    idle.close()


def test_a_snapshot_taken_as_a_turn_finishes_shows_it_once(page: Page, web: Web) -> None:
    """A turn is saved a moment before its worker lets go of the chat: a snapshot then
    says `running` while the answer is saved complete, and the turn's events replay.
    The page shows the saved answer once (not again from the replay), and what follows
    the replay on the same stream (a title from the background tasks) still counts."""
    web.upstream.route(CHAT, SSEReply(chat_chunks(text=["Done", "."])))
    send(page, "finish")
    expect(page.locator("article.assistant")).to_have_class(re.compile("status-completed"))
    chat_id = page.evaluate("new URLSearchParams(location.hash.slice(1)).get('chat')")
    with web.api() as api:
        messages = api.get(f"/api/chats/{chat_id}").json()["messages"]
        replay = api.get(f"/api/chats/{chat_id}/events?after=0").content
    assert b"chat:completion" in replay
    snapshot = {
        "type": "chat:snapshot",
        "data": {"messages": messages, "running": True, "more": False},
    }
    last_id = int(re.findall(rb"^id: (\d+)$", replay, re.M)[-1])
    title = {"type": "chat:title", "data": {"title": "Settled"}}
    body = (
        b"id: 0\nevent: chat:snapshot\ndata: "
        + orjson.dumps(snapshot)
        + b"\n\n"
        + replay
        + f"id: {last_id + 1}\nevent: chat:title\ndata: ".encode()
        + orjson.dumps(title)
        + b"\n\n"
    )
    calls: list[str] = []

    def events(route: Route) -> None:
        calls.append(route.request.url)
        if len(calls) == 1:
            route.fulfill(status=200, body=body, headers={"Content-Type": "text/event-stream"})
        else:
            route.continue_()

    page.route("**/api/chats/*/events*", events)
    page.reload()
    deadline = time.monotonic() + HANG
    while len(calls) < 2:  # the replay was read, and the page looked again
        assert time.monotonic() < deadline, "the page never looked at the chat again"
        page.wait_for_timeout(50)
    expect(page.locator("article.assistant")).to_have_count(1)
    expect(page.locator("article.assistant .answer")).to_have_text("Done.")
    expect(page.locator("article.user")).to_have_count(1)
    expect(page.locator("#chat-title")).to_have_text("Settled")
