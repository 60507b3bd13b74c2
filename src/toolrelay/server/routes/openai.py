"""`POST /v1/chat/completions` and `GET /v1/models`: the whole loop behind OpenAI's API.

Server-side tools run inside the turn; strict clients see a plain completion
(content and `reasoning_content` deltas, usage, `[DONE]`). Tools the request
declares are the client's: their calls end the response with
`finish_reason: tool_calls`, exactly as OpenAI does, so the client runs them
and continues. `toolrelay_events: true` adds the loop's events as extra
chunks (`choices: []`, key `toolrelay`).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from toolrelay.config.settings import ModelRoute
from toolrelay.core.formats.answer import turn_answer
from toolrelay.core.formats.chat_completions.render import ChatStream, completion_for
from toolrelay.engine.request import TurnRequest
from toolrelay.server.attachments import attach_last
from toolrelay.server.client_tools import turn_args
from toolrelay.server.error_responses import APIError, JSONBody
from toolrelay.server.guard import GuardedRoute, UserDep
from toolrelay.server.logs import REQUEST_ID
from toolrelay.server.openapi import ModelList, OpenAIObject, doc
from toolrelay.server.params import client_params
from toolrelay.server.request_info import ADMITTED
from toolrelay.server.schemas import ChatCompletionRequest
from toolrelay.server.services import ServicesDep
from toolrelay.server.streams import TurnStream

router = APIRouter(route_class=GuardedRoute)


@router.get("/v1/models", response_model=None, responses=doc(ModelList))
async def list_models(svc: ServicesDep, _: UserDep) -> dict[str, Any]:
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": "toolrelay"}
        for name in sorted(svc.registry.routes)
    ]
    return {"object": "list", "data": data}


@router.post("/v1/chat/completions", response_model=None, responses=doc(OpenAIObject, stream=True))
async def chat_completions(
    body: ChatCompletionRequest, svc: ServicesDep, user: UserDep
) -> TurnStream | JSONBody:
    route = svc.route(body.model)
    messages = [m.model_dump(exclude_none=True) for m in body.messages]
    who = svc.turn_user(user)
    turn = TurnRequest(
        messages=messages,
        **turn_args(who, body.tools),
        params=sampling_params(body, svc.registry.routes[route]),
        features=body.features,
        message_id=REQUEST_ID.get(),  # the turn's id is the request's (X-Request-ID)
        **svc.turn_context(route, None, who, "v1"),
    )
    if svc.budgets is not None:
        await svc.budgets.check(user.id, ADMITTED.get())
    if body.files or body.sources:
        messages, attached = await attach_last(svc, user.id, route, messages, body)
        turn = turn.but(messages=messages, **attached)
    options = body.stream_options
    window = options.coalesce_ms if options is not None else None
    run = svc.v1_run(route, user.id, turn, coalesce_ms=window)
    if body.stream:
        usage = body.stream_options is not None and body.stream_options.include_usage
        writer = ChatStream(route, include_usage=usage, events=body.toolrelay_events)
        return TurnStream(
            run,
            writer,
            svc.settings.keepalive_s,
        )
    result = await run(None)
    answer = turn_answer(
        status=result.status,
        output=result.output,
        usage=result.usage,
        error=result.error,
        finish_reason=result.finish_reason,
    )
    if answer.failure is not None:  # even with partial text: a cut answer must not look whole
        raise APIError(502, answer.failure, type="upstream_error")
    return JSONBody(completion_for(answer, route))


def sampling_params(body: ChatCompletionRequest, route: ModelRoute) -> dict[str, Any]:
    """What the client asked of the model itself (temperature, max_tokens, tool_choice …),
    passed to every model call of the turn as `server.params` allows (see there)."""
    extra = body.model_extra or {}
    if extra.get("n") not in (None, 1):
        raise APIError(400, "Only n=1 is supported.", param="n", code="unsupported_value")
    return client_params({k: v for k, v in extra.items() if k != "n"}, "chat", route)
