"""Move a test database's schema to a given Alembic revision, up or down."""

from __future__ import annotations


def move_schema(url: str, revision: str, *, down: bool = False) -> None:
    """Upgrade (or, with `down`, downgrade) the database at `url` to `revision`."""
    from alembic import command
    from alembic.config import Config

    from sync_server.storage.sql import MIGRATIONS_DIR, SqlStore

    store = SqlStore(url)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    try:
        with store.engine.connect() as connection:
            config.attributes["connection"] = connection
            (command.downgrade if down else command.upgrade)(config, revision)
            connection.commit()
    finally:
        store.close()
