"""Streaming splitter for inline tags in plain content text (SPEC R5, reference §4).

Models without native reasoning or code fields write `<think>…</think>`,
`<|begin_of_solution|>…<|end_of_solution|>` or `<code_interpreter …>…
</code_interpreter>` into their content. `TagSplitter` turns that text, fed in
arbitrary chunks, into `Open` / `Chunk` / `Close` segments that the
accumulator maps onto output items. It owns only the splitting: no clock (the
accumulator times reasoning blocks), no I/O, no item building.

Invariants (the tests check each):

1. Text is released as soon as it cannot be part of a tag. Only a possible
   opening-tag prefix (at most `MAX_HELD` characters) is held outside a
   block; inside one, only trailing whitespace plus a possible closing-tag
   prefix is held.
2. Outside a block every enabled opening tag is looked for and the earliest
   position wins; at one position the first tag in config order that is not
   ruled out decides (so an earlier tag that might still match is waited for).
3. Inside a block only that block's closing tag is looked for: no nesting.
4. Whitespace is dropped right after an opening tag, right before a closing
   tag (and at the end of a block left open at `flush`) and right after a
   closing tag. Nothing else is ever dropped.
5. The segments, with consecutive Chunks of one kind merged, do not depend on
   how the input was chunked.

Opening tags of the form `<name>` may carry attributes (`<think foo="x">`):
`<name`, then a space or tab, then anything but `<`, `>` or a line break up
to `>`. Closing tags, and every other opening tag, are literal.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

SegmentKind = Literal["text", "reasoning", "solution", "code_interpreter"]

DEFAULT_REASONING_TAGS: tuple[tuple[str, str], ...] = (
    ("<think>", "</think>"),
    ("<thinking>", "</thinking>"),
    ("<reason>", "</reason>"),
    ("<reasoning>", "</reasoning>"),
    ("<thought>", "</thought>"),
    ("<Thought>", "</Thought>"),
    ("<|begin_of_thought|>", "<|end_of_thought|>"),
    ("◁think▷", "◁/think▷"),
)
SOLUTION_TAGS: tuple[str, str] = ("<|begin_of_solution|>", "<|end_of_solution|>")
CODE_INTERPRETER_TAGS: tuple[str, str] = ("<code_interpreter>", "</code_interpreter>")
MAX_HELD = 256
"""Longest opening tag, attributes included, that is waited for before giving up."""

_NAMED_TAG = re.compile(r"<([A-Za-z_][\w-]*)>")
_ATTR_REGION = re.compile(r"[^<>\r\n]*")
_ATTR_PAIR = re.compile(r'(\w+)="([^"]+)"')


@dataclass(frozen=True, slots=True)
class Open:
    """A block starts; `tag` is the configured opening tag (without attributes)."""

    kind: SegmentKind
    attributes: dict[str, str]
    tag: str


@dataclass(frozen=True, slots=True)
class Chunk:
    """Text inside the current block (`kind == "text"`: outside any block)."""

    kind: SegmentKind
    text: str


@dataclass(frozen=True, slots=True)
class Close:
    """The block ended (its closing tag, or the end of the stream)."""

    kind: SegmentKind


Segment = Open | Chunk | Close


@dataclass(frozen=True, slots=True)
class TagPair:
    """One enabled opening/closing pair and the block kind it produces."""

    start: str
    end: str
    kind: SegmentKind


@dataclass(frozen=True, slots=True)
class TagConfig:
    """Which tag families are detected; `reasoning=()` disables reasoning and solution."""

    reasoning: tuple[tuple[str, str], ...] = DEFAULT_REASONING_TAGS
    solution: bool = True
    code_interpreter: bool = False

    @classmethod
    def from_param(cls, value: object, *, code_interpreter: bool = False) -> TagConfig:
        """Read Open WebUI's `reasoning_tags` param: False, a `[start, end]` pair, or defaults."""
        if value is False:
            return cls(reasoning=(), code_interpreter=code_interpreter)
        if isinstance(value, list | tuple) and len(value) == 2:
            start, end = value
            if isinstance(start, str) and isinstance(end, str) and start and end:
                return cls(reasoning=((start, end),), code_interpreter=code_interpreter)
        return cls(code_interpreter=code_interpreter)

    def pairs(self) -> tuple[TagPair, ...]:
        """The enabled pairs in matching order: reasoning, solution, code interpreter."""
        found = [TagPair(start, end, "reasoning") for start, end in self.reasoning]
        if self.reasoning and self.solution:
            found.append(TagPair(*SOLUTION_TAGS, "solution"))
        if self.code_interpreter:
            found.append(TagPair(*CODE_INTERPRETER_TAGS, "code_interpreter"))
        return tuple(found)


