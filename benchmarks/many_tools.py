"""Cost of offering many tools: start-up, and CPU per answer-only turn (issue 31, item 3).

Sizes 10, 100 and 1,000 `@tool` functions in one tool file, configured as the server
configures them (`build_registry`). Start-up is building the registry in a fresh
process (the tool file imported, every tool's schema made). A turn is what the server
does per chat turn: `TurnManager.relay_for(route)` builds the turn's `Relay`, then
`relay.run` streams an answer-only reply from an in-process model that never
serialises the request. Serialising the tool list (what a real client adds per model
call) is measured on its own and reported beside it. Targets: per-turn CPU at 1,000
tools ≤ 1.2× that at 10 beyond serialising the list; start-up with 1,000 ≤ 2 s.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path

import orjson

from toolrelay.adapters.events import make_bus
from toolrelay.adapters.stores.memory import MemoryStore
from toolrelay.config.registry import Registry, build_registry
from toolrelay.config.settings import ModelRoute, Settings
from toolrelay.engine.interfaces import ModelRequest, ModelStream
from toolrelay.server.turns import TurnManager
from toolrelay.testing.scripted_model import reply

SIZES = (10, 100, 1000)
ANSWER = reply(["Nothing to call: ", "the answer is 42."])


def write_tool_file(folder: Path, count: int) -> Path:
    """A tool file of `count` typed, documented `@tool` functions."""
    lines = ["from toolrelay import tool", ""]
    for i in range(count):
        lines.append(
            textwrap.dedent(
                f'''
                @tool
                def lookup_{i}(query: str, limit: int = 10) -> str:
                    """Look up `query` in index {i}.

                    Args:
                        query: what to look for.
                        limit: at most this many hits.
                    """
                    return query
                '''
            )
        )
    path = folder / f"tools_{count}.py"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def settings_for(path: Path, data_dir: Path) -> Settings:
    route = ModelRoute(name="m", base_url="http://127.0.0.1:9", model="m")
    return Settings(models=[route], tools=[str(path)], data_dir=data_dir, local=False)


class _Body:
    format = "sse"

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        yield ANSWER

    async def aclose(self) -> None:
        return None


class InstantModel:
    """Answers every request at once with the same body; reads nothing of the request."""

    async def open(self, request: ModelRequest) -> ModelStream:
        return _Body()  # type: ignore[return-value]

    async def aclose(self) -> None:
        return None


_STARTUP = """
import sys, time
from pathlib import Path
from benchmarks.many_tools import settings_for
from toolrelay.config.registry import build_registry
start = time.process_time()
registry = build_registry(settings_for(Path(sys.argv[1]), Path(sys.argv[2])))
assert len(registry.tools) == int(sys.argv[3])
print(time.process_time() - start)
"""


def startup_s(path: Path, data_dir: Path, count: int) -> float:
    """CPU seconds to build the registry (import the file, make every tool) in a new
    process: on a busy machine its wall time mostly measures the wait."""
    found = subprocess.run(
        [sys.executable, "-c", _STARTUP, str(path), str(data_dir), str(count)],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(found.stdout.strip())


async def turn_cpu(registry: Registry, turns: int) -> float:
    """Best CPU seconds of one turn (relay built and run), over `turns` turns."""
    manager = TurnManager(MemoryStore(), make_bus(None), registry)
    best = float("inf")
    for _ in range(turns):
        start = time.thread_time()
        relay = manager.relay_for("m")
        result = await relay.run("What is six times seven?")
        best = min(best, time.thread_time() - start)
        assert result.text.endswith("42.")
    return best


def serialise_cpu(registry: Registry, repeat: int) -> float:
    """Best CPU seconds to serialise the route's tool list once, as a client does."""
    specs = [t.spec.openai_spec() for t in registry.tools.values()]
    best = float("inf")
    for _ in range(repeat):
        start = time.thread_time()
        orjson.dumps({"tools": specs})
        best = min(best, time.thread_time() - start)
    return best


def run(quick: bool = False) -> None:
    turns = 20 if quick else 200
    rows: list[tuple[int, float, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for count in SIZES:
            path = write_tool_file(folder, count)
            started = startup_s(path, folder / "data", count)
            registry = build_registry(settings_for(path, folder / "data"))
            registry.clients["m"] = InstantModel()
            cpu = asyncio.run(turn_cpu(registry, turns))
            rows.append((count, started, cpu, serialise_cpu(registry, turns)))
    base = rows[0][2]
    print("\nmany tools: start-up and CPU per answer-only turn (best of", turns, "turns)")
    print(f"{'tools':>6} {'start-up s':>11} {'turn ms':>8} {'× 10 tools':>10} {'serialise ms':>13}")
    for count, started, cpu, ser in rows:
        print(
            f"{count:>6} {started:>11.2f} {cpu * 1e3:>8.2f} {cpu / base:>10.2f} {ser * 1e3:>13.2f}"
        )
    print("targets: turn at 1,000 ≤ 1.2× at 10 (serialising excluded); start-up at 1,000 ≤ 2 s")


if __name__ == "__main__":
    run(quick="--quick" in sys.argv)
