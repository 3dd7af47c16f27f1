"""`memsync-server`: serve, migrate, prune, and manage tokens and repos.

Each command parses its options, calls one library function, and prints the result.
Errors are one readable line on stderr with exit code 1 (failure) or 2 (usage or
configuration); never a traceback.
"""

from __future__ import annotations

import errno
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from sync_server import __version__
from sync_server.logs import LOG_FORMATS, LogFormat

if TYPE_CHECKING:
    from sync_server.config import Settings
    from sync_server.database_url import DatabaseSettings
    from sync_server.errors import StorageUnavailable
    from sync_server.storage.base import MigrationResult, TokenRecord, TokenStore
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
# `token create --expires`: a whole number of hours, days or weeks.
_EXPIRY_PATTERN = re.compile(r"([1-9][0-9]{0,5})([hdw])")
_EXPIRY_UNITS = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}
MAX_EXPIRY = timedelta(days=3650)
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
    database: DatabaseSettings, say: Callable[[str], None] = _say_on_stderr
) -> tuple[SqlStore, MigrationResult]:
    """A migrated store and what the migration did, or a one-line failure."""
    from sync_server.errors import StorageUnavailable
    from sync_server.storage.factory import open_store

    _announce_new_database(database, say)
    try:
        store = open_store(database.url)
        result = store.migrate()
    except StorageUnavailable as error:
        _unavailable(error, database)
    return store, result


def _store(settings: Settings) -> SqlStore:
    """A migrated store, or a one-line failure."""
    return _open_store(_database_of(settings))[0]


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


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_CODES)
@click.version_option(__version__, prog_name="memsync-server")
def main() -> None:
    """The memsync team server. Settings come from MEMSYNC_* environment variables."""


def _check_port(host: str, port: int) -> None:
    """Fail in one line unless `host:port` can be listened on, as uvicorn will bind it."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # uvicorn sets SO_REUSEADDR too: only a listening socket makes the bind fail.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except socket.gaierror:
            _fail(f"cannot listen on {host}: no such host or address", EXIT_USAGE)
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                _fail(
                    f"port {port} on {host} is in use (is another server running there? "
                    "choose another with --port)"
                )
            if error.errno == errno.EACCES:
                _fail(f"may not listen on port {port} on {host}: permission denied")
            if error.errno == errno.EADDRNOTAVAIL:
                _fail(f"cannot listen on {host}: not an address of this machine", EXIT_USAGE)
            _fail(f"cannot listen on port {port} on {host}: {error.strerror}")


@main.command(epilog=SERVE_EXIT_CODES)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8787, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Server processes (share one PostgreSQL; keep 1 on SQLite).",
)
@click.option("--no-migrate", is_flag=True, help="Do not upgrade the schema on start.")
@click.option(
    "--log-format",
    type=click.Choice(LOG_FORMATS),
    default="text",
    show_default=True,
    help="text, or json: one object per line (time, level, logger, message, request fields).",
)
def serve(host: str, port: int, workers: int, no_migrate: bool, log_format: LogFormat) -> None:
    """Run the HTTP server (uvicorn); every worker logs every request to stderr."""
    import logging.config

    import uvicorn

    from sync_server.events import SHUTDOWN_GRACE_SECONDS
    from sync_server.logs import log_config

    settings = _settings()
    config = log_config(log_format)
    # Applied here for this process's own lines; uvicorn applies it again in each worker.
    logging.config.dictConfig(config)
    log = logging.getLogger("memsync.server")
    _check_port(host, port)
    if not no_migrate and settings.auto_migrate:
        # Migrate once here, with a one-line error if the database cannot be reached,
        # rather than in (or racing between) the workers.
        _open_store(_database_of(settings), log.warning)[0].close()
    else:
        _announce_new_database(_database_of(settings), log.warning)
    os.environ["MEMSYNC_AUTO_MIGRATE"] = "false"
    log.info(
        "memsync-server %s on http://%s:%d, %d worker(s) (database: %s)",
        __version__,
        host,
        port,
        workers,
        _redacted_url(settings.database_url),
    )
    uvicorn.run(
        "sync_server.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        access_log=False,
        log_config=config,
        log_level="info",
        timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
    )


@main.command(epilog=EXIT_CODES)
def migrate() -> None:
    """Create or upgrade the database schema, and say which it did."""
    settings = _settings()
    store, result = _open_store(_database_of(settings))
    store.close()
    where = _redacted_url(settings.database_url)
    if result.before is None:
        click.echo(f"created the schema at revision {result.after} ({where})")
    elif result.before == result.after:
        click.echo(f"schema is up to date at revision {result.after} ({where})")
    else:
        click.echo(f"upgraded the schema from revision {result.before} to {result.after} ({where})")


@main.command(epilog=EXIT_CODES)
@click.option("--days", type=click.IntRange(min=1), help="Default: MEMSYNC_HISTORY_DAYS.")
def prune(days: int | None) -> None:
    """Drop history older than DAYS that no live entry needs."""
    settings = _settings()
    days = days or settings.history_days
    if days is None:
        _fail("history is kept forever: give --days or set MEMSYNC_HISTORY_DAYS", EXIT_USAGE)
    store = _store(settings)
    removed = store.prune_history(datetime.now(UTC) - timedelta(days=days))
    click.echo(f"removed {removed} history row(s) older than {days} day(s)")


def _sqlite_path(settings: Settings, command: str) -> Path:
    """The SQLite file the settings name, or a one-line pointer to PostgreSQL's tools."""
    from sync_server.storage.sql import sqlite_file

    path = sqlite_file(settings.database_url)
    if path is None:
        _fail(POSTGRES_ADVICE[command], EXIT_USAGE)
    return path


