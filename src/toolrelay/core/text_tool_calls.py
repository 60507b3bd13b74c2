"""Tool calls a model wrote as text in its content, recognised (issue 14).

Small local models (Qwen2.5-Coder through llama.cpp, among others) are offered
tools but answer with the call written out as content instead of a native
`tool_calls` field. This module decides whether a response's whole content is
such a call, and which calls it makes. It owns only that decision: no items,
no events, no I/O (`core.text_call_accumulator` turns calls into the same
deltas a provider would send).

What counts (after leading whitespace; only whitespace between and after):

- a call object `{"name": X, "arguments": {...}}` — `"parameters"` instead of
  `"arguments"`, arguments as a JSON string holding an object, missing
  arguments (`{}`) and `"type": "function"` are accepted; no other key is;
- a JSON list of call objects, or several call objects one after the other;
- any of those inside a Markdown fence (```` ``` ````, ```` ```json ````,
  ```` ```tool_call ````) or between `<tool_call>` and `</tool_call>` tags
  (a closing fence or tag may be missing at the very end);
- `functions.X:{...}` (Kimi's form; an index such as `functions.X:0` may
  stand before the arguments object);
- X must be the name of a tool offered in this request.

Anything else is text: prose around JSON, JSON that is not a call, a call to
a tool nobody offered. A leading reasoning block (`<think>…</think>`, the
configured tags) is passed through and the rule applies to what follows.

Streaming invariants (the tests check each):

1. `feed` releases text the moment it is known to be text. Content that could
   still become a call is held; plain text is released at its first
   character that no form above can start with (`Hello` at `H`, `fine` at `i`).
2. The streaming check is only ever a necessary condition: a prefix of content
   that `parse_text_calls` accepts is never released. So the final decision,
   made by `parse_text_calls` on the whole content in `finish`, does not
   depend on how the content was cut.
3. Nothing is lost: released text plus what `finish` returns (text, or calls
   made from it) is exactly the content.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

__all__ = ["MAX_CALL_CHARS", "TextCall", "TextCallRecogniser", "parse_text_calls"]

MAX_CALL_CHARS = 256 * 1024
"""Longer content is text: holding it back any longer would stall a real answer."""

FENCE_LANGS = frozenset({"", "json", "tool_call", "tool_calls"})
"""Fence info strings (lower-cased) a call may be fenced with."""

_CALL_KEYS = frozenset({"name", "arguments", "parameters", "type"})
_FENCE = "```"
_TAG_OPEN, _TAG_CLOSE = "<tool_call>", "</tool_call>"
_FUNCTIONS = "functions."
_WS = frozenset(" \t\r\n")
_LANG_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_NAME_CHARS = _LANG_CHARS | frozenset("0123456789-.")
_DIGITS = frozenset("0123456789")


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)


@dataclass(frozen=True, slots=True)
class TextCall:
    """One call recognised in text; `arguments` is a JSON object as compact text."""

    name: str
    arguments: str


# ------------------------------------------------------------------ the decision


def parse_text_calls(text: str, tools: Collection[str]) -> list[TextCall] | None:
    """The calls `text` consists of (module doc), or None when it is text."""
    if len(text) > MAX_CALL_CHARS:
        return None
    calls: list[TextCall] = []
    i = _skip_ws(text, 0)
    if i == len(text):
        return None
    while i < len(text):
        i = _block(text, i, tools, calls)
        if i < 0:
            return None
        i = _skip_ws(text, i)
    return calls


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _block(text: str, i: int, tools: Collection[str], calls: list[TextCall]) -> int:
    """One block at `text[i]`; the index after it, or -1 when it is not a call block."""
    if text.startswith(_FENCE, i):
        j = i + len(_FENCE)
        k = j
        while k < len(text) and text[k] in _LANG_CHARS:
            k += 1
        if text[j:k].lower() not in FENCE_LANGS:
            return -1
        return _wrapped(text, k, _FENCE, tools, calls)
    if text.startswith(_TAG_OPEN, i):
        return _wrapped(text, i + len(_TAG_OPEN), _TAG_CLOSE, tools, calls)
    if text.startswith(_FUNCTIONS, i):
        return _function(text, i + len(_FUNCTIONS), tools, calls)
    return _values(text, i, tools, calls)


def _wrapped(text: str, i: int, closer: str, tools: Collection[str], calls: list[TextCall]) -> int:
    """Call values up to `closer` (or to the end of the text)."""
    i = _skip_ws(text, i)
    found = False
    while i < len(text) and not text.startswith(closer, i):
        i = _values(text, i, tools, calls)
        if i < 0:
            return -1
        found = True
        i = _skip_ws(text, i)
    if not found:
        return -1
    return i + len(closer) if i < len(text) else i


def _values(text: str, i: int, tools: Collection[str], calls: list[TextCall]) -> int:
    """A call object or a non-empty list of them at `text[i]`."""
    if i >= len(text) or text[i] not in "{[":
        return -1
    try:
        value, end = _DECODER.raw_decode(text, i)
    except (ValueError, RecursionError):
        return -1
    found = value if isinstance(value, list) else [value]
    if not found:
        return -1
    for entry in found:
        call = _call(entry, tools)
        if call is None:
            return -1
        calls.append(call)
    return int(end)


def _call(value: object, tools: Collection[str]) -> TextCall | None:
    """A call object's name and arguments, when it is one to an offered tool."""
    if not isinstance(value, dict) or not value.keys() <= _CALL_KEYS:
        return None
    name = value.get("name")
    if not isinstance(name, str) or name not in tools:
        return None
    if value.get("type", "function") != "function":
        return None
    if "arguments" in value and "parameters" in value:
        return None
    arguments = _arguments(value.get("arguments", value.get("parameters", {})))
    return None if arguments is None else TextCall(name, arguments)


