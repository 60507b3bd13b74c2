"""The chat API: saved chats, background turns, resumable event streams.

`POST …/messages` saves the user message, starts the turn in the background
and returns its ids at once; `GET …/events` streams the chat's events as SSE
with `id:` sequence numbers. `Last-Event-ID` (or `?after=`) resumes exactly
after the last event seen within the last (or running) turn, also after it
ended (a finished turn's deltas are no longer kept: its `output_item.done`
events hold the text). A subscriber without one, or with one past the chat's
last event (from before a restart, say), first gets a `chat:snapshot` (the
saved messages), then the running turn's events from its start; one from
before the last turn (`Last-Event-ID: 0`) gets the snapshot, then that turn's
kept events, never every past turn's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any, Literal

import orjson
from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import Response, StreamingResponse

from toolrelay.adapters.events import Envelope
from toolrelay.adapters.stores import Chat, StoredMessage
from toolrelay.adapters.stores.listing import ChatCursor
from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.core.formats.chat_stream import ChatFrames, frame
from toolrelay.core.formats.openwebui_events import OpenWebUIEvents
from toolrelay.core.tools.citations import saved_sources
from toolrelay.server.api_log import API_CHAT_PREFIX
from toolrelay.server.error_responses import APIError
from toolrelay.server.guard import GuardedRoute, UserDep
from toolrelay.server.metrics import Metrics
from toolrelay.server.openapi import (
    SSE,
    Accepted,
    Cancelled,
    ChatDetail,
    ChatList,
    ChatOut,
    TurnStarted,
    doc,
)
from toolrelay.server.schemas import ChatCreate, ChatUpdate, MessageCreate, ToolResultIn
from toolrelay.server.services import Services, ServicesDep
from toolrelay.server.streams import SSE_HEADERS
from toolrelay.server.turn_start import begin_turn
from toolrelay.server.turns import channel

log = logging.getLogger(__name__)

router = APIRouter(prefix="/api/chats", route_class=GuardedRoute)
HEARTBEAT_S = 15.0
MAX_PAGE = 1000
"""The most messages one page of a chat holds."""
SNAPSHOT_MESSAGES = 100
"""A snapshot holds the chat's last messages; a client reads earlier ones by pages
(`GET /api/chats/{id}?before=…&limit=…`)."""
MAX_INT64 = 2**63 - 1
"""The largest offset or event number accepted: what every store and bus can hold."""


def chat_json(chat: Chat) -> dict[str, Any]:
    return {
        "id": chat.id,
        "title": chat.title,
        "tags": list(chat.tags or []),
        "model": chat.model,
        "created_at": chat.created_at.isoformat(),
        "updated_at": chat.updated_at.isoformat(),
    }


def message_json(m: StoredMessage) -> dict[str, Any]:
    return {
        "id": m.id,
        "role": m.role,
        "content": m.content,
        "output": m.output,
        "usage": m.usage,
        "status": m.status,
        "error": m.error,
        "timings": m.timings,
        "model": m.model,
        "follow_ups": m.follow_ups,
        "sources": saved_sources(m.output) if m.role == "assistant" else [],
        "created_at": m.created_at.isoformat(),
        "parent_id": m.parent_id,
        "siblings": list(m.siblings),
    }


async def _owned(svc: Services, chat_id: str, user_id: str) -> Chat:
    valid = len(chat_id) <= 64 and "\x00" not in chat_id  # what the id column can hold
    chat = await svc.store.get_chat(chat_id, user_id=user_id) if valid else None
    if chat is None:
        raise APIError(404, f"No chat '{chat_id}'.", code="chat_not_found")
    return chat


@router.post("", status_code=201, response_model=None, responses=doc(ChatOut, 201))
async def create_chat(body: ChatCreate, svc: ServicesDep, user: UserDep) -> dict[str, Any]:
    if body.model is not None:
        svc.route(body.model)
    chat = await svc.store.create_chat(user.id, title=body.title, model=body.model)
    return chat_json(chat)


@router.get("", response_model=None, responses=doc(ChatList))
async def list_chats(
    svc: ServicesDep,
    user: UserDep,
    limit: int = Query(50, ge=1, le=200),
    offset: int = Query(0, ge=0, le=MAX_INT64),
    q: str | None = Query(
        None, max_length=200, description="Words that start words of the title or one message."
    ),
    source: Literal["api", "chat"] | None = Query(
        None, description="`api`: the request log of /v1 turns; `chat`: every other chat."
    ),
    cursor: str | None = Query(
        None, max_length=400, description="A page's `next_cursor`: the page after it."
    ),
) -> dict[str, Any]:
    try:
        after = ChatCursor.decode(cursor) if cursor else None
    except ValueError as exc:
        raise APIError(400, str(exc), param="cursor", code="invalid_cursor") from None
    chats, total = await svc.store.list_chats(
        user.id,
        limit=limit,
        offset=offset,
        query=q or None,
        id_prefix=API_CHAT_PREFIX if source else None,
        exclude_prefix=source == "chat",
        after=after,
    )
    following = ChatCursor.after(chats[-1]).encode() if len(chats) == limit else None
    capped = total < 0  # a search matching too many chats to count (stores.sql_search)
    if capped:
        total = offset + len(chats) + (1 if following else 0)
    return {
        "data": [chat_json(c) for c in chats],
        "total": total,
        "total_capped": capped,
        "limit": limit,
        "offset": offset,
        "next_cursor": following,
    }


@router.get("/{chat_id}", response_model=None, responses=doc(ChatDetail))
async def get_chat(
    chat_id: str,
    svc: ServicesDep,
    user: UserDep,
    limit: int | None = Query(
        None, ge=1, le=MAX_PAGE, description="Only the last so many messages (all if unset)."
    ),
    before: str | None = Query(
        None, max_length=64, description="A message id: the page of messages before it."
    ),
) -> Response:
    """Serialised by orjson straight to bytes: FastAPI's encoder walks every value of
    every message in Python, the main cost of opening a long chat."""
    chat = await _owned(svc, chat_id, user.id)
    messages, more = await message_page(svc, chat_id, before=before, limit=limit)
    body = {**chat_json(chat), "messages": [message_json(m) for m in messages], "more": more}
    return Response(orjson.dumps(body), media_type="application/json")


async def message_page(
    svc: Services, chat_id: str, *, before: str | None, limit: int | None
) -> tuple[list[StoredMessage], bool]:
    """The last `limit` messages (before `before`) and whether earlier ones exist; with
    neither given, every message (from `before` alone: every one before it)."""
    if limit is None:
        return await svc.store.get_messages(chat_id, before=before), False
    messages = await svc.store.get_messages(chat_id, before=before, limit=limit + 1)
    return messages[-limit:], len(messages) > limit


@router.patch("/{chat_id}", response_model=None, responses=doc(ChatOut))
async def rename_chat(
    chat_id: str, body: ChatUpdate, svc: ServicesDep, user: UserDep
) -> dict[str, Any]:
    await _owned(svc, chat_id, user.id)
    if body.title is not None:
        await svc.store.update_chat(chat_id, title=body.title)
    return chat_json(await _owned(svc, chat_id, user.id))


@router.delete("/{chat_id}", status_code=204)
async def delete_chat(chat_id: str, svc: ServicesDep, user: UserDep) -> None:
    await _owned(svc, chat_id, user.id)
    if await svc.turns.running(chat_id):
        await svc.turns.cancel(chat_id)
        await svc.turns.wait(chat_id)
    if not await svc.store.delete_chat(chat_id, user_id=user.id):
        raise APIError(404, f"No chat '{chat_id}'.", code="chat_not_found")
    await svc.files.delete_chat(user.id, chat_id)  # the files sent in it go with it
    await svc.bus.forget(channel(chat_id))  # its events and turn state go with it
    if svc.registry.code_runner is not None:  # its kernel and the files its code wrote
        await svc.registry.code_runner.forget(chat_id)


@router.post(
    "/{chat_id}/messages", status_code=202, response_model=None, responses=doc(TurnStarted, 202)
)
async def post_message(
    chat_id: str, body: MessageCreate, svc: ServicesDep, user: UserDep, request: Request
) -> dict[str, Any]:
    chat = await _owned(svc, chat_id, user.id)
    return await begin_turn(
        svc,
        chat,
        user,
        request,
        content=body.content,
        model=body.model,
        tools=body.tools,
        features=body.features,
        files=body.files,
        sources=body.sources,
    )


@router.post(
    "/{chat_id}/tool-results", status_code=202, response_model=None, responses=doc(Accepted, 202)
)
async def tool_results(
    chat_id: str, body: ToolResultIn, svc: ServicesDep, user: UserDep
) -> dict[str, Any]:
    await _owned(svc, chat_id, user.id)
    if body.approved is not None:
        message = {
            "op": "approval",
            "id": body.id,
            "approved": body.approved,
            "reason": body.reason,
        }
    else:
        message = {"op": "tool_result", "id": body.id, "result": body.result}
        if body.headers is not None:
            message["headers"] = body.headers
    if not await svc.turns.answer(chat_id, message):
        raise APIError(409, "No turn is running in this chat.", code="no_turn_running")
    return {"accepted": True}


@router.post(
    "/{chat_id}/cancel", status_code=202, response_model=None, responses=doc(Cancelled, 202)
)
async def cancel(chat_id: str, svc: ServicesDep, user: UserDep) -> dict[str, Any]:
    await _owned(svc, chat_id, user.id)
    cancelled = await svc.turns.cancel(chat_id)  # a running turn, or a paused one
    return {"cancelled": cancelled}


@router.get(
    "/{chat_id}/events",
    response_class=StreamingResponse,
    responses={200: {"content": SSE, "description": "The chat's events (SSE)"}},
)
async def events(
    chat_id: str,
    request: Request,
    svc: ServicesDep,
    user: UserDep,
    after: int | None = Query(None, ge=0),
    last_event_id: str | None = Header(None),
    format: Literal["toolrelay", "openwebui"] | None = Query(None),
    until: Literal["end", "question"] = Query("end"),
) -> StreamingResponse:
    """`format=openwebui`: Open WebUI's event names and payloads, each frame's data its
    Socket.IO envelope `{chat_id, message_id, data: {type, data}}` (`core.formats.openwebui_events`);
    unset: the chat's route's `events`. `until=question`: the stream also ends after a
    question the client answers (`execute:tool`, `tool:approval`, or a snapshot listing a
    paused turn's); by default it stays open through the pause to the turn's end."""
    chat = await _owned(svc, chat_id, user.id)
    resume = None if after is None else min(after, MAX_INT64)
    if resume is None and last_event_id is not None:
        resume = _event_number(last_event_id)
    route = svc.registry.routes.get(chat.model or "")
    mode = format or (route.events if route is not None else "toolrelay")
    owui = OpenWebUIEvents(title=chat.title) if mode == "openwebui" else None
    stream = _sse(svc, chat_id, resume, request, owui, questions=until == "question")
    return StreamingResponse(stream, media_type="text/event-stream", headers=SSE_HEADERS)


def _event_number(value: str) -> int:
    """`Last-Event-ID` as a sequence number: ASCII digits only. One past what any bus holds
    (2^63-1) is simply past the end: the client gets a fresh snapshot."""
    value = value.strip()
    if not (value.isascii() and value.isdigit()):
        raise APIError(
            400,
            "Last-Event-ID must be an event sequence number (ASCII digits).",
            param="Last-Event-ID",
            code="invalid_event_id",
        )
    return MAX_INT64 if len(value) > 19 else min(int(value), MAX_INT64)


async def _opening(
    svc: Services, chat_id: str, resume: int | None, owui: OpenWebUIEvents | None
) -> tuple[bytes | None, int, bool]:
    """The snapshot frame a subscriber starts with (None: it resumes exactly), the seq its
    events follow, and whether it lists a paused turn's questions. In Open WebUI's form
    it is enveloped like every other frame (`message_id`: the chat's last message)."""
    name = channel(chat_id)
    start: int | None = None
    if resume is not None:
        if resume > await svc.bus.last_seq(name):
            resume = None  # from another life of the chat (or made up): start afresh
        elif resume < (turn := await svc.bus.turn_start(name)):
            start = turn  # before the last turn (`Last-Event-ID: 0`): not every past turn
    if resume is not None and start is None:
        return None, resume, False
    running = await svc.turns.running(chat_id)
    if start is None:
        start = await svc.bus.turn_start(name) if running else await svc.bus.last_seq(name)
    messages, more = await message_page(svc, chat_id, before=None, limit=SNAPSHOT_MESSAGES)
    data = {"messages": [message_json(m) for m in messages], "running": running, "more": more}
    if not running and (waiting := await svc.turns.waiting(chat_id)):
        data["waiting"] = waiting  # a paused turn's questions (approvals, client tools)
    snapshot = Event("chat:snapshot", data)
    asks = "waiting" in data
    if owui is None:
        return frame(start, snapshot), start, asks
    owui.message_id = messages[-1].id if messages else None
    return _owui_frame(start, owui.envelope(chat_id, snapshot), snapshot.type), start, asks


async def _owui_frames(
    svc: Services, chat_id: str, owui: OpenWebUIEvents, seq: int, event: Event
) -> bytes:
    """One event in Open WebUI's form (none, one or several frames, all with its `seq`)."""
    if owui.starting:  # a turn's first event: its message is the chat's last
        last, _ = await message_page(svc, chat_id, before=None, limit=1)
        owui.message_id = last[-1].id if last else None
    if owui.unresolved(event):  # resumed after some items' done events: the saved ones
        last, _ = await message_page(svc, chat_id, before=None, limit=1)
        owui.remember(last[-1].output if last else [])
    found = owui.feed(event)
    return b"".join(_owui_frame(seq, owui.envelope(chat_id, e), e.type) for e in found)


def _owui_frame(seq: int, envelope: dict[str, Any], kind: str) -> bytes:
    data = orjson.dumps(envelope)
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (seq, kind.encode(), data)


async def _sse(
    svc: Services,
    chat_id: str,
    resume: int | None,
    request: Request,
    owui: OpenWebUIEvents | None = None,
    *,
    questions: bool = False,
) -> AsyncIterator[bytes]:
    """`questions`: end after a question for the client (`until=question`)."""
    name = channel(chat_id)
    if not await svc.turns.running(chat_id):
        await svc.turns.settle(chat_id)  # a dead worker's turn, its lease run out
    opening, resume, asks = await _opening(svc, chat_id, resume, owui)
    if opening is not None:
        yield opening
        if questions and asks:
            return
    frames = ChatFrames()  # this reader's: what it was sent is not sent again
    queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=1000)
    pump = asyncio.get_running_loop().create_task(_pump(svc, name, resume, queue))
    unwatch = svc.stopping.watch(lambda: _offer(queue, _STOP))
    metrics: Metrics | None = getattr(request.app.state, "metrics", None)
    since = metrics.subscribed() if metrics is not None else 0.0
    try:
        while not svc.stopping.is_set:
            try:
                envelope = await asyncio.wait_for(queue.get(), HEARTBEAT_S)
            except TimeoutError:
                if await request.is_disconnected():
                    return
                yield b": keep-alive\n\n"
                continue
            if envelope is None:
                return
            if envelope is not _STOP:
                if metrics is not None:
                    metrics.delivered(envelope.published_at, since)
                yield await _rendered(svc, chat_id, owui, frames, envelope)
                if questions and envelope.event.type in QUESTIONS:
                    return
        yield SHUTDOWN_FRAME  # the server is stopping: the client resumes elsewhere or later
    finally:
        unwatch()
        pump.cancel()
        if metrics is not None:
            metrics.unsubscribed()


async def _rendered(
    svc: Services,
    chat_id: str,
    owui: OpenWebUIEvents | None,
    frames: ChatFrames,
    envelope: Envelope,
) -> bytes:
    """One event as this reader's frames (Open WebUI's form when it asked for that)."""
    if owui is None:
        return frames.frame(envelope.seq, envelope.event)
    return await _owui_frames(svc, chat_id, owui, envelope.seq, envelope.event)


_STOP = object()
QUESTIONS = frozenset({ev.EXECUTE_TOOL, ev.TOOL_APPROVAL})
"""Events the client answers (`until=question` ends the stream after one)."""
SHUTDOWN_FRAME = (
    b"retry: 1000\nevent: server:shutdown\n"
    b'data: {"type":"server:shutdown","data":{"reconnect":true}}\n\n'
)
"""No `id:`: a client reconnecting with its Last-Event-ID misses nothing."""


def _offer(queue: asyncio.Queue[Any], item: object) -> None:
    """Wake the reader if the queue has room; a full queue wakes it anyway."""
    with contextlib.suppress(asyncio.QueueFull):
        queue.put_nowait(item)


async def _pump(svc: Services, name: str, after: int, queue: asyncio.Queue[Any]) -> None:
    """Moves the subscription into a queue, so heartbeats never cancel the subscription.

    A subscription that fails (the bus went away) ends the stream like a finished one:
    the client reconnects with its `Last-Event-ID` and loses nothing. Left running, the
    stream would send keep-alives and no event until the client gave up."""
    try:
        async for envelope in svc.bus.subscribe(name, after=after):
            await queue.put(envelope)
    except Exception as exc:
        log.warning("%s: event stream ended, the bus failed: %r", name, exc)
    await queue.put(None)