POSTGRES_ADVICE = {
    "vacuum": "on PostgreSQL autovacuum reclaims deleted rows for reuse; VACUUM FULL gives "
    "the space back to the OS but locks each table (see docs/operators.md, Disk space)",
    "backup": "on PostgreSQL back up with pg_dump --format=custom --file=memsync.dump "
    "DATABASE_URL, and restore with pg_restore (see docs/operators.md, Backups)",
}


@main.command(epilog=EXIT_CODES)
def vacuum() -> None:
    """Give disk space back after `repo delete` or `prune` (SQLite: VACUUM).

    Deleted rows leave free pages that SQLite reuses but never returns to the disk;
    VACUUM rewrites the file without them. Safe while the server runs: writes wait for
    it (about a second per 100 MB). Needs free disk of about the database's size. On
    PostgreSQL it only says what to run instead.
    """
    from sync_server.storage.maintenance import MaintenanceError
    from sync_server.storage.maintenance import vacuum as vacuum_file

    path = _sqlite_path(_settings(), "vacuum")
    try:
        result = vacuum_file(path)
    except MaintenanceError as error:
        _fail(str(error))
    click.echo(
        f"vacuumed {path}: {result.before:,} bytes before, {result.after:,} after "
        f"({_human_bytes(max(0, result.before - result.after))} given back)"
    )
    if not result.checkpointed:
        click.echo(
            "a reader still holds an old snapshot: the file shrinks fully at the next "
            "checkpoint (or run vacuum again)",
            err=True,
        )