@dataclass(frozen=True, slots=True)
class _Tag:
    pair: TagPair
    head: str | None
    """`<name` when the opening tag may carry attributes, else None (literal match)."""


@dataclass(frozen=True, slots=True)
class _Hit:
    tag: _Tag
    end: int
    attributes: dict[str, str]


_Status = Literal["no", "maybe"]


def _compile(pair: TagPair) -> _Tag:
    named = _NAMED_TAG.fullmatch(pair.start)
    return _Tag(pair, pair.start[:-1] if named else None)


def _prefix_status(buf: str, p: int, literal: str, final: bool) -> _Status:
    """`buf[p:]` does not start with `literal`: could more text still make it?"""
    seg = buf[p : p + len(literal)]
    if not final and len(seg) < len(literal) and literal.startswith(seg):
        return "maybe"
    return "no"


def _match_tag(tag: _Tag, buf: str, p: int, final: bool) -> _Hit | _Status:
    """Does an opening tag start at `buf[p]`? `final`: no more text will come."""
    head = tag.head
    if head is None:
        if buf.startswith(tag.pair.start, p):
            return _Hit(tag, p + len(tag.pair.start), {})
        return _prefix_status(buf, p, tag.pair.start, final)
    if not buf.startswith(head, p):
        return _prefix_status(buf, p, head, final)
    q = p + len(head)
    if q == len(buf):
        return "no" if final else "maybe"
    if buf[q] == ">":
        return _Hit(tag, q + 1, {})
    if buf[q] not in " \t":
        return "no"
    limit = min(len(buf), p + MAX_HELD)
    region = _ATTR_REGION.match(buf, q, limit)
    r = region.end() if region else q
    if r < limit:
        if buf[r] != ">":
            return "no"
        return _Hit(tag, r + 1, dict(_ATTR_PAIR.findall(buf, q, r)))
    if final or limit == p + MAX_HELD:
        return "no"
    return "maybe"


def _partial_suffix(buf: str, end: str) -> int:
    """Length of the longest proper prefix of `end` that `buf` ends with."""
    i = buf.find(end[0], max(0, len(buf) - len(end) + 1))
    while i >= 0:
        if end.startswith(buf[i:]):
            return len(buf) - i
        i = buf.find(end[0], i + 1)
    return 0


@functools.lru_cache(maxsize=64)
def _tables(
    config: TagConfig,
) -> tuple[dict[str, tuple[_Tag, ...]], tuple[str, ...], re.Pattern[str]]:
    """Per-config lookup tables, built once: a splitter is made per model response."""
    by_first: dict[str, list[_Tag]] = {}
    for pair in config.pairs():
        by_first.setdefault(pair.start[0], []).append(_compile(pair))
    tables = {first: tuple(tags) for first, tags in by_first.items()}
    triggers = tuple(tables)
    chars = "".join(map(re.escape, triggers))
    return tables, triggers, re.compile(f"[{chars}]" if chars else "(?!)")


_NEVER: Callable[[str], bool] = ().__contains__
"""`TagSplitter.plain` while a block is open or text is held: always false."""


