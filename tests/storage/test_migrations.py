"""The Alembic migrations build exactly the schema the queries are written against."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from sync_server.storage.schema import metadata
from sync_server.storage.sql import SqlStore


def test_migrated_database_matches_schema_module(store: SqlStore) -> None:
    with store.engine.connect() as connection:
        context = MigrationContext.configure(connection)
        assert compare_metadata(context, metadata) == []
        assert context.get_current_revision() is not None


def test_migrate_twice_changes_nothing(store: SqlStore) -> None:
    before = sorted(inspect(store.engine).get_table_names())
    store.migrate()
    assert sorted(inspect(store.engine).get_table_names()) == before
    assert {"repos", "entries", "history", "tokens"} <= set(before)
