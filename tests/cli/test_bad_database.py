"""`toolrelay serve` on a database it cannot use: one line naming it, exit 2 (issue 24
item 7), with one worker and with two; never a traceback, never a password."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from tests.cli.test_startup_errors import ROUTE, one_error_line, run_cli, write


def _garbage_file(tmp_path: Path) -> str:
    path = tmp_path / "garbage.db"
    path.write_bytes(secrets.token_bytes(8192))
    return f"sqlite+aiosqlite:///{path}"


def _directory(tmp_path: Path) -> str:
    path = tmp_path / "a-directory.db"
    path.mkdir()
    return f"sqlite+aiosqlite:///{path}"


def _missing_postgres_database(tmp_path: Path) -> str:
    return "postgresql://postgres:s3cret-pw@127.0.0.1:5432/toolrelay_no_such_database"


def _unreachable_postgres(tmp_path: Path) -> str:
    return "postgresql://postgres:s3cret-pw@127.0.0.1:1/toolrelay"


CASES = [
    pytest.param(_garbage_file, "not a database", id="sqlite-garbage"),
    pytest.param(_directory, "unable to open", id="sqlite-directory"),
    pytest.param(
        _missing_postgres_database,
        "does not exist",
        id="postgres-missing-db",
        marks=pytest.mark.postgres,
    ),
    pytest.param(_unreachable_postgres, "127.0.0.1:1", id="postgres-unreachable"),
]


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize(("url", "said"), CASES)
def test_a_database_that_cannot_be_used_is_one_line_and_exit_2(
    tmp_path: Path, url: object, said: str, workers: str
) -> None:
    database_url = url(tmp_path)  # type: ignore[operator]
    config = write(tmp_path, f'database_url = "{database_url}"\n' + ROUTE)
    done = run_cli(tmp_path, "serve", "--config", str(config), "--workers", workers)
    message = one_error_line(done)
    assert message.startswith("database_url: cannot use the database"), message
    assert said in message, message
    assert "s3cret-pw" not in done.stderr
