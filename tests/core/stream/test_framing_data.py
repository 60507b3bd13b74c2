"""`SSEDecoder.feed_data`: payloads alone, the same as the full parser at any cut.

Its shortcut cuts a whole read into payloads by counting separators; a body
that only looks like the common shapes must still get the full parser's frames.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay.core.stream.framing import RawFrame, SSEDecoder

Read = tuple[list[bytes | RawFrame], bool, str | None]


def reference(body: bytes) -> Read:
    """The full parser's frames in `feed_data`'s shape (the body read in one go),
    whether it ended, and the last event id it kept."""
    dec = SSEDecoder()
    frames = dec.feed_raw(body) + dec.flush_raw()
    return [f if f[1] == b"error" else f[0] for f in frames], dec.done, dec.last_event_id


def fed(body: bytes, cuts: list[int]) -> Read:
    dec = SSEDecoder()
    frames: list[bytes | RawFrame] = []
    start = 0
    for cut in sorted(c for c in cuts if c <= len(body)):
        frames += dec.feed_data(body[start:cut])
        start = cut
    frames += dec.feed_data(body[start:])
    frames += dec.flush_data()
    return frames, dec.done, dec.last_event_id


def reads(body: bytes, size: int) -> list[int]:
    return list(range(size, len(body), size))


CHAT = b"".join(b'data: {"n": %d}\n\n' % i for i in range(40)) + b"data: [DONE]\n\n"
RESPONSES = b"".join(b'event: response.x\ndata: {"n": %d}\n\n' % i for i in range(40))


def test_common_shapes_come_as_payloads() -> None:
    for body in (CHAT, RESPONSES):
        frames = fed(body, reads(body, 64))[0]
        assert frames == [b'{"n": %d}' % i for i in range(40)]
    assert fed(CHAT, reads(CHAT, 64))[1]  # [DONE] still ends the body


def test_error_events_come_whole_with_their_type() -> None:
    body = b"event: a\ndata: 1\n\nevent: error\ndata: 2\n\nevent: errors\ndata: 3\n\n" * 3
    frames = fed(body, [20])[0]
    assert frames == [b"1", (b"2", b"error", None, None), b"3"] * 3


def test_lookalikes_of_the_common_shapes_take_the_full_parser() -> None:
    """Each has as many separators and field lines as the shortcut counts, or
    nearly: a mistake there would cut the payloads wrongly."""
    lookalikes = [
        b"event: a\ndata: 1\ndata: 2\n\nevent: b\n\nevent: c\ndata: 3\n\n",  # 2 data, then 0
        b"event: a\n\nevent: b\ndata: 1\ndata: 2\n\n",
        b"event: a\ndata: \n\nevent: b\ndata: 1\n\n",  # an empty payload
        b"event: a\ndata: 1\ndata: \n\nevent: b\n\nevent: c\ndata: 2\n\n",  # and 2 data, 0
        b"event: a\ndata: 1\n\nevent: b\ndata: 2\nid: 3\n\ndata: 4\n\n",  # an id at the end
        b"event: a\ndata: 1\n\nevent: b\ndata: 2\nevent: error\n\n",  # the type comes late
        b"event: a\nid: 1\n\nevent: b\ndata: 2\n\n",  # another field for a data line
        b"\xef\xbb\xbfdata: 1\n\n",  # a BOM is dropped only at the start of the body
        # three lines an event, but one of them not what the shape puts there
        b"event: a\ndata: 1\nevent: b\nevent: c\ndata: 2\n\n",
        b"event: a\ndata: 1\n\ndata: 2\ndata: 3\n\n",
        b"event: a\ndata: 1\n\nid: 3\ndata: 2\n\n",
        b"event: a\n: c\n\nevent: b\ndata: 2\n\n",
        b"event: a\ndata: 1\n\nevent: b\nevent: c\n\n",
        b"event: a\ndata: 1\n\n\n\nevent: b\ndata: 2\n\n",  # a run of blank lines
        b"data: 1\n\n\n\ndata: 2\n\ndata: 3\n\n",
        b"data: 1\ndata: 2\n\ndata: 3\n\n",
        b"data: 1\n\ndata: 2\n\n\n",
        b"data: 1\n\nid: 4\ndata: 2\n\ndata: 3\n\n",
        b"data: 1\n\n: comment\n\ndata: 2\n\n",
        b"data: 1\n\nevent: a\ndata: 2\n\n",  # the two shapes mixed
        b"event: a\ndata: 1\n\ndata: 2\n\n",
        b"data:1\n\ndata: 2\n\n",
        b"event: a\ndata: 1\nevent: b\n\nevent: c\ndata: 2\n\n",
        b"data: 1\n\ndata: 2\r\n\r\ndata: 3\n\n",
        b"data: 1\n\ndata: [DONE]\n\ndata: 2\n\n",
        b"event: a\ndata: 1\n\nevent: b\ndata: [DONE]\n\nevent: c\ndata: 2\n\n",
        b"event: a\ndata: 1\n\nevent: error\ndata: 2\n\n",
        b"event: a\ndata: 1\nretry: 5\n\nevent: b\ndata: 2\n\n",
    ]
    for body in lookalikes:
        warmed = b"data: 0\n\n" + body  # the shortcut waits for the first read's BOM check
        for cut in range(len(warmed) + 1):
            assert fed(warmed, [9, cut]) == reference(warmed), (body, cut)


PIECES = st.sampled_from(
    [
        b"data: {}",
        b'data: {"a": 1}',
        b"data: ",
        b"data:",
        b"data",
        b"data: [DONE]",
        b"event: a",
        b"event: error",
        b"event:error",
        b"id: 1",
        b"retry: 9",
        b": c",
        b"",
        b"\r",
        b"\xef\xbb\xbf",
    ]
)


@settings(max_examples=300)
@given(
    st.lists(st.tuples(PIECES, st.sampled_from([b"\n", b"\n\n", b"\r\n"])), max_size=30),
    st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_any_body_cut_anywhere_gives_the_full_parsers_frames(
    lines: list[tuple[bytes, bytes]], cuts: list[int]
) -> None:
    body = b"".join(piece + end for piece, end in lines)
    assert fed(body, cuts) == reference(body)


def event_reads(body: bytes) -> list[int]:
    """Cuts after each blank line: one event per read, what a streamed response
    mostly arrives as (the shortcut for a read that is one whole event)."""
    return [i + 2 for i in range(len(body)) if body[i : i + 2] == b"\n\n"]


ONE_EVENT_READS = [
    b"data: 1\n\n",
    b"event: a\ndata: 1\n\n",
    b"data: \n\n",  # an empty payload
    b"data: data: 1\n\n",  # `data: ` inside the payload
    b"event: data: \ndata: 1\n\n",  # and inside the type
    b"event: xdata: 1\n\n",  # `data: ` not at a line start
    b"xdata: 1\n\n",
    b"data:1\n\n",
    b"data: 1\r\n\r\n",  # CR line ends
    b"data: 1\r\r",
    b"data: 1\r\n\n",
    b"data: 1\n\r\n",
    b"data: 1\rdata: 2\n\n",  # a CR inside: two data lines
    b"data: {\r}\n\n",
    b"event: a\r\ndata: 1\n\n",
    b"event: a\rb\ndata: 1\n\n",
    b"event: error\r\ndata: 1\n\n",
    b"event: a\rid: 7\ndata: 1\n\n",
    b"event: error\ndata: 1\n\n",  # comes whole, with its type
    b"event:error\ndata: 1\n\n",
    b"event: errors\ndata: 1\n\n",
    b"event:  error\ndata: 1\n\n",
    b"event: a\nevent: error\ndata: 1\n\n",
    b"event: a\n\ndata: 1\n\n",
    b"data: [DONE]\n\n",
    b"event: a\ndata: [DONE]\n\n",
    b"data: [DONE] \n\n",
    b": comment\ndata: 1\n\n",
    b"data: 1\n: comment\n\n",
    b"id: 7\ndata: 1\n\n",  # the id is kept
    b"data: 1\nid: 7\n\n",
    b"event: a\nid: 7\ndata: 1\n\n",
    b"retry: 5\ndata: 1\n\n",
    b"data: 1\nretry: 5\n\n",
    b"data: 1\ndata: 2\n\n",
    b"data: 1\n\n\n",  # one blank line more
    b"data: 1\n\n\n\n",
    b"\ndata: 1\n\n",
    b"data: 1\n",  # an event not ended yet
    b"data: 1",
    b"data: ",
    b"data: 1\n\ndata: 2\n\n",  # two events in one read
    b"data: 1\n\ndata: 2",
    b"\xef\xbb\xbfdata: 1\n\n",  # a BOM after the start is not dropped
    b"data: \xc3\xa9\xe2\x82\xac\n\n",  # UTF-8
    b"data: \xc3\n\n",  # cut UTF-8: the bytes as they came
]


def test_a_read_of_one_whole_event_gives_the_full_parsers_frames() -> None:
    """Each read, after a warm-up event, alone; then followed by a plain event (what
    it held or ended must carry over), and cut at every byte after the warm-up."""
    for read in ONE_EVENT_READS:
        for body in (b"data: 0\n\n" + read, b"data: 0\n\n" + read + b"data: 9\n\n"):
            assert fed(body, event_reads(body)) == reference(body), (read, body)
            for cut in range(9, len(body) + 1):
                assert fed(body, [9, cut]) == reference(body), (read, cut)


def test_one_event_reads_come_as_their_payloads() -> None:
    dec = SSEDecoder()
    reads = [b"data: 0\n\n", b"data: 1\n\n", b"event: a\ndata: 2\n\n", b"data: \xc3\xa9\n\n"]
    assert [list(dec.feed_data(r)) for r in reads] == [[b"0"], [b"1"], [b"2"], [b"\xc3\xa9"]]
    assert list(dec.feed_data(b"event: error\ndata: 3\n\n")) == [(b"3", b"error", None, None)]
    assert list(dec.feed_data(b"data: 4\r\n\r\n")) == [b"4"]
    assert list(dec.feed_data(b"data: 5\rdata: 6\n\n")) == [b"5\n6"]
    assert not dec.done
    assert list(dec.feed_data(b"data: [DONE]\n\n")) == []
    assert dec.done
    assert list(dec.feed_data(b"data: 7\n\n")) == []  # after [DONE], nothing


def test_a_multibyte_character_cut_between_reads_is_whole() -> None:
    body = "data: é€\n\n".encode()
    for cut in range(6, len(body)):
        dec = SSEDecoder()
        dec.feed_data(b"data: 0\n\n")
        frames = [*dec.feed_data(body[:cut]), *dec.feed_data(body[cut:])]
        assert frames == ["é€".encode()], cut


@settings(max_examples=300)
@given(st.lists(st.tuples(PIECES, st.sampled_from([b"\n", b"\n\n", b"\r\n"])), max_size=30))
def test_any_body_read_one_event_at_a_time_gives_the_full_parsers_frames(
    lines: list[tuple[bytes, bytes]],
) -> None:
    body = b"".join(piece + end for piece, end in lines)
    assert fed(body, event_reads(body)) == reference(body)
