"""`create_app(tune_gc=True)` sets the process's collector once started; garbage still goes.

Each case runs in a child Python: freezing and thresholds are process-wide, and
the test process's own collector must stay as it was.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import orjson

from toolrelay.server.gc_tuning import THRESHOLDS

STARTED = """
import asyncio, gc, orjson, sys
from toolrelay.config.settings import Settings
from toolrelay.server.app import create_app

async def main(tune):
    settings = Settings(data_dir=sys.argv[1], local=False)
    app = create_app(settings, tune_gc=tune)
    before = (gc.get_threshold(), gc.get_freeze_count())
    async with app.router.lifespan_context(app):
        started = (gc.get_threshold(), gc.get_freeze_count())
    print(orjson.dumps({"before": before, "started": started}).decode())

asyncio.run(main(sys.argv[2] == "tune"))
"""


def _child(script: str, *args: str) -> dict[str, list[object]]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, list[object]] = orjson.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_a_started_server_freezes_start_up_and_collects_less_often(tmp_path: Path) -> None:
    tuned = _child(STARTED, str(tmp_path / "a"), "tune")
    assert tuned["before"] == [[700, 10, 10], 0]  # CPython's defaults until started
    thresholds, frozen = tuned["started"]
    assert thresholds == list(THRESHOLDS)
    assert isinstance(frozen, int) and frozen > 10_000  # modules, the app, its settings


def test_the_library_leaves_the_collector_alone(tmp_path: Path) -> None:
    untouched = _child(STARTED, str(tmp_path / "b"), "leave")
    assert untouched["started"] == untouched["before"] == [[700, 10, 10], 0]


def test_cyclic_garbage_is_still_collected_without_asking() -> None:
    script = """
    import gc, orjson, weakref
    from toolrelay.server.gc_tuning import THRESHOLDS, tune

    class Node:
        pass

    tune()
    cycle = Node()
    cycle.me = cycle
    alive = weakref.ref(cycle)
    del cycle
    kept = []
    seen = []
    for i in range(3 * THRESHOLDS[0]):  # new container objects: a young collection comes
        kept.append([i])
        if i % 1000 == 0:
            seen.append(alive() is not None)
    print(orjson.dumps({"alive_at_first": seen[:1], "alive_at_end": [alive() is not None]}).decode())
    """
    found = _child(script)
    assert found["alive_at_first"] == [True]  # not collected at once: batches are larger
    assert found["alive_at_end"] == [False]  # but collected, with no gc.collect() call
