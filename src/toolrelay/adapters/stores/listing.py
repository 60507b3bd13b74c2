"""Listing and searching chats: the words a search matches, and the cursor of a page.

Search is by words, the same on every backend: a message's or title's text is folded
(lower case, accents dropped) and cut into words (runs of letters and digits);
a query is cut the same way, and a chat matches when one of its messages, or its
title, has a word starting with each of the query's words ("par" finds "Paris").
`search_text` makes the folded text a database indexes (SQLite FTS5, PostgreSQL
`tsvector`); `MemoryStore` matches it in Python. Only the first `INDEXED_CHARS`
characters of a message are indexed, and words longer than `LONGEST_WORD` (base64,
hashes) are left out: they would bloat the index and nobody types them.

A page of a chat list ends where the next one starts: `ChatCursor` is the last
chat's sort key (updated, created, id), handed to clients as an opaque string,
so a deep page costs what the first one does (no OFFSET to skip over).
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import orjson

__all__ = [
    "INDEXED_CHARS",
    "LONGEST_WORD",
    "ChatCursor",
    "fts5_query",
    "matches",
    "search_terms",
    "search_text",
    "tsquery",
]

INDEXED_CHARS: Final = 100_000
"""Characters of one message that search sees (the rest is stored, not indexed)."""
LONGEST_WORD: Final = 64
MAX_TERMS: Final = 16
_WORD = re.compile(r"[^\W_]+")


def _fold(text: str) -> str:
    """Lower case without accents: what both the index and the query are made of."""
    text = text.casefold()
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(_fold(text)) if len(w) <= LONGEST_WORD]


def _plain(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a part list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        return "\n".join(t for t in texts if isinstance(t, str))
    return ""


def search_text(content: Any) -> str:
    """The words of a message's content (or a title), folded, joined by spaces."""
    return " ".join(_words(_plain(content)[:INDEXED_CHARS]))


def search_terms(query: str) -> list[str]:
    """The words of a query, folded; each must start a word of the same message."""
    return list(dict.fromkeys(_words(query[:1000])))[:MAX_TERMS]


def fts5_query(terms: Sequence[str]) -> str:
    """An FTS5 MATCH expression: every term as a quoted prefix (terms are letters and
    digits only, so quoting cannot be escaped)."""
    return " ".join(f'"{t}"*' for t in terms)


def tsquery(terms: Sequence[str]) -> str:
    """A PostgreSQL `to_tsquery('simple', …)` text: every term as a prefix, all needed."""
    return " & ".join(f"{t}:*" for t in terms)


def matches(terms: Sequence[str], texts: Iterable[str]) -> bool:
    """True when one of `texts` (`search_text` outputs) has a word starting with each term."""
    for text in texts:
        words = text.split()
        if all(any(w.startswith(t) for w in words) for t in terms):
            return True
    return False


@dataclass(frozen=True, slots=True)
class ChatCursor:
    """Where a page of chats ended: the sort key of its last chat."""

    updated_at: datetime
    created_at: datetime
    id: str

    def encode(self) -> str:
        key = [self.updated_at.isoformat(), self.created_at.isoformat(), self.id]
        return base64.urlsafe_b64encode(orjson.dumps(key)).decode().rstrip("=")

    @classmethod
    def decode(cls, value: str) -> ChatCursor:
        """The cursor a page handed out; `ValueError` for anything else."""
        try:
            raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
            updated, created, chat_id = orjson.loads(raw)
            cursor = cls(datetime.fromisoformat(updated), datetime.fromisoformat(created), chat_id)
        except (binascii.Error, orjson.JSONDecodeError, TypeError, ValueError) as exc:
            raise ValueError(f"not a chat list cursor: {value[:40]!r}") from exc
        if cursor.updated_at.tzinfo is None or cursor.created_at.tzinfo is None:
            raise ValueError("not a chat list cursor: times without a zone")
        if not isinstance(cursor.id, str):
            raise ValueError("not a chat list cursor: the id is not a string")
        return cursor

    @classmethod
    def after(cls, chat: Any) -> ChatCursor:
        """The cursor of the page ending at `chat` (a `Chat` record)."""
        return cls(chat.updated_at, chat.created_at, chat.id)

    def key(self) -> tuple[datetime, datetime, str]:
        return (self.updated_at, self.created_at, self.id)
