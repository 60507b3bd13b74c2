"""`CellOutput`: Jupyter IOPub messages → the item's output and live events (no kernel)."""

from __future__ import annotations

import base64
from typing import Any

from toolrelay.adapters.code.outputs import MAX_TEXT, CellOutput


def msg(kind: str, **content: Any) -> dict[str, Any]:
    return {"header": {"msg_type": kind}, "msg_type": kind, "content": content}


def test_a_flood_of_output_is_cut_and_stops_streaming() -> None:
    cell = CellOutput()
    events = [cell.feed(msg("stream", name="stdout", text="x" * 1000)) for _ in range(150)]
    shown = [e for e in events if e is not None]
    assert len(shown) == MAX_TEXT // 1000  # nothing more goes out live once the cap is hit
    out = cell.as_dict()
    assert len(out["stdout"]) == MAX_TEXT
    assert out["stderr"] == f"[stdout cut at {MAX_TEXT} characters]\n"


def test_rich_output_kinds() -> None:
    cell = CellOutput()
    png = base64.b64encode(b"\x89PNG fake").decode()
    assert cell.feed(msg("display_data", data={"image/png": png, "text/plain": "<Figure>"})) == {
        "kind": "display",
        "mime": "image/png",
        "index": 0,
    }
    assert cell.displays[0].data == b"\x89PNG fake"
    cell.feed(msg("execute_result", data={"text/html": "<i>t</i>", "text/plain": "T"}))
    cell.feed(
        msg("error", ename="ValueError", evalue="bad", traceback=["\x1b[31mValueError\x1b[0m: bad"])
    )
    cell.feed(msg("status", execution_state="idle"))
    out = cell.as_dict()
    assert cell.idle and out["result"] == "T" and out["embeds"] == ["<i>t</i>"]
    assert out["error"] == "ValueError: bad" and out["stderr"] == "ValueError: bad\n"
    assert out["files"] == [{"type": "image", "mime_type": "image/png", "name": ""}]
