"""Run a server with tracemalloc on; asked by a file, it writes what Python holds now.

`python -m benchmarks.traced OUT toolrelay serve …` or `… OUT proxy PORT URL`.
When `OUT.ask` appears (a thread looks every 50 ms: a signal would wait for
the event loop to run Python code), the process collects garbage and writes
one JSON object to OUT: `traced` (bytes held now, tracemalloc's own objects
left out), `top` (the 25 allocation sites holding the most, file:line, bytes
and blocks) and `files` (the same per file), and removes `OUT.ask`. With
`BENCH_TRACE_SNAPSHOTS=1` each snapshot is also kept as `OUT.<n>.snap`
(`tracemalloc.Snapshot.load`, to compare by line).
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
import tracemalloc

import orjson


def _dump(out: str) -> None:
    gc.collect()  # what only waits for the collector is not held: it would blur the difference
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)]
    )
    top = [
        {
            "where": f"{s.traceback[0].filename}:{s.traceback[0].lineno}",
            "bytes": s.size,
            "blocks": s.count,
        }
        for s in snapshot.statistics("lineno")[:25]
    ]
    files = [
        {"where": s.traceback[0].filename, "bytes": s.size, "blocks": s.count}
        for s in snapshot.statistics("filename")[:40]
    ]
    ours = [
        {"where": f"{s.traceback[0].filename}:{s.traceback[0].lineno}", "bytes": s.size}
        for s in snapshot.filter_traces([tracemalloc.Filter(True, "*/toolrelay/*")]).statistics(
            "lineno"
        )[:40]
    ]
    # what the heap holds, without tracemalloc's own objects: `get_traced_memory()` counted
    # the statistics built just above, whose size follows the number of allocation sites
    current = sum(t.size for t in snapshot.traces)
    if os.environ.get("BENCH_TRACE_SNAPSHOTS"):  # kept for `tracemalloc` comparisons by line
        _dump.count += 1  # type: ignore[attr-defined]
        snapshot.dump(f"{out}.{_dump.count}.snap")  # type: ignore[attr-defined]
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(orjson.dumps({"traced": current, "top": top, "files": files, "ours": ours}))
    os.replace(tmp, out)


_dump.count = 0  # type: ignore[attr-defined]


def main() -> None:
    out, kind, *rest = sys.argv[1:]
    tracemalloc.start()

    def watch() -> None:
        while True:
            if os.path.exists(out + ".ask"):
                _dump(out)
                os.unlink(out + ".ask")
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()
    if kind == "proxy":
        from benchmarks import proxy

        sys.argv = ["proxy", *rest]
        proxy.main()
    else:
        from toolrelay.cli.main import app

        app(rest, prog_name="toolrelay")


if __name__ == "__main__":
    main()
