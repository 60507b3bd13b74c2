"""How a model route talks HTTP, as config: its timeouts, retries and response size cap.

`[[models]]` tables (and the `OPENAI_*` / `OLLAMA_*` env routes, through
`OPENAI_TIMEOUTS`, `OPENAI_RETRIES`, `OPENAI_MAX_RESPONSE_BYTES` and their
`OLLAMA_` twins) take:

    timeouts = { connect = 10, first_byte = 120, idle = 120, total = 600 }
    retries = { attempts = 3, backoff = 0.5 }
    max_response_bytes = "32 MiB"

The defaults are the model clients' own (`adapters.models.http`); a value
out of range is a validation error, so `toolrelay serve` stops with one line
naming the key. `http_options` turns a route's values into the clients'
`HTTPOptions`.
"""

from __future__ import annotations

import re
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from toolrelay.adapters.http.record import Recorder
from toolrelay.adapters.models.http import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_RETRY,
    DEFAULT_TIMEOUTS,
    HTTPOptions,
    Retry,
    Timeouts,
)

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "RouteRetries",
    "RouteTimeouts",
    "http_options",
    "parse_size",
]


class RouteTimeouts(BaseModel):
    """Seconds (`adapters.models.http` rule 3); `total` unset: no bound on a whole answer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    connect: float = Field(default=DEFAULT_TIMEOUTS.connect, gt=0)
    """A free connection, the proxy and the TLS handshake."""
    first_byte: float = Field(default=DEFAULT_TIMEOUTS.first_byte, gt=0)
    """From sending the request to the answer's first body bytes (a long prompt on a slow
    local model needs more; a gateway that should fail over, less)."""
    idle: float = Field(default=DEFAULT_TIMEOUTS.idle, gt=0)
    """The longest silence between two chunks of an answer."""
    total: float | None = Field(default=DEFAULT_TIMEOUTS.total, gt=0)
    """The whole model call, retries included."""


class RouteRetries(BaseModel):
    """Tries before the first byte of an answer (`adapters.models.http` rule 2)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    attempts: int = Field(default=DEFAULT_RETRY.attempts, ge=1, le=100)
    """Every try, the first included: 1 never retries."""
    backoff: float = Field(default=DEFAULT_RETRY.backoff, ge=0, le=3600)
    """Seconds before the second try, doubling per try (capped, spread by jitter); a
    server's `Retry-After` wins."""


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]i?b|b)?\s*$", re.IGNORECASE)
_UNITS: Final = {
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
}


def parse_size(value: Any) -> Any:
    """`"32 MiB"`, `"500kb"`, `1048576` → bytes; 0 means no cap. Anything else is left for
    the field's own check to refuse."""
    if isinstance(value, str):
        found = _SIZE.match(value)
        if found is None:
            raise ValueError(f"must be a size like 33554432, '32 MiB' or '500 KB' (got {value!r})")
        number, unit = found.groups()
        return int(float(number) * _UNITS[(unit or "b").lower()])
    return value


def http_options(
    timeouts: RouteTimeouts,
    retries: RouteRetries,
    max_response_bytes: int,
    record: Recorder | None = None,
) -> HTTPOptions:
    """The clients' options from a route's values (0 bytes: no cap)."""
    return HTTPOptions(
        timeouts=Timeouts(**timeouts.model_dump()),
        retry=Retry(attempts=retries.attempts, backoff=retries.backoff),
        max_response_bytes=max_response_bytes or None,
        record=record,
    )
