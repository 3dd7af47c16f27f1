"""The base-text store: every synced key's base text, addressed by its checksum.

git keeps the text of every version it has seen as an object named by its hash; memsync
keeps the text of every key's *base* (the version last agreed with the server) the same
way, so that a pull can merge two edits line by line, a file deleted here can be written
again without asking the server, and `status` and `diff` work offline.

The objects live in one SQLite file under the state dir (`objects.sqlite3`): writing
2,000 texts is one transaction instead of 2,000 files. An object is only ever read back
through its checksum, and a text whose checksum does not match is treated as missing, so
a damaged store costs a full comparison with the server (or a conflict instead of a
merge), never a wrong text. Losing the file is as safe as losing the state.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from contextlib import closing, contextmanager
from pathlib import Path

from memsync_protocol.checksums import entry_checksum

OBJECTS_FILE = "objects.sqlite3"
_SCHEMA = "CREATE TABLE IF NOT EXISTS objects (checksum TEXT PRIMARY KEY, text TEXT NOT NULL)"


class ObjectStore:
    """Texts by entry checksum, in `state_dir/objects.sqlite3`; opened on first use."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / OBJECTS_FILE
        self._connection: sqlite3.Connection | None = None

    def _db(self, *, create: bool) -> sqlite3.Connection | None:
        if self._connection is None:
            if not create and not self.path.exists():
                return None
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            try:
                self._connection = self._open()
            except sqlite3.DatabaseError:
                if not create:
                    raise
                # Not a database (any more): it only ever held copies, so start afresh.
                for suffix in ("", "-journal", "-wal", "-shm"):
                    Path(f"{self.path}{suffix}").unlink(missing_ok=True)
                self._connection = self._open()
        return self._connection

    def _open(self) -> sqlite3.Connection:
        # check_same_thread off: a watcher uses one workspace from its push and pull
        # threads, one at a time (its repo lock), never at once.
        connection = sqlite3.connect(
            self.path, timeout=10, isolation_level=None, check_same_thread=False
        )
        try:
            self.path.chmod(0o600)
            # A rollback journal and one transaction per call: 2,000 texts in ~25 ms.
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute(_SCHEMA)
        except sqlite3.DatabaseError:
            connection.close()
            raise
        return connection

    def put_many(self, texts: Mapping[str, str]) -> None:
        """Store texts by checksum (`{checksum: text}`; texts already stored cost nothing).

        The caller's checksums are not checked here: `get` checks every text it returns.
        """
        if not texts:
            return
        try:
            db = self._db(create=True)
            assert db is not None
            with _transaction(db):
                db.executemany(
                    "INSERT OR IGNORE INTO objects (checksum, text) VALUES (?, ?)", texts.items()
                )
        except sqlite3.DatabaseError:
            # A damaged store loses merges and offline views, never data: carry on.
            self.close()

    def get(self, checksum: str) -> str | None:
        """The text whose checksum is `checksum`, or None when it is not (validly) kept."""
        found = self.get_many([checksum])
        return found.get(checksum)

    def get_many(self, checksums: Iterable[str]) -> dict[str, str]:
        """The kept texts among `checksums`, each verified against its checksum."""
        wanted = sorted(set(checksums))
        if not wanted:
            return {}
        found: dict[str, str] = {}
        try:
            db = self._db(create=False)
            if db is None:
                return {}
            # Chunks stay far below SQLite's limit on bound parameters.
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                marks = ",".join("?" * len(chunk))
                with closing(
                    db.execute(
                        f"SELECT checksum, text FROM objects WHERE checksum IN ({marks})",  # noqa: S608
                        chunk,
                    )
                ) as cursor:
                    for checksum, text in cursor:
                        if isinstance(text, str) and entry_checksum(text) == checksum:
                            found[checksum] = text
        except sqlite3.DatabaseError:
            self.close()
            return {}
        return found

    def keep_only(self, checksums: Iterable[str]) -> None:
        """Drop every object not named in `checksums` (the current bases)."""
        keep = set(checksums)
        try:
            db = self._db(create=False)
            if db is None:
                return
            with closing(db.execute("SELECT checksum FROM objects")) as cursor:
                stale = [(row[0],) for row in cursor if row[0] not in keep]
            if stale:
                with _transaction(db):
                    db.executemany("DELETE FROM objects WHERE checksum = ?", stale)
        except sqlite3.DatabaseError:
            self.close()

    def close(self) -> None:
        """Close the database, if it was opened."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None


@contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    """One explicit transaction (the connection is in autocommit mode otherwise)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def base_texts(store: ObjectStore, bases: Mapping[str, str], keys: Iterable[str]) -> dict[str, str]:
    """key -> base text for those of `keys` whose base text is kept."""
    wanted = {key: bases[key] for key in keys if key in bases}
    texts = store.get_many(wanted.values())
    return {key: texts[checksum] for key, checksum in wanted.items() if checksum in texts}
