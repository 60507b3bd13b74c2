"""The `Store` API and its record types: what persistence hands the server.

Declarations only (no SQLAlchemy, no logic): the backends (`sql`, `memory`)
implement `Store`; the helpers they share are in `keys` and `records`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from toolrelay.adapters.stores.listing import ChatCursor
from toolrelay.engine.interfaces import ChatStore
from toolrelay.errors import ToolrelayError

__all__ = [
    "ApiKey",
    "Chat",
    "NewChat",
    "NotFoundError",
    "Spend",
    "Store",
    "StoredMessage",
    "TurnFields",
    "TurnRun",
    "User",
]


@dataclass(frozen=True, slots=True)
class Spend:
    """Tokens and cost of some turns (a user's or a key's, on one UTC day)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    turns: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class NotFoundError(ToolrelayError, LookupError):
    """A write names a user, chat or message that does not exist (or is not in that chat)."""


@dataclass(frozen=True, slots=True)
class User:
    id: str
    name: str
    is_admin: bool
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ApiKey:
    id: str
    user_id: str
    name: str
    prefix: str
    """The key's fixed `tr-` marker (no character of its secret; `keys.public_prefix`)."""
    created_at: datetime
    revoked_at: datetime | None
    tail: str = ""
    """The key's last 4 characters (`keys.key_tail`): `tr-…a1B2` tells keys apart."""


@dataclass(frozen=True, slots=True)
class Chat:
    id: str
    user_id: str
    title: str | None
    tags: list[str]
    model: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: str
    chat_id: str
    role: str
    content: Any
    """A string, or a list of content parts for multimodal user messages."""
    output: list[dict[str, Any]]
    usage: dict[str, Any] | None
    status: str | None
    error: Any
    timings: dict[str, Any] | None
    model: str | None
    follow_ups: list[str]
    created_at: datetime
    updated_at: datetime
    parent_id: str | None = None
    """The message before it in its branch; None for a chat's first (`stores.tree`)."""
    siblings: tuple[str, ...] = ()
    """With siblings (other answers to the same question, other edits of it): all of
    them, itself included, oldest first; empty when it has none."""


@dataclass(frozen=True, slots=True)
class TurnFields:
    """An assistant turn checked and copied into plain JSON values before any write."""

    output: list[dict[str, Any]]
    content: str
    usage: dict[str, Any] | None
    status: str
    error: Any
    timings: dict[str, Any] | None
    model: str | None
    follow_ups: list[str]
    whole_outputs: dict[str, str] = field(default_factory=dict)
    """Tool results cut for the model, whole, by output item id: stored once, apart from
    the turn (`get_tool_output`), so loading history never reads them."""

    def columns(self, *, checkpoint: bool = False) -> dict[str, Any]:
        """The message columns a write sets, by name; a checkpoint leaves `model` and
        `follow_ups` to the final save."""
        columns = {
            "content": self.content,
            "output": self.output,
            "usage": self.usage,
            "status": self.status,
            "error": self.error,
            "timings": self.timings,
        }
        if not checkpoint:
            columns["model"] = self.model
            columns["follow_ups"] = self.follow_ups
        return columns


@dataclass(frozen=True, slots=True)
class TurnRun:
    """A turn that has not ended (`turn_runs`): how to rebuild it and where it stood."""

    message_id: str
    chat_id: str
    owner: str
    """Who runs it: `host:port:slot` of a server (a restart knows its own)."""
    status: str
    """`running`, or `paused` (waiting for an answer, run by nobody)."""
    resumes: int
    """How many times it was taken over after its runner stopped."""
    request: dict[str, Any]
    """What rebuilds the turn: route, user, features, history, client tools."""
    state: dict[str, Any] | None
    """The last checkpoint (`engine.checkpoint.TurnState.to_json`); None before the first."""
    updated_at: datetime
    lease_until: datetime | None = None
    """Until when its owner holds it (a library process, `engine.durable_runs`); None: no
    lease in the store (a server's run: its lease is on the bus)."""