@main.command(epilog=EXIT_CODES)
@click.argument("target", metavar="PATH", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Replace PATH if it exists.")
def backup(target: Path, force: bool) -> None:
    """Copy the SQLite database to PATH, consistently, while the server serves.

    The copy is the database as of one commit (SQLite's online backup API), written
    to a temporary file beside PATH and then renamed into place. Restore: stop the
    server, put the copy where MEMSYNC_DATABASE_URL points, start it. On PostgreSQL it
    only says how to use pg_dump.
    """
    from sync_server.storage.maintenance import MaintenanceError
    from sync_server.storage.maintenance import backup as backup_file

    path = _sqlite_path(_settings(), "backup")
    try:
        result = backup_file(path, target, force=force)
    except MaintenanceError as error:
        _fail(str(error))
    click.echo(f"backed up {path} to {result.path}: {result.bytes:,} bytes, {result.repos} repo(s)")


# -- tokens ------------------------------------------------------------------------------


@main.group(epilog=EXIT_CODES)
def token() -> None:
    """Create, list and revoke access tokens."""


def parse_expiry(value: str) -> timedelta:
    """`90d`, `12h` or `2w` as a duration; `ValueError` for anything else."""
    match = _EXPIRY_PATTERN.fullmatch(value.strip().lower())
    if match is None:
        raise ValueError(
            f"--expires {value!r}: give a whole number of hours, days or weeks (12h, 90d, 2w)"
        )
    duration = int(match.group(1)) * _EXPIRY_UNITS[match.group(2)]
    if duration > MAX_EXPIRY:
        raise ValueError(f"--expires {value!r}: at most 3650 days; leave it out for no expiry")
    return duration


def _access(record: TokenRecord) -> str:
    """`read-only`, `read-write`, or `read-write, reviewer`, as the CLI shows a token."""
    if record.read_only:
        return "read-only"
    return "read-write, reviewer" if record.reviewer else "read-write"


def _person(record: TokenRecord) -> str | None:
    """The person a token belongs to (its name when none was given), as the CLI shows it."""
    from sync_server.personal import person_of

    return person_of(record.name, record.person)


def _token_state(record: TokenRecord, now: datetime) -> str:
    if record.revoked_at is not None:
        return "revoked"
    return "expired" if record.expired(now) else "live"


def token_names(names: tuple[str, ...], joined: str | None) -> list[str]:
    """The names of `--name` (repeated) and `--names a,b`, in order; each once."""
    wanted = list(names)
    if joined is not None:
        wanted += [part.strip() for part in joined.split(",")]
    if any(not name for name in wanted):
        raise ValueError("--names: an empty name (a stray comma?)")
    if any(not (len(name) <= 100 and name.isprintable()) for name in wanted):
        # issue_token's rule, checked for all names before the first token is made
        raise ValueError("a token name must be 1 to 100 printable characters")
    repeated = sorted({name for name in wanted if wanted.count(name) > 1})
    if repeated:
        raise ValueError(f"the name {repeated[0]!r} is given twice")
    return wanted


@token.command("create", epilog=EXIT_CODES)
@click.option("--repo", "repo_pattern", required=True, help="owner/name, owner/* or *.")
@click.option("--read-only", is_flag=True, help="May read but not write.")
@click.option(
    "--name",
    "names",
    multiple=True,
    help="Shown as the author of writes; no two live tokens share one. "
    "Repeat it to mint one token per name.",
)
@click.option(
    "--names", "joined", metavar="A,B,...", help="Several names at once, comma-separated."
)
@click.option(
    "--expires",
    default=None,
    metavar="DURATION",
    help="Stop working after this long: 12h, 90d or 2w (default: never).",
)
@click.option(
    "--reviewer",
    is_flag=True,
    help="In reviewed repos, its writes publish directly and it may accept or reject "
    "others' proposals (not with --read-only).",
)
@click.option(
    "--person",
    default=None,
    help="Whose personal spaces it reaches (one per machine may share a person; "
    "default: the token's name).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='One JSON object on stdout: {"tokens": [{"name", "id", "repos", "access", '
    '"expiresAt", "reviewer", "person", "token"}]}.',
)
def token_create(
    repo_pattern: str,
    read_only: bool,
    names: tuple[str, ...],
    joined: str | None,
    expires: str | None,
    reviewer: bool,
    person: str | None,
    as_json: bool,
) -> None:
    """Mint a token (or one per --name); each token is printed once, on stdout.

    One token: alone on the last line. Several: one line each, NAME then the token,
    separated by a tab. All are minted or, when one cannot be (a name already live),
    none is.
    """
    from memsync_protocol.repos import normalize_scope
    from sync_server.auth import issue_token

    if reviewer and read_only:
        _fail("a reviewer token writes: --reviewer cannot go with --read-only", EXIT_USAGE)
    try:
        normalize_scope(repo_pattern)  # refuse bad input before touching the database
        lifetime = None if expires is None else parse_expiry(expires)
        if person is not None:
            from sync_server.personal import normalize_person

            person = normalize_person(person)
        wanted: list[str | None] = [*token_names(names, joined)] or [None]
    except ValueError as error:
        _fail(str(error), EXIT_USAGE)
    from sync_server.storage.base import DuplicateTokenName

    with _tokens() as store:
        taken = {r.name: r for r in store.list_tokens() if r.revoked_at is None}
        clash = next((taken[name] for name in wanted if name in taken), None)
        if clash is not None:
            none_made = "; no token was created" if len(wanted) > 1 else ""
            _fail(f"{DuplicateTokenName(clash)}{none_made}", EXIT_USAGE)
        expires_at = None if lifetime is None else datetime.now(UTC) + lifetime
        minted: list[tuple[TokenRecord, str]] = []
        for name in wanted:
            try:
                minted.append(
                    issue_token(
                        store,
                        repo_pattern=repo_pattern,
                        read_only=read_only,
                        name=name,
                        expires_at=expires_at,
                        reviewer=reviewer,
                        person=person,
                    )
                )
            except ValueError as error:
                # Another `token create` took the name meanwhile: take back the ones made.
                for record, _ in minted:
                    store.revoke_token(record.lookup_id)
                _fail(str(error), EXIT_USAGE)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "tokens": [
                        {
                            "name": record.name,
                            "id": record.lookup_id[:6],
                            "repos": record.repo_pattern,
                            "access": "read-only" if record.read_only else "read-write",
                            "expiresAt": _iso(record.expires_at),
                            "reviewer": record.reviewer,
                            "person": _person(record),
                            "token": secret,
                        }
                        for record, secret in minted
                    ]
                },
                ensure_ascii=False,
            )
        )
        return
    for record, _ in minted:
        access = _access(record)
        if record.person is not None:
            access += f", person {record.person}"
        until = f", expires {record.expires_at.strftime(_TIME)} UTC" if record.expires_at else ""
        click.echo(
            f"created token {record.name!r} ({access}, repos: {record.repo_pattern}{until})",
            err=True,
        )
    click.echo("store it now: it is not shown again", err=True)
    if len(minted) == 1:
        click.echo(minted[0][1])
        return
    for record, secret in minted:
        click.echo(f"{record.name}\t{secret}")