def _arguments(value: object) -> str | None:
    """Arguments as compact JSON text: an object, or a string holding one."""
    if isinstance(value, str):
        try:
            value = _DECODER.decode(value)
        except (ValueError, RecursionError):
            return None
    if not isinstance(value, dict):
        return None
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _function(text: str, i: int, tools: Collection[str], calls: list[TextCall]) -> int:
    """`functions.NAME:` [index] then an arguments object."""
    j = i
    while j < len(text) and text[j] in _NAME_CHARS:
        j += 1
    name = text[i:j]
    if name not in tools or not text.startswith(":", j):
        return -1
    j += 1
    while j < len(text) and text[j] in _DIGITS:
        j += 1
    j = _skip_ws(text, j)
    if not text.startswith("{", j):
        return -1
    try:
        value, end = _DECODER.raw_decode(text, j)
    except (ValueError, RecursionError):
        return -1
    arguments = _arguments(value)
    if arguments is None:
        return -1
    calls.append(TextCall(name, arguments))
    return int(end)


# ------------------------------------------------------------------ streaming

_Step = Callable[[str], bool]
_HOLD, _TEXT, _THINK = 0, 1, 2
"""What the streaming check says about the held text."""


class TextCallRecogniser:
    """Feed content chunks; text comes back as soon as it is text (module doc).

    `feed(text)` returns the text to release now; `finish()` returns what was
    held, as text or as the calls it makes; `give_up()` releases what was held
    as text. After either, the recogniser only passes text through.
    """

    __slots__ = (
        "_ctx",
        "_held",
        "_json",
        "_lit",
        "_lit_at",
        "_name",
        "_openers",
        "_pos",
        "_step",
        "_think_end",
        "_tools",
        "passing",
    )

    def __init__(
        self, tools: Collection[str], *, reasoning: Sequence[tuple[str, str]] = ()
    ) -> None:
        self._tools = frozenset(tools)
        self._openers = dict(reasoning)
        """Leading reasoning blocks passed through: opening tag -> closing tag."""
        self.passing = not self._tools
        """True once the rest of the content is known to be text."""
        self._held = ""
        self._think_end: str | None = None
        """Inside a leading reasoning block: its closing tag."""
        self._json = _JsonCheck(self._tools)
        self._restart()

    def _restart(self) -> None:
        """The streaming check from the start of the (rest of the) content."""
        self._pos = 0
        """How much of `_held` the streaming check has seen."""
        self._ctx = ""
        """The wrapper the check is in: "", or the closing fence or tag it waits for."""
        self._step: _Step = self._between
        self._lit: tuple[str, ...] = ()
        self._lit_at = 0
        self._name = ""

    @property
    def holding(self) -> bool:
        """Something other than whitespace is held back."""
        return bool(self._held.strip())

    # -- the three calls -----------------------------------------------------
    def feed(self, text: str) -> str:
        if self.passing:
            return text
        if self._think_end is not None:
            return self._in_think(text)
        self._held += text
        verdict = self._check()
        if verdict == _HOLD:
            return ""
        if verdict == _TEXT:
            return self.give_up()
        held, at = self._held, self._pos  # a reasoning block opened: pass it through
        self._held = ""
        self._restart()
        return held[:at] + self._in_think(held[at:])

    def finish(self) -> tuple[str, list[TextCall]]:
        """End of content: the held text, or the calls it makes (then the text is "")."""
        held = self._held
        calls = None if self.passing else parse_text_calls(held, self._tools)
        self.give_up()
        return ("", calls) if calls else (held, [])

    def give_up(self) -> str:
        """Stop looking; what was held is text."""
        held, self._held = self._held, ""
        self.passing = True
        self._think_end = None
        return held

    # -- a leading reasoning block ---------------------------------------------
    def _in_think(self, text: str) -> str:
        """Pass the block through; look again after its closing tag."""
        end = self._think_end
        assert end is not None
        seen = self._held + text  # `_held`: what may be the start of the closing tag
        at = seen.find(end)
        if at < 0:
            keep = _partial_suffix(seen, end)
            self._held = seen[len(seen) - keep :]
            return seen[: len(seen) - keep]
        cut = at + len(end)
        self._held, self._think_end = "", None
        return seen[:cut] + self.feed(seen[cut:])

    # -- the streaming check (a necessary condition, module doc) ----------------
    def _check(self) -> int:
        """Run the check over the held text not seen yet."""
        held = self._held
        if len(held) > MAX_CALL_CHARS:
            return _TEXT
        while self._pos < len(held):
            ch = held[self._pos]
            self._pos += 1
            if not self._step(ch):
                return _TEXT
            if self._think_end is not None:
                return _THINK
        return _HOLD

    def _between(self, ch: str) -> bool:
        """Between blocks: whitespace, or the first character of a block."""
        if ch in _WS:
            return True
        if ch in "{[":
            self._json.start(ch, functions=False)
            self._step = self._in_json
            return True
        if self._ctx:
            candidates: list[str] = [self._ctx]
        else:
            candidates = [_FENCE, _TAG_OPEN, _FUNCTIONS]
            if not self._held[: self._pos - 1].strip():  # nothing before: it may think first
                candidates += self._openers
        found = tuple(c for c in candidates if c[0] == ch)
        if not found:
            return False
        self._lit, self._lit_at, self._step = found, 1, self._literal
        return self._literal_done()

    def _literal(self, ch: str) -> bool:
        at = self._lit_at
        self._lit = tuple(c for c in self._lit if len(c) > at and c[at] == ch)
        if not self._lit:
            return False
        self._lit_at = at + 1
        return self._literal_done()

    def _literal_done(self) -> bool:
        """A literal is complete: go on to what follows it."""
        done = [c for c in self._lit if len(c) == self._lit_at]
        if not done:
            return True
        literal = done[0]
        self._name = ""
        if literal == _FENCE and not self._ctx:
            self._step = self._lang
        elif literal == _TAG_OPEN:
            self._ctx, self._step = _TAG_CLOSE, self._between
        elif literal == _FUNCTIONS:
            self._step = self._fname
        elif literal in (_FENCE, _TAG_CLOSE):  # a wrapper closes
            self._ctx, self._step = "", self._between
        else:
            self._think_end = self._openers[literal]
        return True

    def _lang(self, ch: str) -> bool:
        """The fence's info string, then the fenced calls."""
        if ch in _LANG_CHARS and len(self._name) < 16:
            self._name += ch
            return True
        if self._name.lower() not in FENCE_LANGS:
            return False
        self._ctx, self._step = _FENCE, self._between
        return self._between(ch)

    def _fname(self, ch: str) -> bool:
        """`functions.` NAME `:`."""
        if ch in _NAME_CHARS:
            self._name += ch
            name = self._name
            return any(t.startswith(name) for t in self._tools)
        if ch != ":" or self._name not in self._tools:
            return False
        self._name, self._step = "", self._findex
        return True

    def _findex(self, ch: str) -> bool:
        """An optional index after `functions.NAME:`, whitespace, then `{`."""
        if ch in _DIGITS and not self._name:
            return True
        if ch in _WS:
            self._name = " "  # no digit may follow whitespace
            return True
        if ch != "{":
            return False
        self._json.start(ch, functions=True)
        self._step = self._in_json
        return True

    def _in_json(self, ch: str) -> bool:
        ok = self._json.step(ch)
        if ok and self._json.closed:
            self._step = self._between
        return ok


