"""Normalising tool results, building outputs, stripping base64 (SPEC R10, R12)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolrelay.core.tools.results import (
    IMAGE_READ_TEXT,
    UI_SHOWN_TEXT,
    NormalisedResult,
    normalise_result,
    result_output_parts,
    strip_base64,
)

PNG = "data:image/png;base64,iVBORw0KGgo="
INLINE_HTML = {"Content-Type": "text/html; charset=utf-8", "Content-Disposition": "inline"}


# ---------------------------------------------------------------- scalars and strings


@pytest.mark.parametrize(
    ("result", "text"),
    [
        (None, None),
        ("plain", "plain"),
        ("", ""),
        (b"caf\xc3\xa9", "café"),
        (b"\xffok", "\ufffdok"),
        (bytearray(b"hi"), "hi"),
        (True, "true"),
        (False, "false"),
        (123, "123"),
        (1.5, "1.5"),
        (10**30, "1000000000000000000000000000000"),
    ],
)
def test_scalars_become_text(result: Any, text: str | None) -> None:
    assert normalise_result(result) == NormalisedResult(text)


def test_image_data_uri_becomes_a_file() -> None:
    assert normalise_result(PNG) == NormalisedResult(
        IMAGE_READ_TEXT, files=({"type": "image", "url": PNG},)
    )
    assert IMAGE_READ_TEXT == "The image was read and shown to the user."


def test_other_data_uris_stay_text() -> None:
    assert normalise_result("data:text/plain;base64,aGk=") == NormalisedResult(
        "data:text/plain;base64,aGk="
    )


# ---------------------------------------------------------------- dicts and lists


@pytest.mark.parametrize(
    ("result", "text"),
    [
        ({"a": "é", "b": [1, None]}, '{"a":"é","b":[1,null]}'),
        ([1, 2], "[1,2]"),
        ((1, 2, 3), "[1,2,3]"),
        ([], "[]"),
        ({}, "{}"),
        ({1: "x"}, '{"1":"x"}'),
        ({"b": b"x"}, '{"b":"b\'x\'"}'),
        ({"big": 10**30}, '{"big":1000000000000000000000000000000}'),
        (["\ud800"], '["\\ud800"]'),
        ([{"type": "text", "text": "a"}, 5], '[{"type":"text","text":"a"},5]'),
        ([{"type": "unknown"}], '[{"type":"unknown"}]'),
        ([{"type": []}], '[{"type":[]}]'),
    ],
)
def test_dicts_and_lists_become_compact_json(result: Any, text: str) -> None:
    assert normalise_result(result) == NormalisedResult(text)


def test_circular_structures_do_not_crash() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    assert normalise_result(loop) == NormalisedResult("[1, [...]]")


@dataclass
class Point:
    x: int
    y: int


class Opaque:
    def __str__(self) -> str:
        return "opaque!"


class Broken:
    def __str__(self) -> str:
        raise RuntimeError("no")


def test_objects_become_json_or_their_str() -> None:
    assert normalise_result(Point(1, 2)) == NormalisedResult('{"x":1,"y":2}')
    assert normalise_result(Opaque()) == NormalisedResult("opaque!")
    text = normalise_result(Broken()).text
    assert text is not None
    assert text.startswith("<") and "Broken object at" in text


# ---------------------------------------------------------------- (data, headers)


def test_inline_html_becomes_an_embed() -> None:
    assert normalise_result(("<b>hi</b>", INLINE_HTML)) == NormalisedResult(
        UI_SHOWN_TEXT, embeds=("<b>hi</b>",)
    )


def test_inline_html_headers_are_case_insensitive_and_body_may_be_bytes() -> None:
    headers = {"content-type": "TEXT/HTML", "CONTENT-DISPOSITION": 'Inline; filename="x.html"'}
    assert normalise_result((b"<i>x</i>", headers)) == NormalisedResult(
        UI_SHOWN_TEXT, embeds=("<i>x</i>",)
    )


def test_headers_keyword_works_like_a_tuple() -> None:
    assert normalise_result("<p/>", headers=INLINE_HTML) == NormalisedResult(
        UI_SHOWN_TEXT, embeds=("<p/>",)
    )


def test_inline_location_becomes_a_url_embed() -> None:
    headers = {"Content-Disposition": "inline", "Location": "https://ui.example/app"}
    assert normalise_result(({"ok": True}, headers)) == NormalisedResult(
        UI_SHOWN_TEXT, embeds=({"url": "https://ui.example/app"},)
    )


@pytest.mark.parametrize(
    ("data", "headers", "expected"),
    [
        ("<b>x</b>", {"Content-Type": "text/html"}, NormalisedResult("<b>x</b>")),
        ({"a": 1}, {"Location": "https://x"}, NormalisedResult('{"a":1}')),
        (
            PNG,
            {"Content-Type": "application/json"},
            NormalisedResult(IMAGE_READ_TEXT, files=({"type": "image", "url": PNG},)),
        ),
        ({"a": 1}, {"Content-Disposition": "inline", "Content-Type": "text/html"}, None),
    ],
)
def test_other_header_tuples_normalise_their_data(
    data: Any, headers: dict[str, str], expected: NormalisedResult | None
) -> None:
    # Last case: inline HTML whose body is not text is not embedded; the data is JSON.
    assert normalise_result((data, headers)) == (expected or NormalisedResult('{"a":1}'))


def test_tuple_without_mapping_is_plain_json() -> None:
    assert normalise_result(("a", "b")) == NormalisedResult('["a","b"]')


# ---------------------------------------------------------------- MCP content


def test_mcp_text_parts_are_joined() -> None:
    result = [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]
    assert normalise_result(result) == NormalisedResult("one\ntwo")


def test_mcp_images_and_audio_become_files() -> None:
    result = [
        {"type": "text", "text": "chart:"},
        {"type": "image", "data": "QUJD", "mimeType": "image/jpeg"},
        {"type": "audio", "data": "UklG", "mimeType": "audio/mpeg"},
        {"type": "image", "data": "WFla"},
    ]
    assert normalise_result(result) == NormalisedResult(
        "chart:",
        files=(
            {"type": "image", "url": "data:image/jpeg;base64,QUJD"},
            {"type": "audio", "url": "data:audio/mpeg;base64,UklG", "mime_type": "audio/mpeg"},
            {"type": "image", "url": "data:image/png;base64,WFla"},
        ),
    )


def test_mcp_image_only_has_no_text() -> None:
    result = [{"type": "image", "data": "QUJD", "mimeType": "image/gif"}]
    assert normalise_result(result) == NormalisedResult(
        None, files=({"type": "image", "url": "data:image/gif;base64,QUJD"},)
    )


def test_mcp_resources() -> None:
    result = [
        {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "file text"}},
        {
            "type": "resource",
            "resource": {"uri": "file:///p.png", "blob": "QQ==", "mimeType": "image/png"},
        },
        {
            "type": "resource",
            "resource": {"uri": "file:///d.pdf", "blob": "JVBE", "mimeType": "application/pdf"},
        },
        {"type": "resource", "resource": {"uri": "file:///only-uri"}},
        {"type": "resource", "resource": "junk"},
        {"type": "resource_link", "uri": "https://x/y", "name": "Y"},
        {"type": "resource_link", "uri": "https://x/z"},
    ]
    assert normalise_result(result) == NormalisedResult(
        "file text\n"
        "[Resource: file:///d.pdf] (binary data, mimeType: application/pdf)\n"
        "[Resource: file:///only-uri]\n"
        "[Resource: Y] https://x/y\n"
        "[Resource: https://x/z]",
        files=(
            {"type": "image", "url": "data:image/png;base64,QQ=="},
            {
                "type": "file",
                "url": "data:application/pdf;base64,JVBE",
                "mime_type": "application/pdf",
                "name": "file:///d.pdf",
            },
        ),
    )


def test_mcp_odd_text_values_stay_strings() -> None:
    result = [{"type": "text", "text": {"a": 1}}, {"type": "text"}]
    assert normalise_result(result) == NormalisedResult('{"a":1}\n')


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text()
    | st.binary(max_size=8)
    | st.sampled_from(["data:image/png;base64,AA", "text", "image", "audio", "resource"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=6) | st.sampled_from(["type", "text", "data"]), inner)
    ),
    max_leaves=12,
)


@given(json_values, st.none() | st.dictionaries(st.text(max_size=20), st.text(max_size=20)))
def test_normalise_result_never_raises(value: Any, headers: dict[str, str] | None) -> None:
    result = normalise_result(value, headers=headers)
    assert result.text is None or isinstance(result.text, str)
    assert all(isinstance(f, dict) for f in result.files)
    output = result_output_parts(result)
    assert isinstance(output, str | list)


# ---------------------------------------------------------------- result_output_parts


def test_output_is_plain_text_without_images() -> None:
    assert result_output_parts(NormalisedResult("hello")) == "hello"
    assert result_output_parts(NormalisedResult(None)) == ""
    audio = {"type": "audio", "url": "data:audio/wav;base64,AA", "mime_type": "audio/wav"}
    assert result_output_parts(NormalisedResult("t", files=(audio,))) == "t"


def test_output_has_image_parts_after_the_text() -> None:
    result = NormalisedResult(
        "two images",
        files=(
            {"type": "image", "url": PNG},
            {"type": "file", "url": "data:application/pdf;base64,AA"},
            {"type": "image", "url": "https://cdn.example/i.png"},
        ),
    )
    assert result_output_parts(result) == [
        {"type": "input_text", "text": "two images"},
        {"type": "input_image", "image_url": PNG},
        {"type": "input_image", "image_url": "https://cdn.example/i.png"},
    ]


def test_output_of_image_only_result_has_no_empty_text_part() -> None:
    result = NormalisedResult(None, files=({"type": "image", "url": PNG},))
    assert result_output_parts(result) == [{"type": "input_image", "image_url": PNG}]


# ---------------------------------------------------------------- strip_base64


def test_strip_base64_replaces_large_payloads_and_copies() -> None:
    big_uri = "data:image/png;base64," + "A" * 5000
    bare = "QUJD" * 300
    prose = "hello world " * 200
    value = {"output": [{"type": "input_image", "image_url": big_uri}], "raw": (bare, prose, 7)}
    before = copy.deepcopy(value)

    assert strip_base64(value) == {
        "output": [
            {"type": "input_image", "image_url": "data:image/png;base64,…[stripped 5000 bytes]"}
        ],
        "raw": ("…[stripped 1200 bytes]", prose, 7),
    }
    assert value == before


def test_strip_base64_keeps_short_and_non_base64_strings() -> None:
    small = "data:image/png;base64," + "A" * 100
    long_text_uri = "data:text/plain," + "x" * 5000
    assert strip_base64([small, long_text_uri, None, 1.5]) == [small, long_text_uri, None, 1.5]


def test_strip_base64_limit_is_exclusive() -> None:
    exact = "A" * 1024
    assert strip_base64(exact) == exact
    assert strip_base64(exact + "A") == "…[stripped 1025 bytes]"
    assert strip_base64("data:audio/wav;base64,QUJD", limit=10) == (
        "data:audio/wav;base64,…[stripped 4 bytes]"
    )


def test_a_result_the_tool_built_itself_passes_unchanged() -> None:
    built = NormalisedResult("text", files=({"type": "image", "url": PNG},), embeds=("<b>x</b>",))
    assert normalise_result(built) is built
