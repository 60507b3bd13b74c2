"""Alembic environment: runs migrations on the connection `sql.py` hands over.

`toolrelay.adapters.stores.sql` opens an async engine and calls Alembic inside
`connection.run_sync`, passing the sync connection as `config.attributes["connection"]`
(Alembic's async cookbook). Offline SQL generation is not supported.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from toolrelay.adapters.stores.models import Base


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def _main() -> None:
    if context.is_offline_mode():
        raise RuntimeError("toolrelay migrations run online only: use `toolrelay db upgrade`")
    connection = context.config.attributes.get("connection")
    if not isinstance(connection, Connection):
        raise RuntimeError("run migrations through toolrelay.adapters.stores.sql.upgrade()")
    _run(connection)


_main()
