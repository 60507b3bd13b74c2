"""The settled part of a chat's history, kept between turns so a turn reads only what is new.

Every turn sends the model the whole history, so reading and expanding every saved
message per turn grows with the chat (thousands of rows decoded and replayed into
Chat Completions messages). `SQLStore.load_messages` keeps, per chat, the history of
its *settled* prefix (every message up to the first one still `in_progress`) as orjson
bytes, with what identifies that prefix: its last `seq`, its row count and its newest
`updated_at`. The next load checks those three with one indexed aggregate, reads only
the rows after the prefix, and decodes the bytes: a fresh copy each time, so a caller
(an inlet filter, say) that changes the messages it got never changes the kept ones.

A prefix that changed (a message rewritten, deleted, or written late by another
process) fails the check and is read again in full; the store's own writes to a
chat drop its entry at once. Entries are evicted least recently used beyond
`max_bytes` in all.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime

__all__ = ["HistoryCache", "Kept"]


@dataclass(frozen=True, slots=True)
class Kept:
    """One chat's settled prefix: where it ends, how to recognise it, its history."""

    seq: int
    """The last settled message's `seq`."""
    count: int
    """Messages with `seq` ≤ `seq`."""
    stamp: datetime | None
    """Their newest `updated_at`."""
    history: bytes
    """orjson of their Chat Completions history (`records.history_of`)."""
    calls: dict[str, int]
    """Call ids met in them, with how often (`transcript.unique_call_ids` goes on from it)."""
    outputs: dict[str, int]
    """The same for call outputs."""


class HistoryCache:
    """Least recently used `Kept` entries by chat id, at most `max_bytes` of history."""

    def __init__(self, max_bytes: int = 32 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, Kept] = OrderedDict()
        self._bytes = 0

    def get(self, chat_id: str) -> Kept | None:
        kept = self._entries.get(chat_id)
        if kept is not None:
            self._entries.move_to_end(chat_id)
        return kept

    def put(self, chat_id: str, kept: Kept) -> None:
        self.drop(chat_id)
        if len(kept.history) > self.max_bytes:
            return
        self._entries[chat_id] = kept
        self._bytes += len(kept.history)
        while self._bytes > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= len(evicted.history)

    def drop(self, chat_id: str) -> None:
        kept = self._entries.pop(chat_id, None)
        if kept is not None:
            self._bytes -= len(kept.history)

    @property
    def size(self) -> int:
        """Bytes of history held."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)
