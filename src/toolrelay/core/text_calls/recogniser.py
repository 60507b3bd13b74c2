"""Tool calls written as text, while the content streams: what to hold back (issue 14).

`TextCallRecogniser` takes content chunks and gives back at once the text
that cannot be part of a call (`core.text_calls.parse` says what a call is);
at the end it decides on what it held with `parse_text_calls`. Invariants
(the tests check each):

1. `feed` releases text the moment it is known to be text. Content that could
   still become a call is held; plain text is released at its first
   character that no form of call can start with (`Hello` at `H`, `fine` at `i`).
2. The streaming check is only ever a necessary condition: a prefix of content
   that `parse_text_calls` accepts is never released. So the final decision,
   made on the whole content in `finish`, does not depend on how it was cut.
3. Nothing is lost: released text plus what `finish` returns (text, or calls
   made from it) is exactly the content.
4. Held text is kept as its pieces and joined once: holding costs the same
   per chunk however much is held.
5. With `made_up=True`, a call to any name is held like a call to an offered
   tool; content that is wholly calls, one or more of them to a tool not offered,
   is kept in `invented` instead of being returned by `finish` (nothing is lost:
   the caller decides what to do with it, `engine.tool_select` rule 8).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence

from toolrelay.core.text_calls.parse import (
    ANY_NAME,
    CALL_KEYS,
    DIGITS,
    FENCE,
    FENCE_LANGS,
    FUNCTIONS,
    LANG_CHARS,
    MAX_CALL_CHARS,
    NAME_CHARS,
    TAG_CLOSE,
    TAG_OPEN,
    WS,
    AnyName,
    TextCall,
    parse_text_calls,
)

__all__ = ["TextCallRecogniser"]

_STRING_BODY = re.compile(r'[^"\\]*')

_Step = Callable[[str], bool]
_HOLD, _TEXT = -1, -2
"""What the streaming check says about the held text (else: where a reasoning block opened)."""


class TextCallRecogniser:
    """Feed content chunks; text comes back as soon as it is text (module doc).

    `feed(text)` returns the text to release now; `finish()` returns what was
    held, as text or as the calls it makes; `give_up()` releases what was held
    as text. After either, the recogniser only passes text through.
    """

    __slots__ = (
        "_ctx",
        "_json",
        "_lit",
        "_lit_at",
        "_made_up",
        "_name",
        "_names",
        "_openers",
        "_parts",
        "_size",
        "_started",
        "_step",
        "_tail",
        "_think_end",
        "_tools",
        "invented",
        "passing",
    )

    def __init__(
        self,
        tools: Collection[str],
        *,
        reasoning: Sequence[tuple[str, str]] = (),
        made_up: bool = False,
    ) -> None:
        self._tools = frozenset(tools)
        self._made_up = made_up and bool(self._tools)
        self._names: frozenset[str] | AnyName = ANY_NAME if self._made_up else self._tools
        """The names the streaming check lets a call have (invariant 5)."""
        self.invented = ""
        """After `finish`: the content, when it was wholly calls, some to tools not offered."""
        self._openers = dict(reasoning)
        """Leading reasoning blocks passed through: opening tag -> closing tag."""
        self.passing = not self._tools
        """True once the rest of the content is known to be text."""
        self._parts: list[str] = []
        """The held text, as it came (joined once, when it is decided: no quadratic copying)."""
        self._size = 0
        self._think_end: str | None = None
        """Inside a leading reasoning block: its closing tag."""
        self._tail = ""
        """Inside that block: the end of the text, when it may start the closing tag."""
        self._json = _JsonCheck(self._names)
        self._restart()

    def _restart(self) -> None:
        """The streaming check from the start of the (rest of the) content."""
        self._started = False
        """Something other than whitespace was checked (a reasoning block may no longer open)."""
        self._ctx = ""
        """The wrapper the check is in: "", or the closing fence or tag it waits for."""
        self._step: _Step = self._between
        self._lit: tuple[str, ...] = ()
        self._lit_at = 0
        self._name = ""

    @property
    def holding(self) -> bool:
        """Something other than whitespace is held back."""
        return self._started and bool(self._parts)

    # -- the three calls -----------------------------------------------------
    def feed(self, text: str) -> str:
        if self.passing:
            return text
        if self._think_end is not None:
            return self._in_think(text)
        self._parts.append(text)
        self._size += len(text)
        if self._size > MAX_CALL_CHARS:
            return self.give_up()
        at = self._check(text)
        if at == _HOLD:
            return ""
        if at == _TEXT:
            return self.give_up()
        held = self._take()  # a reasoning block opened: pass it through
        cut = len(held) - len(text) + at
        self._restart()
        return held[:cut] + self._in_think(held[cut:])

    def finish(self) -> tuple[str, list[TextCall]]:
        """End of content: the held text, or the calls it makes (then the text is "")."""
        held = self._take()
        calls = None if self.passing else parse_text_calls(held, self._tools)
        if (
            calls is None
            and self._made_up
            and not self.passing
            and parse_text_calls(held, ANY_NAME)
        ):
            self.give_up()
            self.invented = held  # invariant 5
            return "", []
        held += self.give_up()  # the end of a reasoning block left open
        return ("", calls) if calls else (held, [])

    def give_up(self) -> str:
        """Stop looking; what was held is text."""
        held = self._take() + self._tail
        self._tail = ""
        self.passing = True
        self._think_end = None
        return held

    def _take(self) -> str:
        held = "".join(self._parts)
        self._parts, self._size = [], 0
        return held

    # -- a leading reasoning block ---------------------------------------------
    def _in_think(self, text: str) -> str:
        """Pass the block through; look again after its closing tag."""
        end = self._think_end
        assert end is not None
        seen = self._tail + text
        at = seen.find(end)
        if at < 0:
            keep = _partial_suffix(seen, end)
            self._tail = seen[len(seen) - keep :]
            return seen[: len(seen) - keep]
        cut = at + len(end)
        self._tail, self._think_end = "", None
        return seen[:cut] + self.feed(seen[cut:])

    # -- the streaming check (a necessary condition, module doc) ----------------
    def _check(self, text: str) -> int:
        """Check the new text: `_HOLD`, `_TEXT`, or where in it a reasoning block opened."""
        json_check = self._json
        i, n = 0, len(text)
        while i < n:
            if json_check.in_plain_string:  # most of a long call: skip to its next quote
                i = json_check.skip(text, i)
                if i == n:
                    break
            if not self._step(text[i]):
                return _TEXT
            i += 1
            if self._think_end is not None:
                return i
        return _HOLD

    def _between(self, ch: str) -> bool:
        """Between blocks: whitespace, or the first character of a block."""
        if ch in WS:
            return True
        first, self._started = not self._started, True
        if ch in "{[":
            self._json.start(ch, functions=False)
            self._step = self._in_json
            return True
        if self._ctx:
            candidates: list[str] = [self._ctx]
        else:
            candidates = [FENCE, TAG_OPEN, FUNCTIONS]
            if first:  # nothing before: it may think first
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
        if literal == FENCE and not self._ctx:
            self._step = self._lang
        elif literal == TAG_OPEN:
            self._ctx, self._step = TAG_CLOSE, self._between
        elif literal == FUNCTIONS:
            self._step = self._fname
        elif literal in (FENCE, TAG_CLOSE):  # a wrapper closes
            self._ctx, self._step = "", self._between
        else:
            self._think_end = self._openers[literal]
        return True

    def _lang(self, ch: str) -> bool:
        """The fence's info string, then the fenced calls."""
        if ch in LANG_CHARS and len(self._name) < 16:
            self._name += ch
            return True
        if self._name.lower() not in FENCE_LANGS:
            return False
        self._ctx, self._step = FENCE, self._between
        return self._between(ch)

    def _fname(self, ch: str) -> bool:
        """`functions.` NAME `:`."""
        if ch in NAME_CHARS:
            self._name += ch
            name = self._name
            return _could_start(self._names, name)
        if ch != ":" or self._name not in self._names:
            return False
        self._name, self._step = "", self._findex
        return True

    def _findex(self, ch: str) -> bool:
        """An optional index after `functions.NAME:`, whitespace, then `{`."""
        if ch in DIGITS and not self._name:
            return True
        if ch in WS:
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


