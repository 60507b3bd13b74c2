"""The coalescer: first delta at once, then merged per item within the window, order kept."""

from __future__ import annotations

import asyncio
import gc

import pytest

from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.engine.coalesce import Coalescer
from toolrelay.testing.sinks import ListSink

pytestmark = pytest.mark.anyio


def delta(item: str, text: str) -> Event:
    data = {"item_id": item, "output_index": 0, "content_index": 0, "delta": text}
    return Event(ev.OUTPUT_TEXT_DELTA, data)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_first_delta_of_an_item_is_not_held() -> None:
    sink = ListSink()
    coalescer = Coalescer(sink, window=10.0, max_chunks=100, clock=Clock())
    await coalescer.emit(delta("a", "Hel"))
    assert [e.data["delta"] for e in sink.events] == ["Hel"]
    await coalescer.emit_many([delta("a", "lo "), delta("a", "wor"), delta("a", "ld")])
    assert len(sink.events) == 1  # held within the window
    await coalescer.flush()
    assert [e.data["delta"] for e in sink.events] == ["Hel", "lo world"]


async def test_another_event_flushes_what_waits_and_order_is_kept() -> None:
    sink = ListSink()
    coalescer = Coalescer(sink, window=10.0, max_chunks=100, clock=Clock())
    await coalescer.emit_many([delta("a", "1"), delta("a", "2"), delta("a", "3")])
    await coalescer.emit(Event(ev.OUTPUT_ITEM_DONE, {"output_index": 0, "item": {}}))
    await coalescer.emit_many([delta("b", "x"), delta("b", "y")])
    await coalescer.flush()
    assert [(e.type, e.data.get("delta")) for e in sink.events] == [
        (ev.OUTPUT_TEXT_DELTA, "1"),
        (ev.OUTPUT_TEXT_DELTA, "23"),
        (ev.OUTPUT_ITEM_DONE, None),
        (ev.OUTPUT_TEXT_DELTA, "x"),
        (ev.OUTPUT_TEXT_DELTA, "y"),
    ]


async def test_chunk_limit_and_window_end_a_merge() -> None:
    clock = Clock()
    sink = ListSink()
    coalescer = Coalescer(sink, window=0.02, max_chunks=3, clock=clock)
    await coalescer.emit_many([delta("a", str(i)) for i in range(7)])
    assert [e.data["delta"] for e in sink.events] == ["0", "123", "456"]
    clock.now = 1.0  # past the window: the next delta ends the merge
    await coalescer.emit(delta("a", "7"))
    await coalescer.flush()
    assert "".join(e.data["delta"] for e in sink.events) == "01234567"


async def test_a_paused_upstream_still_gets_its_text_out() -> None:
    sink = ListSink()
    coalescer = Coalescer(sink, window=0.01, max_chunks=100)
    await coalescer.emit_many([delta("a", "x"), delta("a", "y")])
    await asyncio.sleep(0.05)  # no more events: the timer flushes
    assert [e.data["delta"] for e in sink.events] == ["x", "y"]
    await coalescer.aclose()


class FailingSink(ListSink):
    """Takes the first event, then fails every emit (a bus that went away)."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = asyncio.Event()

    async def emit(self, event: Event) -> None:
        if self.events:
            self.failed.set()
            raise ConnectionError("the bus went away")
        await super().emit(event)


async def test_a_failed_timer_flush_is_raised_by_the_turns_next_call() -> None:
    """Nobody awaits the timer's flush: its failure must reach the turn, not vanish."""
    lost: list[dict[str, object]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _, context: lost.append(context))
    sink = FailingSink()
    coalescer = Coalescer(sink, window=0.001, max_chunks=100)
    await coalescer.emit_many([delta("a", "x"), delta("a", "y")])  # "y" waits for the timer
    await asyncio.wait_for(sink.failed.wait(), 30)
    for _ in range(3):
        await asyncio.sleep(0)  # the failed flush task finishes
    with pytest.raises(ConnectionError, match="went away"):
        await coalescer.emit(delta("a", "z"))
    await coalescer.flush()  # raised once: the turn's own error path may still flush
    del coalescer
    gc.collect()
    assert lost == []  # no "Task exception was never retrieved"
