"""Alembic environment: runs migrations on the connection the store hands over.

memsync never reads an alembic.ini; `SqlStore.migrate()` builds the configuration in
code and passes its open connection in `config.attributes["connection"]`.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from sync_server.storage.schema import metadata

connection = context.config.attributes.get("connection")
if not isinstance(connection, Connection):
    raise RuntimeError("run migrations through `memsync-server migrate`")

context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
