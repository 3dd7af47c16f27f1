"""The write path's statements, defined once against `schema`'s tables, for both backends.

A commit (the repo row's lock, the entries, the history rows, the head), a PUT's review
switch and the index rule's read of an old text are each one SQLAlchemy Core statement
here, written against the `schema` tables: no column, table or type is named anywhere
else. `WriteStatements` compiles them once per store for its dialect:

- PostgreSQL executes the Core statement itself (`Connection.execute`).
- SQLite executes the compiled SQL text on the transaction's own `sqlite3` connection,
  with the parameters in the compiled order and the columns' own bind and result
  processors (so a `UtcDateTime` is stored and read exactly as SQLAlchemy does). Building,
  cache-keying and compiling Core statements per call cost more than SQLite itself for a
  one-key PUT (about 60% of `SqlStore.put` in a profile); compiling once does not.

A driver error is worded by `sql_base._translate_errors`, around every call made here.
The storage contract suite (tests/storage) runs every statement on both backends.
"""

from __future__ import annotations

import sqlite3
from abc import ABC, abstractmethod
from collections import namedtuple
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from sqlalchemy import Connection, bindparam, delete, insert, null, select, update
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import ClauseElement, Executable
from sqlalchemy.sql.compiler import SQLCompiler

from sync_server.storage import schema

# A SQLAlchemy bind or result processor: the stored form of a value, or back.
_Processor = Callable[[Any], Any]


def driver(connection: Connection) -> sqlite3.Connection:
    """The `sqlite3` connection under a SQLAlchemy one (inside its transaction)."""
    raw: Any = connection.connection.driver_connection
    assert isinstance(raw, sqlite3.Connection)
    return raw


def _insert_ignoring_conflict(dialect: Dialect) -> Any:
    """This dialect's INSERT INTO repos that knows ON CONFLICT DO NOTHING."""
    if dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as postgresql_insert

        return postgresql_insert(schema.repos)
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(schema.repos)


class Prepared:
    """One statement, compiled once for a dialect. Its parameters are given by the
    bind names of its definition (`values` mappings)."""

    __slots__ = ("names", "order", "params_out", "results", "row", "sql", "statement")

    def __init__(self, statement: Executable, dialect: Dialect) -> None:
        self.statement = statement
        compiled = cast(SQLCompiler, cast(ClauseElement, statement).compile(dialect=dialect))
        self.sql = compiled.string
        self.order: tuple[str, ...] = tuple(compiled.positiontup or ())
        self.params_out: tuple[tuple[int, _Processor], ...] = tuple(
            (index, processor)
            for index, name in enumerate(self.order)
            if (processor := _bind_processor(compiled.binds[name].type, dialect)) is not None
        )
        columns = list(getattr(statement, "selected_columns", ()))
        self.names = tuple(column.name for column in columns)
        self.row: Any = namedtuple("Row", self.names) if columns else None
        self.results: tuple[tuple[int, _Processor], ...] = tuple(
            (index, processor)
            for index, column in enumerate(columns)
            if (processor := _result_processor(column.type, dialect)) is not None
        )

    def params(self, values: Mapping[str, Any]) -> list[Any]:
        """`values` in the compiled order, in their stored form (the driver's)."""
        params = [values[name] for name in self.order]
        for index, processor in self.params_out:
            params[index] = processor(params[index])
        return params

    def loaded(self, found: Sequence[Any]) -> Any:
        """A driver row as a row read by attribute, each column in its Python form."""
        values = list(found)
        for index, processor in self.results:
            values[index] = processor(values[index])
        return self.row(*values)


def _bind_processor(kind: Any, dialect: Dialect) -> _Processor | None:
    processor: _Processor | None = kind.dialect_impl(dialect).bind_processor(dialect)
    return processor


def _result_processor(kind: Any, dialect: Dialect) -> _Processor | None:
    processor: _Processor | None = kind.dialect_impl(dialect).result_processor(dialect, None)
    return processor