@dataclass(frozen=True, slots=True)
class NewChat:
    """A whole chat written at once (the `/v1` request log): its messages, then one turn."""

    id: str
    user_id: str
    title: str | None
    model: str | None
    tags: list[str]
    messages: Sequence[Mapping[str, Any]]
    """User, system and assistant messages, as `add_message` takes them."""
    turn_id: str
    turn: Mapping[str, Any]
    """The assistant turn, as `save_turn` takes it."""


class Store(ChatStore, Protocol):
    """What the server needs from persistence; the engine only uses the `ChatStore` part."""

    async def close(self) -> None: ...

    async def ping(self) -> None:
        """Raise when the database cannot be reached (`/readyz`)."""
        ...

    async def create_user(self, name: str, *, is_admin: bool = False) -> User: ...

    async def user_named(self, name: str) -> User | None: ...

    async def create_api_key(self, user_id: str, *, name: str = "") -> tuple[ApiKey, str]: ...

    async def create_api_key_with_value(
        self, user_id: str, key: str, *, name: str = ""
    ) -> ApiKey: ...

    async def user_for_key(self, key: str) -> User | None: ...

    async def user_for_key_id(self, key_id: str) -> User | None:
        """The owner of the key with this id while it is active (browser sessions name keys)."""
        ...

    async def find_api_key(self, key: str) -> ApiKey | None:
        """The record of this key, revoked or not (start-up checks the configured admin key)."""
        ...

    async def list_api_keys(self, user_id: str | None = None) -> list[ApiKey]: ...

    async def revoke_api_key(self, key_id: str) -> bool: ...

    async def user_for_session(self, key_id: str, session_id: str) -> User | None:
        """The owner of an active key, for a browser session not signed out (one query)."""
        ...

    async def revoke_session(self, session_id: str, expires: datetime) -> None:
        """Refuse this session from now on (sign-out); `expires` is when it would have ended
        anyway, after which its row may go."""
        ...

    async def get_user_valves(self, user_id: str, tool_id: str) -> dict[str, Any] | None:
        """A user's own `UserValves` values for a tool file, or None when never set."""
        ...

    async def set_user_valves(self, user_id: str, tool_id: str, values: Mapping[str, Any]) -> None:
        """Store (replace) them; the caller has checked them against the file."""
        ...

    async def count_users(self) -> int: ...

    async def list_users(self) -> list[User]:
        """Every user, oldest first (`toolrelay keys list` names each key's user)."""
        ...

    async def create_chat(
        self,
        user_id: str,
        *,
        title: str | None = None,
        model: str | None = None,
        chat_id: str | None = None,
    ) -> Chat: ...

    async def get_chat(self, chat_id: str, *, user_id: str) -> Chat | None: ...

    async def list_chats(
        self,
        user_id: str,
        *,
        limit: int = 50,
        offset: int = 0,
        query: str | None = None,
        id_prefix: str | None = None,
        exclude_prefix: bool = False,
        after: ChatCursor | None = None,
        count: bool = True,
    ) -> tuple[list[Chat], int]:
        """A page of the user's chats, newest first, and how many match. `query`: the title
        or a message has a word starting with each of its words (`stores.listing`);
        `id_prefix`: the chat id starts with it (with `exclude_prefix`: does not);
        `after`: the chats after that cursor (`ChatCursor.after(last chat of a page)`);
        `count=False`: the total is not counted (-1)."""
        ...

    async def prune_chats(
        self, *, id_prefix: str, older_than: datetime | None = None, keep: int | None = None
    ) -> int:
        """Delete chats whose id starts with `id_prefix` (every user's) created before
        `older_than`, and all but the newest `keep` of them; returns how many went."""
        ...

    async def delete_chat(self, chat_id: str, *, user_id: str) -> bool: ...

    async def update_chat(
        self, chat_id: str, *, title: str | None = None, tags: list[str] | None = None
    ) -> None: ...

    async def add_spend(self, subjects: list[tuple[str, str]], day: str, spend: Spend) -> None:
        """Add one turn's spend to each `(scope, subject)` (`user`/user id, `key`/key
        hash) for the UTC `day` (`YYYY-MM-DD`)."""
        ...

    async def spend_of(self, scope: str, subject: str, day: str) -> Spend:
        """What `(scope, subject)` spent on `day` (zeros when nothing)."""
        ...

    async def title_if_untitled(self, chat_id: str, title: str) -> bool:
        """Set a made title (`engine.tasks`) only while the chat has none: a user's title,
        given at creation or by a rename, is never overwritten. True when it was set."""
        ...

    async def add_message(self, chat_id: str, message: Mapping[str, Any]) -> str: ...

    async def add_chats(self, chats: Sequence[NewChat]) -> None:
        """Write new whole chats in one transaction: all of them, or (on any error) none.
        What `create_chat`, `update_chat`, `add_message` and `save_turn` would write, one
        transaction per batch instead of several per chat."""
        ...

    async def add_branch(
        self,
        chat_id: str,
        message: Mapping[str, Any],
        *,
        parent_id: str | None,
        message_id: str | None = None,
    ) -> str:
        """Add a message beside the children `parent_id` already has (None: beside the
        chat's first message) and make it the chat's current branch's end: a regenerated
        answer (role assistant, then `save_turn`) or an edited question. `NotFoundError`
        when the parent is not in the chat. Returns the message's id."""
        ...

    async def switch_branch(self, chat_id: str, message_id: str) -> str | None:
        """Make the branch through `message_id` current, down to its newest leaf (that
        leaf's id), or None when the chat has no such message."""
        ...

    async def get_messages(
        self, chat_id: str, *, before: str | None = None, limit: int | None = None
    ) -> list[StoredMessage]:
        """The messages of the chat's current branch (`stores.tree`), oldest first; `limit`: only the last so many (before the
        message whose id is `before`, when given: an unknown id gives none). A long chat
        is read a page at a time this way."""
        ...

    async def get_tool_output(self, chat_id: str, item_id: str) -> str | None:
        """The whole text of a tool result that was cut for the model (its output item's
        id), or None when the chat has no such result."""
        ...

    async def checkpoint_turn(self, chat_id: str, message_id: str, turn: Mapping[str, Any]) -> bool:
        """Overwrite an assistant turn only while it is still `in_progress`; True if it was."""
        ...

    async def in_progress_turns(self, *, chat_id: str | None = None) -> list[StoredMessage]:
        """Assistant turns still `in_progress` (all chats, or one), oldest first."""
        ...

    async def start_run(
        self,
        chat_id: str,
        message_id: str,
        *,
        owner: str,
        request: Mapping[str, Any],
        lease: float | None = None,
    ) -> bool:
        """Record a turn that starts (status `running`, no state yet). With `lease`
        (seconds), `owner` holds it that long (`renew_run`), and it is not recorded
        (False) while another owner holds a live lease on a run of the chat."""
        ...

    async def save_run_state(self, message_id: str, state: Mapping[str, Any]) -> bool:
        """The turn's latest checkpoint; False when its run is gone (ended, chat deleted)."""
        ...

    async def claim_run(
        self, message_id: str, *, owner: str, resumed: bool = True, lease: float | None = None
    ) -> TurnRun | None:
        """Take a run over (its owner now `owner`, status `running`, `resumes` one more
        unless `resumed` is False: a paused turn answered); None if it is gone. The
        caller holds the chat's lease; or, with `lease` (seconds), the run's own lease is
        taken in the same write, only if it is paused, free (none, or run out) or
        `owner`'s already (else None too)."""
        ...

    async def renew_run(self, message_id: str, *, owner: str, lease: float) -> bool:
        """Hold `owner`'s lease on the run `lease` seconds more; False when it is not
        theirs any more (ended, paused, or taken over once it ran out)."""
        ...

    async def pause_run(self, message_id: str) -> bool:
        """Mark a run `paused` (it waits for an answer, run by nobody: its lease let go);
        False if gone."""
        ...

    async def end_run(self, message_id: str) -> None:
        """Forget a run (its turn was saved for good); nothing if there is none."""
        ...

    async def list_runs(
        self, *, chat_id: str | None = None, owner: str | None = None
    ) -> list[TurnRun]:
        """Runs not ended (all, one chat's, or one owner's), oldest first."""
        ...
