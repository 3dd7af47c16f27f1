"""`memsync-server`: serve, migrate, prune, and manage tokens.

Each command parses its options, calls one library function, and prints the result.
Errors are one readable line on stderr with exit code 1 (failure) or 2 (usage or
configuration); never a traceback.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, NoReturn

import click
from pydantic import ValidationError

from sync_server import __version__
from sync_server.config import Settings

if TYPE_CHECKING:
    from sync_server.storage.sql import SqlStore

EXIT_FAILURE = 1
EXIT_USAGE = 2


def _fail(message: str, code: int = EXIT_FAILURE) -> NoReturn:
    click.echo(f"memsync-server: {message}", err=True)
    sys.exit(code)


def _settings() -> Settings:
    try:
        return Settings()
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "settings"
        _fail(f"bad setting MEMSYNC_{field.upper()}: {first['msg']}", EXIT_USAGE)


def _store(settings: Settings) -> SqlStore:
    """A migrated store, or a one-line failure."""
    from sync_server.errors import StorageUnavailable
    from sync_server.storage.sql import SqlStore

    try:
        store = SqlStore(settings.database_url)
        store.migrate()
    except StorageUnavailable as error:
        _fail(f"{error.message} ({_redacted_url(settings.database_url)})")
    return store


def _redacted_url(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="memsync-server")
def main() -> None:
    """The memsync team server. Settings come from MEMSYNC_* environment variables."""


@main.command()
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
def serve(host: str, port: int, workers: int, no_migrate: bool) -> None:
    """Run the HTTP server (uvicorn)."""
    import os

    import uvicorn

    from sync_server.events import SHUTDOWN_GRACE_SECONDS

    settings = _settings()
    if no_migrate:
        os.environ["MEMSYNC_AUTO_MIGRATE"] = "false"
    elif workers > 1:
        # Migrate once here rather than racing in every worker.
        _store(settings)
        os.environ["MEMSYNC_AUTO_MIGRATE"] = "false"
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    click.echo(
        f"memsync-server {__version__} on http://{host}:{port} "
        f"(database: {_redacted_url(settings.database_url)})",
        err=True,
    )
    uvicorn.run(
        "sync_server.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        access_log=False,
        log_level="info",
        timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
    )


@main.command()
def migrate() -> None:
    """Create or upgrade the database schema."""
    settings = _settings()
    _store(settings)
    click.echo(f"schema is up to date ({_redacted_url(settings.database_url)})")


@main.command()
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


@main.group()
def token() -> None:
    """Create, list and revoke access tokens."""


@token.command("create")
@click.option("--repo", "repo_pattern", required=True, help="owner/name, owner/* or *.")
@click.option("--read-only", is_flag=True, help="May read but not write.")
@click.option("--name", default=None, help="Shown as the author of writes.")
def token_create(repo_pattern: str, read_only: bool, name: str | None) -> None:
    """Mint a token; the token is printed alone on the last line, once."""
    from memsync_protocol.repos import normalize_scope
    from sync_server.auth import issue_token

    try:
        normalize_scope(repo_pattern)  # refuse bad input before touching the database
    except ValueError as error:
        _fail(str(error), EXIT_USAGE)
    store = _store(_settings())
    try:
        record, secret = issue_token(
            store, repo_pattern=repo_pattern, read_only=read_only, name=name
        )
    except ValueError as error:
        _fail(str(error), EXIT_USAGE)
    access = "read-only" if record.read_only else "read-write"
    click.echo(f"created token {record.name!r} ({access}, repos: {record.repo_pattern})", err=True)
    click.echo("store it now: it is not shown again", err=True)
    click.echo(secret)


@token.command("list")
def token_list() -> None:
    """List tokens (never their secrets)."""
    from rich.console import Console
    from rich.table import Table

    store = _store(_settings())
    table = Table("name", "id", "repos", "access", "created", "revoked")
    for record in store.list_tokens():
        table.add_row(
            record.name,
            record.lookup_id[:6],
            record.repo_pattern,
            "read-only" if record.read_only else "read-write",
            record.created_at.strftime("%Y-%m-%d %H:%M"),
            record.revoked_at.strftime("%Y-%m-%d %H:%M") if record.revoked_at else "",
        )
    Console().print(table)


@token.command("revoke")
@click.argument("name_or_id")
def token_revoke(name_or_id: str) -> None:
    """Revoke the live tokens with this name (or id, as `token list` shows it)."""
    store = _store(_settings())
    revoked = store.revoke_token(name_or_id)
    if not revoked:
        matches = [r for r in store.list_tokens() if r.lookup_id.startswith(name_or_id)]
        if len(name_or_id) >= 6 and len(matches) == 1 and matches[0].revoked_at is None:
            revoked = store.revoke_token(matches[0].lookup_id)
    if not revoked:
        _fail(f"no live token named or with id {name_or_id!r}")
    click.echo(f"revoked {revoked} token(s)")
