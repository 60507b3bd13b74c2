"""The event bus shared by the processes of one machine, with no service to run.

`BusHost(path)` serves one `MemoryBus` over a Unix socket from a thread of the
process that owns it (the parent of `serve --workers N`); each worker's
`IpcBus(path)` (events url `ipc:///abs/path/bus.sock`) speaks to it. The bus
keeps every invariant of `toolrelay.adapters.events` across the workers, since
they all reach the same in-memory logs, leases and control queues. The host
process must outlive its workers: its death loses the logs, as Redis's would.
"""

from toolrelay.adapters.events.ipc.client import IpcBus
from toolrelay.adapters.events.ipc.frames import BusUnavailable
from toolrelay.adapters.events.ipc.host import BusHost

__all__ = ["BusHost", "BusUnavailable", "IpcBus"]
