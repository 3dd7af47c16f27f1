"""SQLite upkeep for the operator: give space back (`vacuum`) and copy it live (`backup`).

Standard library only (`sqlite3`): both work on the database file while a server is
serving from it. PostgreSQL has its own tools (`VACUUM`, `pg_dump`); see
docs/operators.md.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

BUSY_TIMEOUT_MS = 30_000


class MaintenanceError(Exception):
    """A vacuum or backup that could not be done; the message is one readable line."""


@dataclass(frozen=True, slots=True)
class VacuumResult:
    """Bytes on disk (the file and its -wal) before and after."""

    before: int
    after: int
    checkpointed: bool


@dataclass(frozen=True, slots=True)
class BackupResult:
    """The copy's path and size, and how many repos it holds."""

    path: Path
    bytes: int
    repos: int


def disk_bytes(path: Path) -> int:
    """The database file's size plus its write-ahead log's, as the disk holds them."""
    total = 0
    for part in (path, path.with_name(path.name + "-wal")):
        if part.exists():
            total += part.stat().st_size
    return total


def _connect(path: Path) -> sqlite3.Connection:
    if not path.is_file():
        raise MaintenanceError(f"no SQLite database at {path}")
    try:
        connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        connection.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as error:
        raise MaintenanceError(f"cannot open the SQLite database {path}: {error}") from None
    return connection


def vacuum(path: Path) -> VacuumResult:
    """Rewrite the database without its free pages, then fold the WAL back into it.

    VACUUM takes the write lock for as long as it runs (writers wait, up to the busy
    timeout; readers go on) and needs free disk space of about the database's size.
    """
    before = disk_bytes(path)
    connection = _connect(path)
    try:
        connection.execute("VACUUM")
        # In WAL mode the rewritten pages land in the -wal file first; a TRUNCATE
        # checkpoint copies them into the database file, which then shrinks, and empties
        # the WAL. A reader still on an old snapshot keeps it from finishing (busy = 1).
        busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    except sqlite3.Error as error:
        raise MaintenanceError(f"VACUUM of {path} failed: {error}") from None
    finally:
        connection.close()
    return VacuumResult(before=before, after=disk_bytes(path), checkpointed=busy == 0)


def backup(source: Path, target: Path, *, force: bool = False) -> BackupResult:
    """Copy the live database to `target` as one consistent snapshot.

    SQLite's online backup API copies every page in one step, inside one read
    transaction: the copy is the database as of one commit, whatever is written
    meanwhile. It goes to a private temporary file beside `target` that is then renamed,
    so `target` is either absent or complete; an existing `target` is kept unless
    `force`.
    """
    target = target.absolute()
    if target.exists() and not force:
        raise MaintenanceError(f"{target} exists: give --force to replace it")
    if target.resolve() == source.resolve():
        raise MaintenanceError("the backup would overwrite the database itself")
    if not target.parent.is_dir():
        raise MaintenanceError(f"no folder {target.parent} to write the backup in")
    connection = _connect(source)
    try:
        handle, temporary = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=".partial", dir=target.parent
        )
    except OSError as error:
        connection.close()
        raise MaintenanceError(f"cannot write in {target.parent}: {error.strerror}") from None
    os.close(handle)  # mkstemp made it 0600: the copy holds every note and token hash
    partial = Path(temporary)
    try:
        copy = sqlite3.connect(partial, isolation_level=None)
        try:
            connection.backup(copy, pages=-1)
            # A self-contained file: no -wal beside it to lose in a copy or a move.
            copy.execute("PRAGMA journal_mode=DELETE")
            (verdict,) = copy.execute("PRAGMA quick_check").fetchone()
            if verdict != "ok":
                raise MaintenanceError(f"the copy failed its check: {verdict}")
            repos = 0
            if copy.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'repos'"
            ).fetchone():
                (repos,) = copy.execute("SELECT count(*) FROM repos WHERE version > 0").fetchone()
        finally:
            copy.close()
        if force:
            os.replace(partial, target)
        else:
            try:
                os.link(partial, target)  # fails, rather than replaces, if one appeared
            except FileExistsError:
                raise MaintenanceError(f"{target} exists: give --force to replace it") from None
            partial.unlink()
    except sqlite3.Error as error:
        raise MaintenanceError(f"backup of {source} failed: {error}") from None
    except OSError as error:
        raise MaintenanceError(f"cannot write {target}: {error.strerror}") from None
    finally:
        connection.close()
        partial.unlink(missing_ok=True)
    return BackupResult(path=target, bytes=target.stat().st_size, repos=int(repos))
