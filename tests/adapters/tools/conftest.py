"""Real MCP servers for the tool-source tests: npm packages, the PyPI time server, our own."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

ROOT = Path(__file__).resolve().parents[3]
NODE_BIN = ROOT / "tests" / "node" / "node_modules" / ".bin"
TEST_SERVER = Path(__file__).with_name("mcp_test_server.py")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def node_server(name: str) -> str:
    """Path of an npm MCP server's command; fails (never skips) saying how to get it."""
    if shutil.which("node") is None:
        pytest.fail(f"this test needs node (for {name}); install nodejs, then run `make test`")
    path = NODE_BIN / name
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make node` (npm ci in tests/node) or `make test`")
    return str(path)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class HttpServer:
    """Our test MCP server as a process on a real port; restartable on the same port."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{'mcp' if self.kind == 'http' else 'sse'}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(TEST_SERVER), self.kind, str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = (
            time.monotonic() + 60
        )  # a generous bound for a loaded machine, not a timing check
        while time.monotonic() < deadline:
            try:
                httpx2.get(f"http://127.0.0.1:{self.port}/", timeout=1.0)
                return
            except httpx2.TransportError:
                if self.proc.poll() is not None:
                    raise RuntimeError("the test MCP server exited") from None
                time.sleep(0.05)
        raise RuntimeError("the test MCP server did not start listening")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(30)
            self.proc = None


@pytest.fixture
def http_server() -> Iterator[HttpServer]:
    server = HttpServer("http")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def sse_server() -> Iterator[HttpServer]:
    server = HttpServer("sse")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def token_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("TEST_MCP_TOKEN", "secret-token")
    return "TEST_MCP_TOKEN"


def descendants(pid: int | None = None) -> set[int]:
    """Every live process below `pid` (default: this one), from /proc."""
    root = os.getpid() if pid is None else pid
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] == "Z":
            continue  # a zombie is dead; its parent just has not reaped it yet
        parents[int(entry.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        children = {p for p, parent in parents.items() if parent in frontier} - found
        found |= children
        frontier = children
    return found


def session_members(sid: int) -> set[int]:
    """Live processes whose session id is `sid` (an MCP child and everything it spawned)."""
    out: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[3]) == sid:
            out.add(int(entry.name))
    return out