@token.command("list", epilog=EXIT_CODES)
@click.option("--json", "as_json", is_flag=True, help='One JSON object: {"tokens": [...]}.')
def token_list(as_json: bool) -> None:
    """List tokens with their scope, expiry and state (never their secrets)."""
    with _tokens() as store:
        records = store.list_tokens()
    now = datetime.now(UTC)
    if as_json:
        tokens = [
            {
                "name": record.name,
                "id": record.lookup_id[:6],
                "repos": record.repo_pattern,
                "access": "read-only" if record.read_only else "read-write",
                "reviewer": record.reviewer,
                "person": _person(record),
                "createdAt": _iso(record.created_at),
                "expiresAt": _iso(record.expires_at),
                "revokedAt": _iso(record.revoked_at),
                "state": _token_state(record, now),
            }
            for record in records
        ]
        click.echo(json.dumps({"tokens": tokens}, ensure_ascii=False))
        return
    from rich.console import Console
    from rich.table import Table

    # The person column only when some token belongs to someone other than its name:
    # the table stays within 80 columns for the usual one-token-per-person team.
    with_person = any(_person(record) != record.name for record in records)
    table = Table("name", "id", *(["person"] if with_person else []), "repos", "access")
    table.add_column("created")
    table.add_column("expires")
    table.add_column("state")
    for record in records:
        person = [_person(record) or "-"] if with_person else []
        table.add_row(
            record.name,
            record.lookup_id[:6],
            *person,
            record.repo_pattern,
            _access(record),
            record.created_at.strftime(_TIME),
            record.expires_at.strftime(_TIME) if record.expires_at else "never",
            _token_state(record, now)
            + (f" {record.revoked_at.strftime(_TIME)}" if record.revoked_at else ""),
        )
    Console().print(table)


