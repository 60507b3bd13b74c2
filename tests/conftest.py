"""Suite-wide fixtures."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.sdk_clients import close_all

# No property test depends on the clock: hypothesis' default 200 ms deadline per example
# and its too-slow health check fail on a loaded 2-core machine (seen: a cheap splitter
# test failed under `pytest -n 2` with eight suites running), never on a wrong answer.
pytest_plugins = ["tests.embedded"]
"""The embedded model's session fixture, registered once for every module that uses it."""

settings.register_profile("toolrelay", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("toolrelay")

_PURE_DIRS = ("/core/", "/fuzz/", "/config/")
"""Tests of pure functions (no socket, process or file they could leak): the only ones not
followed by a garbage collection."""


def pytest_collection_finish(session: pytest.Session) -> None:
    """Every test module is imported: what exists now (modules, their libraries, the
    collected tests) lives to the end, so the collection after each test skips it
    (`gc.freeze`); a full collection would go through ~300,000 objects each time."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _own_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads or migrates the runner's ~/.toolrelay (nor one left by another checkout).

    A test that wants the default location sets HOME or passes its own environment.
    """
    monkeypatch.setenv("TOOLRELAY_DATA_DIR", str(tmp_path / "toolrelay-data"))


@pytest.fixture(autouse=True)
def _close_sdk_clients(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    close_all()
    where = "/" + request.node.path.relative_to(request.config.rootpath).as_posix()
    if not any(part in where for part in _PURE_DIRS):
        # a socket, process or ZeroMQ context the test leaked warns here, in its teardown
        # (filterwarnings = error fails it), not in whichever later test collects it
        gc.collect()
