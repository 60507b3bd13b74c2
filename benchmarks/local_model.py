"""The embedded model through toolrelay, against llama.cpp's own server called directly.

One llama.cpp (the `[local]` extra, started as `toolrelay serve` starts it,
default threads, plus its metrics counters) serves every contender in the
same run, one request at a time, contenders interleaved round by round:

- `llama.cpp server, direct`: an httpx2 stream straight to its
  /v1/chat/completions (the baseline);
- `llama.cpp in-process call`: `xllamacpp.Server.handle_chat_completions`
  with a stream callback, no HTTP (the alternative to the private port);
- `toolrelay library`: `Relay(OpenAIChat(...)).stream(...)`, events consumed;
- `toolrelay server`: /v1/chat/completions of the toolrelay app (uvicorn in
  this process, as `make run` runs llama.cpp and the server in one process).

Every request is the same: one user message, `max_tokens` answers with
`ignore_eos` (the same number of tokens every time), `cache_prompt: false`
(each one pays for its prompt), temperature 0. TTFT is the time to the
first content delta the client sees; generated tokens/s is
(completion tokens - 1) / (last delta - first delta); ratios are the median of
each round's ratio to the direct call of that round (a load spike hits both).
`llama` is llama.cpp's own decode speed for the same answer (its metrics
counters before and after) and `kept` the share of it the client saw; `rest
ms` is TTFT minus llama.cpp's own prompt time (the first token's decode and
the path). On a busy machine llama.cpp's own speed swings from answer to
answer by ±20 %; `kept` and `rest ms` are the parts of the figures the path owns.
Clients persist across requests (one httpx2 client, one event loop and Relay).
`CPU ms/tok` is this process's CPU time per generated token, llama.cpp's
threads included: what a path adds on top of llama.cpp shows there even when
the machine is too busy for the timings to settle. `cached` is the most prompt
tokens any request of a path took from llama.cpp's cache (0: all pay alike).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import orjson

from benchmarks.harness import AppThread
from toolrelay.adapters.local import QWEN_CODER_05B, LlamaOptions, LlamaServer, ensure_weights
from toolrelay.adapters.models import OpenAIChat
from toolrelay.config import Settings, build_registry
from toolrelay.config.local import KEY_ENV, LocalModel
from toolrelay.engine.relay import Relay

PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."
PINNED = {"ignore_eos": True, "cache_prompt": False, "temperature": 0, "seed": 1}
ADMIN = "tr-bench-local-admin-key-0123456789"


@dataclass
class Sample:
    ttft: float
    tokens_per_s: float
    """Seen by the client: (completion tokens - 1) / (last delta - first delta)."""
    llama_tokens_per_s: float
    """llama.cpp's own decode speed for the same answer (its metrics, before and after)."""
    tokens: int
    cached: int
    """Prompt tokens llama.cpp took from its cache (0: every path pays for its prompt)."""
    cpu_s: float = 0.0
    """CPU time of this whole process (llama.cpp's threads included) during the request."""
    prompt_s: float = 0.0
    """llama.cpp's own time reading the prompt (its metrics): TTFT minus it is the rest."""

    @property
    def kept(self) -> float:
        """The share of llama.cpp's speed the client saw: how much the path itself costs,
        whatever the machine's load did to llama.cpp during that answer."""
        return self.tokens_per_s / self.llama_tokens_per_s if self.llama_tokens_per_s else 0.0


def rate(start: float, first: float, last: float, usage: dict[str, Any]) -> Sample:
    tokens = int(usage.get("completion_tokens", 0))
    cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0))
    speed = (tokens - 1) / (last - first) if last > first else 0.0
    return Sample(first - start, speed, 0.0, tokens, cached)


def llama_body(max_tokens: int) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        **PINNED,
    }


def read_sse(http: httpx2.Client, url: str, body: dict[str, Any], key: str) -> Sample:
    """One streamed Chat Completions answer, timed at the client."""
    start = time.perf_counter()
    first = last = 0.0
    usage: dict[str, Any] = {}
    headers = {"Authorization": f"Bearer {key}"}
    with http.stream("POST", url, json=body, headers=headers) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = orjson.loads(line[6:])
            if chunk.get("choices") and chunk["choices"][0]["delta"].get("content"):
                last = time.perf_counter()
                first = first or last
            usage = chunk.get("usage") or usage
    return rate(start, first, last, usage)


def in_process(model: LocalModel, max_tokens: int) -> Sample:
    """llama.cpp's handler called directly; the callback sees each chunk as it is made."""
    times: list[float] = []
    usage: dict[str, Any] = {}

    def on_chunk(chunk: Any) -> bool:
        data = orjson.loads(chunk) if isinstance(chunk, str | bytes) else chunk
        if isinstance(data, dict):
            if data.get("choices") and data["choices"][0]["delta"].get("content"):
                times.append(time.perf_counter())
            usage.update(data.get("usage") or {})
        return False

    start = time.perf_counter()
    model.server._server.handle_chat_completions(llama_body(max_tokens), on_chunk)
    return rate(start, times[0], times[-1], usage)


