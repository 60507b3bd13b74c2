"""The parent's temporary directories (bus socket, metric files): named after its pid,
removed by the next parent once their process is gone (a SIGKILL leaves them behind)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolrelay.config.settings import Settings
from toolrelay.server import metrics
from toolrelay.server.processes import run_dirs, workers


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()  # reaped: no process has this pid now
    return child.pid


def _left(folder: Path, kind: str, pid: int) -> Path:
    path = folder / f"toolrelay-{kind}-{pid}-x1y2z3"
    path.mkdir()
    (path / "bus.sock").write_text("left by a killed parent")
    return path


@pytest.fixture
def tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The temporary directory, short (a Unix socket path has ~100 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="tr-", dir="/tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_only_directories_of_dead_processes_are_removed(tmp_path: Path) -> None:
    dead = _left(tmp_path, "run", _dead_pid())
    alive = _left(tmp_path, "run", os.getpid())
    other_kind = _left(tmp_path, "metrics", _dead_pid())
    older = tmp_path / "toolrelay-run-12345678"  # no pid in the name: another version's
    older.mkdir()
    found = run_dirs.sweep("toolrelay-run-", [str(tmp_path), str(tmp_path / "missing")])
    assert found == [str(dead)]
    assert not dead.exists()
    assert alive.exists() and other_kind.exists() and older.exists()


def test_the_parents_bus_sweeps_stale_runs_and_removes_its_own(tmp: Path, tmp_path: Path) -> None:
    stale = _left(tmp, "run", _dead_pid())
    settings = Settings(data_dir=tmp_path / "data", events_url=None, local=False)
    with workers.shared_bus(settings) as url:
        assert url is not None and url.startswith("ipc://")
        socket_path = Path(url.removeprefix("ipc://"))
        assert socket_path.parent.name.startswith(f"toolrelay-run-{os.getpid()}-")
        assert socket_path.exists()
        assert not stale.exists()
    assert not socket_path.parent.exists()


def test_the_workers_metrics_directory_sweeps_stale_ones(
    tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(metrics.MULTIPROC_ENV, raising=False)
    stale = _left(tmp, "metrics", _dead_pid())
    with metrics.shared_across_workers("127.0.0.1", None) as path:
        assert Path(path).name.startswith(f"toolrelay-metrics-{os.getpid()}-")
        assert not stale.exists()
    assert not Path(path).exists()