class TagSplitter:
    """Incremental splitter: `feed()` each content chunk, `flush()` at end of stream."""

    __slots__ = (
        "_block",
        "_by_first",
        "_held",
        "_marks",
        "_open_re",
        "_strip",
        "_triggers",
        "mark1",
        "mark2",
        "plain",
    )

    def __init__(self, config: TagConfig = TagConfig()) -> None:
        self._by_first, self._triggers, self._open_re = _tables(config)
        self._block: _Tag | None = None
        self._held = ""
        self._strip = False
        triggers = self._triggers
        self._marks = (triggers[0], triggers[-1]) if 0 < len(triggers) <= 2 else ("", "")
        self.plain: Callable[[str], bool] = frozenset(triggers).isdisjoint
        """`plain(text)` is true when `feed(text)` would be exactly `[Chunk("text", text)]`
        for a non-empty `text`: outside any block, nothing held and no character in
        `text` that can start a tag. A C call, for the accumulator's hot path; kept
        current by `feed` and `flush`, the only calls that change the splitter's state."""
        self.mark1, self.mark2 = self._marks
        """`plain(text)` holds for a non-empty `text` in which neither is (`mark1 not in
        text and mark2 not in text`, cheaper than the call): the triggers when there
        are one or two; "" (in every text) while not idle or with more triggers, when
        only `plain` can say."""

    @property
    def inside(self) -> SegmentKind:
        """The kind of block the next text belongs to ("text" outside any block)."""
        return "text" if self._block is None else self._block.pair.kind

    def passes(self, text: str) -> bool:
        """True when `feed(text)` would be exactly `[Chunk(self.inside, text)]` (the hot path)."""
        return not self._held and not self._strip and bool(text) and self._plain(text)

    def feed(self, text: str) -> list[Segment]:
        """Split one chunk; text that may still be part of a tag is held back."""
        if not self._held and not self._strip and self._plain(text):
            return [Chunk(self.inside, text)] if text else []
        held, self._held = self._held, ""
        out = self._run(held + text, final=False)
        self._rescan()
        return out

    def flush(self) -> list[Segment]:
        """End of stream: release what was held and close a block left open."""
        held, self._held = self._held, ""
        out = self._run(held, final=True)
        if self._block is not None:
            out.append(Close(self._block.pair.kind))
            self._block = None
        self._strip = False
        self._rescan()
        return out

    def _rescan(self) -> None:
        idle = self._block is None and not self._held and not self._strip
        self.plain = frozenset(self._triggers).isdisjoint if idle else _NEVER
        self.mark1, self.mark2 = self._marks if idle else ("", "")

    def _plain(self, text: str) -> bool:
        """Fast path: nothing in `text` can start a tag or needs holding back."""
        if self._block is None:
            for trigger in self._triggers:  # noqa: SIM110 - a plain loop beats all() per token
                if trigger in text:
                    return False
            return True
        end = self._block.pair.end
        return end[0] not in text and not text[-1:].isspace()

    def _run(self, buf: str, *, final: bool) -> list[Segment]:
        out: list[Segment] = []
        while buf:
            if self._strip:
                buf = buf.lstrip()
                if not buf:
                    break
                self._strip = False
            if self._block is None:
                buf = self._scan_text(buf, out, final)
            else:
                buf = self._scan_block(buf, out, final)
        return out

    def _scan_text(self, buf: str, out: list[Segment], final: bool) -> str:
        """Release text up to the first opening tag; return what follows that tag."""
        i = 0
        while (trigger := self._open_re.search(buf, i)) is not None:
            p = trigger.start()
            found = self._match_open(buf, p, final)
            if found == "no":
                i = p + 1
                continue
            if p:
                out.append(Chunk("text", buf[:p]))
            if not isinstance(found, _Hit):
                self._held = buf[p:]
                return ""
            pair = found.tag.pair
            out.append(Open(pair.kind, found.attributes, pair.start))
            self._block = found.tag
            self._strip = True
            return buf[found.end :]
        out.append(Chunk("text", buf))
        return ""

    def _match_open(self, buf: str, p: int, final: bool) -> _Hit | _Status:
        for tag in self._by_first[buf[p]]:
            found = _match_tag(tag, buf, p, final)
            if found != "no":
                return found
        return "no"

    def _scan_block(self, buf: str, out: list[Segment], final: bool) -> str:
        """Release block text up to its closing tag; return what follows that tag."""
        assert self._block is not None
        pair = self._block.pair
        p = buf.find(pair.end)
        if p >= 0:
            body = buf[:p].rstrip()
            if body:
                out.append(Chunk(pair.kind, body))
            out.append(Close(pair.kind))
            self._block = None
            self._strip = True
            return buf[p + len(pair.end) :]
        keep = 0 if final else _partial_suffix(buf, pair.end)
        body = buf[: len(buf) - keep].rstrip()
        if body:
            out.append(Chunk(pair.kind, body))
        if not final:
            self._held = buf[len(body) :]
        return ""
