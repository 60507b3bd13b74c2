"""`cli.render.Renderer`: events in, blocks and text out, without a terminal."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

from rich.console import Console, RenderableType

from toolrelay.cli.render import ErrorBlock, Renderer, ToolBlock
from toolrelay.core import events as ev
from toolrelay.core.events import Event


def _clock(*values: float) -> Any:
    it: Iterator[float] = iter(values)
    return lambda: next(it)


def text_of(*renderables: RenderableType) -> str:
    """What a 100-column console shows, trailing blanks trimmed (Markdown pads lines)."""
    console = Console(record=True, width=100, color_system=None, file=io.StringIO())
    for r in renderables:
        console.print(r)
    return "".join(line.rstrip() + "\n" for line in console.export_text().splitlines())


def added(index: int, item: dict[str, Any]) -> Event:
    return Event(ev.OUTPUT_ITEM_ADDED, {"output_index": index, "item": item})


def done(index: int, item: dict[str, Any]) -> Event:
    return Event(ev.OUTPUT_ITEM_DONE, {"output_index": index, "item": item})


def reasoning(rid: str, text: str, status: str = "completed") -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": rid,
        "status": status,
        "content": [{"type": "output_text", "text": text}],
        "summary": [],
    }


def message(mid: str, text: str, status: str = "completed") -> dict[str, Any]:
    return {
        "type": "message",
        "id": mid,
        "role": "assistant",
        "status": status,
        "content": [{"type": "output_text", "text": text}],
    }


def call(fid: str, call_id: str, name: str, arguments: str = "") -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": fid,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "in_progress",
    }


def call_output(call_id: str, output: Any, status: str = "completed") -> dict[str, Any]:
    return {
        "type": "function_call_output",
        "id": "fco_" + call_id,
        "call_id": call_id,
        "output": output,
        "status": status,
    }


def delta(kind: str, item_id: str, text: str) -> Event:
    return Event(kind, {"item_id": item_id, "output_index": 0, "content_index": 0, "delta": text})


def final(status: str = "completed", usage: dict[str, Any] | None = None, **extra: Any) -> Event:
    return Event(
        ev.CHAT_COMPLETION, {"done": True, "status": status, "usage": usage or {}, **extra}
    )


TOOL_TURN = [
    added(0, reasoning("rs_1", "", "in_progress")),
    delta(ev.REASONING_TEXT_DELTA, "rs_1", "I should "),
    delta(ev.REASONING_TEXT_DELTA, "rs_1", "check the weather"),
    done(0, reasoning("rs_1", "I should check the weather")),
    added(1, call("fc_1", "call_1", "get_weather")),
    Event(ev.FUNCTION_CALL_ARGUMENTS_DELTA, {"item_id": "fc_1", "delta": '{"city": '}),
    Event(ev.FUNCTION_CALL_ARGUMENTS_DELTA, {"item_id": "fc_1", "delta": '"Paris"}'}),
    Event(ev.CHAT_COMPLETION, {"usage": {"input_tokens": 5, "output_tokens": 7}}),
    done(1, call("fc_1", "call_1", "get_weather", '{"city": "Paris"}')),
    done(2, call_output("call_1", "sunny, 21 °C")),
    added(3, message("msg_1", "", "in_progress")),
    delta(ev.OUTPUT_TEXT_DELTA, "msg_1", "It is **sunny** "),
    delta(ev.OUTPUT_TEXT_DELTA, "msg_1", "in Paris."),
    done(3, message("msg_1", "It is **sunny** in Paris.")),
    final(usage={"input_tokens": 14, "output_tokens": 10}),
]


def test_a_tool_turn_prints_each_block_once_then_the_usage_line() -> None:
    renderer = Renderer(clock=_clock(10.0, 12.25))
    printed: list[RenderableType] = []
    for event in TOOL_TURN:
        renderer.feed(event)
        printed += renderer.take_finished()
    assert text_of(*printed).splitlines() == [
        "thinking: I should check the weather",
        '✓ get_weather(city="Paris") → sunny, 21 °C',
        "It is sunny in Paris.",
        "tokens: in 14 · out 10 · 1 tool call · 2.2s",
    ]
    assert renderer.status == "completed"
    assert renderer.take_finished() == []


def test_blocks_come_out_in_order_only_when_everything_before_them_is_complete() -> None:
    renderer = Renderer(clock=_clock(0.0, 1.0))
    for event in [
        added(0, call("fc_a", "call_a", "slow", '{"n": 1}')),
        added(1, call("fc_b", "call_b", "fast", "{}")),
        done(0, call("fc_a", "call_a", "slow", '{"n": 1}')),
        done(1, call("fc_b", "call_b", "fast", "{}")),
        done(2, call_output("call_b", "quick")),
    ]:
        renderer.feed(event)
    assert renderer.take_finished() == []  # `slow` still runs, so `fast` waits behind it
    assert text_of(renderer.render()).splitlines() == ["⠋ slow(n=1)", "✓ fast() → quick"]
    renderer.feed(done(3, call_output("call_a", "Error: boom", "failed")))
    assert text_of(*renderer.take_finished()).splitlines() == [
        "✗ slow(n=1) → Error: boom",
        "✓ fast() → quick",
    ]


def test_streaming_reasoning_is_collapsed_to_its_last_lines() -> None:
    renderer = Renderer(clock=_clock(0.0), reasoning_lines=2)
    renderer.feed(added(0, reasoning("rs_1", "", "in_progress")))
    renderer.feed(delta(ev.REASONING_TEXT_DELTA, "rs_1", "one\ntwo\nthree\nfour"))
    assert text_of(renderer.render()).splitlines() == ["thinking… (…)", "three", "four"]
    assert renderer.take_finished() == []


def test_streaming_answer_and_waiting_state() -> None:
    renderer = Renderer(clock=_clock(0.0))
    assert text_of(renderer.render()) == "⠋ waiting for the model…\n"
    renderer.feed(added(0, message("msg_1", "", "in_progress")))
    renderer.feed(delta(ev.OUTPUT_TEXT_DELTA, "msg_1", "# Title\n\nhalf an ans"))
    live = text_of(renderer.render())
    assert "Title" in live and "# Title" not in live  # rendered as Markdown
    assert live.rstrip().endswith("half an ans")


def test_an_error_is_shown_once_in_red_and_the_turn_fails() -> None:
    renderer = Renderer(clock=_clock(0.0, 0.5))
    failure = {"content": "Model server returned 500: upstream exploded"}
    renderer.feed(Event(ev.CHAT_MESSAGE_ERROR, {"error": failure}))
    renderer.feed(final("failed", error=failure))
    assert renderer.blocks == [ErrorBlock("Model server returned 500: upstream exploded")]
    assert text_of(*renderer.take_finished()).splitlines() == [
        "error: Model server returned 500: upstream exploded",
        "tokens: in 0 · out 0 · 0 tool calls · 0.5s",
    ]
    assert renderer.status == "failed"


def test_error_lines_are_red() -> None:
    renderer = Renderer(clock=_clock(0.0, 0.5))
    renderer.feed(Event(ev.CHAT_MESSAGE_ERROR, {"error": {"content": "bad"}}))
    console = Console(
        record=True, width=100, force_terminal=True, color_system="standard", file=io.StringIO()
    )
    console.print(*renderer.take_finished())
    assert "\x1b[1;31merror: bad" in console.export_text(styles=True)


def test_a_capped_turn_without_an_error_says_so() -> None:
    renderer = Renderer(clock=_clock(0.0, 3.0))
    renderer.feed(final("capped", usage={"prompt_tokens": 3, "completion_tokens": 4}))
    assert text_of(*renderer.take_finished()).splitlines() == [
        "error: turn capped",
        "tokens: in 3 · out 4 · 0 tool calls · 3.0s",
    ]


def test_a_call_without_a_result_at_the_end_was_not_run() -> None:
    renderer = Renderer(clock=_clock(0.0, 1.0))
    renderer.feed(added(0, call("fc_1", "call_1", "search", '{"q": "x"}')))
    renderer.feed(final("cancelled"))
    block = renderer.blocks[0]
    assert isinstance(block, ToolBlock) and block.state == "skipped"
    assert text_of(*renderer.take_finished()).splitlines() == [
        '✗ search(q="x") → not run',
        "tokens: in 0 · out 0 · 1 tool call · 1.0s",
    ]


def test_long_results_and_arguments_are_cut_to_one_line() -> None:
    renderer = Renderer(clock=_clock(0.0), preview_chars=12, args_chars=10)
    renderer.feed(added(0, call("fc_1", "call_1", "echo", '{"text": "abcdefghijkl"}')))
    renderer.feed(done(1, call_output("call_1", "line one\nline two\nline three")))
    assert text_of(*renderer.take_finished()) == '✓ echo(text="abc…) → line one li…\n'


def test_list_results_show_text_parts_and_images() -> None:
    renderer = Renderer(clock=_clock(0.0))
    renderer.feed(added(0, call("fc_1", "call_1", "shot", "not json")))
    output = [
        {"type": "input_text", "text": "a chart"},
        {"type": "input_image", "image_url": "https://x/y.png"},
    ]
    renderer.feed(done(1, call_output("call_1", output)))
    assert text_of(*renderer.take_finished()) == "✓ shot(not json) → a chart [image]\n"


def test_unknown_events_and_items_are_ignored() -> None:
    renderer = Renderer(clock=_clock(0.0))
    renderer.feed(Event(ev.CHAT_TITLE, {"title": "x"}))
    renderer.feed(added(0, {"type": "web_search_call", "id": "ws_1"}))
    assert renderer.blocks == []
    assert renderer.done is False


def test_a_running_call_shows_its_latest_progress() -> None:
    renderer = Renderer(clock=_clock(0.0))
    renderer.feed(added(0, call("fc_1", "call_1", "copy")))
    renderer.feed(done(0, call("fc_1", "call_1", "copy", "{}")))
    renderer.feed(Event(ev.TOOL_PROGRESS, {"call_id": "call_1", "progress": 1, "total": 4}))
    renderer.feed(
        Event(ev.TOOL_PROGRESS, {"call_id": "call_1", "progress": 2, "total": 4, "message": "b"})
    )
    renderer.feed(Event(ev.TOOL_PROGRESS, {"call_id": "nobody", "progress": 9}))
    assert "copy()  2/4 b" in text_of(renderer.render())
    renderer.feed(done(1, call_output("call_1", "copied")))
    assert "2/4" not in text_of(renderer.render())


def test_running_code_shows_its_last_line_of_output() -> None:
    renderer = Renderer(clock=_clock(0.0))
    renderer.feed(added(0, call("fc_1", "call_1", "execute_code")))
    renderer.feed(done(0, call("fc_1", "call_1", "execute_code", "{}")))
    renderer.feed(
        Event(ev.CODE_OUTPUT, {"call_id": "call_1", "kind": "stdout", "text": "a\nstep 2\n"})
    )
    renderer.feed(
        Event(ev.CODE_OUTPUT, {"call_id": "call_1", "kind": "display", "mime": "image/png"})
    )
    assert "execute_code()  step 2" in text_of(renderer.render())


def test_a_chat_streams_done_without_its_text_keeps_the_deltas_text() -> None:
    """Read from a chat's stream (`from_deltas`), an item's `done` leaves its text out."""
    r = Renderer(clock=_clock(0.0, 1.0))
    r.feed(added(0, message("m1", "", "in_progress")))
    for piece in ("Paris ", "it is."):
        data = {"item_id": "m1", "output_index": 0, "content_index": 0, "delta": piece}
        r.feed(Event(ev.OUTPUT_TEXT_DELTA, data))
    lean = {
        "type": "message",
        "id": "m1",
        "status": "completed",
        "content": [{"type": "output_text"}],
    }
    r.feed(Event(ev.OUTPUT_ITEM_DONE, {"output_index": 0, "item": lean, "from_deltas": True}))
    assert "Paris it is." in text_of(*r.take_finished())


def test_an_event_without_a_key_its_payload_requires_is_skipped() -> None:
    """A tool's own event may reuse a known type with other keys: nothing breaks."""
    r = Renderer(clock=_clock(0.0, 1.0))
    r.feed(added(0, call("f1", "c1", "copy")))
    for event in (
        Event(ev.TOOL_PROGRESS, {"progress": 1}),  # no call_id
        Event(ev.OUTPUT_TEXT_DELTA, {"delta": "x"}),  # no item_id
        Event(ev.OUTPUT_ITEM_DONE, {"output_index": 0}),  # no item
        Event(ev.CHAT_MESSAGE_ERROR, {"message": "?"}),  # no error
    ):
        r.feed(event)
    r.feed(Event(ev.TOOL_PROGRESS, {"call_id": "c1", "progress": 2, "total": 5}))
    assert isinstance(r.blocks[0], ToolBlock) and r.blocks[0].progress == "2/5"
    assert len(r.blocks) == 1
