"""The server's shared secrets: made once, then the same for every store on the database."""

from __future__ import annotations

from sync_server.storage.sql import SqlStore


def test_a_secret_is_made_once_and_every_store_on_the_database_reads_it(
    store: SqlStore, database_url: str
) -> None:
    first = store.server_secret("ui-session")
    assert len(first) >= 40
    assert store.server_secret("ui-session") == first
    other = SqlStore(database_url)
    try:
        assert other.server_secret("ui-session") == first
    finally:
        other.close()
    assert store.server_secret("another") != first