def _partial_suffix(text: str, end: str) -> int:
    """Length of the longest proper prefix of `end` that `text` ends with."""
    for n in range(min(len(end) - 1, len(text)), 0, -1):
        if text.endswith(end[:n]):
            return n
    return 0


class _JsonCheck:
    """Brackets, strings and call-object keys of one JSON value, a character at a time.

    Not a validator: it rules out only what no call can be (a key outside the
    call keys, a name no offered tool starts with, a non-object in a call list).
    """

    __slots__ = (
        "_buf",
        "_call_depth",
        "_collect",
        "_esc",
        "_expect_key",
        "_key",
        "_stack",
        "_str",
        "_tools",
        "closed",
    )

    def __init__(self, tools: frozenset[str]) -> None:
        self._tools = tools
        self._stack: list[str] = []
        self._call_depth = 0
        self._str = self._esc = False
        self._expect_key = False
        self._key: str | None = None
        self._collect: str | None = None
        self._buf = ""
        self.closed = False

    def start(self, ch: str, *, functions: bool) -> None:
        """A value opens with `ch`; `functions`: it is arguments, not a call."""
        self._stack = [ch]
        self._call_depth = 0 if functions else (1 if ch == "{" else 2)
        self._str = self._esc = False
        self._expect_key = self._call_depth == 1
        self._key = self._collect = None
        self.closed = False

    def step(self, ch: str) -> bool:
        if self._str:
            return self._string(ch)
        if ch in _WS:
            return True
        depth = len(self._stack)
        if depth == 1 and self._call_depth == 2:  # in a call list: objects only
            if ch == "{":
                self._stack.append(ch)
                self._expect_key, self._key = True, None
                return True
            return ch == "," or (ch == "]" and self._close(ch))
        at_call = depth == self._call_depth
        if ch == '"':
            self._open_string(at_call)
            return True
        if at_call and self._expect_key:
            return ch == "}" and self._close(ch)
        if ch in "{[":
            self._stack.append(ch)
            return True
        if ch in "}]":
            return self._close(ch)
        if ch == "," and at_call:
            self._expect_key, self._key = True, None
        return True

    def _close(self, ch: str) -> bool:
        if self._stack.pop() != ("{" if ch == "}" else "["):
            return False
        self.closed = not self._stack
        return True

    def _open_string(self, at_call: bool) -> None:
        self._str = True
        self._collect = None
        if at_call and self._expect_key:
            self._collect, self._buf, self._expect_key = "key", "", False
        elif at_call and self._key == "name":
            self._collect, self._buf = "name", ""

    def _string(self, ch: str) -> bool:
        if self._esc:
            self._esc = False
            return True
        if ch == "\\":
            self._esc = True
            if self._collect == "key":
                self._key = None  # an escaped key is not checked here
            self._collect = None
            return True
        if ch != '"':
            if self._collect is None:
                return True
            self._buf += ch
            if self._collect == "name":
                buf = self._buf
                return any(t.startswith(buf) for t in self._tools)
            return len(self._buf) <= 10  # the longest call key, "parameters"
        self._str = False
        collected, self._collect = self._collect, None
        if collected == "key":
            self._key = self._buf
            return self._buf in _CALL_KEYS
        if collected == "name":
            self._key = None
            return self._buf in self._tools
        return True
