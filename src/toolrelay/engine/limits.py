"""RunLimits: every bound the loop obeys, with sane defaults.

Reads no environment: the settings (`toolrelay.config`) read
`CHAT_RESPONSE_MAX_TOOL_CALL_ITERATIONS` once, where they are built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from toolrelay.core.tools.result_cap import DEFAULT_CAP
from toolrelay.core.turn.budget import Budget
from toolrelay.errors import ConfigError

DEFAULT_MAX_ITERATIONS = 256


@dataclass(frozen=True, slots=True)
class RunLimits:
    """Bounds of one turn. `max_iterations=-1` means no cap (SPEC R7)."""

    max_iterations: int = DEFAULT_MAX_ITERATIONS
    """Tool-call rounds per turn."""
    on_cap: Literal["error", "final_answer"] = "error"
    """At the cap: write an error (SPEC R7), or make one last call without tools."""
    repeat_warn: int = 3
    """Identical calls in a row before the result tells the model it repeats itself."""
    repeat_stop: int | None = None
    """Identical calls in a row that stop the loop; default 2 × repeat_warn. 0 disables."""
    tool_timeout: float = 120.0
    """Seconds per tool call (a tool's own `timeout` wins)."""
    max_concurrency: int = 8
    """Calls of one batch that run at once."""
    client_tool_timeout: float = 300.0
    """Seconds to wait for a client-side tool's result or an approval."""
    coalesce_ms: float = 20.0
    """Delta events of one item are merged over this window; 0 sends every chunk."""
    coalesce_chunks: int = 32
    """… or over this many chunks, whichever comes first."""
    interpreter_retries: int = 5
    """Code-interpreter runs per turn (SPEC R16)."""
    tool_result_max_bytes: int = DEFAULT_CAP
    """Bytes of one tool result the model reads (`core.tools.result_cap`); 0: no cap."""
    max_input_tokens: int | None = None
    """Budget of the turn (`core.turn.budget`): input tokens over all its model calls; None: none."""
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    max_cost: float | None = None
    """In the route's price unit (`prices`), else the provider's reported `cost`."""

    @property
    def budget(self) -> Budget:
        return Budget(
            self.max_input_tokens, self.max_output_tokens, self.max_total_tokens, self.max_cost
        )

    def __post_init__(self) -> None:
        if self.max_iterations < -1 or self.max_iterations == 0:
            raise ConfigError("max_iterations must be a positive integer or -1 (no cap)")
        if self.max_concurrency < 1:
            raise ConfigError("max_concurrency must be at least 1")
        if self.on_cap not in ("error", "final_answer"):
            raise ConfigError("on_cap must be 'error' or 'final_answer'")

    @property
    def stop_after_repeats(self) -> int:
        return 2 * self.repeat_warn if self.repeat_stop is None else self.repeat_stop
