"""`write_now`: a SQLite write asked for at once is made at once, or not at all."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sync_server.config import sqlite_url
from sync_server.storage import sql, write_now
from sync_server.storage.factory import open_store
from sync_server.storage.sql import SqlStore

REPO = "acme/app"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlStore]:
    opened = open_store(sqlite_url(tmp_path / "db.sqlite3"))
    opened.migrate()
    opened.put(
        REPO, {"a.md": "one\n"}, if_match=None, base_checksums=None, max_entries=100, author="t"
    )
    yield opened
    opened.close()


def put(store: SqlStore, text: str) -> int:
    result = store.put(
        REPO, {"a.md": text}, if_match=None, base_checksums=None, max_entries=100, author="t"
    )
    return result.head.version


def version(store: SqlStore) -> int:
    head = store.head(REPO)
    assert head is not None
    return head.version


def test_a_free_writer_lock_writes_at_once(store: SqlStore) -> None:
    with write_now.now_or_never():
        assert put(store, "two\n") == 2
    assert version(store) == 2


def test_another_process_holding_the_lock_is_not_waited_for(
    store: SqlStore, tmp_path: Path
) -> None:
    other = sqlite3.connect(tmp_path / "db.sqlite3", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # as another server process's write would
    try:
        started = time.monotonic()
        with pytest.raises(write_now.WriterBusy), write_now.now_or_never():
            put(store, "two\n")
        assert time.monotonic() - started < 5  # not the 30 s busy timeout
    finally:
        other.execute("ROLLBACK")
        other.close()
    # Nothing was written, and the connection went back waiting as usual.
    assert version(store) == 1
    assert put(store, "two\n") == 2


def test_a_writer_of_this_process_is_not_waited_for(store: SqlStore) -> None:
    with (
        store._write(),  # this process's other writer, mid-write
        pytest.raises(write_now.WriterBusy),
        write_now.now_or_never(),
    ):
        put(store, "two\n")
    assert version(store) == 1


def test_closing_waits_only_briefly_for_a_write_stuck_on_another_process(
    store: SqlStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sql, "CLOSE_WAIT_SECONDS", 0.5)
    other = sqlite3.connect(tmp_path / "db.sqlite3", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process's write, for a while
    waiting = threading.Thread(target=put, args=(store, "two\n"))
    waiting.start()
    time.sleep(0.2)  # the write is now waiting for SQLite's lock
    started = time.monotonic()
    store.close()  # a server shutting down
    assert time.monotonic() - started < 5
    other.execute("ROLLBACK")
    other.close()
    waiting.join(timeout=30)
    assert not waiting.is_alive()  # the write went on once the lock was free
    reopened = open_store(sqlite_url(tmp_path / "db.sqlite3"))
    assert version(reopened) == 2
    reopened.close()
