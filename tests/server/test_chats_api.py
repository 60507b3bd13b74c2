"""The chat API end to end: background turns, resumable SSE, cancel, client tools, isolation."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx2
import orjson
import pytest

from tests.patience import HANG
from tests.server.conftest import Running
from toolrelay.adapters.stores import sql_search
from toolrelay.core.events import DELTA_EVENTS
from toolrelay.core.stream.framing import SSEDecoder
from toolrelay.events import ChatStreamReader
from toolrelay.testing.fake_server import SSEReply
from toolrelay.testing.wire import ToolCallSpec, chat_chunks

CHAT = "/v1/chat/completions"


class Frames:
    """A chat stream's events: whole (`ChatStreamReader`), or `raw`, each frame's
    `data:` line as sent (a lean delta without `type`: what the schema checks) and,
    under `event`, the frame's `event:` line."""

    def __init__(self, *, raw: bool = False) -> None:
        self._whole = None if raw else ChatStreamReader()
        self._raw = SSEDecoder()

    def feed(self, chunk: bytes) -> list[tuple[int, dict[str, Any]]]:
        if self._whole is not None:
            return [(int(i or 0), e.to_dict()) for i, e in self._whole.feed(chunk)]
        frames = self._raw.feed(chunk)
        return [(int(f.id or 0), {**orjson.loads(f.data), "event": f.event}) for f in frames]


def read_events(
    client: httpx2.Client,
    chat_id: str,
    *,
    last: int | None = None,
    limit: int | None = None,
    raw: bool = False,
    until: str | None = None,
) -> list[tuple[int, dict[str, Any]]]:
    """(seq, {type, data}) until the stream ends, or `limit` events then disconnect;
    `raw`: as sent (`Frames`); `until`: the request's `until`."""
    headers = {"Last-Event-ID": str(last)} if last is not None else {}
    params = {"until": until} if until is not None else {}
    out: list[tuple[int, dict[str, Any]]] = []
    decoder = Frames(raw=raw)
    url = f"/api/chats/{chat_id}/events"
    with client.stream("GET", url, headers=headers, params=params) as response:
        assert response.status_code == 200
        for chunk in response.iter_bytes():
            for seq, event in decoder.feed(chunk):
                out.append((seq, event))
                if limit is not None and len(out) >= limit:
                    return out
    return out


LOCATION_TOOL = [
    {
        "type": "function",
        "function": {"name": "get_location", "parameters": {"type": "object", "properties": {}}},
    }
]


def events_answering_tools(
    client: httpx2.Client,
    chat_id: str,
    result: Any,
    *,
    last: int | None = None,
    paused_first: bool = False,
    raw: bool = False,
) -> list[tuple[int, dict[str, Any]]]:
    """Read the chat's events in one stream to its end, answering each `execute:tool` (or
    a snapshot's `waiting` question: the stream began while the turn was paused) once
    with `result`. A turn paused for the answer keeps the stream open (docs/events.md).
    `last`: the Last-Event-ID to start from (0: the running turn from its start).
    `paused_first`: each answer waits until the turn is saved paused, so it takes the
    turn on (maybe in another worker) rather than reaching it while it runs.
    `raw`: the events as sent (`Frames`)."""
    seen: list[tuple[int, dict[str, Any]]] = []
    answered: set[str] = set()
    headers = {"Last-Event-ID": str(last)} if last is not None else {}
    decoder = Frames(raw=raw)
    with client.stream("GET", f"/api/chats/{chat_id}/events", headers=headers) as response:
        for chunk in response.iter_bytes():
            for seq, event in decoder.feed(chunk):
                seen.append((seq, event))
                if event.get("type") == "execute:tool":  # raw: a delta has no type
                    asks = [event["data"]["id"]]
                elif event.get("type") == "chat:snapshot":
                    asks = [ask["id"] for ask in event["data"].get("waiting", [])]
                else:
                    continue
                for call_id in (a for a in asks if a not in answered):
                    answered.add(call_id)
                    if paused_first:
                        wait_paused(client, chat_id)
                    answer = {"id": call_id, "result": result}
                    posted = client.post(f"/api/chats/{chat_id}/tool-results", json=answer)
                    assert posted.status_code == 202, posted.text
    return seen


