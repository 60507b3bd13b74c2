"""Issue 29 item 8 over a real server and a real model server: regenerate, edit and
continue (`server.branches`), switching branches, and the history the model reads
following the current branch only."""

from __future__ import annotations

from typing import Any

import httpx2

from tests.server.conftest import Running
from tests.server.test_chats_api import new_chat, read_events, wait_saved
from toolrelay.testing.fake_server import SSEReply
from toolrelay.testing.wire import chat_chunks

CHAT = "/v1/chat/completions"


def _ask(client: httpx2.Client, chat_id: str, text: str) -> dict[str, Any]:
    posted = client.post(f"/api/chats/{chat_id}/messages", json={"content": text})
    assert posted.status_code == 202, posted.text
    return dict(posted.json())


def _shown(client: httpx2.Client, chat_id: str) -> list[dict[str, Any]]:
    return list(client.get(f"/api/chats/{chat_id}").json()["messages"])


def _sent(running: Running) -> list[tuple[str, str]]:
    """(role, content) of what the model read last."""
    return [(m["role"], m.get("content")) for m in running.upstream.requests[-1].json["messages"]]


def test_regenerate_makes_a_sibling_answer_and_switching_shows_either(running: Running) -> None:
    running.upstream.route(
        CHAT,
        SSEReply(chat_chunks(text="First.")),
        SSEReply(chat_chunks(text="Second.")),
        SSEReply(chat_chunks(text="Later.")),
    )
    with running.client() as client:
        chat_id = new_chat(client, model="fake")
        asked = _ask(client, chat_id, "hi")
        first = wait_saved(client, chat_id)
        again = client.post(f"/api/chats/{chat_id}/regenerate", json={})
        assert again.status_code == 202, again.text
        assert again.json()["user_message_id"] == asked["user_message_id"]
        second = wait_saved(client, chat_id)
        assert second["id"] == again.json()["message_id"] != first["id"]
        assert _sent(running) == [("user", "hi")]  # not the first answer
        shown = _shown(client, chat_id)
        assert [m["content"] for m in shown] == ["hi", "Second."]
        assert shown[-1]["siblings"] == [first["id"], second["id"]]
        assert shown[-1]["parent_id"] == asked["user_message_id"]
        switched = client.post(f"/api/chats/{chat_id}/branch", json={"message_id": first["id"]})
        assert switched.json() == {"chat_id": chat_id, "current_id": first["id"]}
        assert [m["content"] for m in _shown(client, chat_id)] == ["hi", "First."]
        _ask(client, chat_id, "and?")  # goes on the branch shown
        wait_saved(client, chat_id)
        assert _sent(running) == [("user", "hi"), ("assistant", "First."), ("user", "and?")]
        back = client.post(f"/api/chats/{chat_id}/branch", json={"message_id": second["id"]})
        assert back.json()["current_id"] == second["id"]
        assert [m["content"] for m in _shown(client, chat_id)] == ["hi", "Second."]


def test_editing_a_question_branches_and_the_model_reads_the_new_branch(
    running: Running,
) -> None:
    running.upstream.route(
        CHAT,
        SSEReply(chat_chunks(text="A1")),
        SSEReply(chat_chunks(text="A2")),
        SSEReply(chat_chunks(text="A2 edited")),
    )
    with running.client() as client:
        chat_id = new_chat(client, model="fake")
        _ask(client, chat_id, "Q1")
        wait_saved(client, chat_id)
        q2 = _ask(client, chat_id, "Q2")["user_message_id"]
        wait_saved(client, chat_id)
        url = f"/api/chats/{chat_id}/messages/{q2}/edit"
        edited = client.post(url, json={"content": "Q2, better"})
        assert edited.status_code == 202, edited.text
        wait_saved(client, chat_id)
        assert _sent(running) == [("user", "Q1"), ("assistant", "A1"), ("user", "Q2, better")]
        shown = _shown(client, chat_id)
        assert [m["content"] for m in shown] == ["Q1", "A1", "Q2, better", "A2 edited"]
        assert shown[2]["siblings"] == [q2, edited.json()["user_message_id"]]
        client.post(f"/api/chats/{chat_id}/branch", json={"message_id": q2})
        assert [m["content"] for m in _shown(client, chat_id)] == ["Q1", "A1", "Q2", "A2"]


