"""Where a chat turn's messages go: after the branch's end, beside an answer or a
question, or into a cut answer (issue 29 item 8; the tree is `stores.tree`).

`TurnManager.start` calls `open_turn` once it holds the chat's lease, so what is
checked here (the message is on the current branch, the answer has ended) cannot
change before the rows are written:

- a new message (`None`): the user message and an `in_progress` answer at the end;
- `Regenerate`: a new answer beside an answer (its siblings: ‹ 1/2 › on the page),
  to the same question; the model reads the branch up to that question;
- `Edit`: a new user message beside one of the branch's (the edited text), then
  its answer; the branch from the old message on stays, as a sibling branch;
- `Continue`: the branch's last answer goes on in the same message: its items are
  the turn's starting state, the model reads them as its last message, and its new
  text joins the cut message item (`engine.continuation`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolrelay.adapters.stores import Store, StoredMessage, history_messages
from toolrelay.core.ids import new_id
from toolrelay.core.items import as_items, is_message
from toolrelay.engine.checkpoint import TurnState
from toolrelay.engine.interfaces import Message

__all__ = ["BranchRefused", "Continue", "Edit", "Opened", "Placement", "Regenerate", "open_turn"]


@dataclass(frozen=True, slots=True)
class Regenerate:
    message_id: str | None = None
    """The answer to make again; None: the branch's last."""


@dataclass(frozen=True, slots=True)
class Edit:
    message_id: str
    """The user message the new one goes beside."""


@dataclass(frozen=True, slots=True)
class Continue:
    message_id: str | None = None
    """The answer to go on with; None: the branch's last (it must be the last)."""


Placement = Regenerate | Edit | Continue


class BranchRefused(Exception):
    """The placement names nothing it can apply to; `status` 404 (no such message on
    the branch) or 409 (not an answer, still running, not the last …)."""

    def __init__(self, status: int, message: str, code: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass(frozen=True, slots=True)
class Opened:
    """The turn's rows, and how it starts: `history` None: read by the turn."""

    message_id: str
    user_message_id: str
    history: list[Message] | None = None
    resume: TurnState | None = None
    continues: str | None = None


def _placeholder(route: str, **more: Any) -> dict[str, Any]:
    return {"output": [], "content": "", "status": "in_progress", "model": route, **more}


async def open_turn(
    store: Store,
    chat_id: str,
    message: Mapping[str, Any] | None,
    place: Placement | None,
    route: str,
) -> Opened:
    """Write the turn's rows (`message`: the user message, for a new one or an edit)."""
    message_id = new_id("msg")
    if place is None:
        assert message is not None, "a new turn has a user message"
        user_message_id = await store.add_message(chat_id, message)
        await store.save_turn(chat_id, message_id, _placeholder(route))
        return Opened(message_id, user_message_id)
    branch = await store.get_messages(chat_id)
    match place:
        case Regenerate(target):
            answer = _answer(branch, target)
            question = answer.parent_id
            assistant = {"role": "assistant", "content": ""}
            await store.add_branch(chat_id, assistant, parent_id=question, message_id=message_id)
            await store.save_turn(chat_id, message_id, _placeholder(route))
            return Opened(message_id, question or "")
        case Edit(target):
            asked = _on_branch(branch, target)
            if asked.role != "user":
                raise BranchRefused(409, "Only a user message can be edited.", "not_a_question")
            assert message is not None, "an edit has the new user message"
            user_message_id = await store.add_branch(chat_id, message, parent_id=asked.parent_id)
            await store.save_turn(chat_id, message_id, _placeholder(route))
            return Opened(message_id, user_message_id)
        case Continue(target):
            return await _continue(store, chat_id, branch, target, route)


async def _continue(
    store: Store, chat_id: str, branch: list[StoredMessage], target: str | None, route: str
) -> Opened:
    answer = _answer(branch, target)
    if answer.id != branch[-1].id:
        raise BranchRefused(409, "Only the branch's last answer can be continued.", "not_last")
    output = as_items(answer.output)
    last = output[-1] if output else None
    continues = str(last["id"]) if last is not None and is_message(last) else None
    usage = dict(answer.usage or {})
    turn = _placeholder(route, output=answer.output, content=answer.content, usage=usage or None)
    await store.save_turn(chat_id, answer.id, turn)
    question = answer.parent_id or ""
    state = TurnState(output=list(output), usage=usage)
    return Opened(answer.id, question, history_messages(branch[:-1]), state, continues)


def _on_branch(branch: list[StoredMessage], message_id: str) -> StoredMessage:
    for message in branch:
        if message.id == message_id:
            return message
    raise BranchRefused(404, f"No message '{message_id}' on the chat's branch.", "not_found")


def _answer(branch: list[StoredMessage], message_id: str | None) -> StoredMessage:
    """An ended answer on the branch (None: the branch's last message)."""
    if message_id is None:
        if not branch:
            raise BranchRefused(409, "The chat has no answer yet.", "no_answer")
        found = branch[-1]
    else:
        found = _on_branch(branch, message_id)
    if found.role != "assistant":
        raise BranchRefused(409, "That message is not an answer.", "not_an_answer")
    if found.status == "in_progress":
        raise BranchRefused(409, "That answer is still being written.", "turn_running")
    return found
