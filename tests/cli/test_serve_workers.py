"""`toolrelay serve --workers N`: how many, when it is refused, and what the workers get."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from tests.cli.test_admin import invoke, owner
from toolrelay.config.settings import Settings
from toolrelay.server.processes import workers

REDIS = "redis://127.0.0.1:6379/0"


def _config(tmp_path: Path, *, events_url: str | None, code: str | None = None) -> Path:
    lines = [
        f'data_dir = "{tmp_path / "data"}"',
        "local = false",
        'admin_key = "tr-w-0123456789abcdef"',
    ]
    if events_url:
        lines.append(f'events_url = "{events_url}"')
    if code:
        lines += ["[code_interpreter]", f'engine = "{code}"']
    config = tmp_path / "toolrelay.toml"
    config.write_text("\n".join(lines) + "\n")
    return config


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, dict[str, Any]]]:
    """What `uvicorn.run` (one worker, or the fallback) and our supervisor were called with
    (nothing is served)."""
    calls: list[tuple[Any, dict[str, Any]]] = []
    monkeypatch.setattr("uvicorn.run", lambda app, **kw: calls.append((app, kw)))

    def supervise(settings: Settings, count: int, bus_url: str | None, on_exit: Any) -> int:
        calls.append(("supervisor", {"settings": settings, "workers": count, "bus": bus_url}))
        return 0

    monkeypatch.setattr("toolrelay.cli.serve._supervise", supervise)
    # the CLI runner's streams close after each call: no logging handlers bound to them
    monkeypatch.setattr("toolrelay.server.logs.configure_logging", lambda *a, **kw: None)
    monkeypatch.delenv(workers.SETTINGS_ENV, raising=False)
    monkeypatch.delenv(workers.EVENTS_ENV, raising=False)
    return calls


def test_more_than_one_worker_needs_a_shared_bus(tmp_path: Path, runs: list[Any]) -> None:
    config = _config(tmp_path, events_url="memory")  # asked for the in-process bus
    result = invoke("serve", "--config", str(config), "--workers", "2")
    assert result.exit_code == 2
    assert "--workers 2 needs a shared event bus: set events_url" in result.stderr
    assert "one turn per chat, resume and cancel" in result.stderr
    assert runs == []
    zero = invoke("serve", "--config", str(_config(tmp_path, events_url=None)), "--workers", "0")
    assert zero.exit_code == 2 and "at least 1" in zero.stderr


def test_workers_get_the_checked_settings_the_reserved_port_and_one_migration(
    tmp_path: Path, runs: list[tuple[Any, dict[str, Any]]]
) -> None:
    config = _config(tmp_path, events_url=REDIS)
    result = invoke("serve", "--config", str(config), "--workers", "3", "--port", "0")
    assert result.exit_code == 0, result.output
    ((target, options),) = runs
    assert target == "supervisor" and options["workers"] == 3 and options["bus"] is None
    given = options["settings"]
    assert given.port != 0  # port 0 became one real port, the same for every worker
    assert given.events_url == REDIS
    # the parent migrated the database and made the admin key before any worker started
    assert owner(given.database_url, "tr-w-0123456789abcdef") is not None


def test_a_port_someone_listens_on_is_one_line_and_exit_code_2(
    tmp_path: Path, runs: list[tuple[Any, dict[str, Any]]]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        config = _config(tmp_path, events_url=REDIS)
        result = invoke("serve", "--config", str(config), "--workers", "2", "--port", port)
    assert result.exit_code == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert runs == []


def test_without_balancing_reuseport_uvicorn_workers_share_one_socket(
    tmp_path: Path, runs: list[tuple[Any, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("toolrelay.server.processes.supervisor.REUSEPORT", None)
    config = _config(tmp_path, events_url=REDIS)
    result = invoke("serve", "--config", str(config), "--workers", "3", "--port", "8123")
    assert result.exit_code == 0, result.output
    ((target, options),) = runs
    assert target == "toolrelay.server.processes.workers:app"
    assert options["factory"] is True and options["workers"] == 3 and options["port"] == 8123
    # a worker still importing on a loaded machine is not killed as hung (uvicorn's 5 s)
    assert options["timeout_worker_healthcheck"] >= 60
    given = Settings.model_validate_json(os.environ[workers.SETTINGS_ENV])
    assert given.port == 8123 and given.events_url == REDIS  # the flags applied, as checked
    built = workers.app()  # what each spawned worker runs
    assert isinstance(built, FastAPI)


def test_the_default_is_every_core(
    tmp_path: Path, runs: list[tuple[Any, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    assert invoke("serve", "--config", str(_config(tmp_path, events_url=REDIS))).exit_code == 0
    assert runs[-1][1]["workers"] == 4 and runs[-1][1]["bus"] is None
    assert invoke("serve", "--config", str(_config(tmp_path, events_url=None))).exit_code == 0
    assert runs[-1][1]["workers"] == 4  # on the bus the parent hosts
    assert str(runs[-1][1]["bus"]).startswith("ipc:///")
    memory = _config(tmp_path, events_url="memory")
    assert invoke("serve", "--config", str(memory)).exit_code == 0
    assert not isinstance(runs[-1][0], str)  # one process: the app itself


def test_a_code_interpreter_keeps_one_worker(
    tmp_path: Path, runs: list[tuple[Any, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chat's kernel lives in one process: several workers would lose its state between turns."""
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    config = _config(tmp_path, events_url=REDIS, code="jupyter")
    assert invoke("serve", "--config", str(config)).exit_code == 0
    assert not isinstance(runs[-1][0], str)  # the default falls back to one process
    refused = invoke("serve", "--config", str(config), "--workers", "2")
    assert refused.exit_code == 2
    assert "code kernel lives in one process" in refused.stderr
    assert len(runs) == 1
