"""`POST /v1/responses`: the loop as OpenAI Responses events (DESIGN §4).

Executed `function_call` and `function_call_output` items are part of the
stream and of the final `response.output`. Function tools the request
declares are the client's: their calls end the response, as OpenAI does.
Each response is answered statelessly: send the full input each time.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import orjson
from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.core.ids import new_id
from toolrelay.server.client_tools import turn_args
from toolrelay.server.errors import APIError, JSONBody
from toolrelay.server.routes.openai import SSE_HEADERS
from toolrelay.server.schemas import ResponsesRequest
from toolrelay.server.services import ServicesDep, UserDep

router = APIRouter()


@router.post("/v1/responses", response_model=None)
async def responses(
    body: ResponsesRequest, svc: ServicesDep, user: UserDep
) -> StreamingResponse | JSONBody:
    route = svc.route(body.model)
    if body.previous_response_id:
        raise APIError(
            400,
            "previous_response_id is not supported: send the whole conversation as `input`.",
            param="previous_response_id",
            code="unsupported_parameter",
        )
    messages = input_messages(body.input, body.instructions)
    relay = svc.turns.relay_for(route)
    run_args = turn_args(user, [t for t in body.tools or () if t.type == "function" and t.name])
    run_args["params"] = sampling_params(body, svc.registry.routes[route].kind)
    shell = _Shell(route)
    if body.stream:
        stream = _events(relay.stream(messages, **run_args), shell)
        return StreamingResponse(stream, media_type="text/event-stream", headers=SSE_HEADERS)
    result = await relay.run(messages, **run_args)
    if result.status == "failed":
        raise APIError(502, result.error or "The model server failed.", type="upstream_error")
    return JSONBody(
        shell.response(_status(result.status), result.output, result.usage, result.error)
    )


def sampling_params(body: ResponsesRequest, kind: str) -> dict[str, Any]:
    """Temperature, top_p and the output limit, named as the route's upstream API names them."""
    extra = body.model_extra or {}
    params = {k: extra[k] for k in ("temperature", "top_p") if extra.get(k) is not None}
    limit = extra.get("max_output_tokens")
    if limit is not None:
        params["max_output_tokens" if kind == "openai-responses" else "max_tokens"] = limit
    return params


def input_messages(
    value: str | list[dict[str, Any]], instructions: str | None
) -> list[dict[str, Any]]:
    """Responses `input` → Chat Completions history (what the engine speaks)."""
    messages: list[dict[str, Any]] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
    if isinstance(value, str):
        return [*messages, {"role": "user", "content": value}]
    for item in value:
        kind = item.get("type", "message")
        if kind == "message" or (
            "role" in item and kind not in ("function_call", "function_call_output")
        ):
            messages.append(
                {"role": _role(item.get("role")), "content": _content(item.get("content"))}
            )
        elif kind == "function_call":
            call = {
                "id": item.get("call_id"),
                "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments") or "{}"},
            }
            last = messages[-1] if messages else None
            if last is not None and last.get("role") == "assistant" and "tool_calls" in last:
                last["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else orjson.dumps(output).decode()
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": text})
    if not messages:
        raise APIError(400, "`input` has no message.", param="input", code="empty_input")
    return messages


def _role(role: Any) -> str:
    return role if role in ("system", "user", "assistant", "developer") else "user"


def _content(content: Any) -> Any:
    if not isinstance(content, list):
        return content
    parts = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") in ("input_text", "output_text", "text"):
            parts.append({"type": "text", "text": part.get("text", "")})
        elif part.get("type") == "input_image" and part.get("image_url"):
            parts.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
    return parts


def _status(status: str) -> str:
    return {"completed": "completed", "capped": "incomplete", "cancelled": "cancelled"}.get(
        status, "failed"
    )


class _Shell:
    """The `response` object around the items, and event numbering."""

    def __init__(self, route: str) -> None:
        self.id = new_id("resp")
        self.route = route
        self.created = int(time.time())
        self.seq = 0

    def response(
        self, status: str, output: Sequence[Any], usage: dict[str, Any] | None, error: str | None
    ) -> dict[str, Any]:
        usage = usage or {}
        obj: dict[str, Any] = {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "model": self.route,
            "output": list(output),
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "error": {"code": "server_error", "message": error}
            if error and status == "failed"
            else None,
            "incomplete_details": {"reason": "max_tool_iterations"}
            if status == "incomplete"
            else None,
            "usage": {
                "input_tokens": int(usage.get("input_tokens") or 0),
                "output_tokens": int(usage.get("output_tokens") or 0),
                "total_tokens": int(usage.get("total_tokens") or 0),
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
        return obj

    def sse(self, type: str, data: dict[str, Any]) -> bytes:
        payload = {"type": type, "sequence_number": self.seq, **data}
        self.seq += 1
        return b"event: " + type.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


_FORWARD = frozenset(
    {
        ev.OUTPUT_ITEM_ADDED,
        ev.OUTPUT_ITEM_DONE,
        ev.OUTPUT_TEXT_DELTA,
        ev.REASONING_TEXT_DELTA,
        ev.FUNCTION_CALL_ARGUMENTS_DELTA,
        ev.FUNCTION_CALL_ARGUMENTS_DONE,
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_part.added",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.done",
    }
)


async def _events(events: AsyncIterator[Event], shell: _Shell) -> AsyncIterator[bytes]:
    start = shell.response("in_progress", [], None, None)
    yield shell.sse("response.created", {"response": start})
    yield shell.sse("response.in_progress", {"response": start})
    added: set[int] = set()
    async for event in events:
        kind, data = event.type, event.data
        if kind == ev.CHAT_COMPLETION and data.get("done"):
            status = _status(str(data.get("status")))
            error = (data.get("error") or {}).get("content")
            final = shell.response(status, data.get("output") or [], data.get("usage"), error)
            name = {"completed": "response.completed", "incomplete": "response.incomplete"}.get(
                status, "response.failed"
            )
            yield shell.sse(name, {"response": final})
            return
        if kind not in _FORWARD:
            continue
        if kind == ev.OUTPUT_ITEM_ADDED:
            added.add(data["output_index"])
        elif kind == ev.OUTPUT_ITEM_DONE and data.get("output_index") not in added:
            added.add(data["output_index"])  # tool outputs appear complete: announce them first
            yield shell.sse(ev.OUTPUT_ITEM_ADDED, data)
        yield shell.sse(kind, data)
