"""A `toolrelay serve` child process on a real port, for crash tests and load runs.

Shared by `tests/reliability/` (SIGKILL and restart on the same database) and
`benchmarks/chat_load.py`. The server reads a TOML config written here; its
log goes to a file so the pipe never fills; the port is read from that log.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2

if TYPE_CHECKING:
    from toolrelay.config.settings import Settings

ADMIN_KEY = "tr-reliability-admin-key-0123456789"
_LISTENING = re.compile(rb"Uvicorn running on http://127\.0\.0\.1:(\d+)")


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_config(path: Path, upstream_url: str, **settings: Any) -> Path:
    """A config with one `fake` chat route to `upstream_url` and the given top-level settings."""
    lines = [
        f"{key} = {_toml_value(value)}" for key, value in settings.items() if value is not None
    ]
    lines += [
        "",
        "[[models]]",
        'name = "fake"',
        'kind = "openai-chat"',
        f"base_url = {_toml_value(upstream_url)}",
        'model = "fake-model"',
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


class ServerProcess:
    """`toolrelay serve --config …` in a child process; `kill()` is a SIGKILL, no clean-up."""

    def __init__(
        self,
        config: Path,
        log: Path,
        env: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
    ) -> None:
        self.args = list(args) if "--workers" in args else [*args, "--workers", "1"]
        """More `serve` flags. One worker unless asked: `kill()` and `pid` mean the server
        process itself (the default is one per core)."""
        self.config = config
        self.log = log
        self.env = {k: v for k, v in (env or os.environ).items() if not k.startswith("TOOLRELAY")}
        self.process: subprocess.Popen[bytes] | None = None
        self.base_url = ""

    def start(self, timeout: float = 60) -> str:
        offset = self.log.stat().st_size if self.log.exists() else 0
        command = [sys.executable, "-m", "toolrelay.cli.main", "serve"]
        command += ["--config", str(self.config), "--port", "0", *self.args]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=log, env=self.env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = _LISTENING.search(self.log.read_bytes()[offset:])
            if found:
                self.base_url = f"http://127.0.0.1:{int(found.group(1))}"
                return self.base_url
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"toolrelay serve did not start:\n{self.log.read_text()[-3000:]}")

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def kill(self) -> None:
        """SIGKILL by pid: the server gets no chance to save anything."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)

    def client(self, *, timeout: float = 30) -> httpx2.Client:
        headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
        return httpx2.Client(base_url=self.base_url, headers=headers, timeout=timeout)

    def open_fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class AppThread:
    """The toolrelay app under uvicorn on a free port, in a thread of this process
    (`with AppThread(settings) as base_url:`); the server tests use it too."""

    def __init__(self, settings: Settings) -> None:
        import uvicorn

        from toolrelay.server.app import create_app

        config = uvicorn.Config(
            create_app(settings), host="127.0.0.1", port=0, log_level="warning", lifespan="on"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("toolrelay server did not start")
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