class Library:
    """`Relay.stream` on one event loop and one open `Relay`, as an application keeps them."""

    def __init__(self, client: OpenAIChat) -> None:
        self.loop = asyncio.new_event_loop()
        self.relay = Relay(client, [])

    def sample(self, max_tokens: int) -> Sample:
        return self.loop.run_until_complete(self._sample(max_tokens))

    async def _sample(self, max_tokens: int) -> Sample:
        start = time.perf_counter()
        first = last = 0.0
        usage: dict[str, Any] = {}
        async for event in self.relay.stream(PROMPT, params={"max_tokens": max_tokens}):
            if event.type == "response.output_text.delta":
                last = time.perf_counter()
                first = first or last
            elif event.type == "chat:completion" and event.data.get("done"):
                usage = event.data["usage"]
        return rate(start, first, last, usage)

    def close(self) -> None:
        self.loop.run_until_complete(self.relay.aclose())
        pending = asyncio.all_tasks(self.loop)  # finalizers of the streams' generators
        if pending:  # gather() of nothing asks for the thread's current loop: there is none
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()


def server_body(max_tokens: int) -> dict[str, Any]:
    return {
        "model": "local",
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def run(quick: bool = False) -> None:
    rounds, max_tokens = (2, 32) if quick else (7, 64)
    with tempfile.TemporaryDirectory() as scratch:
        base = Settings(models=[], admin_key=ADMIN, database_url=f"sqlite:///{scratch}/bench.db")
        path, _ = ensure_weights(QWEN_CODER_05B, base.data_dir / "models")
        server = LlamaServer(path, LlamaOptions(alias=QWEN_CODER_05B.name, metrics=True))
        model = LocalModel(QWEN_CODER_05B, path, assembled=False, server=server)
        os.environ[KEY_ENV] = server.api_key
        try:
            route = model.route().model_copy(update={"params": PINNED})
            settings = base.model_copy(update={"models": [route], "data_dir": Path(scratch)})
            client = build_registry(settings).client_for("local")
            assert isinstance(client, OpenAIChat)
            key, url = server.api_key, server.base_url
            library = Library(client)
            with AppThread(settings) as app, httpx2.Client(timeout=300) as http:
                contenders: dict[str, Callable[[], Sample]] = {
                    "llama.cpp server, direct": lambda: read_sse(
                        http, f"{url}/chat/completions", llama_body(max_tokens), key
                    ),
                    "llama.cpp in-process call": lambda: in_process(model, max_tokens),
                    "toolrelay library (Relay)": lambda: library.sample(max_tokens),
                    "toolrelay server (/v1)": lambda: read_sse(
                        http, f"{app}/v1/chat/completions", server_body(max_tokens), ADMIN
                    ),
                }
                samples = measure(server, contenders, rounds)
            library.close()
        finally:
            model.close()
    report(model, samples, rounds, max_tokens)


def measure(
    llama: LlamaServer, contenders: dict[str, Callable[[], Sample]], rounds: int
) -> dict[str, list[Sample]]:
    """Every contender once per round, the order rotating so drift hits all alike."""
    names = list(contenders)
    for name in names:  # warm-up: first-request costs (threads, pools, imports)
        contenders[name]()
    samples: dict[str, list[Sample]] = {name: [] for name in names}
    for index in range(rounds):
        for name in names[index % len(names) :] + names[: index % len(names)]:
            before, cpu = llama.metrics(), time.process_time()
            sample = contenders[name]()
            sample.cpu_s = time.process_time() - cpu
            after = llama.metrics()
            seconds = (
                after["tokens_predicted_seconds_total"] - before["tokens_predicted_seconds_total"]
            )
            tokens = after["tokens_predicted_total"] - before["tokens_predicted_total"]
            sample.llama_tokens_per_s = (tokens - 1) / seconds if seconds > 0 else 0.0
            sample.prompt_s = after["prompt_seconds_total"] - before["prompt_seconds_total"]
            samples[name].append(sample)
    return samples


def report(
    model: LocalModel, samples: dict[str, list[Sample]], rounds: int, max_tokens: int
) -> None:
    """Medians, and the median of each round's ratio to the direct call of the same round."""
    threads = model.server.options.threads
    print(
        f"\nembedded model: {model.weights.name}, {threads} llama.cpp thread"
        f"{'s' if threads != 1 else ''}, {max_tokens} tokens per answer, {rounds} rounds"
    )
    print(
        f"{'path':26} {'TTFT ms':>7} {'ratio':>6} {'rest ms':>7} {'tok/s':>6} {'ratio':>6} "
        f"{'llama':>6} {'kept':>6} {'CPU ms/tok':>10} {'cached':>6}"
    )
    baseline = samples["llama.cpp server, direct"]

    def ratio(got: list[Sample], value: Callable[[Sample], float]) -> float:
        pairs = zip(got, baseline, strict=True)
        ratios = [value(s) / value(b) for s, b in pairs if value(b) and value(s)]
        return statistics.median(ratios) if ratios else float("nan")

    for name, got in samples.items():
        print(
            f"{name:26} {statistics.median(s.ttft for s in got) * 1000:7.0f} "
            f"{ratio(got, lambda s: s.ttft):5.2f}× "
            f"{statistics.median(s.ttft - s.prompt_s for s in got) * 1000:7.0f} "
            f"{statistics.median(s.tokens_per_s for s in got):6.1f} "
            f"{ratio(got, lambda s: s.tokens_per_s):5.2f}× "
            f"{statistics.median(s.llama_tokens_per_s for s in got):6.1f} "
            f"{statistics.median(s.kept for s in got):6.3f} "
            f"{statistics.median(s.cpu_s / max(1, s.tokens) for s in got) * 1000:10.2f} "
            f"{max(s.cached for s in got):6d}"
        )


if __name__ == "__main__":
    run()
