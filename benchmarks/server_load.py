"""N concurrent streamed chats: toolrelay against pass-through proxies and the upstream alone.

The contenders stream the same answers (CHUNKS text chunks, INTERVAL apart,
from the fake upstream in its own process), N chats started at once:

- `upstream`: straight from the fake upstream, the time any answer needs;
- `aiohttp`, `httpx2`: the minimal pass-through proxy (`benchmarks/proxy.py`:
  a raw ASGI app forwarding the upstream's bytes with one shared client of
  that library); `aiohttp` is the floor the ratios are taken against;
- `toolrelay`: `toolrelay serve --workers 1` (SQLite, in-process events) with
  `coalesce_ms = 0`, so every client gets the same 40 chunks as from a proxy;
- `coalesced`: the same with the default coalescing window (`[limits]
  coalesce_ms`): fewer, larger writes to each client.

With two or more cores the servers are pinned to CPU 0 and the upstream and
the load client to CPU 1, so a server's own queueing is what the figures show.
Reported per N (the median of ROUNDS rounds, the contenders alternating and
each round starting one later, so drift and the previous wave hit all alike): added time to first token p50 / p99 (the contender's
TTFT percentile minus the upstream's), TTFB p50 (response head), server CPU
per chat (from /proc, until the server is idle again: work left for after the
answers counts too) and content chunks per chat, then each one's figures
over the aiohttp proxy's (targets, issue 25: TTFT p50 and p99 at most 1.5x,
CPU at most 2x). `cut` counts chats whose text did not arrive whole: it
should stay 0.

`BENCH_WORKERS_ONLY=1` runs only the `--workers 2` rows.
`BENCH_BEFORE_SRC=/path/to/other/src` adds a `before` contender: another
checkout's toolrelay, measured in the same rounds (a before/after comparison).
Two last rows run `toolrelay serve --workers 2` unpinned (client and upstream
share the two cores with it then): with Redis as the bus, and on the embedded
default (SQLite, the bus the parent hosts over a Unix socket). Each worker has
its own SO_REUSEPORT listener; `split` is the CPU share of the busiest worker
over the wave (0.50 is an even split).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import orjson

from benchmarks.load_client import Sample, percentile, wave

CHUNKS = 40
INTERVAL = 0.02
ROUNDS = 3
KEY = "tr-benchmark-key-0123456789abcdef"
PATH = "/v1/chat/completions"
BODY = orjson.dumps(
    {"model": "fake", "messages": [{"role": "user", "content": "hi"}], "stream": True}
)
EXPECTED = "".join(f"tok{i} " for i in range(CHUNKS))
REDIS_URL = "redis://127.0.0.1:6379/0"
ROOT = Path(__file__).resolve().parent.parent
"""This checkout: its `src` and `benchmarks` go first on the children's path."""
PROXIES = ("aiohttp", "httpx2")
"""The pass-through proxies (`benchmarks/proxy.py`); the first is the floor."""
FLOOR = PROXIES[0]
SERVER_CPUS = {0}
CLIENT_CPUS = {1}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, limit: float = 60) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            httpx2.get(url, timeout=1)
            return
        except httpx2.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def pinned() -> bool:
    return len(os.sched_getaffinity(0)) >= 2 and {0, 1} <= os.sched_getaffinity(0)


def children(pid: int) -> list[int]:
    """The process and its children (uvicorn's worker processes)."""
    found = [pid]
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            text = (task / "children").read_text().split()
            found += [int(c) for c in text]
    return found


@dataclass
class Contender:
    name: str
    port: int
    headers: dict[str, str]
    pid: int

    def pids(self) -> list[int]:
        return children(self.pid)


@dataclass
class Figures:
    p50: float
    p99: float
    ttfb: float
    cpu_ms: float
    chunks: float
    cut: int
    split: float | None = None
    """With several workers: the busiest one's share of their CPU over the wave."""


def settled(pids: list[int], limit: float = 120) -> float:
    """The processes' CPU seconds once they have gone quiet (under 20 ms of CPU in 0.5 s).

    Work a server leaves for after the answers (the request log's writes) is part of a
    chat's cost, and must not run on into the next contender's wave on the same core."""
    last = cpu_seconds(pids)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = cpu_seconds(pids)
        if now - last < 0.02:
            return now
        last = now
    return last


