"""`memsync-server`: serve, migrate, prune, and manage tokens and repos.

Each command parses its options, calls one library function, and prints the result.
Errors are one readable line on stderr with exit code 1 (failure) or 2 (usage or
configuration); never a traceback.
"""

from __future__ import annotations

import errno
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from sync_server import __version__
from sync_server.cli_common import (
    _TIME,
    EXIT_CODES,
    EXIT_USAGE,
    SERVE_EXIT_CODES,
    _announce_new_database,
    _database_of,
    _fail,
    _iso,
    _open_store,
    _redacted_url,
    _settings,
    _store,
    print_table,
)
from sync_server.cli_tokens import person, token
from sync_server.logs import LOG_FORMATS, LogFormat

if TYPE_CHECKING:
    from sync_server.config import Settings
    from sync_server.storage.base import Proposal


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
    print_table(table)


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
    matching a repo decides).

    Switched off, the proposals waiting in the repos it no longer reviews are
    published as their authors' commits, merged with the team's newer edits as an
    accept merges them; one that would overwrite a newer edit is returned to its
    author instead (their next pull saves its text and says what to do).
    """
    from memsync_protocol.repos import normalize_scope

    try:
        normalized = normalize_scope(pattern)
    except ValueError as error:
        _fail(str(error), EXIT_USAGE)
    settings = _settings()
    store = _store(settings)
    store.set_review(normalized, review == "on")
    covers = "repo" if "*" not in normalized else "repos matching"
    click.echo(f"review {review} for {covers} {normalized}")
    if review == "off":
        for proposal in store.settle_unreviewed(max_entries=settings.max_entries):
            _settled_line(proposal)


def _settled_line(proposal: Proposal) -> None:
    """One proposal decided because review was switched off."""
    from sync_server.personal import spoken
    from sync_server.review import proposer

    what = f"proposal {proposal.id} in {spoken(proposal.repo)} by {proposer(proposal)}"
    keys = ", ".join(proposal.keys)
    if proposal.status == "accepted":
        click.echo(f"published {what} ({keys}) as version {proposal.accepted_version}")
    else:
        click.echo(f"returned {what} ({keys}): {proposal.reason}")


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


main.add_command(token)
main.add_command(person)
