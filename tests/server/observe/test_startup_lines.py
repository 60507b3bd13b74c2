"""The start-up log says when filters or the code interpreter are on (they act on every turn)."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest

from tests.server.test_tasks_filters import FILTERS
from toolrelay.adapters.stores.sql import upgrade
from toolrelay.config import build_registry
from toolrelay.config.code import CodeInterpreterConfig
from toolrelay.config.settings import Settings
from toolrelay.server.logs import configure_logging
from toolrelay.server.startup_log import log_startup


async def _lines(settings: Settings, caplog: pytest.LogCaptureFixture) -> list[str]:
    registry = build_registry(settings)
    try:
        with caplog.at_level(logging.INFO, logger="toolrelay.server"):
            log_startup(settings, registry, "http://127.0.0.1:1/", servers=[])
    finally:
        await registry.aclose()
    return [r.getMessage() for r in caplog.records if r.name == "toolrelay.server"]


@pytest.mark.anyio
async def test_filters_and_the_code_interpreter_are_logged_when_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    code = CodeInterpreterConfig(engine="subprocess")
    on = Settings(data_dir=tmp_path, filters=[f"{FILTERS}:Upper"], code_interpreter=code)
    lines = await _lines(on, caplog)
    assert f"filters: {FILTERS}:Upper" in lines
    assert (
        "code interpreter: on (subprocess engine, full sandbox, network off; "
        "runs code for admins only)"
    ) in lines
    caplog.clear()
    off = await _lines(Settings(data_dir=tmp_path), caplog)
    assert not any(line.startswith(("filters:", "code interpreter:")) for line in off)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_alembic_says_nothing_at_info_on_start(tmp_path: Path) -> None:
    """Migrating a database (each start does, a no-op or not) logs no Alembic INFO lines."""
    out = io.StringIO()
    root = logging.getLogger()
    before = (root.level, list(root.handlers))
    try:
        configure_logging("INFO", "pretty", stream=out)
        upgrade(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
        upgrade(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
    finally:
        for handler in [h for h in root.handlers if h.get_name() == "toolrelay"]:
            root.removeHandler(handler)
        root.setLevel(before[0])
        logging.getLogger("alembic").setLevel(logging.NOTSET)
    assert "alembic" not in out.getvalue() and "Context impl" not in out.getvalue()
