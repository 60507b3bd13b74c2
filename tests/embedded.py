"""The real embedded model as a session fixture (`embedded`), shared by every test module
that asks for it (tests/conftest.py registers this module as a plugin, once).

Its GGUF is assembled once per test run: xdist workers share the run's temp dir; under
a lock the first instance assembles it, the next ones check its file, and the last one
out deletes it (491 MB not left in pytest's kept temp dirs). Each instance marks itself
with a file of its own name: were the fixture ever instantiated twice in a process (it
was, when two test modules imported it), neither would delete the other's marker.
"""

from __future__ import annotations

import fcntl
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.server.conftest import ADMIN_KEY
from toolrelay.adapters.local import QWEN_CODER_05B
from toolrelay.config import Settings
from toolrelay.config.local import LocalModel, start_local

__all__ = ["Embedded", "embedded", "locked"]


@dataclass
class Embedded:
    settings: Settings
    model: LocalModel


@contextmanager
def locked(folder: Path) -> Iterator[None]:
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Embedded]:
    """The model, loaded once per test process (see the module doc for its file)."""
    shared = tmp_path_factory.getbasetemp()
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        shared = shared.parent  # the run's dir, above each worker's own
    data = shared / "embedded"
    (data / "users").mkdir(parents=True, exist_ok=True)
    user = data / "users" / f"{worker or 'main'}-{uuid.uuid4().hex[:8]}"
    base = Settings(data_dir=data, models=[], admin_key=ADMIN_KEY, database_url=None)
    with locked(data):
        user.touch()
        settings, model = start_local(base)
    assert model.path == data / "models" / QWEN_CODER_05B.filename
    try:
        yield Embedded(settings, model)
    finally:
        model.close()
        with locked(data):
            user.unlink()
            if not any((data / "users").iterdir()):
                model.path.unlink()
