"""The log's view of turns: one line per turn, one per failed tool call or upstream error.

An `engine.observer.Observer`; every line names the turn (its id: the saved
message id, which for `/v1` is the request id the client got in
`X-Request-ID` and in a 5xx body) and the chat, so one grep finds a turn's story.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from toolrelay.engine.observer import ModelCall, ToolCall, TurnStart, TurnSummary
from toolrelay.server.logs import fields

__all__ = ["TurnLog"]

log = logging.getLogger("toolrelay.turn")


@dataclass(slots=True)
class _TurnLines:
    start: TurnStart

    @contextmanager
    def model_call(self, call: ModelCall) -> Iterator[object]:
        yield call
        if call.error is not None:
            log.warning(
                "upstream error",
                extra=fields(
                    turn=self.start.turn_id,
                    chat=self.start.chat_id,
                    model=self.start.route,
                    iteration=call.iteration,
                    error=call.error,
                ),
            )

    @contextmanager
    def tool_call(self, call: ToolCall) -> Iterator[object]:
        yield call
        if call.status != "completed":
            log.warning(
                "tool call failed",
                extra=fields(
                    turn=self.start.turn_id,
                    chat=self.start.chat_id,
                    tool=call.name,
                    call_id=call.call_id,
                    error=call.error,
                ),
            )

    def finished(self, summary: TurnSummary) -> None:
        usage = summary.usage
        level = logging.WARNING if summary.status == "failed" else logging.INFO
        log.log(
            level,
            "turn %s",
            summary.status,
            extra=fields(
                turn=self.start.turn_id,
                chat=self.start.chat_id,
                model=self.start.route,
                status=summary.status,
                iterations=summary.iterations,
                model_calls=summary.model_calls,
                tool_calls=summary.tool_calls,
                tokens_in=usage.get("input_tokens", 0),
                tokens_out=usage.get("output_tokens", 0),
                duration_s=round(summary.duration_s, 3),
                error=summary.error,
            ),
        )


class TurnLog:
    """Observer writing the turn lines to the `toolrelay.turn` logger."""

    @contextmanager
    def turn(self, start: TurnStart) -> Iterator[_TurnLines]:
        yield _TurnLines(start)
