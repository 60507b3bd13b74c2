"""`core.chunked.Dechunker`: the payload of a chunked body, however the body was cut.

The expected payloads come from the test's own encoder (`encode`, written from
RFC 9112 §7.1), never from the decoder."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolrelay.core.chunked import MAX_LINE, ChunkedError, Dechunker


def encode(
    pieces: list[bytes], *, ext: bool = False, trailers: tuple[bytes, ...] = (), upper: bool = False
) -> bytes:
    out = b""
    for piece in pieces:
        size = f"{len(piece):X}" if upper else f"{len(piece):x}"
        out += size.encode() + (b";name=value" if ext else b"") + b"\r\n" + piece + b"\r\n"
    out += b"0" + (b";last" if ext else b"") + b"\r\n"
    for trailer in trailers:
        out += trailer + b"\r\n"
    return out + b"\r\n"


def decode_in(body: bytes, cuts: list[int]) -> tuple[bytes, Dechunker]:
    chunks = Dechunker()
    got = b""
    at = 0
    for cut in [*sorted(cuts), len(body)]:
        got += chunks.feed(body[at:cut])
        at = cut
    return got, chunks


pieces = st.lists(st.binary(min_size=1, max_size=300), max_size=8)


@given(
    pieces,
    st.lists(st.integers(min_value=0, max_value=4000), max_size=12),
    st.booleans(),
    st.booleans(),
)
def test_any_cut_gives_the_same_payload(
    parts: list[bytes], cuts: list[int], ext: bool, upper: bool
) -> None:
    trailers = (b"x-checksum: abc",) if ext else ()
    body = encode(parts, ext=ext, trailers=trailers, upper=upper)
    got, chunks = decode_in(body, [min(c, len(body)) for c in cuts])
    assert got == b"".join(parts)
    assert chunks.done
    assert chunks.extra == b""


def test_bytes_after_the_end_are_kept_apart() -> None:
    got, chunks = decode_in(encode([b"hello"]) + b"HTTP/1.1 200", [3])
    assert got == b"hello"
    assert chunks.done
    assert chunks.extra == b"HTTP/1.1 200"


def test_an_unfinished_body_is_not_done() -> None:
    body = encode([b"hello", b"world"])
    for end in range(len(body)):
        got, chunks = decode_in(body[:end], [])
        assert not chunks.done
        assert b"helloworld".startswith(got)


def test_bare_line_feeds_are_taken() -> None:
    got, chunks = decode_in(b"5\nhello\n0\n\n", [1, 2, 7])
    assert (got, chunks.done) == (b"hello", True)


@pytest.mark.parametrize(
    "body",
    [
        b"zz\r\nhello\r\n0\r\n\r\n",  # not hex
        b"0x5\r\nhello\r\n0\r\n\r\n",  # int() would take it; the coding does not
        b"+5\r\nhello\r\n0\r\n\r\n",
        b"\r\n",  # no size at all
        b"5\r\nhelloXX0\r\n\r\n",  # the data runs on past its size
        b"5\r\nhello\rX",
        b"0\r\nno colon here\r\n\r\n",  # a trailer that is no field
    ],
)
def test_bad_coding_is_an_error(body: bytes) -> None:
    with pytest.raises(ChunkedError):
        decode_in(body, [])


def test_a_size_line_without_end_is_refused_before_it_grows_without_bound() -> None:
    chunks = Dechunker()
    chunks.feed(b"5" + b";" * (MAX_LINE - 10))  # long, but may still end
    with pytest.raises(ChunkedError):
        chunks.feed(b";" * 20)
