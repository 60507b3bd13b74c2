"""`serve --workers 2`: one SO_REUSEPORT listener per worker against uvicorn's shared socket.

`server/processes/supervisor.py` gives every worker its own listening socket, and the
kernel spreads new connections over them by a hash of their addresses;
uvicorn's own multi-process mode (what `serve` falls back to where no
balancing SO_REUSEPORT exists) has all workers accept on one inherited socket.
Both run here side by side, the same tree, on the Redis bus, unpinned (the
client and upstream share the two cores with them), N chats at once as in
`server_load`: added TTFT over the upstream's, CPU per chat, and `split`, the
busiest worker's share of the workers' CPU over a wave (0.50 is even). The
per-worker listener earns its code only if it beats the shared socket here.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator

from benchmarks.server_load import (
    CHUNKS,
    INTERVAL,
    KEY,
    REDIS_URL,
    ROOT,
    ROUNDS,
    Contender,
    _rows,
    free_port,
    measure,
    spawned,
    toolrelay_env,
    wait_http,
)

SHARED = (
    "import toolrelay.server.processes.supervisor as s; s.REUSEPORT = None; "  # serve's fallback
    "from toolrelay.cli.main import app; app(prog_name='toolrelay')"
)


@contextlib.contextmanager
def contenders() -> Iterator[list[Contender]]:
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLRELAY_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    up_port, proxy_port = free_port(), free_port()
    upstream_cmd = [sys.executable, "-m", "benchmarks.upstream", str(up_port)]
    upstream_cmd += [str(CHUNKS), str(INTERVAL)]
    with tempfile.TemporaryDirectory() as data, contextlib.ExitStack() as stack:
        upstream = subprocess.Popen(upstream_cmd, stdout=subprocess.PIPE, env=env)
        stack.callback(upstream.wait, 15)
        stack.callback(upstream.terminate)
        assert upstream.stdout is not None and upstream.stdout.readline().strip() == b"ready"
        upstream_url = f"http://127.0.0.1:{up_port}"
        proxy_cmd = [sys.executable, "-m", "benchmarks.proxy", str(proxy_port), upstream_url]
        found = [
            Contender("upstream", up_port, {}, 0),
            Contender("proxy", proxy_port, {}, stack.enter_context(spawned(proxy_cmd, env, None))),
        ]
        commands = {
            "reuseport": [sys.executable, "-m", "toolrelay.cli.main"],
            "shared": [sys.executable, "-c", SHARED],
        }
        for name, command in commands.items():
            port = free_port()
            server_env = toolrelay_env(
                env, str(ROOT / "src"), tempfile.mkdtemp(dir=data), port, upstream_url
            )
            server_env["TOOLRELAY_EVENTS_URL"] = REDIS_URL
            argv = [*command, "serve", "--workers", "2"]
            pid = stack.enter_context(spawned(argv, server_env, None))
            found.append(Contender(name, port, {"authorization": f"Bearer {KEY}"}, pid))
        for contender in found[1:]:
            wait_http(f"http://127.0.0.1:{contender.port}/healthz")
            measure(contender, 20)  # warm up every worker: imports, pools, the key cache
        yield found


def run(*, quick: bool = False) -> None:
    sizes = (200,) if quick else (200, 1000)
    rounds = 1 if quick else ROUNDS
    print(f"\nworker listeners: --workers 2 on Redis, unpinned; median of {rounds} round(s)")
    print(f"{'N':>12}  {'':<10}{'added TTFT':>14}{'TTFB':>7}{'CPU ms':>8}{'chunks':>8}{'cut':>5}")
    with contenders() as found:
        for n in sizes:
            _rows(str(n), n, rounds, found)


if __name__ == "__main__":
    run(quick="--quick" in sys.argv)
