"""`toolrelay serve` picks the log level and format from flags, the environment and the file."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolrelay.cli.main import app


def test_level_and_format_from_env_file_and_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "toolrelay.toml"
    config.write_text(f'log_format = "json"\nlocal = false\ndata_dir = {str(tmp_path / "d")!r}\n')
    fake_app = types.ModuleType("toolrelay.server.app")
    fake_app.create_app = lambda settings, **_: settings  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "toolrelay.server.app", fake_app)
    ran: list[Any] = []
    monkeypatch.setattr("uvicorn.run", lambda app, **kw: ran.append(kw["log_level"]))
    logs: list[tuple[Any, ...]] = []
    monkeypatch.setattr(
        "toolrelay.server.logs.configure_logging", lambda *a, **kw: logs.append((*a, kw))
    )
    monkeypatch.setenv("TOOLRELAY_LOG_LEVEL", "warning")
    monkeypatch.setenv("TOOLRELAY_ADMIN_KEY", "tr-the-admin-key-xyz")
    runner = CliRunner()
    assert runner.invoke(app, ["serve", "--config", str(config), "--workers", "1"]).exit_code == 0
    flags = ["--workers", "1", "--log-level", "error", "--log-format", "pretty"]
    assert runner.invoke(app, ["serve", "--config", str(config), *flags]).exit_code == 0
    assert [(lvl, fmt) for lvl, fmt, _ in logs] == [("WARNING", "json"), ("ERROR", "pretty")]
    assert ran == ["warning", "error"]
    assert "tr-the-admin-key-xyz" in list(logs[0][2]["secrets"])  # the redactor knows it


def test_a_missing_otel_extra_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "toolrelay.toml"
    config.write_text(
        f"local = false\ndata_dir = {str(tmp_path / 'd')!r}\n"
        'otel_endpoint = "http://127.0.0.1:4318/v1/traces"\n'
    )
    # as if the extra were missing: a dotted name whose parent package is not installed
    monkeypatch.setattr("toolrelay.cli.serve.OTEL", ("no_such_package.sdk",))
    result = CliRunner().invoke(app, ["serve", "--config", str(config)])
    assert result.exit_code == 2
    assert "pip install 'toolrelay[otel]'" in result.output