@token.command("revoke", epilog=EXIT_CODES)
@click.argument("name_or_id")
def token_revoke(name_or_id: str) -> None:
    """Revoke the live tokens with this name (or id, as `token list` shows it)."""
    with _tokens() as store:
        revoked = store.revoke_token(name_or_id)
        if not revoked:
            matches = [r for r in store.list_tokens() if r.lookup_id.startswith(name_or_id)]
            if len(name_or_id) >= 6 and len(matches) == 1 and matches[0].revoked_at is None:
                revoked = store.revoke_token(matches[0].lookup_id)
    if not revoked:
        _fail(f"no live token named or with id {name_or_id!r}")
    click.echo(f"revoked {revoked} token(s)")


# -- repos -------------------------------------------------------------------------------


@main.group(epilog=EXIT_CODES)
def repo() -> None:
    """List the repos on this server, switch review on or off, and delete one."""


def _human_bytes(size: int) -> str:
    if size < 1000:
        return f"{size} B"
    if size < 1_000_000:
        return f"{size / 1000:.1f} kB"
    return f"{size / 1_000_000:.1f} MB"


@repo.command("list", epilog=EXIT_CODES)
@click.option("--json", "as_json", is_flag=True, help='One JSON object: {"repos": [...]}.')
def repo_list(as_json: bool) -> None:
    """Every repo with its live entries, their bytes, its version, last write and checksum,
    and (once any repo is reviewed) whether it is and how many proposals wait.

    The table shows the checksum's first 12 hex digits; --json shows it whole. Two
    servers whose repos have the same versions and checksums hold the same entries.
    """
    from rich.console import Console
    from rich.table import Table

    from sync_server.storage.sql_review import policy_patterns

    store = _store(_settings())
    from sync_server.personal import is_personal

    # Personal spaces are no team repos: `person list` counts them.
    summaries = [summary for summary in store.list_repos() if not is_personal(summary.repo)]
    policies = store.review_policies()

    def reviewed(name: str) -> bool:
        decided = (policies[p] for p in policy_patterns(name) if p in policies)
        return next(decided, False)

    review = {summary.repo: reviewed(summary.repo) for summary in summaries}
    pending = {summary.repo: store.pending_count(summary.repo) for summary in summaries}
    if as_json:
        repos: list[dict[str, Any]] = [
            {
                "repo": summary.repo,
                "entries": summary.entries,
                "bytes": summary.bytes,
                "version": summary.version,
                "lastModified": _iso(summary.last_modified),
                "checksum": summary.checksum,
                "review": review[summary.repo],
                "pending": pending[summary.repo],
            }
            for summary in summaries
        ]
        click.echo(json.dumps({"repos": repos}, ensure_ascii=False))
        return
    # The review columns only once review is used, so the table stays as narrow as before.
    shows_review = any(review.values()) or any(pending.values())
    columns = ["repo", "entries", "bytes", "version", "last write", "checksum"]
    table = Table(*columns, *(["review", "pending"] if shows_review else []))
    for summary in summaries:
        cells = [
            summary.repo,
            str(summary.entries),
            _human_bytes(summary.bytes),
            str(summary.version),
            summary.last_modified.strftime(_TIME),
            summary.checksum.removeprefix("sha256:")[:12],
        ]
        if shows_review:
            cells += ["on" if review[summary.repo] else "off", str(pending[summary.repo])]
        table.add_row(*cells)
    Console().print(table)


