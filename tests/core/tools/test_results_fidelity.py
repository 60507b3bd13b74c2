"""Issue 8, items 7–9: HTML responses, nested image data URIs, client `[data, headers]` results."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse

from toolrelay.core.tools.results import (
    IMAGE_PLACEHOLDER,
    UI_SHOWN_TEXT,
    NormalisedResult,
    normalise_result,
    result_output_parts,
)

PNG = "data:image/png;base64,iVBORw0KGgo="
JPEG = "data:image/jpeg;base64,/9j/4AAQSkZJRg=="
SVG_B64 = "data:image/svg+xml;base64,PHN2Zy8+"
SVG_TEXT = "data:image/svg+xml,%3Csvg%2F%3E"
PNG_NOT_B64 = "data:image/png,rawbytes"
INLINE = {"Content-Disposition": "inline"}


# ---------------------------------------------------------------- item 7: HTML responses


def test_inline_html_response_is_an_embed_with_the_ui_text() -> None:
    page = HTMLResponse("<h1>Chart</h1>", headers=INLINE)
    assert normalise_result(page) == NormalisedResult(UI_SHOWN_TEXT, embeds=("<h1>Chart</h1>",))


def test_html_response_without_inline_gives_its_body() -> None:
    assert normalise_result(HTMLResponse("<p>hi</p>")) == NormalisedResult("<p>hi</p>")


def test_other_responses_give_their_body_not_their_repr() -> None:
    assert normalise_result(JSONResponse({"a": 1})) == NormalisedResult('{"a":1}')
    assert normalise_result(PlainTextResponse("plain")) == NormalisedResult("plain")


@pytest.mark.parametrize(
    ("context", "text"),
    [("Chart of Q3 sales.", "Chart of Q3 sales."), ({"rows": 3}, '{"rows":3}'), ([1], "[1]")],
)
def test_html_response_with_context_tells_the_model_the_context(context: Any, text: str) -> None:
    page = HTMLResponse("<svg/>", headers=INLINE)
    assert normalise_result((page, context)) == NormalisedResult(text, embeds=("<svg/>",))


def test_html_response_error_status_is_said() -> None:
    page = HTMLResponse("<p>oops</p>", status_code=502, headers=INLINE)
    result = normalise_result(page)
    assert result.embeds == ("<p>oops</p>",)
    assert result.text == "Error: the embedded UI answered with HTTP status 502."


def test_html_and_context_inside_data_headers() -> None:
    headers = {"Content-Type": "text/html", "Content-Disposition": "inline"}
    result = normalise_result((("<b>ui</b>", {"shown": "table"}), headers))
    assert result == NormalisedResult('{"shown":"table"}', embeds=("<b>ui</b>",))


def test_location_with_context_inside_data_headers() -> None:
    headers = {"Content-Disposition": "inline", "Location": "https://ui.example/x"}
    result = normalise_result((({"ignored": 1}, "Opened the app."), headers))
    assert result == NormalisedResult("Opened the app.", embeds=({"url": "https://ui.example/x"},))


# ---------------------------------------------------------------- item 8: nested images


def _model_images(result: NormalisedResult) -> list[str]:
    parts = result_output_parts(result)
    return [p["image_url"] for p in parts if isinstance(p, dict) and p["type"] == "input_image"]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"chart": PNG, "n": 1}, f'{{"chart":"{IMAGE_PLACEHOLDER}","n":1}}'),
        ([PNG, "caption"], f'["{IMAGE_PLACEHOLDER}","caption"]'),
        ((PNG, 2, 3), f'["{IMAGE_PLACEHOLDER}",2,3]'),
        ({"deep": [{"img": PNG}]}, f'{{"deep":[{{"img":"{IMAGE_PLACEHOLDER}"}}]}}'),
    ],
)
def test_image_data_uris_in_containers_go_to_the_model_as_images(value: Any, text: str) -> None:
    result = normalise_result(value)
    assert result.text == text
    assert result.files == ({"type": "image", "url": PNG},)
    assert _model_images(result) == [PNG]


def test_the_callers_dict_is_not_changed() -> None:
    value = {"chart": PNG}
    normalise_result(value)
    assert value == {"chart": PNG}


def test_mcp_text_part_that_is_an_image_data_uri() -> None:
    result = normalise_result([{"type": "text", "text": "see:"}, {"type": "text", "text": JPEG}])
    assert result.text == f"see:\n{IMAGE_PLACEHOLDER}"
    assert _model_images(result) == [JPEG]


def test_mcp_text_part_with_json_holding_an_image() -> None:
    result = normalise_result([{"type": "text", "text": f'{{"plot": "{PNG}"}}'}])
    assert result.text == f'{{"plot":"{IMAGE_PLACEHOLDER}"}}'
    assert _model_images(result) == [PNG]


def test_mcp_image_part_with_blob_instead_of_data_is_an_image() -> None:
    """Issue 30 item 4: `blob` is the data when `data` is missing (Open WebUI: `data or blob`);
    the expected URI is the part's mime type and blob joined by hand."""
    part = {"type": "image", "blob": "QUJD", "mimeType": "image/png"}
    result = normalise_result([{"type": "text", "text": "chart:"}, part])
    assert result.text == "chart:"
    assert [f["url"] for f in result.files] == ["data:image/png;base64,QUJD"]


@pytest.mark.parametrize("part", [{"type": "image", "blob": 7}, {"type": "image"}])
def test_mcp_image_without_string_data_is_skipped_with_a_note(part: dict[str, Any]) -> None:
    result = normalise_result([{"type": "text", "text": "chart:"}, part])
    assert result.files == ()
    assert result.text == "chart:\n[image without data skipped]"
    assert result_output_parts(result) == result.text


@pytest.mark.parametrize("uri", [SVG_B64, SVG_TEXT, PNG_NOT_B64])
def test_svg_or_non_base64_data_uris_never_reach_the_model_as_images(uri: str) -> None:
    for value in (uri, {"img": uri}, [uri], [{"type": "text", "text": uri}]):
        assert _model_images(normalise_result(value)) == []


def test_mcp_svg_image_is_for_display_only() -> None:
    result = normalise_result([{"type": "image", "data": "PHN2Zy8+", "mimeType": "image/svg+xml"}])
    assert _model_images(result) == []
    assert result.files == ({"type": "file", "url": SVG_B64, "mime_type": "image/svg+xml"},)


def test_a_top_level_svg_is_shown_not_sent() -> None:
    result = normalise_result(SVG_B64)
    assert _model_images(result) == []
    assert result.files == ({"type": "file", "url": SVG_B64, "mime_type": "image/svg+xml"},)


# ---------------------------------------------------------------- item 9: client results


def test_a_client_tools_data_headers_list_can_embed() -> None:
    headers = {"Content-Type": "text/html", "Content-Disposition": "inline"}
    result = normalise_result(["<b>map</b>", headers], direct=True)
    assert result == NormalisedResult(UI_SHOWN_TEXT, embeds=("<b>map</b>",))


def test_a_server_tools_two_item_list_stays_json() -> None:
    assert normalise_result(["a", {"b": "c"}]) == NormalisedResult('["a",{"b":"c"}]')
