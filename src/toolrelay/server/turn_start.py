"""Starting a chat turn from a request: a new message, a regenerated answer, an edited
question or a continued answer (`server.branches`), all the same way: the route, the
user's budget, files and sources, the turn's context, and the errors a client gets."""

from __future__ import annotations

from typing import Any

from fastapi import Request

from toolrelay.adapters.stores import Chat, User
from toolrelay.server.attachments import attach
from toolrelay.server.branches import BranchRefused, Placement
from toolrelay.server.client_tools import client_tools
from toolrelay.server.error_responses import APIError
from toolrelay.server.schemas import ChatTool
from toolrelay.server.services import Services
from toolrelay.server.turns import TurnBusy, TurnNotStarted

__all__ = ["begin_turn", "default_route"]


def default_route(svc: Services) -> str:
    routes = svc.registry.routes
    if not routes:
        raise APIError(
            404, "No model is configured on this server; see GET /.", code="model_not_found"
        )
    return next(iter(routes))


async def begin_turn(
    svc: Services,
    chat: Chat,
    user: User,
    request: Request,
    *,
    content: Any = None,
    model: str | None = None,
    tools: list[ChatTool] | None = None,
    features: dict[str, Any] | None = None,
    files: list[Any] | None = None,
    sources: list[dict[str, Any]] | None = None,
    place: Placement | None = None,
) -> dict[str, Any]:
    """Start the turn (`content`: the user message's, None for a regenerated or continued
    answer) and answer with its ids; 409 while a turn runs or when `place` cannot apply."""
    route = svc.route(model or chat.model or default_route(svc))
    turn_user = svc.turn_user(user)
    spent = None
    if svc.budgets is not None:
        await svc.budgets.check(user.id, request)
        spent = svc.budgets.recorder(user.id, request)
    message: dict[str, Any] | None = None
    attached: dict[str, Any] = {}
    if content is not None:
        message, attached = await attach(
            svc.files,
            user.id,
            {"role": "user", "content": content},
            files,
            sources,
            chat_id=chat.id,
            vision=svc.registry.routes[route].vision,
            text_limit=svc.settings.files.inline_text_chars,
        )
    try:
        started = await svc.turns.start(
            chat.id,
            message,
            route=route,
            user=turn_user,
            client_tools=client_tools(tools),
            features=features,
            context={
                **svc.turn_context(route, request, turn_user, "chat"),
                **attached,
                **({"on_done": spent} if spent is not None else {}),
            },
            place=place,
        )
    except TurnBusy:
        raise APIError(
            409, "A turn is already running in this chat; cancel it or wait.", code="turn_running"
        ) from None
    except TurnNotStarted:
        raise APIError(
            503, "The turn could not be started (saving failed); try again.", code="not_started"
        ) from None
    except BranchRefused as refused:
        raise APIError(refused.status, str(refused), code=refused.code) from None
    return {
        "chat_id": chat.id,
        "message_id": started.message_id,
        "user_message_id": started.user_message_id,
    }
