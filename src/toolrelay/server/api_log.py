"""The request log: `/v1/*` turns saved as chats of the caller (`log_api_turns`, default on).

Like simonw/llm logging every prompt: each `/v1` request becomes a chat with
id `api_…`, tag `api`, titled by its first user message, holding the
request's messages and the assistant turn as the engine saved it (output,
tool calls, usage, timings, status). `GET /api/chats?source=api` lists them,
`q=` searches them like any chat.

The writes happen once the turn has ended, in the background: the answer
never waits for the log, and a failed write is logged, never the client's
error. A stream cut short (the client left, the server stopped) is logged
`cancelled` with what it had, from the turn's final event (`cut_result`). The
turn's tools see no chat (a `/v1` request has none): the code interpreter
keeps using the caller's own kernel across requests. After
each write the log is pruned to `api_turns_max_age_days` and
`api_turns_max_count` (over all users).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, Final

from toolrelay.adapters.stores import NewChat, Store, utc_now
from toolrelay.config.settings import Settings
from toolrelay.core.ids import new_id
from toolrelay.core.turn.status import TurnStatus
from toolrelay.engine.finish import RunResult
from toolrelay.engine.interfaces import Message

__all__ = ["API_CHAT_PREFIX", "ApiTurnLog", "cut_result"]

log = logging.getLogger("toolrelay.server")

API_CHAT_PREFIX = "api_"
TITLE_CHARS = 80
MAX_BATCH: Final = 64
"""Turns written in one transaction at most: a larger batch saves little more and holds
the event loop longer in one go (SQLAlchemy binds the rows on the loop thread)."""
_ROLES = {"user": "user", "system": "system", "developer": "system", "assistant": "assistant"}


class ApiTurnLog:
    """Writes ended `/v1` turns to the store, in the background, then prunes the log.

    One writer task at a time takes every turn ended meanwhile and writes them in
    one transaction (`Store.add_chats`): a burst of a thousand ended streams costs
    a few transactions, not four per turn, each a round trip through SQLAlchemy
    (which cost several times the CPU of streaming the answer, and ran on after
    the answers, slowing the next ones' first tokens). No timer: turns ending while
    a write is under way simply form the next batch.
    """

    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self._queue: list[NewChat] = []
        self._writer: asyncio.Task[None] | None = None

    def record(
        self,
        user_id: str,
        route: str,
        messages: Sequence[Message],
        turn_id: str,
        result: RunResult,
    ) -> None:
        """Save one ended turn (as `turn_id`, the request id) under a new `api_…` chat."""
        kept = [k for k in (_kept(m) for m in messages) if k is not None]
        chat = NewChat(
            id=new_id(API_CHAT_PREFIX.rstrip("_")),
            user_id=user_id,
            title=_title(kept),
            model=route,
            tags=["api"],
            messages=kept,
            turn_id=turn_id,
            turn=result.saved(route),
        )
        self._queue.append(chat)
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write_all())

    async def drain(self) -> None:
        """Wait for the writes in flight (shutdown, tests)."""
        while self._writer is not None:
            await asyncio.gather(self._writer, return_exceptions=True)

    async def _write_all(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
                await self._write(batch)
                try:
                    await self._prune()
                except Exception:
                    log.exception("could not prune the request log")
        finally:
            self._writer = None

    async def _write(self, batch: list[NewChat]) -> None:
        """The batch in one transaction; if that fails, each turn alone, so one bad turn
        (its user deleted meanwhile, say) costs only itself."""
        try:
            await self.store.add_chats(batch)
            return
        except Exception:
            if len(batch) == 1:
                log.exception("could not save /v1 turn %s in the request log", batch[0].turn_id)
                return
        for chat in batch:
            try:
                await self.store.add_chats([chat])
            except Exception:
                log.exception("could not save /v1 turn %s in the request log", chat.turn_id)

    async def _prune(self) -> None:
        days, keep = self.settings.api_turns_max_age_days, self.settings.api_turns_max_count
        if days is None and keep is None:
            return
        before = utc_now() - timedelta(days=days) if days is not None else None
        gone = await self.store.prune_chats(id_prefix=API_CHAT_PREFIX, older_than=before, keep=keep)
        if gone:
            log.info("request log: %d old /v1 turns deleted", gone)


def _kept(message: Mapping[str, Any]) -> Message | None:
    """The message as the store keeps it: text and parts of user, system and assistant
    messages (an earlier exchange's tool results are not kept; this turn's are, in its output)."""
    role = _ROLES.get(str(message.get("role")))
    content = message.get("content")
    if role is None or (role == "assistant" and not content):
        return None
    if not isinstance(content, str | list):
        content = "" if content is None else str(content)
    return {"role": role, "content": content}


def _title(messages: Sequence[Message]) -> str:
    for message in messages:
        if message["role"] == "user":
            content = message["content"]
            text = content if isinstance(content, str) else _parts_text(content)
            text = " ".join(text.split())
            return text[:TITLE_CHARS] + ("…" if len(text) > TITLE_CHARS else "")
    return "API request"


def _parts_text(parts: list[Any]) -> str:
    return " ".join(
        str(p.get("text", "")) for p in parts if isinstance(p, Mapping) and p.get("type") == "text"
    )


def cut_result(final: Mapping[str, Any]) -> RunResult:
    """A cancelled turn's result, from the data of its final `chat:completion` event (a
    cancel leaves `Relay.run` as an exception, not a result). The event has no timings,
    and its output has base64 data cut out, as the live events carry it."""
    error = final.get("error")
    return RunResult(
        output=list(final.get("output") or []),
        text=str(final.get("content") or ""),
        usage=dict(final.get("usage") or {}),
        status=TurnStatus(final.get("status", TurnStatus.CANCELLED)),
        error=error.get("content") if isinstance(error, Mapping) else None,
        finish_reason=final.get("finish_reason"),
    )
