"""`memsync-server`'s plumbing, shared by its command modules (`cli`, `cli_tokens`):
exit codes, one-line failures, settings, and the store a command opens.

Importing it checks that the server's libraries are installed at all, so a client-only
install gets a clear "install the server" from `launch.py` rather than a traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, NoReturn

import click

if TYPE_CHECKING:
    from rich.table import Table

    from sync_server.config import Settings
    from sync_server.database_url import DatabaseSettings
    from sync_server.errors import StorageUnavailable
    from sync_server.storage.base import MigrationResult, TokenStore
    from sync_server.storage.sql import SqlStore
    from sync_server.storage.sqlite_tokens import SqliteTokens


def _require_server_stack() -> None:
    """Fail the import, as a missing library would, in an install without the `server`
    extra: the stack is imported command by command (so `--help` and the token
    commands start fast), but `launch.py` must still tell a client-only install how to
    get the server. `find_spec` looks the packages up without importing them."""
    from importlib.util import find_spec

    for name in ("fastapi", "sqlalchemy", "uvicorn"):
        if find_spec(name) is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


_require_server_stack()

EXIT_FAILURE = 1
EXIT_USAGE = 2

EXIT_CODES = (
    "Exit codes: 0 done, 1 failed (e.g. the database cannot be reached), "
    "2 usage or configuration error."
)
SERVE_EXIT_CODES = (
    "Exit codes: 0 stopped cleanly (SIGTERM, Ctrl-C), 1 failed (the port is in use, "
    "the database cannot be reached), 2 usage or configuration error."
)
_TIME = "%Y-%m-%d %H:%M"


def _fail(message: str, code: int = EXIT_FAILURE) -> NoReturn:
    click.echo(f"memsync-server: {message}", err=True)
    sys.exit(code)


def _settings() -> Settings:
    # Imported here: pydantic is a tenth of a second that `--help` does not need.
    from pydantic import ValidationError

    from sync_server.config import Settings

    try:
        return Settings()
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "settings"
        _fail(f"bad setting MEMSYNC_{field.upper()}: {first['msg']}", EXIT_USAGE)


def _database() -> DatabaseSettings:
    """The database settings alone, which is all the token commands need: read and
    checked as `Settings` reads them (the same functions), without importing pydantic."""
    from sync_server.database_url import SettingError, database_settings

    try:
        return database_settings(os.environ)
    except SettingError as error:
        _fail(f"bad setting {error.variable}: {error.problem}", EXIT_USAGE)


def _database_of(settings: Settings) -> DatabaseSettings:
    from sync_server.database_url import DatabaseSettings

    return DatabaseSettings(
        url=settings.database_url, url_given="database_url" in settings.model_fields_set
    )


def _say_on_stderr(message: str) -> None:
    click.echo(f"memsync-server: {message}", err=True)


def _announce_new_database(
    database: DatabaseSettings, say: Callable[[str], None] = _say_on_stderr
) -> None:
    """Say which SQLite file is about to be created when no database URL was given.

    `scripts/dev-server` always sets `MEMSYNC_DATABASE_URL`; without it the default
    file is relative to the current directory, which an operator should see.
    """
    from sync_server.storage.sql import sqlite_file

    path = sqlite_file(database.url)
    if database.url_given or path is None or path.exists():
        return
    say(f"MEMSYNC_DATABASE_URL is not set: creating the SQLite database {path.resolve()}")


def _unavailable(error: StorageUnavailable, database: DatabaseSettings) -> NoReturn:
    cause = f": {error.cause}" if error.cause else ""
    _fail(f"{error.message}{cause} ({_redacted_url(database.url)})")


@contextmanager
def _worded_failures(database: DatabaseSettings) -> Iterator[None]:
    """A store that fails midway (busy for 30 s, a disk error) is one line, too."""
    from sync_server.errors import StorageUnavailable

    try:
        yield
    except StorageUnavailable as error:
        _unavailable(error, database)


def _open_store(
    database: DatabaseSettings,
    say: Callable[[str], None] = _say_on_stderr,
    *,
    sqlite_synchronous: str = "normal",
) -> tuple[SqlStore, MigrationResult]:
    """A migrated store and what the migration did, or a one-line failure."""
    from sync_server.errors import StorageUnavailable
    from sync_server.storage.factory import open_store

    _announce_new_database(database, say)
    try:
        store = open_store(database.url, sqlite_synchronous=sqlite_synchronous)
        result = store.migrate()
    except StorageUnavailable as error:
        _unavailable(error, database)
    return store, result


def _store(settings: Settings) -> SqlStore:
    """A migrated store (SQLite as durable as `MEMSYNC_SQLITE_SYNCHRONOUS` says), or a
    one-line failure."""
    return _open_store(_database_of(settings), sqlite_synchronous=settings.sqlite_synchronous)[0]


def _not_migrated(revision: str | None, head: str, database: DatabaseSettings) -> NoReturn:
    _fail(
        f"the database schema is at revision {revision or 'none'}, this memsync-server "
        f"needs {head}: run `memsync-server migrate` first "
        f"({_redacted_url(database.url)})"
    )


def _ready_store(database: DatabaseSettings) -> SqlStore:
    """A store whose schema is already current, checked without Alembic (fast).

    A new, empty database gets its schema (as `migrate` would); one at another revision
    is a one-line failure asking for `memsync-server migrate`, which the server's own
    start runs too.
    """
    from sync_server.errors import StorageUnavailable
    from sync_server.storage.base import SCHEMA_HEAD
    from sync_server.storage.factory import open_store

    _announce_new_database(database)
    try:
        store = open_store(database.url)
        revision, has_tables = store.schema_revision()
    except StorageUnavailable as error:
        _unavailable(error, database)
    if revision == SCHEMA_HEAD:
        return store
    store.close()
    if revision is None and not has_tables:
        return _open_store(database)[0]
    _not_migrated(revision, SCHEMA_HEAD, database)


def _sqlite_tokens(database: DatabaseSettings) -> SqliteTokens | None:
    """The tokens of an existing, migrated SQLite file on the standard library's
    `sqlite3` (no SQLAlchemy to import), or None to leave the database to `SqlStore`:
    PostgreSQL, a URL with a query, a file to create, or one `sqlite3` cannot read
    (`SqlStore` says what is wrong with it)."""
    import sqlite3

    from sync_server.storage.base import SCHEMA_HEAD
    from sync_server.storage.factory import sqlite_tokens

    tokens = sqlite_tokens(database.url)
    if tokens is None:
        return None
    try:
        revision, has_tables = tokens.schema_revision()
    except sqlite3.Error:
        tokens.close()
        return None
    if revision == SCHEMA_HEAD:
        return tokens
    tokens.close()
    if revision is None and not has_tables:
        return None  # an empty file: `SqlStore` gives it its schema
    _not_migrated(revision, SCHEMA_HEAD, database)


def _token_store(database: DatabaseSettings) -> TokenStore:
    """The store of the token commands, its schema current (a new database gets it)."""
    tokens = _sqlite_tokens(database)
    return _ready_store(database) if tokens is None else tokens


@contextmanager
def _tokens() -> Iterator[TokenStore]:
    """The token commands' store (`_token_store`), closed after; a failure is one line."""
    database = _database()
    store = _token_store(database)
    try:
        with _worded_failures(database):
            yield store
    finally:
        store.close()


def _redacted_url(url: str) -> str:
    """The database URL with its password, wherever it is, shown as `***`."""
    from sync_server.database_url import masked_url

    return masked_url(url)


def _iso(moment: datetime | None) -> str | None:
    from sync_server.times import wire_time

    return None if moment is None else wire_time(moment)


def print_table(table: Table) -> None:
    """A rich table on stdout. In a pipe or a file every cell is whole (no `…`): a
    script or `grep` gets every name in full, however narrow the terminal it ran
    under; on a terminal rich fits the table to its width, as people expect."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console = Console(width=10_000)
    console.print(table)
