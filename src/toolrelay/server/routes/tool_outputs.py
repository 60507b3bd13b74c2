"""Whole tool results: `GET /api/chats/{id}/outputs/{item_id}`.

The model reads a long tool result cut to the cap (`core.tools.result_cap`); its
`function_call_output` item says so (`cut: {bytes, sent}`), and the whole text is
stored once, apart from the turn, and served here to the chat's owner on demand,
never pushed over the event stream.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from toolrelay.server.error_responses import APIError
from toolrelay.server.guard import GuardedRoute, UserDep
from toolrelay.server.routes.chats import _owned
from toolrelay.server.services import ServicesDep

router = APIRouter(prefix="/api/chats", route_class=GuardedRoute)

_HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "private, max-age=3600"}


@router.get("/{chat_id}/outputs/{item_id}", response_model=None)
async def tool_output(chat_id: str, item_id: str, svc: ServicesDep, user: UserDep) -> Response:
    await _owned(svc, chat_id, user.id)
    text = await svc.store.get_tool_output(chat_id, item_id) if len(item_id) <= 64 else None
    if text is None:
        raise APIError(
            404, f"No cut tool result '{item_id}' in this chat.", code="output_not_found"
        )
    return Response(text, media_type="text/plain; charset=utf-8", headers=_HEADERS)
