"""Every recorded provider body through the whole core, checked exactly.

Each `tests/fixtures/streams/<provider>/<case>` has a `<case>.expected.json`
beside it: the `toolrelay replay --json` result with minted ids masked. Run
with `TOOLRELAY_REGEN=1` to rewrite them after a deliberate change, then read
the diff. Hypothesis cuts every body at arbitrary byte boundaries (inside
UTF-8 characters and tags too) and must get the same result.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.patience import fuzz_budget
from toolrelay.core.formats.chat_completions.parse import ChatCompletionsDecoder
from toolrelay.core.formats.content import detect_format
from toolrelay.core.stream.framing import SSEDecoder
from toolrelay.core.stream.reader import BodyReader

STREAMS = Path(__file__).parent.parent / "fixtures" / "streams"
BODIES = sorted(
    p
    for p in STREAMS.rglob("*")
    if p.suffix in (".sse", ".ndjson", ".json")
    and not p.name.endswith((".expected.json", ".exchange.json"))
)
MINTED = re.compile(r"^(msg|rs|fc|fco|ci|call)_[0-9a-f]{24}$")


def mask(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: mask(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v) for v in value]
    if isinstance(value, str) and MINTED.match(value):
        return value.split("_")[0] + "_*"
    return value


def replay(body: bytes, cuts: list[int] | None = None) -> dict[str, Any]:
    reader = BodyReader(detect_format(body))
    start = 0
    for cut in sorted(cuts or []):
        reader.feed(body[start:cut])
        start = cut
    reader.feed(body[start:])
    reader.finish()
    result: dict[str, Any] = mask(reader.result().to_dict())
    return result


@pytest.mark.parametrize("path", BODIES, ids=lambda p: str(p.relative_to(STREAMS)))
def test_fixture_gives_expected_items(path: Path) -> None:
    expected_path = path.with_suffix(".expected.json")
    got = replay(path.read_bytes())
    if os.environ.get("TOOLRELAY_REGEN"):
        expected_path.write_bytes(orjson.dumps(got, option=orjson.OPT_INDENT_2) + b"\n")
    assert got == orjson.loads(expected_path.read_bytes())


def test_every_fixture_has_an_expectation() -> None:
    assert len(BODIES) >= 30
    missing = [p for p in BODIES if not p.with_suffix(".expected.json").exists()]
    assert missing == []


@settings(
    max_examples=fuzz_budget(150), suppress_health_check=[HealthCheck.too_slow], deadline=None
)
@given(st.data())
def test_any_cut_of_any_fixture_gives_the_same_result(data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(BODIES))
    body = path.read_bytes()
    cuts = data.draw(st.lists(st.integers(min_value=0, max_value=len(body)), max_size=20))
    assert replay(body, cuts) == replay(body)


def test_byte_by_byte_equals_whole_for_every_fixture() -> None:
    for path in BODIES:
        body = path.read_bytes()
        assert replay(body, list(range(len(body)))) == replay(body), path


@settings(max_examples=fuzz_budget(300), deadline=None)
@given(st.binary(max_size=400), st.sampled_from(["sse", "ndjson", "json"]))
def test_garbage_never_raises(body: bytes, fmt: str) -> None:
    reader = BodyReader(fmt)  # type: ignore[arg-type]
    reader.feed(body)
    reader.finish()
    result = reader.result()
    assert isinstance(result.output, list)
    assert result.error is None or isinstance(result.error, str)


@settings(max_examples=fuzz_budget(200), deadline=None)
@given(
    st.lists(
        st.recursive(
            st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=8),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(
                    st.sampled_from(
                        [
                            "choices",
                            "delta",
                            "content",
                            "tool_calls",
                            "index",
                            "id",
                            "function",
                            "arguments",
                            "name",
                            "type",
                            "usage",
                            "error",
                            "reasoning_content",
                            "finish_reason",
                            "output_index",
                            "item",
                            "delta",
                        ]
                    ),
                    inner,
                    max_size=4,
                )
            ),
            max_leaves=12,
        ),
        max_size=6,
    )
)
def test_random_json_frames_never_raise(frames: list[Any]) -> None:
    body = b"".join(b"data: " + orjson.dumps(f) + b"\n\n" for f in frames)
    reader = BodyReader("sse")
    reader.feed(body)
    reader.finish()
    assert isinstance(reader.result().output, list)


CHAT_BODIES = [
    p
    for p in BODIES
    if p.suffix == ".sse" and p.parent.name not in ("openai-responses", "malformed")
]
"""Well-formed Chat Completions bodies (a malformed frame is the reader's to report)."""


@pytest.mark.parametrize("path", CHAT_BODIES, ids=lambda p: str(p.relative_to(STREAMS)))
def test_common_chunks_take_the_lane_the_full_reading_gives(path: Path) -> None:
    """The translator recognises common chunks without the full reading and hands them
    to a lane (`core.stream.deltas.DeltaSink`): for every chunk of every recorded body, that
    must be exactly the deltas the full reading makes of it."""
    fast, full = ChatCompletionsDecoder(), ChatCompletionsDecoder()
    for data, *_ in SSEDecoder().feed_raw(path.read_bytes()):
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            assert fast.feed(obj) == full._full(obj), obj
