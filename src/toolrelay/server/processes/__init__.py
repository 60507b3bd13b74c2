"""The server's processes: who runs, who listens, who hosts the bus, how they stop.

One process (`serve`, the default with the embedded model or a code kernel) is a
whole server: `shutdown.py` is all of this package it uses. `serve --workers N`
adds a parent and N workers:

- `workers.py`: the parent's preparation (settings checked once, database
  migrated and admin key made before any worker starts, `SETTINGS_ENV`), and
  the bus it hosts (`shared_bus`).
- `supervisor.py`: the parent's loop (`Supervisor`): starts, replaces and stops
  the workers; `worker.py` is a worker's `main` (`python -m
  toolrelay.server.processes.worker`).
- `run_dirs.py`: the parent's temporary directories (the bus socket, the
  workers' metric files), swept by the next parent when it was killed.
- `shutdown.py`: a process's stop: SSE streams leave at once, running turns get
  `shutdown_grace_s`.

Invariants:

- **Sockets.** The parent reserves host:port (a bound socket that never listens)
  and owns it for the whole run; each worker binds its own SO_REUSEPORT listener
  on that port and only accepts there (figures: `worker.py`'s docstring,
  `benchmarks/worker_listeners.py`). Without a balancing SO_REUSEPORT, uvicorn's
  multi-process mode is the fallback: its parent owns one listening socket the
  workers inherit (`workers.worker_app`, `cli/serve.py`).
- **The bus.** With `events_url` unset or `ipc`, the parent hosts the one bus all
  workers share (`adapters/events/ipc`: a `MemoryBus` behind a Unix socket in its
  run directory); with Redis nobody hosts it. The bus stays in `adapters/events/`:
  it is an `EventBus` like the others, chosen by URL, and a single-process test
  hosts it in a thread.
- **A worker's death** (crash, SIGKILL): its SO_REUSEPORT socket leaves the group
  (connections it had queued are reset), the parent starts another at once, and
  its running chat turns stay `in_progress` with their checkpoints: their leases
  run out and a live worker takes them over (`server/resume.py`).
- **The parent's death**: each worker reads EOF on its control socket, leaves its
  running turns for a take-over (`TurnManager.leave`) and stops gracefully
  (`worker._watch_parent`); none outlives its parent by more than the grace plus
  `STOP_MARGIN_S`. The bus went with the parent, so a turn can neither stream nor
  be recorded as ended: it stays `in_progress` with its run and last checkpoint,
  as a crash leaves it, and the next server on the same database resumes it
  (`tests/reliability/test_workers.py`).
"""