def wait_paused(client: httpx2.Client, chat_id: str) -> dict[str, Any]:
    """The snapshot of the chat once its turn is saved paused and runs nowhere."""
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline:
        ((_, snapshot),) = read_events(client, chat_id, limit=1)
        if not snapshot["data"]["running"] and snapshot["data"].get("waiting"):
            return dict(snapshot["data"])
        time.sleep(0.02)
    raise AssertionError(f"the turn never paused: {snapshot}")


def new_chat(client: httpx2.Client, **body: Any) -> str:
    response = client.post("/api/chats", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def wait_saved(client: httpx2.Client, chat_id: str, status: str = "completed") -> dict[str, Any]:
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline:
        messages = client.get(f"/api/chats/{chat_id}").json()["messages"]
        if messages and messages[-1]["role"] == "assistant" and messages[-1]["status"] == status:
            return dict(messages[-1])
        time.sleep(0.05)
    raise AssertionError(f"turn never reached {status}: {messages}")


def test_turn_runs_in_background_and_is_saved(running: Running) -> None:
    running.upstream.route(
        CHAT,
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec("add", {"a": 1, "b": 2})])),
        SSEReply(chat_chunks(text=["Three", "."])),
    )
    with running.client() as client:
        chat_id = new_chat(client, title="sums", model="fake")
        posted = client.post(f"/api/chats/{chat_id}/messages", json={"content": "1+2?"})
        assert posted.status_code == 202
        ids = posted.json()
        events = read_events(client, chat_id)  # a snapshot, then the turn if it still runs
        if len(events) > 1:
            assert events[-1][1]["type"] == "chat:completion"
            assert events[-1][1]["data"]["done"] is True
        seqs = [s for s, _ in events]
        assert seqs[1:] == list(range(seqs[0] + 1, seqs[0] + len(seqs)))  # no gap, no repeat
        saved = wait_saved(client, chat_id)
        assert saved["id"] == ids["message_id"]
        # a subscriber without Last-Event-ID after the turn gets a snapshot of the saved chat
        ((snap_seq, snapshot),) = read_events(client, chat_id)
        assert (snap_seq, snapshot["type"]) == (seqs[-1], "chat:snapshot")
        assert snapshot["data"]["running"] is False
        assert snapshot["data"]["messages"][-1]["content"] == "Three."
        assert saved["content"] == "Three."
        assert [i["type"] for i in saved["output"]] == [
            "function_call",
            "function_call_output",
            "message",
        ]
        # the next turn sees the whole history, tool calls included
        running.upstream.route(CHAT, SSEReply(chat_chunks(text="Six.")))
        client.post(f"/api/chats/{chat_id}/messages", json={"content": "and 3+3?"})
        wait_saved(client, chat_id)
        sent = running.upstream.requests[-1].json["messages"]
        assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]


def read_until_text(
    client: httpx2.Client, chat_id: str, last: int | None, text: str
) -> list[tuple[int, dict[str, Any]]]:
    """Events after `last` until the deltas read add up to `text`, then disconnect."""
    headers = {"Last-Event-ID": str(last)} if last is not None else {}
    out: list[tuple[int, dict[str, Any]]] = []
    decoder = ChatStreamReader()
    with client.stream("GET", f"/api/chats/{chat_id}/events", headers=headers) as response:
        for chunk in response.iter_bytes():
            for frame_id, whole in decoder.feed(chunk):
                out.append((int(frame_id or 0), whole.to_dict()))
                if _deltas(out) == text:
                    return out
    raise AssertionError(f"the stream ended first: {out}")


def _deltas(events: list[tuple[int, dict[str, Any]]]) -> str:
    kind = "response.output_text.delta"
    return "".join(e["data"].get("delta", "") for _, e in events if e["type"] == kind)


