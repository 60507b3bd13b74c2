"""Regenerate, edit and continue, and switching branches (issue 29 item 8).

A chat's messages form a tree (`stores.tree`); the chat shows, and the model
reads, its current branch. Each of these starts a turn as `POST …/messages`
does (202 with its ids; its events on the chat's stream), placed by
`server.branches`:

- `POST /api/chats/{id}/regenerate` `{message_id?}`: a new answer beside the
  branch's last (or the named) answer;
- `POST /api/chats/{id}/messages/{mid}/edit` (a message body): a new user
  message beside `mid`, and its answer;
- `POST /api/chats/{id}/continue` `{message_id?}`: the last answer goes on;
- `POST /api/chats/{id}/branch` `{message_id}`: show the branch through it (no
  turn); answers the new branch's end.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from toolrelay.server.branches import Continue, Edit, Regenerate
from toolrelay.server.error_responses import APIError
from toolrelay.server.guard import GuardedRoute, UserDep
from toolrelay.server.openapi import BranchShown, TurnStarted, doc
from toolrelay.server.routes.chats import _owned
from toolrelay.server.schemas import BranchSwitch, BranchTurn, MessageCreate
from toolrelay.server.services import ServicesDep
from toolrelay.server.turn_start import begin_turn

router = APIRouter(prefix="/api/chats", route_class=GuardedRoute)


@router.post(
    "/{chat_id}/regenerate", status_code=202, response_model=None, responses=doc(TurnStarted, 202)
)
async def regenerate(
    chat_id: str, body: BranchTurn, svc: ServicesDep, user: UserDep, request: Request
) -> dict[str, Any]:
    chat = await _owned(svc, chat_id, user.id)
    place = Regenerate(body.message_id)
    return await begin_turn(
        svc, chat, user, request, model=body.model, tools=body.tools,
        features=body.features, place=place,
    )  # fmt: skip


@router.post(
    "/{chat_id}/messages/{message_id}/edit",
    status_code=202,
    response_model=None,
    responses=doc(TurnStarted, 202),
)
async def edit(
    chat_id: str,
    message_id: str,
    body: MessageCreate,
    svc: ServicesDep,
    user: UserDep,
    request: Request,
) -> dict[str, Any]:
    chat = await _owned(svc, chat_id, user.id)
    return await begin_turn(
        svc, chat, user, request, content=body.content, model=body.model, tools=body.tools,
        features=body.features, files=body.files, sources=body.sources,
        place=Edit(message_id),
    )  # fmt: skip


@router.post(
    "/{chat_id}/continue", status_code=202, response_model=None, responses=doc(TurnStarted, 202)
)
async def continue_answer(
    chat_id: str, body: BranchTurn, svc: ServicesDep, user: UserDep, request: Request
) -> dict[str, Any]:
    chat = await _owned(svc, chat_id, user.id)
    place = Continue(body.message_id)
    return await begin_turn(
        svc, chat, user, request, model=body.model, tools=body.tools,
        features=body.features, place=place,
    )  # fmt: skip


@router.post("/{chat_id}/branch", response_model=None, responses=doc(BranchShown))
async def switch_branch(
    chat_id: str, body: BranchSwitch, svc: ServicesDep, user: UserDep
) -> dict[str, Any]:
    """While an answer is being written (or waits, paused) the branch stays: it would end
    up out of sight. A turn already saved and only finishing (its title, tags …) is no
    obstacle."""
    await _owned(svc, chat_id, user.id)
    if await svc.store.in_progress_turns(chat_id=chat_id):
        raise APIError(
            409, "A turn is running in this chat; wait or cancel it.", code="turn_running"
        )
    leaf = await svc.store.switch_branch(chat_id, body.message_id)
    if leaf is None:
        raise APIError(404, f"No message '{body.message_id}' in this chat.", code="not_found")
    return {"chat_id": chat_id, "current_id": leaf}
