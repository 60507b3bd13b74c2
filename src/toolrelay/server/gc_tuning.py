"""The server process's garbage collector, set for many chats in flight.

CPython's cyclic collector makes a young collection every 700 new container
objects and a full one, over every object alive, every 100 of those. A server
streaming a thousand chats holds millions of objects: measured in a wave of
1,000 streamed chats on one core, the collector took 2.4 s of the wave's 5.8 s
of CPU, its full collections 0.3-0.4 s each with the event loop stopped, and
first tokens waited behind it (p50 6.1 s, p99 10.6 s; tuned: 2.5 s and 3.0 s,
CPU per chat 3.0 ms instead of 4-6). So `toolrelay serve`, once started,
freezes what start-up made (modules, the app, settings: never garbage, never
scanned again) and collects less often. Cyclic garbage is still collected,
in larger batches: at most `THRESHOLDS[0]` new objects' worth waits for it.
The library leaves its host process's collector alone: only the server calls this.
"""

from __future__ import annotations

import gc
from typing import Final

__all__ = ["THRESHOLDS", "tune"]

THRESHOLDS: Final = (20_000, 10, 10)
"""Young collections every 20,000 new objects (700 by default); a full one after 100 of
those (1,000 by default, spread over 10 * 10). Tried at 1,000 chats: 50,000 was no better."""


def tune() -> None:
    """Freeze the objects start-up made and collect less often (module doc)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
