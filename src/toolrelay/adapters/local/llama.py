"""llama.cpp in this process (xllamacpp), serving the OpenAI API on a private port.

Owns starting and stopping one `xllamacpp.Server`: llama.cpp's own HTTP server,
run on threads inside this process, bound to 127.0.0.1 on a free port and
guarded by a random API key, so only this process (and workers it starts,
which inherit the key through the environment) can use it. toolrelay talks to
it with its ordinary `OpenAIChat` client: no second code path for the
embedded model. (Calling `handle_chat_completions` in-process instead would
need a thread-to-asyncio bridge and a client of its own; `benchmarks/local_model.py`
measures both ways.)

Threads: llama.cpp with as many threads as cores collapses to a few tokens a
second as soon as anything else runs on the machine, so the default leaves
one core free (`default_threads`).
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolrelay.errors import ConfigError

__all__ = ["LlamaOptions", "LlamaServer", "default_threads"]


def default_threads() -> int:
    """One core fewer than this process may use, at least one."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores - 1)


@dataclass(frozen=True, slots=True)
class LlamaOptions:
    """What llama.cpp is started with."""

    threads: int = field(default_factory=default_threads)
    ctx: int = 8192
    """Context in tokens, shared by the slots."""
    parallel: int = 2
    """Requests decoded together (continuous batching); more wait their turn."""
    alias: str = "local"
    """The model id llama.cpp reports."""
    metrics: bool = False
    """llama.cpp's Prometheus counters (`metrics()`); the benchmark reads them."""


class LlamaServer:
    """One llama.cpp server in this process; `close()` (or dropping it) stops it."""

    def __init__(self, model: Path, options: LlamaOptions) -> None:
        try:
            import xllamacpp
        except ImportError:
            raise ConfigError(
                "the embedded model needs the local extra (xllamacpp not installed): "
                "pip install 'toolrelay[local]'"
            ) from None
        self.options = options
        self.api_key = secrets.token_urlsafe(24)
        started = time.perf_counter()
        params: Any = xllamacpp.CommonParams()
        params.model.path = str(model)
        params.n_ctx = options.ctx
        params.n_parallel = options.parallel
        params.kv_unified = True
        params.cpuparams.n_threads = options.threads
        params.cpuparams_batch.n_threads = options.threads
        params.hostnames = ["127.0.0.1"]
        params.port = 0  # a free port
        params.api_keys = [self.api_key]
        params.model_alias = {options.alias}
        params.verbosity = 0  # llama.cpp's own log stays quiet; ours says what happened
        params.endpoint_metrics = options.metrics
        try:
            self._server: Any = xllamacpp.Server(params)
        except RuntimeError as exc:
            raise ConfigError(f"llama.cpp could not load {model}: {exc}") from None
        self.load_s = time.perf_counter() - started
        self.base_url = f"{self._server.listening_address}/v1"

    def metrics(self) -> dict[str, float]:
        """llama.cpp's counters (`llamacpp:` names, without the prefix); needs `metrics`."""
        found: dict[str, float] = {}
        for line in str(self._server.handle_metrics()).splitlines():
            name, _, value = line.partition(" ")
            if name.startswith("llamacpp:") and value:
                found[name.removeprefix("llamacpp:")] = float(value)
        return found

    def close(self) -> None:
        """Stop the server's threads and free the model (llama.cpp does it on release)."""
        self._server = None

    @property
    def running(self) -> bool:
        return self._server is not None