@repo.command("set", epilog=EXIT_CODES)
@click.argument("pattern", metavar="PATTERN")
@click.option(
    "--review",
    type=click.Choice(["on", "off"]),
    required=True,
    help="on: writes by tokens that are not reviewers become proposals a reviewer accepts.",
)
def repo_set(pattern: str, review: str) -> None:
    """Switch review on or off for OWNER/NAME, OWNER/* or * (the most specific pattern
    matching a repo decides; pending proposals stay when it is switched off)."""
    from memsync_protocol.repos import normalize_scope

    try:
        normalized = normalize_scope(pattern)
    except ValueError as error:
        _fail(str(error), EXIT_USAGE)
    _store(_settings()).set_review(normalized, review == "on")
    covers = "repo" if "*" not in normalized else "repos matching"
    click.echo(f"review {review} for {covers} {normalized}")


@repo.command("delete", epilog=EXIT_CODES)
@click.argument("name", metavar="OWNER/NAME")
@click.option("--yes", is_flag=True, help="Really delete; without it, only say what would go.")
def repo_delete(name: str, yes: bool) -> None:
    """Delete a repo: its entries and their whole history, for good.

    Without --yes nothing is deleted: it says what would be (exit 2). Clients that
    still sync the repo see it as never written; a later push starts it again. Back up
    the database first if the history might matter.
    """
    from memsync_protocol.repos import normalize_repo

    try:
        repo_name = normalize_repo(name)
    except ValueError as error:
        _fail(str(error), EXIT_USAGE)
    store = _store(_settings())
    summary = store.repo_summary(repo_name)
    if summary is None:
        _fail(f"no repo {repo_name} on this server (`memsync-server repo list` shows them)")
    if not yes:
        _fail(
            f"would delete {repo_name}: {summary.entries} entries "
            f"({_human_bytes(summary.bytes)}) and all their history; "
            "run again with --yes to delete it",
            EXIT_USAGE,
        )
    removed = store.delete_repo(repo_name)
    if removed is None:
        _fail(f"no repo {repo_name} on this server (deleted meanwhile?)")
    click.echo(f"deleted {repo_name}: {removed.entries} entries and {removed.history} history rows")


# -- persons -----------------------------------------------------------------------------


@main.group(epilog=EXIT_CODES)
def person() -> None:
    """List persons (whose tokens reach personal spaces) and delete one's spaces."""


@person.command("list", epilog=EXIT_CODES)
@click.option("--json", "as_json", is_flag=True, help='One JSON object: {"persons": [...]}.')
def person_list(as_json: bool) -> None:
    """Every person with a live token or a personal space: live tokens, spaces, entries."""
    from sync_server.personal import persons

    found = persons(_store(_settings()))
    if as_json:
        rows = [
            {"person": p.person, "tokens": p.tokens, "spaces": p.spaces, "entries": p.entries}
            for p in found
        ]
        click.echo(json.dumps({"persons": rows}, ensure_ascii=False))
        return
    for p in found:
        spaces = ", ".join(p.spaces) or "none"
        click.echo(f"{p.person}\t{p.tokens} live token(s)\tspaces: {spaces}\t{p.entries} entries")


@person.command("delete", epilog=EXIT_CODES)
@click.argument("name", metavar="NAME")
@click.option("--yes", is_flag=True, help="Really delete; without it, only say what would go.")
def person_delete(name: str, yes: bool) -> None:
    """Delete every personal space of NAME: its notes and their whole history, for good.

    Without --yes nothing is deleted: it says what would be (exit 2). The person's
    tokens stay (revoke them with `token revoke`); a later write starts a space again.
    """
    from sync_server.personal import delete_person, normalize_person, persons

    try:
        who = normalize_person(name)
    except ValueError as error:
        _fail(str(error), EXIT_USAGE)
    store = _store(_settings())
    found = next((p for p in persons(store) if p.person == who), None)
    if found is None or not found.spaces:
        _fail(f"{who} has no personal space on this server")
    if not yes:
        _fail(
            f"would delete {len(found.spaces)} personal space(s) of {who} "
            f"({found.entries} entries) and all their history; run again with --yes",
            EXIT_USAGE,
        )
    removed = delete_person(store, who)
    entries = sum(r.entries for r in removed)
    history = sum(r.history for r in removed)
    click.echo(
        f"deleted {len(removed)} personal space(s) of {who}: "
        f"{entries} entries and {history} history rows"
    )