def test_continue_goes_on_in_the_same_message(running: Running) -> None:
    running.upstream.route(
        CHAT, SSEReply(chat_chunks(text=["The answer ", "is"])), SSEReply(chat_chunks(text=" 42."))
    )
    with running.client() as client:
        chat_id = new_chat(client, model="fake")
        _ask(client, chat_id, "What is it?")
        cut = wait_saved(client, chat_id)
        went_on = client.post(f"/api/chats/{chat_id}/continue", json={})
        assert went_on.status_code == 202, went_on.text
        assert went_on.json()["message_id"] == cut["id"]
        saved = wait_saved(client, chat_id)
        assert _sent(running) == [("user", "What is it?"), ("assistant", "The answer is")]
        shown = _shown(client, chat_id)
        assert len(shown) == 2 and saved["id"] == cut["id"]
        assert saved["content"] == "The answer is 42."
        assert [i["type"] for i in saved["output"]] == ["message"]  # one item, joined
        assert saved["output"][0]["id"] == cut["output"][0]["id"]


def test_what_cannot_be_branched_is_refused(running: Running) -> None:
    running.upstream.route(CHAT, SSEReply(chat_chunks(text="A1")), SSEReply(chat_chunks(text="A2")))
    with running.client() as client:
        chat_id = new_chat(client, model="fake")
        assert client.post(f"/api/chats/{chat_id}/regenerate", json={}).status_code == 409
        _ask(client, chat_id, "Q1")
        a1 = wait_saved(client, chat_id)["id"]
        q2 = _ask(client, chat_id, "Q2")["user_message_id"]
        wait_saved(client, chat_id)
        edit = client.post(f"/api/chats/{chat_id}/messages/{a1}/edit", json={"content": "x"})
        assert edit.status_code == 409 and edit.json()["error"]["code"] == "not_a_question"
        missing = client.post(f"/api/chats/{chat_id}/messages/nope/edit", json={"content": "x"})
        assert missing.status_code == 404
        regen = client.post(f"/api/chats/{chat_id}/regenerate", json={"message_id": q2})
        assert regen.json()["error"]["code"] == "not_an_answer"
        went_on = client.post(f"/api/chats/{chat_id}/continue", json={"message_id": a1})
        assert went_on.status_code == 409 and went_on.json()["error"]["code"] == "not_last"
        switch = client.post(f"/api/chats/{chat_id}/branch", json={"message_id": "nope"})
        assert switch.status_code == 404
        other = new_chat(client, model="fake")
        assert client.post(f"/api/chats/{other}/branch", json={"message_id": a1}).status_code == 404
        assert len(running.upstream.requests) == 2  # no refused request reached the model


def test_a_cancelled_answer_continues_where_it_was_cut(running: Running) -> None:
    running.upstream.route(
        CHAT,
        SSEReply(chat_chunks(text=["The answer ", "is ", "never ", "sent"]), stall_after=3),
        SSEReply(chat_chunks(text=["is 42", "."])),
    )
    with running.client() as client:
        chat_id = new_chat(client, model="fake")
        _ask(client, chat_id, "What is it?")
        seen = read_events(client, chat_id, limit=3)
        assert any(e["type"] == "response.output_text.delta" for _, e in seen)
        assert client.post(f"/api/chats/{chat_id}/cancel").json() == {"cancelled": True}
        cut = wait_saved(client, chat_id, status="cancelled")
        assert cut["content"].startswith("The answer")
        went_on = client.post(f"/api/chats/{chat_id}/continue", json={})
        assert went_on.status_code == 202, went_on.text
        saved = wait_saved(client, chat_id)
        assert _sent(running)[-1] == ("assistant", cut["content"])
        assert saved["id"] == cut["id"] and saved["content"] == cut["content"] + "is 42."
        assert [(i["id"], i["status"]) for i in saved["output"]] == [
            (cut["output"][0]["id"], "completed")
        ]
        assert len(_shown(client, chat_id)) == 2
