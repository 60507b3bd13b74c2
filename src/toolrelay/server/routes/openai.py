"""`POST /v1/chat/completions` and `GET /v1/models`: the whole loop behind OpenAI's API.

Server-side tools run inside the turn; strict clients see a plain completion
(content and `reasoning_content` deltas, usage, `[DONE]`). Tools the request
declares are the client's: their calls end the response with
`finish_reason: tool_calls`, exactly as OpenAI does, so the client runs them
and continues. `toolrelay_events: true` adds the loop's events as extra
chunks (`choices: []`, key `toolrelay`).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.core.ids import new_id
from toolrelay.core.items import Item, item_text
from toolrelay.engine.finish import TurnResult
from toolrelay.server.client_tools import turn_args
from toolrelay.server.errors import APIError, JSONBody
from toolrelay.server.schemas import ChatCompletionRequest
from toolrelay.server.services import ServicesDep, UserDep

router = APIRouter()
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@router.get("/v1/models")
async def list_models(svc: ServicesDep, _: UserDep) -> dict[str, Any]:
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": "toolrelay"}
        for name in sorted(svc.registry.routes)
    ]
    return {"object": "list", "data": data}


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(
    body: ChatCompletionRequest, svc: ServicesDep, user: UserDep
) -> StreamingResponse | JSONBody:
    route = svc.route(body.model)
    relay = svc.turns.relay_for(route)
    messages = [m.model_dump(exclude_none=True) for m in body.messages]
    run_args = turn_args(user, body.tools)
    run_args["params"] = sampling_params(body)
    if body.stream:
        chunks = _stream(relay.stream(messages, **run_args), body, route)
        return StreamingResponse(chunks, media_type="text/event-stream", headers=SSE_HEADERS)
    result = await relay.run(messages, **run_args)
    if result.status == "failed":  # even with partial text: a cut answer must not look whole
        raise APIError(502, result.error or "The model server failed.", type="upstream_error")
    return JSONBody(completion(result, route))


_OURS = frozenset({"model", "messages", "stream", "stream_options", "tools", "toolrelay_events"})


def sampling_params(body: ChatCompletionRequest) -> dict[str, Any]:
    """What the client asked of the model itself (temperature, max_tokens, tool_choice …),
    passed through to every model call of the turn."""
    extra = body.model_extra or {}
    if extra.get("n") not in (None, 1):
        raise APIError(400, "Only n=1 is supported.", param="n", code="unsupported_value")
    return {k: v for k, v in extra.items() if k not in _OURS and k != "n"}


def completion(result: TurnResult, route: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": result.text or None}
    reasoning = "".join(item_text(i) for i in result.output if i.get("type") == "reasoning")
    if reasoning:
        message["reasoning_content"] = reasoning
    calls = open_calls(result.output)
    if calls:
        message["tool_calls"] = [_tool_call(c) for c in calls]
    return {
        "id": new_id("chatcmpl").replace("_", "-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": route,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": _finish(result)}
        ],
        "usage": openai_usage(result.usage),
    }


def open_calls(output: list[Item]) -> list[Item]:
    """Calls left for the client: function_calls with no output after them."""
    answered = {i.get("call_id") for i in output if i.get("type") == "function_call_output"}
    return [
        i
        for i in output
        if i.get("type") == "function_call"
        and i.get("call_id") not in answered
        and i.get("status") != "incomplete"
    ]


def _tool_call(call: Item) -> dict[str, Any]:
    function = {"name": call.get("name"), "arguments": call.get("arguments") or "{}"}
    return {"id": call.get("call_id"), "type": "function", "function": function}


def _finish(result: TurnResult) -> str:
    if open_calls(result.output) and result.status == "completed":
        return "tool_calls"
    if result.status == "capped":
        return "length"  # stopped by the tool-round limit, not by the model
    if result.finish_reason in ("stop", "length", "content_filter"):
        return result.finish_reason
    return "stop"


def openai_usage(usage: dict[str, Any]) -> dict[str, int]:
    prompt = int(usage.get("input_tokens") or 0)
    completion_tokens = int(usage.get("output_tokens") or 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion_tokens,
        "total_tokens": int(usage.get("total_tokens") or prompt + completion_tokens),
    }


class _Chunks:
    """Renders `chat.completion.chunk` SSE lines for one response."""

    def __init__(self, route: str) -> None:
        self.head = (
            b'{"id":"'
            + new_id("chatcmpl").replace("_", "-").encode()
            + b'","object":"chat.completion.chunk","created":'
            + str(int(time.time())).encode()
            + b',"model":'
            + orjson.dumps(route)
            + b',"choices":'
        )

    def delta(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        return b"data: " + self.head + orjson.dumps(choice) + b"}\n\n"

    def extra(self, key: str, value: Any) -> bytes:
        return (
            b"data: "
            + self.head
            + b"[],"
            + orjson.dumps(key)
            + b":"
            + orjson.dumps(value)
            + b"}\n\n"
        )


async def _stream(
    events: AsyncIterator[Event], body: ChatCompletionRequest, route: str
) -> AsyncIterator[bytes]:
    chunks = _Chunks(route)
    yield chunks.delta({"role": "assistant", "content": ""})
    text_item: str | None = None  # the message item whose text is streaming
    async for event in events:
        kind = event.type
        if kind == ev.OUTPUT_TEXT_DELTA:
            delta = event.data["delta"]
            if event.data["item_id"] != text_item:
                if text_item is not None:  # as `output_text` joins message items
                    delta = "\n\n" + delta
                text_item = event.data["item_id"]
            yield chunks.delta({"content": delta})
        elif kind == ev.REASONING_TEXT_DELTA:
            yield chunks.delta({"reasoning_content": event.data["delta"]})
        elif kind == ev.CHAT_COMPLETION and event.data.get("done"):
            async for line in _final(chunks, event.data, body):
                yield line
            return
        elif body.toolrelay_events and kind not in ev.DELTA_EVENTS:
            yield chunks.extra("toolrelay", event.to_dict())


async def _final(
    chunks: _Chunks, data: dict[str, Any], body: ChatCompletionRequest
) -> AsyncIterator[bytes]:
    status = data.get("status")
    if status in ("failed", "cancelled") and data.get("error"):
        error = {"message": data["error"]["content"], "type": "upstream_error", "code": status}
        yield b"data: " + orjson.dumps({"error": error}) + b"\n\n"
        yield b"data: [DONE]\n\n"
        return
    calls = open_calls(data.get("output") or [])
    finish = "stop"
    if calls and status == "completed":
        deltas = [{"index": n, **_tool_call(c)} for n, c in enumerate(calls)]
        yield chunks.delta({"tool_calls": deltas})
        finish = "tool_calls"
    yield chunks.delta({}, finish)
    if body.stream_options is not None and body.stream_options.include_usage:
        yield chunks.extra("usage", openai_usage(data.get("usage") or {}))
    yield b"data: [DONE]\n\n"