def test_resume_with_last_event_id_has_no_gap_and_no_duplicate(running: Running) -> None:
    """Inside the running turn a client resumes exactly; once the turn ended, or from
    before it (`Last-Event-ID: 0`), it gets the saved chat instead of a replay."""
    text = [f"w{i} " for i in range(40)]
    # the upstream holds after the role chunk and 10 pieces, and after 20
    first_half, second_half = threading.Event(), threading.Event()
    holds = {11: first_half, 21: second_half}
    running.upstream.route(CHAT, SSEReply(chat_chunks(text=text), holds=holds))
    with running.client() as client:
        chat_id = new_chat(client, model="fake")
        client.post(f"/api/chats/{chat_id}/messages", json={"content": "talk"})
        first = read_until_text(client, chat_id, None, "".join(text[:10]))
        assert first[0][1]["type"] == "chat:snapshot" and first[0][1]["data"]["running"]
        first_half.set()
        rest = read_until_text(client, chat_id, first[-1][0], "".join(text[10:20]))
        got = [s for s, _ in first[1:] + rest]
        assert got == list(range(got[0], got[0] + len(got)))  # no gap, no repeat
        assert got[0] == first[0][0] + 1  # from the turn's first event
        held = second_half
        zero = read_events(client, chat_id, last=0, limit=1)  # before the turn: a snapshot
        assert zero[0][1]["type"] == "chat:snapshot" and zero[0][0] == first[0][0]
        held.set()
        saved = wait_saved(client, chat_id)
        assert saved["content"] == "".join(text)
        # the turn ended: its deltas are not kept, its items (whole) and end are
        after = read_events(client, chat_id, last=got[3])
        assert [s for s, _ in after] == sorted({s for s, _ in after}) and after[0][0] > got[3]
        assert not _deltas(after) and "chat:completion" in [e["type"] for _, e in after]
        done = [e["data"]["item"] for _, e in after if e["type"] == "response.output_item.done"]
        assert done[-1]["content"][0]["text"] == "".join(text)
        # from before the turn (`Last-Event-ID: 0`): the saved chat, then that turn's kept events
        zero = read_events(client, chat_id, last=0)
        assert zero[0][1]["type"] == "chat:snapshot" and not zero[0][1]["data"]["running"]
        assert zero[0][1]["data"]["messages"][-1]["content"] == "".join(text)
        assert "chat:completion" in [e["type"] for _, e in zero] and not _deltas(zero)


def start_stalling_turn(
    running: Running, client: httpx2.Client
) -> tuple[str, list[tuple[int, dict[str, Any]]]]:
    """A chat whose turn streams three chunks, then stalls; its id and first 3 events."""
    running.upstream.route(
        CHAT,
        SSEReply(
            chat_chunks(text=["partial ", "words ", "never ", "end"]), stall_after=3, stall_for=3600
        ),
    )
    chat_id = new_chat(client, model="fake")
    client.post(f"/api/chats/{chat_id}/messages", json={"content": "go"})
    return chat_id, read_events(client, chat_id, limit=3)


def test_cancel_through_the_api_saves_partial(running: Running) -> None:
    with running.client() as client:
        chat_id, seen = start_stalling_turn(running, client)
        assert any(e["type"] == "response.output_text.delta" for _, e in seen)
        busy = client.post(f"/api/chats/{chat_id}/messages", json={"content": "again"})
        assert busy.status_code == 409 and busy.json()["error"]["code"] == "turn_running"
        assert client.post(f"/api/chats/{chat_id}/cancel").json() == {"cancelled": True}
        saved = wait_saved(client, chat_id, status="cancelled")
        assert saved["content"].startswith("partial")
        types = [e["type"] for _, e in read_events(client, chat_id, last=seen[0][0])]
        assert "chat:tasks:cancel" in types and types[-1] == "chat:completion"


