"""`SqliteTokens` (the token commands' store on plain `sqlite3`) keeps the storage
contract's token rules and the very rows `SqlStore` reads and writes.

The contract's token tests (`test_contract.TestTokens`) run here once more, on
`SqliteTokens`; the rest checks that either store reads what the other wrote, that a
creation through each at once still lets one name win once, and that the schema head
it checks is Alembic's.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory

from sync_server.config import sqlite_url
from sync_server.storage.base import SCHEMA_HEAD, DuplicateTokenName, TokenRecord, TokenStore
from sync_server.storage.sql import MIGRATIONS_DIR, SqlStore
from sync_server.storage.sqlite_tokens import SqliteTokens
from tests.storage.test_contract import WRITERS, race_for_one_name
from tests.storage.test_contract import TestTokens as _TokenContract


@pytest.fixture
def database(tmp_path: Path) -> Iterator[tuple[Path, SqlStore]]:
    """A migrated SQLite file and the `SqlStore` on it."""
    path = tmp_path / "memsync.sqlite3"
    sql_store = SqlStore(sqlite_url(path))
    sql_store.migrate()
    yield path, sql_store
    sql_store.close()


@pytest.fixture
def store(database: tuple[Path, SqlStore]) -> Iterator[SqliteTokens]:
    """What the contract's token tests run against here (it overrides conftest's)."""
    tokens = SqliteTokens(database[0])
    yield tokens
    tokens.close()


class TestTokensOnSqlite3(_TokenContract):
    """Every token test of the storage contract, on `SqliteTokens`."""


def _create(store: TokenStore, lookup_id: str, name: str, **options: object) -> TokenRecord:
    return store.create_token(
        lookup_id=lookup_id,
        secret_hash=lookup_id.ljust(64, "0"),
        name=name,
        repo_pattern="acme/*",
        read_only=bool(options.get("read_only", False)),
        expires_at=options.get("expires_at"),  # type: ignore[arg-type]
        reviewer=bool(options.get("reviewer", False)),
        person=options.get("person"),  # type: ignore[arg-type]
    )


def test_each_store_reads_what_the_other_wrote(
    database: tuple[Path, SqlStore], store: SqliteTokens
) -> None:
    sql_store = database[1]
    soon = datetime.now(UTC) + timedelta(days=90, microseconds=7)
    written = [
        _create(store, "fast1", "alice", expires_at=soon, reviewer=True, person="al"),
        _create(sql_store, "slow1", "bob", read_only=True, person="bo"),
        _create(store, "fast2", "carol", read_only=True),
        _create(sql_store, "slow2", "dave", expires_at=soon, reviewer=True),
    ]
    assert [t.reviewer for t in store.list_tokens()] == [True, False, False, True]
    assert [t.person for t in sql_store.list_tokens()] == ["al", "bo", None, None]
    assert written[0].expires_at == soon
    assert sql_store.revoke_token("carol") == 1
    assert store.revoke_token("slow2") == 1
    assert store.list_tokens() == sql_store.list_tokens()
    listed = store.list_tokens()
    assert [(t.lookup_id, t.read_only) for t in listed] == [
        ("fast1", False),
        ("slow1", True),
        ("fast2", True),
        ("slow2", False),
    ]
    assert [t.revoked_at is not None for t in listed] == [False, False, True, True]
    for record in listed:
        assert store.find_token(record.lookup_id) == sql_store.find_token(record.lookup_id)
        assert record.created_at.utcoffset() == timedelta(0)
    # A person's spaces are seen alike (`token create --person` names them); `a_b` is no
    # pattern: `~axb/` is not a space of `a_b`.
    sql_store.put(
        "~axb/~", {"n.md": "x"}, if_match=None, base_checksums=None, max_entries=9, author="a"
    )
    for either in (store, sql_store):
        assert either.has_spaces("~axb/")
        assert not either.has_spaces("~a_b/")
        assert not either.has_spaces("~ax/")
    # The name rule holds across them: a live name taken through one is refused by both.
    with pytest.raises(DuplicateTokenName):
        _create(sql_store, "slow3", "alice")
    with pytest.raises(DuplicateTokenName):
        _create(store, "fast3", "bob")


def test_creating_one_name_through_both_stores_at_once_one_wins(
    database: tuple[Path, SqlStore], store: SqliteTokens
) -> None:
    stores: list[TokenStore] = [store, database[1]]
    outcomes = race_for_one_name(lambda n: _create(stores[n % 2], f"lk{n}", "ci"))
    assert sorted(outcomes) == ["created"] + ["refused"] * (WRITERS - 1)
    assert [t.name for t in database[1].list_tokens()] == ["ci"]


def test_the_schema_head_is_the_newest_migration() -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # The head both the token path (`cli_common._sqlite_tokens`) and `SqlStore` check.
    assert ScriptDirectory.from_config(config).get_current_head() == SCHEMA_HEAD


def test_schema_revision_is_what_sqlstore_reads(database: tuple[Path, SqlStore]) -> None:
    path, sql_store = database
    tokens = SqliteTokens(path)
    assert tokens.schema_revision() == sql_store.schema_revision() == (SCHEMA_HEAD, True)
    tokens.close()
    empty = path.with_name("empty.sqlite3")
    empty.touch()
    tokens = SqliteTokens(empty)
    assert tokens.schema_revision() == (None, False)
    tokens.close()


def test_it_never_creates_a_database_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.sqlite3"
    with pytest.raises(sqlite3.OperationalError):
        SqliteTokens(missing)
    assert not missing.exists()


def test_a_naive_expiry_is_refused(store: SqliteTokens) -> None:
    with pytest.raises(ValueError, match="naive"):
        _create(store, "lk1", "ci", expires_at=datetime.now())
    assert store.list_tokens() == []


def test_a_file_name_with_uri_characters_opens_that_file(tmp_path: Path) -> None:
    folder = tmp_path / "a b%25#x&mode=ro"
    folder.mkdir()
    path = folder / "memsync.sqlite3"
    sqlite3.connect(path).close()
    tokens = SqliteTokens(path)
    assert tokens.schema_revision() == (None, False)
    tokens.close()
    assert sorted(p.name for p in folder.iterdir())[0] == "memsync.sqlite3"
    assert not (tmp_path / "a b%#x&mode=ro").exists()


def test_its_statements_name_the_schemas_columns_in_order() -> None:
    """The token commands name the table's columns themselves (they load no SQLAlchemy):
    a column added to, renamed in or moved in `schema.tokens` fails here first."""
    from sync_server.storage import schema, sqlite_tokens

    columns = [column.name for column in schema.tokens.columns]
    selected = sqlite_tokens._SELECT.removeprefix("SELECT ").removesuffix(" FROM tokens")
    assert selected.split(", ") == columns
    named, values = sqlite_tokens._INSERT.removeprefix("INSERT INTO tokens (").split(") VALUES (")
    assert named.split(", ") == columns[1:]
    assert values == ", ".join("?" * len(columns[1:])) + ")"
