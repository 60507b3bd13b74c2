"""The suite's garbage collection after each test (tests/conftest.py): a socket a test
leaked in a reference cycle fails that test, in its teardown, not a later one.

Run on a small suite of its own in a subprocess, with the real conftest's fixtures and
`filterwarnings = error` as pyproject.toml sets it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LEAKS = """
import socket


class Holder:
    def __init__(self) -> None:
        self.me = self  # a cycle: only a garbage collection frees it
        self.sock = socket.socket()


def test_leaks() -> None:
    Holder()


def test_after() -> None:
    pass
"""


def test_a_leaked_socket_fails_the_test_that_leaked_it(tmp_path: Path) -> None:
    """In a test of anything but pure functions; after a pure one (core/) no collection
    runs, and the leak surfaces later."""
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import _close_sdk_clients, _own_data_dir  # noqa: F401\n"
    )
    for folder in ("adapters", "core"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / f"test_{folder}.py").write_text(LEAKS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    args = ["-q", "-p", "no:cacheprovider", "-p", "no:xdist", "core", "adapters"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    said = done.stdout + done.stderr
    errors = [line for line in said.splitlines() if line.startswith("ERROR ")]
    # core's leak is found too, in the same collection: after the pure test none ran
    assert [e.split(" - ")[0] for e in errors] == ["ERROR adapters/test_adapters.py::test_leaks"]
    assert "4 passed, 1 error" in said, said
    assert "unclosed <socket.socket" in said