def _could_start(names: frozenset[str] | AnyName, prefix: str) -> bool:
    """Some name in `names` starts with `prefix`."""
    if isinstance(names, AnyName):
        return names.could_start(prefix)
    return any(t.startswith(prefix) for t in names)


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

    def __init__(self, tools: frozenset[str] | AnyName) -> None:
        self._tools = tools
        self._stack: list[str] = []
        self._call_depth = 0
        self._str = self._esc = False
        self._expect_key = False
        self._key: str | None = None
        self._collect: str | None = None
        self._buf = ""
        self.closed = False

    @property
    def in_plain_string(self) -> bool:
        """Inside a string whose characters need no look (not a key, not a name)."""
        return self._str and not self._esc and self._collect is None

    def skip(self, text: str, i: int) -> int:
        """The index of the next quote or backslash in `text` from `i` (or its end)."""
        found = _STRING_BODY.match(text, i)
        return found.end() if found else i

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
        if ch in WS:
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
                return _could_start(self._tools, buf)
            return len(self._buf) <= 10  # the longest call key, "parameters"
        self._str = False
        collected, self._collect = self._collect, None
        if collected == "key":
            self._key = self._buf
            return self._buf in CALL_KEYS
        if collected == "name":
            self._key = None
            return self._buf in self._tools
        return True
