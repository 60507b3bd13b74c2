"""`POST /v1/responses`: the loop as OpenAI Responses events (DESIGN §4).

Executed `function_call` and `function_call_output` items are part of the
stream and of the final `response.output`. Function tools the request
declares are the client's: their calls end the response, as OpenAI does.
Each response is answered statelessly: send the full input each time.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from toolrelay.config.settings import ModelRoute
from toolrelay.core.formats.answer import turn_answer
from toolrelay.core.formats.responses.convert import input_messages
from toolrelay.core.formats.responses.render import ResponsesStream, response_for
from toolrelay.core.ids import new_id
from toolrelay.engine.request import TurnRequest
from toolrelay.server.attachments import attach_last
from toolrelay.server.client_tools import turn_args
from toolrelay.server.error_responses import APIError, JSONBody
from toolrelay.server.guard import GuardedRoute, UserDep
from toolrelay.server.logs import REQUEST_ID
from toolrelay.server.openapi import OpenAIObject, doc
from toolrelay.server.params import client_params
from toolrelay.server.request_info import ADMITTED
from toolrelay.server.schemas import ResponsesRequest
from toolrelay.server.services import ServicesDep
from toolrelay.server.streams import TurnStream

router = APIRouter(route_class=GuardedRoute)


@router.post("/v1/responses", response_model=None, responses=doc(OpenAIObject, stream=True))
async def responses(
    body: ResponsesRequest, svc: ServicesDep, user: UserDep
) -> TurnStream | JSONBody:
    route = svc.route(body.model)
    if body.previous_response_id:
        raise APIError(
            400,
            "previous_response_id is not supported: send the whole conversation as `input`.",
            param="previous_response_id",
            code="unsupported_parameter",
        )
    messages = input_messages(body.input, body.instructions)
    if not messages:
        raise APIError(400, "`input` has no message.", param="input", code="empty_input")
    who = svc.turn_user(user)
    turn = TurnRequest(
        messages=messages,
        **turn_args(who, [t for t in body.tools or () if t.type == "function" and t.name]),
        params=sampling_params(body, svc.registry.routes[route]),
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
        writer = ResponsesStream(route)
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
    if answer.response_status == "failed":
        raise APIError(502, answer.failure or "The model server failed.", type="upstream_error")
    return JSONBody(response_for(answer, id=new_id("resp"), model=route))


def sampling_params(body: ResponsesRequest, route: ModelRoute) -> dict[str, Any]:
    """The client's model parameters, with the same meaning as on /v1/chat/completions:
    `server.params` decides what passes and names it for the route's upstream API."""
    return client_params(body.model_extra or {}, "responses", route)
