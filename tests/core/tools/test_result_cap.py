"""`core.tools.result_cap`: a long tool result is cut on a character boundary, and says so."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from toolrelay.core.items import function_call_output_item
from toolrelay.core.tools.result_cap import cap_output, cut_text


def test_a_result_within_the_cap_is_left_alone() -> None:
    item = function_call_output_item("call_1", "é" * 50)  # 100 bytes
    assert cap_output(item, 100) == (item, None)
    assert cap_output(item, 0) == (item, None)  # 0: no cap


def test_a_long_result_keeps_its_start_and_tells_the_model_how_much() -> None:
    text = "ab€" * 100  # 5 bytes each: 500 bytes
    item = function_call_output_item("call_1", text)
    capped, whole = cap_output(item, 9)
    assert whole == text
    assert capped["cut"] == {"bytes": 500, "sent": 7}  # "ab€ab", then no whole € fits
    assert capped["output"] == (
        "ab€ab\n\n[Cut: this tool result is 500 bytes; you see its first 7. "
        "The user has the whole result.]"
    )
    assert item["output"] == text  # the given item is not changed


def test_the_text_part_of_a_result_with_images_is_cut_and_the_images_kept() -> None:
    image = {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}
    parts = [{"type": "input_text", "text": "x" * 300}, image]
    capped, whole = cap_output(function_call_output_item("c", parts), 100)
    assert whole == "x" * 300
    assert isinstance(capped["output"], list) and capped["output"][1] == image
    assert capped["output"][0]["text"].startswith("x" * 100 + "\n\n[Cut: ")


@given(st.text(), st.integers(min_value=1, max_value=64))
def test_the_kept_part_is_a_prefix_within_the_cap(text: str, cap: int) -> None:
    cut = cut_text(text, cap)
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if cut is None:
        assert size <= cap
        return
    shown, total, sent = cut
    kept = shown[: shown.index("\n\n[Cut: ")] if "\n\n[Cut: " in shown else shown
    assert text.startswith(kept) and total == size and sent <= cap
    assert len(kept.encode("utf-8", errors="surrogatepass")) == sent