def measure(contender: Contender, n: int) -> tuple[Figures, list[Sample]]:
    pids = contender.pids()
    cpu0 = settled(pids)
    workers = pids[1:]  # the parent's children, when it has workers
    each0 = [cpu_seconds([pid]) for pid in workers]
    samples = asyncio.run(wave(contender.port, PATH, n, BODY, contender.headers))
    cpu = (settled(pids) - cpu0) * 1000 / n
    spent = [cpu_seconds([pid]) - before for pid, before in zip(workers, each0, strict=True)]
    split = max(spent) / sum(spent) if len(spent) >= 2 and sum(spent) > 0 else None
    ttfts = [s.ttft for s in samples if s.ttft]
    figures = Figures(
        p50=percentile(ttfts, 50) if ttfts else float("nan"),
        p99=percentile(ttfts, 99) if ttfts else float("nan"),
        ttfb=percentile([s.ttfb for s in samples], 50),
        cpu_ms=cpu,
        chunks=statistics.mean(s.chunks for s in samples),
        cut=sum(1 for s in samples if s.status != 200 or s.text != EXPECTED),
        split=split,
    )
    return figures, samples


def median_figures(runs: list[Figures]) -> Figures:
    def med(attr: str) -> float:
        return statistics.median(getattr(r, attr) for r in runs)

    splits = [r.split for r in runs if r.split is not None]
    return Figures(
        med("p50"),
        med("p99"),
        med("ttfb"),
        med("cpu_ms"),
        med("chunks"),
        max(r.cut for r in runs),
        statistics.median(splits) if splits else None,
    )


@contextlib.contextmanager
def spawned(command: list[str], env: dict[str, str], cpus: set[int] | None) -> Iterator[int]:
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        if cpus is not None:
            os.sched_setaffinity(process.pid, cpus)
        yield process.pid
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(15)


def toolrelay_env(
    env: dict[str, str], src: str, data: str, port: int, upstream: str
) -> dict[str, str]:
    routes = [{"name": "fake", "base_url": upstream, "model": "m"}]
    return {
        **env,
        "PYTHONPATH": os.pathsep.join([src, str(ROOT), env.get("PYTHONPATH", "")]),
        "TOOLRELAY_DATA_DIR": data,
        "TOOLRELAY_ADMIN_KEY": KEY,
        "TOOLRELAY_PORT": str(port),
        "TOOLRELAY_MODELS": orjson.dumps(routes).decode(),
    }


@contextlib.contextmanager
def servers(workers: int | None = None, bus: str | None = None) -> Iterator[list[Contender]]:
    """Upstream, proxy and toolrelay processes (and `before`, when asked), as contenders;
    `workers`: toolrelay's `--workers` (None: one, pinned), on `bus` (None: the embedded
    default, SQLite and the bus the parent hosts)."""
    pin = pinned()
    server_cpus = SERVER_CPUS if pin and workers is None else None
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLRELAY_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    up_port = free_port()
    upstream_cmd = [sys.executable, "-m", "benchmarks.upstream", str(up_port)]
    upstream_cmd += [str(CHUNKS), str(INTERVAL)]
    checkouts = {"toolrelay": str(ROOT / "src")}
    if workers is None:
        checkouts["coalesced"] = str(ROOT / "src")
    if os.environ.get("BENCH_BEFORE_SRC") and workers is None:
        checkouts["before"] = os.environ["BENCH_BEFORE_SRC"]
    with tempfile.TemporaryDirectory() as data, contextlib.ExitStack() as stack:
        upstream = subprocess.Popen(upstream_cmd, stdout=subprocess.PIPE, env=env)
        stack.callback(upstream.wait, 15)
        stack.callback(upstream.terminate)
        if pin:
            os.sched_setaffinity(upstream.pid, CLIENT_CPUS)
        assert upstream.stdout is not None and upstream.stdout.readline().strip() == b"ready"
        upstream_url = f"http://127.0.0.1:{up_port}"
        found = [Contender("upstream", up_port, {}, 0)]
        for library in PROXIES:
            port = free_port()
            command = [sys.executable, "-m", "benchmarks.proxy", str(port), upstream_url, library]
            pid = stack.enter_context(spawned(command, env, server_cpus))
            found.append(Contender(library, port, {}, pid))
        auth = {"authorization": f"Bearer {KEY}"}
        serve = [sys.executable, "-m", "toolrelay.cli.main", "serve"]
        for name, src in checkouts.items():
            port = free_port()
            folder = tempfile.mkdtemp(dir=data)
            server_env = toolrelay_env(env, src, folder, port, upstream_url)
            if name != "coalesced":  # every chunk as it comes, as a proxy sends them
                server_env["TOOLRELAY_LIMITS__COALESCE_MS"] = "0"
            if bus is not None:  # several workers share a bus (server/processes/workers.py)
                server_env["TOOLRELAY_EVENTS_URL"] = bus
            # the default is one worker per core (where a tree has workers): pinned rows want one
            one = name in ("toolrelay", "coalesced") or workers_supported(src)
            count = ["--workers", str(workers or 1)] if one else []
            pid = stack.enter_context(spawned(serve + count, server_env, server_cpus))
            found.append(Contender(name, port, auth, pid))
        for contender in found[1:]:
            wait_http(f"http://127.0.0.1:{contender.port}/healthz")  # any answer: it listens
            measure(contender, 20)  # warm up: imports, pools, the key cache
        yield found


