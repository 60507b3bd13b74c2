"""SSE (WHATWG) and NDJSON framing, fed whole and cut at every byte."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from toolrelay.core.stream.framing import NDJSONDecoder, SSEDecoder, SSEFrame


def decode(body: bytes, cuts: list[int] | None = None) -> tuple[list[SSEFrame], bool]:
    dec = SSEDecoder()
    frames: list[SSEFrame] = []
    start = 0
    for cut in sorted(cuts or []):
        frames += dec.feed(body[start:cut])
        start = cut
    frames += dec.feed(body[start:])
    frames += dec.flush()
    return frames, dec.done


def test_data_lines_join_with_newline_and_one_leading_space_is_dropped() -> None:
    frames, _ = decode(b"data: a\ndata:  b\ndata:c\n\n")
    assert frames == [SSEFrame("a\n b\nc")]


def test_crlf_cr_and_lf_line_endings_all_work() -> None:
    frames, _ = decode(b"data: 1\r\n\r\ndata: 2\r\rdata: 3\n\n")
    assert [f.data for f in frames] == ["1", "2", "3"]


def test_comments_event_id_retry_fields() -> None:
    body = b": keep-alive\nevent: error\nid: 7\nretry: 1500\ndata: {}\n\ndata: x\n\n"
    frames, _ = decode(body)
    assert frames == [SSEFrame("{}", "error", "7", 1500), SSEFrame("x", None, "7", None)]


def test_id_with_nul_is_ignored_and_bad_retry_is_ignored() -> None:
    frames, _ = decode(b"id: a\x00b\nretry: 12x\ndata: x\n\n")
    assert frames == [SSEFrame("x")]


def test_event_without_data_is_not_dispatched_and_resets_type() -> None:
    frames, _ = decode(b"event: ping\n\ndata: x\n\n")
    assert frames == [SSEFrame("x")]


def test_field_without_colon_and_data_without_value() -> None:
    frames, _ = decode(b"data\ndata\n\n")
    assert frames == [SSEFrame("\n")]


def test_bom_is_dropped_only_at_start() -> None:
    frames, _ = decode(b"\xef\xbb\xbfdata: x\n\n")
    assert frames == [SSEFrame("x")]


def test_done_ends_the_response_and_later_bytes_are_ignored() -> None:
    frames, done = decode(b"data: 1\n\ndata: [DONE]\n\ndata: 2\n\n")
    assert [f.data for f in frames] == ["1"]
    assert done


def test_pending_event_at_end_of_body_is_dispatched() -> None:
    frames, done = decode(b"data: 1\n\ndata: 2")
    assert [f.data for f in frames] == ["1", "2"]
    assert not done


def test_utf8_character_split_across_reads() -> None:
    body = "data: héllo ◁think▷ 日本\n\n".encode()
    for cut in range(len(body)):
        frames, _ = decode(body, [cut])
        assert frames == [SSEFrame("héllo ◁think▷ 日本")]


def test_invalid_utf8_is_replaced_not_raised() -> None:
    frames, _ = decode(b"data: a\xffb\n\n")
    assert frames == [SSEFrame("a\ufffdb")]


BODY = (
    b'\xef\xbb\xbf: c\r\nevent: e\r\ndata: {"a": "\xc3\xa9"}\r\n\r\n'
    b"data: x\rdata: y\r\rid: 3\ndata: z\n\ndata: [DONE]\n\n"
)


@given(st.lists(st.integers(min_value=0, max_value=len(BODY)), max_size=12))
def test_any_cut_gives_the_same_frames(cuts: list[int]) -> None:
    assert decode(BODY, cuts) == decode(BODY)


@given(st.binary(max_size=300), st.lists(st.integers(min_value=0, max_value=300), max_size=6))
def test_garbage_never_raises_and_cuts_do_not_matter(body: bytes, cuts: list[int]) -> None:
    cuts = [c for c in cuts if c <= len(body)]
    assert decode(body, cuts) == decode(body)


def test_ndjson_lines_split_anywhere() -> None:
    body = b'{"a": 1}\r\n\n{"b": 2}\n{"c"'
    for cut in range(len(body) + 1):
        dec = NDJSONDecoder()
        lines = dec.feed(body[:cut]) + dec.feed(body[cut:]) + dec.flush()
        assert lines == [b'{"a": 1}', b'{"b": 2}', b'{"c"']


def test_event_then_data_block_takes_the_same_rules() -> None:
    frames, done = decode(b"event: a\ndata: 1\n\nevent: b\ndata: [DONE]\n\ndata: 2\n\n")
    assert frames == [SSEFrame("1", "a")]
    assert done
    frames, _ = decode(b"event: a\nid: 9\n\nevent: c\ndata:x\n\n")
    assert frames == [SSEFrame("x", "c", "9")]


ONE_EVENT_READS = [
    b"data: 1\n\n",
    b"event: e\ndata: 2\n\n",
    b"data: a\ndata: b\n\n",  # two data lines: joined, not one line holding "\ndata: "
    b"event: x\ndata: 3\nid: 5\n\n",  # the id comes after the data line
    b"data: 4\n\n",  # carries the last event id, 5
    b"data: c\r\n\r\n",  # CRLF
    b"data: d\r\rdata: e\n\n",  # a CR ends a line too
    b": comment\n\n",
    b"data: 6\n\ndata: 7\n\n",  # two events in one read
    b"event: y\ndata: [DONE]\n\n",
    b"data: 8\n\n",  # after [DONE]: ignored
]


def test_one_event_per_read_gives_the_frames_of_the_whole_body() -> None:
    """Most reads of a streamed response are one whole event: they take a shortcut
    that must give exactly what the full parser gives for the whole body."""
    dec = SSEDecoder()
    frames = [f for read in ONE_EVENT_READS for f in dec.feed(read)] + dec.flush()
    assert (frames, dec.done) == decode(b"".join(ONE_EVENT_READS))
    assert [f.data for f in frames] == ["1", "2", "a\nb", "3", "4", "c", "d", "e", "6", "7"]
    assert frames[4] == SSEFrame("4", None, "5")