class WriteStatements:
    """The write path's statements compiled for one store's dialect, and their runs."""

    def __init__(self, dialect: Dialect) -> None:
        repos, entries, history = schema.repos, schema.entries, schema.history
        policies = schema.repo_policies
        self._on_driver = dialect.name == "sqlite"

        def prepared(statement: Executable) -> Prepared:
            return Prepared(statement, dialect)

        def binds(*names: str) -> dict[str, Any]:
            return {name: bindparam(name) for name in names}

        # Locks the row for the transaction on PostgreSQL; SQLite's IMMEDIATE
        # transaction already holds the write lock (FOR UPDATE compiles to nothing).
        self.lock_repo = prepared(
            select(repos).where(repos.c.name == bindparam("name")).with_for_update()
        )
        # Two first writers may race to create the row: the loser's insert does nothing
        # (after waiting for the winner's commit) and it then locks the winner's row.
        self.create_repo = prepared(
            _insert_ignoring_conflict(dialect)
            .values(
                **binds("name", "version", "checksum", "entry_count", "history_floor"),
                last_modified=bindparam("at"),
                deleted_at=null(),
            )
            .on_conflict_do_nothing()
        )
        self.review_flags = prepared(
            select(policies.c.pattern, policies.c.review).where(
                policies.c.pattern.in_([bindparam("p0"), bindparam("p1"), bindparam("p2")])
            )
        )
        self.entry_text = prepared(
            select(entries.c.text).where(
                entries.c.repo_id == bindparam("repo_id"), entries.c.key == bindparam("key")
            )
        )
        self.insert_entry = prepared(
            insert(entries).values(**binds("repo_id", "key", "text", "checksum", "version"))
        )
        # A WHERE's bind may not share a SET column's name (SQLAlchemy keeps those).
        self.update_entry = prepared(
            update(entries)
            .where(entries.c.repo_id == bindparam("b_repo_id"), entries.c.key == bindparam("b_key"))
            .values(**binds("text", "checksum", "version"))
        )
        self.delete_entry = prepared(
            delete(entries).where(
                entries.c.repo_id == bindparam("repo_id"), entries.c.key == bindparam("key")
            )
        )
        self.insert_history = prepared(
            insert(history).values(
                **binds(
                    "repo_id",
                    "key",
                    "version",
                    "op",
                    "checksum",
                    "text",
                    "author",
                    "at",
                    "accepted_by",
                    "provenance",
                )
            )
        )
        self.update_head = prepared(
            update(repos)
            .where(repos.c.id == bindparam("b_id"))
            .values(
                **binds("version", "checksum", "entry_count"),
                last_modified=bindparam("at"),
                deleted_at=null(),
            )
        )

    def on(self, connection: Connection) -> Runner:
        """The statements' runs in `connection`'s transaction (take one per use: on
        SQLite it holds the driver connection, looked up once)."""
        if self._on_driver:
            return _DriverRunner(driver(connection))
        return _CoreRunner(connection)


class Runner(ABC):
    """Runs prepared statements in one connection's transaction (PostgreSQL's through
    Core, SQLite's on the driver connection)."""

    __slots__ = ()

    @abstractmethod
    def run(self, statement: Prepared, rows: Sequence[Mapping[str, Any]]) -> None:
        """Execute `statement` once per mapping in `rows` (nothing when empty)."""

    @abstractmethod
    def all(self, statement: Prepared, values: Mapping[str, Any]) -> list[Any]:
        """The rows `statement` selects, read by attribute."""

    @abstractmethod
    def first(self, statement: Prepared, values: Mapping[str, Any]) -> Any:
        """The first row `statement` selects, or None."""


class _CoreRunner(Runner):
    """PostgreSQL: the Core statement, through SQLAlchemy (which caches its compile)."""

    __slots__ = ("_connection",)

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def run(self, statement: Prepared, rows: Sequence[Mapping[str, Any]]) -> None:
        if rows:
            self._connection.execute(statement.statement, list(rows))

    def all(self, statement: Prepared, values: Mapping[str, Any]) -> list[Any]:
        return list(self._connection.execute(statement.statement, dict(values)).all())

    def first(self, statement: Prepared, values: Mapping[str, Any]) -> Any:
        return self._connection.execute(statement.statement, dict(values)).first()


class _DriverRunner(Runner):
    """SQLite: the compiled text on the `sqlite3` connection, in the same transaction."""

    __slots__ = ("_raw",)

    def __init__(self, raw: sqlite3.Connection) -> None:
        self._raw = raw

    def run(self, statement: Prepared, rows: Sequence[Mapping[str, Any]]) -> None:
        if len(rows) == 1:
            self._raw.execute(statement.sql, statement.params(rows[0]))
        elif rows:
            self._raw.executemany(statement.sql, [statement.params(values) for values in rows])

    def all(self, statement: Prepared, values: Mapping[str, Any]) -> list[Any]:
        found = self._raw.execute(statement.sql, statement.params(values)).fetchall()
        return [statement.loaded(item) for item in found]

    def first(self, statement: Prepared, values: Mapping[str, Any]) -> Any:
        found = self._raw.execute(statement.sql, statement.params(values)).fetchone()
        return None if found is None else statement.loaded(found)
