"""Which extra `serve` asks for, by the configured URLs (`cli.extras`)."""

from __future__ import annotations

import pytest

from toolrelay.cli import extras
from toolrelay.errors import ConfigError


@pytest.fixture
def nothing_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extras, "_installed", lambda name: False)


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6379/0", "rediss://h/0", "unix:///r.sock"])
def test_a_redis_events_url_needs_the_redis_extra(url: str, nothing_installed: None) -> None:
    with pytest.raises(ConfigError, match=r"pip install 'toolrelay\[redis\]'"):
        extras.require_for_urls("sqlite+aiosqlite:///x.db", url)


@pytest.mark.parametrize("url", [None, "memory", "ipc:///tmp/toolrelay-run/bus.sock"])
def test_the_built_in_buses_need_no_extra(url: str | None, nothing_installed: None) -> None:
    extras.require_for_urls("sqlite+aiosqlite:///x.db", url)  # the IPC bus is ours: no redis


def test_a_postgresql_url_needs_the_postgres_extra(nothing_installed: None) -> None:
    with pytest.raises(ConfigError, match=r"toolrelay\[postgres\]"):
        extras.require_for_urls("postgresql+asyncpg://127.0.0.1/test", None)
