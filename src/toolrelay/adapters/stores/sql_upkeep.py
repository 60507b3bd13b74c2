"""Giving deleted rows' space back: `toolrelay db vacuum` for SQLite files.

A database this version creates has incremental auto-vacuum from its first table
(`sql._sqlite_pragmas`), and the store runs `PRAGMA incremental_vacuum` after it
deletes chats (`SQLStore.reclaim`). A file made before needs one full VACUUM to
switch: `vacuum` does it. PostgreSQL is left to its autovacuum.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy.engine import make_url

from toolrelay.adapters.stores.sql import SQLITE_BUSY_TIMEOUT_MS

__all__ = ["vacuum"]

_HAS_SEARCH = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'search_fts'"


def vacuum(url: str) -> tuple[int, int] | None:
    """Rebuild a SQLite database with incremental auto-vacuum on (`toolrelay db vacuum`):
    one full VACUUM, after which deletes give space back as they go. Returns the file's
    size before and after (bytes, write-ahead log included); None for PostgreSQL, whose
    autovacuum does this on its own. Run it while no server writes to the file."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return None
    path = Path(parsed.database).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"no SQLite database at {path}")
    before = _sqlite_size(path)
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        connection.execute("PRAGMA auto_vacuum=INCREMENTAL")
        if connection.execute(_HAS_SEARCH).fetchone() is not None:  # drop deleted docs' entries
            connection.execute("INSERT INTO search_fts(search_fts) VALUES ('optimize')")
        connection.execute("VACUUM")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()
    return before, _sqlite_size(path)


def _sqlite_size(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