def test_client_tool_results_through_the_api(running: Running) -> None:
    running.upstream.route(
        CHAT,
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec("get_location", {}, id="call_g")])),
        SSEReply(chat_chunks(text="Paris it is.")),
    )
    with running.client() as client:
        chat_id = new_chat(client, model="fake")
        content = {"content": "where?", "tools": LOCATION_TOOL}
        client.post(f"/api/chats/{chat_id}/messages", json=content)
        seen = events_answering_tools(client, chat_id, "Paris")
        asked = [e["data"] for _, e in seen if e["type"] == "execute:tool"]
        assert [a["name"] for a in asked] == ["get_location"]
        saved = wait_saved(client, chat_id)
        assert saved["content"] == "Paris it is."
        assert saved["output"][1]["output"] == "Paris"


def test_a_replay_from_the_turns_start_has_the_part_before_its_pause(
    running: Running,
) -> None:
    """The turn pauses for its client tool (saved, run by nobody) and is answered: one
    stream carries it all, and a replay from its start, after it went on, has the
    events from before the pause too, with the seqs first sent."""
    running.upstream.route(
        CHAT,
        SSEReply(chat_chunks(text="Let me look.", tool_calls=[ToolCallSpec("get_location", {})])),
        SSEReply(chat_chunks(text=["Paris ", "it is."])),
    )
    with running.client() as client:
        chat_id = new_chat(client, model="fake")
        content = {"content": "where?", "tools": LOCATION_TOOL}
        client.post(f"/api/chats/{chat_id}/messages", json=content)
        # from the turn's start (wherever it is by now); the answer waits for the pause
        seen = events_answering_tools(client, chat_id, "Paris", last=0, paused_first=True)
        types = [e["type"] for _, e in seen]
        assert types[0] == "chat:snapshot"
        assert types.index("execute:tool") < types.index("chat:completion")
        seqs = [s for s, _ in seen]
        assert seqs == sorted(set(seqs))  # no repeat (deltas read after the pause went)
        assert wait_saved(client, chat_id)["content"] == "Let me look.\n\nParis it is."
        kept = [s for s, e in seen[1:] if e["type"] not in DELTA_EVENTS]
        replay = read_events(client, chat_id, last=seen[0][0])
        assert [s for s, _ in replay] == kept
        ((start, snapshot), *again) = read_events(client, chat_id, last=0)
        assert (start, snapshot["type"]) == (seen[0][0], "chat:snapshot")
        assert [s for s, _ in again] == kept


def test_until_question_ends_the_stream_at_each_question(running: Running) -> None:
    """A client that asks for it (`until=question`) gets a stream that ends after the
    question, and reads on with its Last-Event-ID once it answered."""
    running.upstream.route(
        CHAT,
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec("get_location", {}, id="call_q")])),
        SSEReply(chat_chunks(text="Paris it is.")),
    )
    with running.client() as client:
        chat_id = new_chat(client, model="fake")
        content = {"content": "where?", "tools": LOCATION_TOOL}
        client.post(f"/api/chats/{chat_id}/messages", json=content)
        first = read_events(client, chat_id, last=0, until="question")
        assert first[-1][1]["type"] == "execute:tool"
        wait_paused(client, chat_id)
        ((_, snapshot),) = read_events(client, chat_id, until="question")  # asked again
        assert [ask["id"] for ask in snapshot["data"]["waiting"]] == ["call_q"]
        answer = {"id": "call_q", "result": "Paris"}
        assert client.post(f"/api/chats/{chat_id}/tool-results", json=answer).status_code == 202
        rest = read_events(client, chat_id, last=first[-1][0], until="question")
        assert rest[0][0] == first[-1][0] + 1  # nothing missed, nothing again
        assert [e["type"] for _, e in rest[-2:]] == ["chat:completion", "chat:title"]


def test_users_see_only_their_chats(running: Running) -> None:
    with running.client() as admin:
        mine = new_chat(admin, title="secret")
        key = admin.post("/api/admin/keys", json={"name": "bob", "user": "bob"}).json()["key"]
    with running.client(key) as bob:
        assert bob.get(f"/api/chats/{mine}").status_code == 404
        assert bob.delete(f"/api/chats/{mine}").status_code == 404
        assert bob.post(f"/api/chats/{mine}/messages", json={"content": "x"}).status_code == 404
        assert bob.get(f"/api/chats/{mine}/events").status_code == 404
        assert bob.get("/api/chats").json()["total"] == 0
        assert bob.get("/api/admin/keys").status_code == 403
        own = new_chat(bob)
        assert bob.get("/api/chats").json()["data"][0]["id"] == own
    with running.client() as admin:
        assert admin.get(f"/api/chats/{mine}").json()["title"] == "secret"