def run(*, quick: bool = False) -> None:
    sizes = (50, 200) if quick else (50, 200, 1000)
    rounds = 1 if quick else ROUNDS
    own = os.sched_getaffinity(0)
    where = "servers on CPU 0, upstream and client on CPU 1" if pinned() else "unpinned"
    print(
        f"\nserver: N concurrent streamed chats, {CHUNKS} chunks {INTERVAL * 1000:.0f} ms apart; "
        f"{where}; median of {rounds} round(s)"
    )
    print(
        f"{'N':>12}  {'':<10}{'added TTFT':>14}{'TTFB':>7}{'CPU ms':>8}{'chunks':>8}{'cut':>5}"
        f"  {'over aiohttp:':<16}{'TTFT p50':>9}{'p99':>6}{'CPU':>6}"
    )
    print(f"{'':>12}  {'':<10}{'p50/p99 ms':>14}{'p50 ms':>7}{'/chat':>8}{'/chat':>8}")
    workers_only = os.environ.get("BENCH_WORKERS_ONLY") == "1"
    try:
        if pinned() and not workers_only:
            os.sched_setaffinity(0, CLIENT_CPUS)
        if not workers_only:
            with servers() as contenders:
                for n in sizes:
                    _rows(str(n), n, rounds, contenders)
        if (workers_only or not quick) and len(own) >= 2 and workers_supported():
            os.sched_setaffinity(0, own)
            with servers(workers=2, bus=REDIS_URL) as contenders:
                _rows("200 w=2 redis", 200, rounds, contenders)
            with servers(workers=2) as contenders:  # SQLite, the parent's bus: the default
                _rows("200 w=2 ipc", 200, rounds, contenders)
    finally:
        os.sched_setaffinity(0, own)


def workers_supported(src: str = str(ROOT / "src")) -> bool:
    command = [sys.executable, "-m", "toolrelay.cli.main", "serve", "--help"]
    env = {**os.environ, "PYTHONPATH": src}
    return "--workers" in subprocess.run(command, capture_output=True, text=True, env=env).stdout


def _rows(label: str, n: int, rounds: int, contenders: list[Contender]) -> None:
    runs: dict[str, list[Figures]] = {c.name: [] for c in contenders}
    for turn in range(rounds):
        for contender in rotated(contenders, turn):
            runs[contender.name].append(_measure_direct(contender, n))
    figures = {name: median_figures(r) for name, r in runs.items()}
    base, floor = figures["upstream"], figures[FLOOR]
    print(
        f"{label:>12}  {'upstream':<10}{f'({base.p50 * 1000:.0f} / {base.p99 * 1000:.0f})':>14}"
        f"{base.ttfb * 1000:>7.0f}{'':>8}{base.chunks:>8.1f}{base.cut:>5}   (its own TTFT)"
    )

    def added(f: Figures) -> tuple[float, float]:
        return (f.p50 - base.p50) * 1000, (f.p99 - base.p99) * 1000

    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}" if b > 1 else "-"

    fa = added(floor)
    for name, f in figures.items():
        if name == "upstream":
            continue
        a = added(f)
        line = (
            f"{'':>12}  {name:<10}{f'{a[0]:.0f} / {a[1]:.0f}':>14}{f.ttfb * 1000:>7.0f}"
            f"{f.cpu_ms:>8.1f}{f.chunks:>8.1f}{f.cut:>5}"
        )
        if name != FLOOR:
            line += f"  {'':<16}{ratio(a[0], fa[0]):>9}{ratio(a[1], fa[1]):>6}"
            line += f"{ratio(f.cpu_ms, floor.cpu_ms):>6}"
        if f.split is not None:
            line += f"  split {f.split:.2f}"
        print(line)


def rotated(contenders: list[Contender], turn: int) -> list[Contender]:
    """This round's order: each round starts one contender later, so none always runs right
    after the same one (whoever ran right after a proxy's wave of 500 was seconds slower in
    the next rounds, whichever tree it was; swapping two trees swapped their figures)."""
    turn %= len(contenders)
    return contenders[turn:] + contenders[:turn]


def _measure_direct(contender: Contender, n: int) -> Figures:
    if contender.pid:
        return measure(contender, n)[0]
    samples = asyncio.run(wave(contender.port, PATH, n, BODY, contender.headers))
    ttfts = [s.ttft for s in samples if s.ttft]
    return Figures(
        percentile(ttfts, 50),
        percentile(ttfts, 99),
        percentile([s.ttfb for s in samples], 50),
        0.0,
        statistics.mean(s.chunks for s in samples),
        sum(1 for s in samples if s.text != EXPECTED),
    )