def test_paging_delete_and_revoke(running: Running) -> None:
    with running.client() as client:
        ids = [new_chat(client, title=f"c{i}") for i in range(5)]
        page = client.get("/api/chats", params={"limit": 2, "offset": 1}).json()
        assert page["total"] == 5 and [c["id"] for c in page["data"]] == [ids[3], ids[2]]
        seen, cursor = [], None
        while True:  # the cursor walks the whole list, a page at a time
            params: dict[str, Any] = {"limit": 2} | ({"cursor": cursor} if cursor else {})
            page = client.get("/api/chats", params=params).json()
            seen.append([c["id"] for c in page["data"]])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == [[ids[4], ids[3]], [ids[2], ids[1]], [ids[0]]]
        bad = client.get("/api/chats", params={"cursor": "made-up"})
        assert (bad.status_code, bad.json()["error"]["code"]) == (400, "invalid_cursor")
        assert client.delete(f"/api/chats/{ids[0]}").status_code == 204
        assert client.get(f"/api/chats/{ids[0]}").status_code == 404
        assert client.get("/api/chats", params={"limit": 0}).status_code == 400
        created = client.post("/api/admin/keys", json={"name": "temp"}).json()
    with running.client(created["key"]) as temp:
        assert temp.get("/api/chats").status_code == 200
    with running.client() as client:
        assert client.delete(f"/api/admin/keys/{created['id']}").status_code == 204
    with running.client(created["key"]) as temp:
        assert temp.get("/api/chats").status_code == 401


def test_chat_api_errors(running: Running) -> None:
    with running.client() as client:
        assert client.get("/api/chats/nope").json()["error"]["code"] == "chat_not_found"
        chat_id = new_chat(client)
        bad = client.get(f"/api/chats/{chat_id}/events", headers={"Last-Event-ID": "abc"})
        assert bad.status_code == 400
        assert (
            client.post(
                f"/api/chats/{chat_id}/messages", json={"content": "x", "model": "nope"}
            ).status_code
            == 404
        )
        assert client.post(f"/api/chats/{chat_id}/messages", json={"text": "x"}).status_code == 400
        assert (
            client.post(
                f"/api/chats/{chat_id}/tool-results", json={"id": "x", "result": 1}
            ).status_code
            == 409
        )
        assert client.post("/api/chats", json={"model": "nope"}).status_code == 404


def test_info_lists_models(running: Running) -> None:
    info = httpx2.get(running.base_url + "/api/info")
    assert info.status_code == 200 and "fake-responses" in info.json()["models"]


def test_a_search_matching_too_many_to_count_says_so(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search whose page filled while walking the list counts no further: `total` is a
    lower bound and `total_capped` says so; the cursor still reaches every match."""
    monkeypatch.setattr(sql_search, "WALK", 2)  # as a word in every one of many chats does
    with running.client() as client:
        ids = [new_chat(client, title=f"alpha {i}") for i in range(5)]
        page = client.get("/api/chats", params={"q": "alp", "limit": 1}).json()
        assert [c["id"] for c in page["data"]] == [ids[4]]
        assert (page["total"], page["total_capped"]) == (2, True)
        seen = [c["id"] for c in page["data"]]
        while page["next_cursor"]:
            params = {"q": "alp", "limit": 1, "cursor": page["next_cursor"]}
            page = client.get("/api/chats", params=params).json()
            seen += [c["id"] for c in page["data"]]
        assert seen == ids[::-1]
        exact = client.get("/api/chats", params={"q": "alpha 3"}).json()
        assert (exact["total"], exact["total_capped"]) == (1, False)
