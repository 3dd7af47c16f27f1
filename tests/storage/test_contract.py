"""The storage contract: one suite that every `Store` backend must pass.

Each test runs through the `store` fixture (a freshly migrated store, once on SQLite and
once on PostgreSQL) and asserts only what a user of the server could observe through the
API: heads, snapshots, deltas, history, the typed errors and the fact that a refused
write leaves nothing behind. Nothing here looks at tables or SQL.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sqlalchemy.engine import make_url

from memsync_protocol.checksums import EMPTY_REPO_CHECKSUM, entry_checksum, repo_checksum
from memsync_protocol.keys import path_clashes
from sync_server.config import sqlite_url
from sync_server.errors import (
    BadRequest,
    HistoryGone,
    NotFound,
    PathClash,
    PreconditionFailed,
    StaleBase,
    TooManyEntries,
)
from sync_server.storage.base import (
    CommitResult,
    DuplicateTokenName,
    RepoHead,
    Snapshot,
    Store,
)
from sync_server.storage.sql import SqlStore
from tests.pgcluster import PostgresCluster

REPO = "acme/widgets"
LIMIT = 2_000
AUTHOR = "alice"
WRITERS = 8
JOIN_TIMEOUT_S = 60.0
STALE = "sha256:" + "0" * 64

# -- helpers ---------------------------------------------------------------------------


def sha256_hex(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def expected_repo_checksum(texts: Mapping[str, str]) -> str:
    """docs/protocol.md section 2 (definition 2), computed here from the texts without the
    server's helpers: 256 buckets by the key's hash, the hash of their digests."""
    if not texts:
        return sha256_hex(b"")
    buckets: list[list[str]] = [[] for _ in range(256)]
    for key in texts:
        buckets[hashlib.sha256(key.encode("utf-8")).digest()[0]].append(key)
    top = hashlib.sha256()
    for keys in buckets:
        digest = hashlib.sha256()
        for key in sorted(keys, key=lambda k: k.encode("utf-8")):
            digest.update(f"{key}\n{sha256_hex(texts[key].encode('utf-8'))}\n".encode())
        top.update(digest.digest())
    return "sha256:" + top.hexdigest()


def put(
    store: Store,
    entries: Mapping[str, str],
    *,
    repo: str = REPO,
    if_match: list[str] | None = None,
    base: Mapping[str, str | None] | None = None,
    max_entries: int = LIMIT,
    author: str = AUTHOR,
) -> CommitResult:
    return store.put(
        repo,
        entries,
        if_match=if_match,
        base_checksums=base,
        max_entries=max_entries,
        author=author,
    )


def current_head(store: Store, repo: str = REPO) -> RepoHead:
    head = store.head(repo)
    assert head is not None, f"{repo} has no head"
    return head


def full_snapshot(store: Store, repo: str = REPO) -> Snapshot:
    snapshot = store.snapshot(repo, with_texts=True)
    assert snapshot is not None, f"{repo} has no snapshot"
    return snapshot


def texts_of(store: Store, repo: str = REPO) -> dict[str, str]:
    return full_snapshot(store, repo).texts


def assert_consistent(store: Store, texts: Mapping[str, str], repo: str = REPO) -> None:
    """The repo holds exactly `texts`, and every checksum it reports follows from them."""
    snapshot = full_snapshot(store, repo)
    assert snapshot.texts == dict(texts)
    assert snapshot.checksums == {key: entry_checksum(body) for key, body in texts.items()}
    assert snapshot.head.checksum == expected_repo_checksum(texts)
    assert snapshot.head.entry_count == len(texts)
    assert snapshot.head == current_head(store, repo)
    hashes = store.snapshot(repo, with_texts=False)
    assert hashes is not None
    assert hashes.texts == {}
    assert hashes.checksums == snapshot.checksums
    assert hashes.head == snapshot.head


def run_together(
    calls: Sequence[Callable[[], CommitResult]],
) -> tuple[list[CommitResult], list[BaseException]]:
    """Start every call at the same moment on its own thread; collect results and errors."""
    barrier = threading.Barrier(len(calls))
    guard = threading.Lock()
    results: list[CommitResult] = []
    errors: list[BaseException] = []

    def worker(call: Callable[[], CommitResult]) -> None:
        try:
            barrier.wait(timeout=JOIN_TIMEOUT_S)
            result = call()
        except BaseException as error:
            with guard:
                errors.append(error)
        else:
            with guard:
                results.append(result)

    threads = [threading.Thread(target=worker, args=(call,), daemon=True) for call in calls]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    assert not any(thread.is_alive() for thread in threads), "a writer never returned"
    return results, errors


@pytest.fixture
def make_store(
    request: pytest.FixtureRequest, database_url: str, tmp_path: Path
) -> Iterator[Callable[[], Store]]:
    """More fresh, migrated stores on the same backend as `store` (each its own database)."""
    backend = make_url(database_url).get_backend_name()
    opened: list[SqlStore] = []
    databases: list[str] = []

    def factory() -> Store:
        if backend == "sqlite":
            url = sqlite_url(tmp_path / f"extra-{len(opened)}.sqlite3")
        else:
            cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
            url = cluster.create_database()
            databases.append(url.rsplit("/", 1)[1])
        extra = SqlStore(url)
        extra.migrate()
        opened.append(extra)
        return extra

    yield factory
    for extra in opened:
        extra.close()
    if databases:
        cluster = request.getfixturevalue("postgres_cluster")
        for name in databases:
            cluster.drop_database(name)


# -- basics: heads, snapshots, checksums -----------------------------------------------


class TestHeadAndSnapshot:
    def test_never_written_repo_has_no_head_snapshot_or_delta(self, store: Store) -> None:
        assert store.head(REPO) is None
        assert store.snapshot(REPO, with_texts=True) is None
        assert store.snapshot(REPO, with_texts=False) is None
        assert store.changes_since(REPO, 0) is None

    def test_first_put_creates_repo_at_version_1(self, store: Store) -> None:
        texts = {"a.md": "alpha\n", "dir/b.md": "beta\n"}
        result = put(store, texts)
        assert result.head.version == 1
        assert result.head.repo == REPO
        assert result.head.entry_count == 2
        assert result.changed_keys == ["a.md", "dir/b.md"]
        assert result.head == current_head(store)
        assert_consistent(store, texts)

    def test_last_modified_is_aware_utc_and_moves_forward(self, store: Store) -> None:
        before = datetime.now(UTC) - timedelta(seconds=5)
        first = put(store, {"a.md": "1"}).head
        second = put(store, {"a.md": "2"}).head
        assert first.last_modified.utcoffset() == timedelta(0)
        assert before <= first.last_modified <= second.last_modified
        assert second.last_modified <= datetime.now(UTC) + timedelta(seconds=5)

    def test_a_commits_time_reads_back_exactly_and_filters_by_it(self, store: Store) -> None:
        # SQLite's commit writes its times as text itself: they must compare in SQL like
        # the times SQLAlchemy binds, to the microsecond.
        head = put(store, {"a.md": "1"}).head
        assert head == current_head(store)
        moment = head.last_modified
        assert [c.at for c in store.log(REPO, since=moment).commits] == [moment]
        assert store.log(REPO, since=moment + timedelta(microseconds=1)).commits == []

    def test_checksums_follow_design_definition(self, store: Store) -> None:
        # "ｚ" (U+FF5A) sorts before "😀" (U+1F600) in UTF-8 byte order, after it in UTF-16.
        texts = {
            "😀.md": "smile",
            "ｚ.md": "wide z",
            "b/c.md": "",
            "a.md": "line one\r\nline two\n",
            "a-b.md": "dash",
            "a/b.md": "slash",
        }
        result = put(store, texts)
        snapshot = full_snapshot(store)
        for key, body in texts.items():
            assert snapshot.checksums[key] == sha256_hex(body.encode("utf-8"))
            assert snapshot.checksums[key] == entry_checksum(body)
        assert result.head.checksum == expected_repo_checksum(texts)
        assert result.head.checksum == repo_checksum(snapshot.checksums)

    def test_same_entries_in_any_order_or_batching_give_same_checksum(
        self, make_store: Callable[[], Store]
    ) -> None:
        final = {f"notes/{n}.md": f"note {n}\n" for n in range(6)}
        one_shot, batched = make_store(), make_store()
        put(one_shot, final)

        keys = sorted(final, reverse=True)
        put(batched, {keys[0]: "draft that gets replaced", "scratch.md": "temporary"})
        put(batched, {key: final[key] for key in keys[3:]})
        batched.delete(REPO, "scratch.md", if_match=None, author=AUTHOR)
        put(batched, {key: final[key] for key in keys[:3]})

        assert current_head(batched).version != current_head(one_shot).version
        assert current_head(batched).checksum == current_head(one_shot).checksum
        assert current_head(batched).checksum == expected_repo_checksum(final)
        assert_consistent(one_shot, final)
        assert_consistent(batched, final)

    def test_repos_are_independent(self, store: Store) -> None:
        put(store, {"a.md": "mine"}, repo="acme/one")
        put(store, {"a.md": "theirs", "b.md": "more"}, repo="acme/two")
        assert texts_of(store, "acme/one") == {"a.md": "mine"}
        assert texts_of(store, "acme/two") == {"a.md": "theirs", "b.md": "more"}
        assert current_head(store, "acme/one").version == 1
        assert store.head("acme/three") is None

    def test_heads_reads_many_repos_and_leaves_out_those_without_data(self, store: Store) -> None:
        assert store.heads([]) == {}
        put(store, {"a.md": "one"}, repo="acme/one")
        put(store, {"a.md": "two"}, repo="acme/two")
        put(store, {"a.md": "two again"}, repo="acme/two")
        # A refused first write leaves the repo without a head.
        with pytest.raises(PathClash):
            put(store, {"d": "file", "d/n.md": "child"}, repo="acme/empty")
        names = ["acme/one", "acme/two", "acme/empty", "acme/never", "acme/two"]
        heads = store.heads(names)
        assert heads == {
            "acme/one": current_head(store, "acme/one"),
            "acme/two": current_head(store, "acme/two"),
        }
        assert heads["acme/two"].version == 2


# -- PUT: upsert and no-ops ------------------------------------------------------------


class TestUpsert:
    def test_put_keeps_keys_not_in_body(self, store: Store) -> None:
        put(store, {"a.md": "a1", "b.md": "b1"})
        result = put(store, {"b.md": "b2", "c.md": "c1"})
        assert result.head.version == 2
        assert result.changed_keys == ["b.md", "c.md"]
        assert_consistent(store, {"a.md": "a1", "b.md": "b2", "c.md": "c1"})

    def test_put_of_same_texts_changes_nothing(self, store: Store) -> None:
        texts = {"a.md": "a1", "b.md": "b1"}
        first = put(store, texts)
        again = put(store, texts, author="bob")
        assert again.changed_keys == []
        assert again.head == first.head
        assert current_head(store) == first.head
        assert [item.version for item in store.key_history(REPO, "a.md")] == [1]

    def test_partly_unchanged_put_reports_and_records_only_changes(self, store: Store) -> None:
        put(store, {"a.md": "a1", "b.md": "b1"})
        result = put(store, {"a.md": "a1", "b.md": "b2"})
        assert result.changed_keys == ["b.md"]
        assert result.head.version == 2
        assert [item.version for item in store.key_history(REPO, "a.md")] == [1]
        assert [item.version for item in store.key_history(REPO, "b.md")] == [1, 2]

    def test_one_put_is_one_version_however_many_keys(self, store: Store) -> None:
        texts = {f"k{n:03}.md": str(n) for n in range(50)}
        assert put(store, texts).head.version == 1
        assert put(store, {key: body + "!" for key, body in texts.items()}).head.version == 2

    def test_empty_put_on_new_repo_creates_nothing(self, store: Store) -> None:
        result = put(store, {})
        assert result.changed_keys == []
        assert store.head(REPO) is None
        assert store.snapshot(REPO, with_texts=True) is None

    def test_empty_text_is_an_entry(self, store: Store) -> None:
        put(store, {"empty.md": ""})
        assert_consistent(store, {"empty.md": ""})


# -- preconditions ---------------------------------------------------------------------


class TestIfMatch:
    def test_matching_checksum_in_list_is_accepted(self, store: Store) -> None:
        head = put(store, {"a.md": "a1"}).head
        result = put(store, {"a.md": "a2"}, if_match=[STALE, head.checksum])
        assert result.head.version == 2
        assert texts_of(store) == {"a.md": "a2"}

    def test_star_is_accepted(self, store: Store) -> None:
        put(store, {"a.md": "a1"})
        assert put(store, {"a.md": "a2"}, if_match=["*"]).head.version == 2

    def test_star_needs_an_existing_repo(self, store: Store) -> None:
        # RFC 9110: If-Match: * fails when there is no current representation.
        with pytest.raises(PreconditionFailed):
            put(store, {"a.md": "a1"}, if_match=["*"])
        assert store.head(REPO) is None

    def test_mismatch_is_refused_and_writes_nothing(self, store: Store) -> None:
        head = put(store, {"a.md": "a1"}).head
        with pytest.raises(PreconditionFailed) as caught:
            put(store, {"a.md": "a2", "new.md": "n"}, if_match=[STALE])
        assert caught.value.current_checksum == head.checksum
        assert caught.value.body()["checksum"] == head.checksum
        assert current_head(store) == head
        assert_consistent(store, {"a.md": "a1"})
        assert len(store.key_history(REPO, "a.md")) == 1
        with pytest.raises(NotFound):
            store.key_history(REPO, "new.md")

    def test_mismatch_on_never_written_repo_creates_nothing(self, store: Store) -> None:
        with pytest.raises(PreconditionFailed):
            put(store, {"a.md": "a1"}, if_match=[STALE])
        assert store.head(REPO) is None

    def test_if_match_is_checked_even_when_put_would_change_nothing(self, store: Store) -> None:
        head = put(store, {"a.md": "a1"}).head
        with pytest.raises(PreconditionFailed):
            put(store, {"a.md": "a1"}, if_match=[STALE])
        assert current_head(store) == head


class TestBaseChecksums:
    def test_correct_bases_pass(self, store: Store) -> None:
        put(store, {"a.md": "a1", "b.md": "b1"})
        result = put(
            store,
            {"a.md": "a2", "new.md": "n1"},
            base={"a.md": entry_checksum("a1"), "new.md": None, "b.md": entry_checksum("b1")},
        )
        assert result.changed_keys == ["a.md", "new.md"]
        assert texts_of(store) == {"a.md": "a2", "b.md": "b1", "new.md": "n1"}

    def test_bases_let_writers_of_different_keys_pass_a_moved_repo(self, store: Store) -> None:
        put(store, {"a.md": "a1", "b.md": "b1"})
        put(store, {"b.md": "teammate"}, author="bob")
        result = put(store, {"a.md": "a2"}, base={"a.md": entry_checksum("a1")})
        assert result.head.version == 3
        assert texts_of(store) == {"a.md": "a2", "b.md": "teammate"}

    def test_stale_bases_are_refused_with_each_conflict(self, store: Store) -> None:
        put(store, {"a.md": "a1", "b.md": "b1", "c.md": "c1"})
        before = full_snapshot(store)
        with pytest.raises(StaleBase) as caught:
            put(
                store,
                {"a.md": "a2", "b.md": "b2", "c.md": "c2", "gone.md": "g", "ok.md": "o"},
                base={
                    "a.md": entry_checksum("a1"),  # correct
                    "b.md": entry_checksum("an older b"),  # stale
                    "c.md": None,  # must not exist, but does
                    "gone.md": entry_checksum("was deleted"),  # expected but absent
                    "ok.md": None,  # correct
                },
            )
        details = caught.value.details
        assert details["error_code"] == "stale_base"
        conflicts = sorted(details["conflicts"], key=lambda item: str(item["key"]))
        assert conflicts == [
            {"key": "b.md", "serverChecksum": entry_checksum("b1")},
            {"key": "c.md", "serverChecksum": entry_checksum("c1")},
            {"key": "gone.md", "serverChecksum": None},
        ]
        assert full_snapshot(store) == before
        assert len(store.key_history(REPO, "a.md")) == 1

    def test_stale_base_on_never_written_repo_creates_nothing(self, store: Store) -> None:
        with pytest.raises(StaleBase):
            put(store, {"a.md": "a1"}, base={"a.md": entry_checksum("imagined")})
        assert store.head(REPO) is None


# -- entry limit -----------------------------------------------------------------------


class TestMaxEntries:
    def test_limit_counts_live_entries_after_the_merge(self, store: Store) -> None:
        put(store, {"a.md": "a1", "b.md": "b1"}, max_entries=3)
        # Three keys in the body, but two already exist: three live entries after.
        result = put(store, {"a.md": "a2", "b.md": "b2", "c.md": "c1"}, max_entries=3)
        assert result.head.entry_count == 3

    def test_too_many_is_refused_with_counts_and_writes_nothing(self, store: Store) -> None:
        put(store, {"a.md": "a1", "b.md": "b1"}, max_entries=3)
        before = full_snapshot(store)
        with pytest.raises(TooManyEntries) as caught:
            put(store, {"a.md": "a2", "c.md": "c1", "d.md": "d1"}, max_entries=3)
        details = caught.value.details
        assert details["error_code"] == "team_memory_too_many_entries"
        assert details["max_entries"] == 3
        assert details["received_entries"] == 4
        assert full_snapshot(store) == before

    def test_first_put_over_limit_creates_nothing(self, store: Store) -> None:
        with pytest.raises(TooManyEntries) as caught:
            put(store, {f"k{n}.md": "x" for n in range(4)}, max_entries=3)
        assert caught.value.details["received_entries"] == 4
        assert store.head(REPO) is None

    def test_updates_at_the_limit_still_work(self, store: Store) -> None:
        put(store, {"a.md": "a1", "b.md": "b1"}, max_entries=2)
        result = put(store, {"a.md": "a2", "b.md": "b2"}, max_entries=2)
        assert result.head.version == 2
        assert texts_of(store) == {"a.md": "a2", "b.md": "b2"}

    def test_deleting_a_key_frees_room(self, store: Store) -> None:
        put(store, {"a.md": "a1", "b.md": "b1"}, max_entries=2)
        with pytest.raises(TooManyEntries):
            put(store, {"c.md": "c1"}, max_entries=2)
        store.delete(REPO, "a.md", if_match=None, author=AUTHOR)
        put(store, {"c.md": "c1"}, max_entries=2)
        assert texts_of(store) == {"b.md": "b1", "c.md": "c1"}

    def test_restore_of_deleted_key_counts_against_the_limit(self, store: Store) -> None:
        put(store, {"a.md": "a1", "b.md": "b1"}, max_entries=2)
        store.delete(REPO, "a.md", if_match=None, author=AUTHOR)
        put(store, {"c.md": "c1"}, max_entries=2)
        with pytest.raises(TooManyEntries):
            store.restore(REPO, "a.md", 1, max_entries=2, author=AUTHOR)
        assert texts_of(store) == {"b.md": "b1", "c.md": "c1"}


# -- file / directory clash -------------------------------------------------------------


def clash_details(caught: pytest.ExceptionInfo[PathClash]) -> dict[str, object]:
    details = caught.value.details
    assert caught.value.status == 409
    assert caught.value.body()["error"]["type"] == "conflict"
    assert details["error_code"] == "path_clash"
    return details


class TestPathClash:
    @pytest.mark.parametrize(
        ("live", "new"),
        [("d", "d/n.md"), ("d/n.md", "d"), ("a/b", "a/b/c/d.md"), ("a/b/c/d.md", "a/b")],
    )
    def test_a_key_that_would_be_file_and_directory_is_refused(
        self, store: Store, live: str, new: str
    ) -> None:
        put(store, {live: "first", "other.md": "o"})
        before = full_snapshot(store)
        with pytest.raises(PathClash) as caught:
            put(store, {new: "second", "fine.md": "would be fine alone"})
        details = clash_details(caught)
        assert details["clashes"] == [{"key": new, "clashesWith": live}]
        assert details["keys"] == [new]
        assert new in caught.value.message
        assert live in caught.value.message
        assert full_snapshot(store) == before
        for refused in (new, "fine.md"):
            with pytest.raises(NotFound):
                store.key_history(REPO, refused)

    def test_two_keys_of_one_write_clash_even_in_a_new_repo(self, store: Store) -> None:
        with pytest.raises(PathClash) as caught:
            put(store, {"d": "file", "d/n.md": "under it", "e.md": "e"})
        details = clash_details(caught)
        assert details["clashes"] == [
            {"key": "d", "clashesWith": "d/n.md"},
            {"key": "d/n.md", "clashesWith": "d"},
        ]
        assert details["keys"] == ["d", "d/n.md"]
        assert store.head(REPO) is None

    def test_every_refused_key_is_named_once_sorted(self, store: Store) -> None:
        put(store, {"x": "file", "y/a.md": "a", "y/b.md": "b"})
        with pytest.raises(PathClash) as caught:
            put(store, {"x/2.md": "2", "y": "file", "x/1.md": "1", "z.md": "z"})
        details = clash_details(caught)
        assert details["keys"] == ["x/1.md", "x/2.md", "y"]
        assert details["clashes"] == [
            {"key": "x/1.md", "clashesWith": "x"},
            {"key": "x/2.md", "clashesWith": "x"},
            {"key": "y", "clashesWith": "y/a.md"},
        ]

    def test_names_that_share_only_characters_do_not_clash(self, store: Store) -> None:
        texts = {"d.md": "1", "d-x/n.md": "2", "d0": "3", "dd/n.md": "4", "d/n.md": "5"}
        put(store, texts)
        put(store, {"d/m.md": "6", "d/n": "7"})
        assert_consistent(store, {**texts, "d/m.md": "6", "d/n": "7"})

    def test_replacing_a_live_key_next_to_a_new_clashing_one(self, store: Store) -> None:
        put(store, {"d": "v1"})
        with pytest.raises(PathClash) as caught:
            put(store, {"d": "v2", "d/n.md": "n"})
        assert clash_details(caught)["keys"] == ["d/n.md"]
        assert texts_of(store) == {"d": "v1"}
        put(store, {"d": "v2"})
        assert texts_of(store) == {"d": "v2"}

    def test_deleted_keys_do_not_clash(self, store: Store) -> None:
        put(store, {"d": "file"})
        store.delete(REPO, "d", if_match=None, author=AUTHOR)
        put(store, {"d/n.md": "now a directory"})
        store.delete(REPO, "d/n.md", if_match=None, author=AUTHOR)
        put(store, {"d": "a file again"})
        assert_consistent(store, {"d": "a file again"})

    def test_restore_is_refused_the_same_way(self, store: Store) -> None:
        put(store, {"d": "file"})
        store.delete(REPO, "d", if_match=None, author=AUTHOR)
        put(store, {"d/n.md": "under it"})
        before = full_snapshot(store)
        with pytest.raises(PathClash) as caught:
            store.restore(REPO, "d", 1, max_entries=LIMIT, author=AUTHOR)
        details = clash_details(caught)
        assert details["clashes"] == [{"key": "d", "clashesWith": "d/n.md"}]
        assert details["keys"] == ["d"]
        assert full_snapshot(store) == before
        assert [item.op for item in store.key_history(REPO, "d")] == ["put", "delete"]
        store.delete(REPO, "d/n.md", if_match=None, author=AUTHOR)
        store.restore(REPO, "d", 1, max_entries=LIMIT, author=AUTHOR)
        assert texts_of(store) == {"d": "file"}

    def test_a_large_write_into_a_large_repo_finds_the_one_clash(self, store: Store) -> None:
        live = {f"team/dir{n % 100}/note{n}.md": "x" for n in range(LIMIT // 2)}
        put(store, live)
        new = {f"team/dir{n % 100}/new{n}.md": "y" for n in range(LIMIT // 2 - 1)}
        with pytest.raises(PathClash) as caught:
            put(store, {**new, "team/dir7/note7.md/x.md": "under a file"})
        assert clash_details(caught)["clashes"] == [
            {"key": "team/dir7/note7.md/x.md", "clashesWith": "team/dir7/note7.md"}
        ]
        assert put(store, new).head.entry_count == LIMIT - 1


# -- delete ----------------------------------------------------------------------------


class TestDelete:
    def test_delete_removes_key_bumps_version_and_leaves_tombstone(self, store: Store) -> None:
        put(store, {"a.md": "a1", "b.md": "b1"})
        result = store.delete(REPO, "a.md", if_match=None, author="bob")
        assert result.changed_keys == ["a.md"]
        assert result.head.version == 2
        assert result.head == current_head(store)
        assert_consistent(store, {"b.md": "b1"})
        tombstone = store.key_history(REPO, "a.md")[-1]
        assert (tombstone.version, tombstone.op, tombstone.checksum, tombstone.author) == (
            2,
            "delete",
            None,
            "bob",
        )
        assert store.key_version(REPO, "a.md", 2).text is None
        assert store.key_version(REPO, "a.md", 1).text == "a1"

    def test_deleting_every_key_leaves_an_empty_repo_not_a_missing_one(self, store: Store) -> None:
        put(store, {"a.md": "a1"})
        store.delete(REPO, "a.md", if_match=None, author=AUTHOR)
        head = current_head(store)
        assert (head.version, head.entry_count, head.checksum) == (2, 0, EMPTY_REPO_CHECKSUM)
        assert full_snapshot(store).texts == {}

    def test_delete_of_unknown_key_or_repo_is_not_found(self, store: Store) -> None:
        with pytest.raises(NotFound):
            store.delete(REPO, "a.md", if_match=None, author=AUTHOR)
        put(store, {"a.md": "a1"})
        with pytest.raises(NotFound):
            store.delete(REPO, "other.md", if_match=None, author=AUTHOR)
        store.delete(REPO, "a.md", if_match=None, author=AUTHOR)
        with pytest.raises(NotFound):
            store.delete(REPO, "a.md", if_match=None, author=AUTHOR)
        assert current_head(store).version == 2

    def test_delete_honours_if_match(self, store: Store) -> None:
        head = put(store, {"a.md": "a1"}).head
        with pytest.raises(PreconditionFailed) as caught:
            store.delete(REPO, "a.md", if_match=[STALE], author=AUTHOR)
        assert caught.value.current_checksum == head.checksum
        assert current_head(store) == head
        assert texts_of(store) == {"a.md": "a1"}
        result = store.delete(REPO, "a.md", if_match=[head.checksum], author=AUTHOR)
        assert result.head.version == 2

    def test_a_put_deletes_keys_in_the_same_version_as_its_upserts(self, store: Store) -> None:
        put(store, {"MEMORY.md": "- [a](a.md)\n- [b](b.md)\n", "a.md": "a1", "b.md": "b1"})
        result = store.put(
            REPO,
            {"MEMORY.md": "- [b](b.md)\n"},
            if_match=None,
            base_checksums={"MEMORY.md": entry_checksum("- [a](a.md)\n- [b](b.md)\n")},
            max_entries=LIMIT,
            author="bob",
            deletes=["a.md"],
        )
        assert result.changed_keys == ["MEMORY.md", "a.md"]
        assert result.head.version == 2
        assert_consistent(store, {"MEMORY.md": "- [b](b.md)\n", "b.md": "b1"})
        assert store.key_history(REPO, "a.md")[-1].op == "delete"
        assert store.key_history(REPO, "MEMORY.md")[-1].version == 2
        delta = store.changes_since(REPO, 1)
        assert delta is not None
        assert delta.deleted == ["a.md"]

    def test_a_put_deleting_a_missing_key_or_with_a_stale_base_writes_nothing(
        self, store: Store
    ) -> None:
        head = put(store, {"MEMORY.md": "x\n", "a.md": "a1"}).head
        with pytest.raises(NotFound):
            store.put(
                REPO,
                {"MEMORY.md": "y\n"},
                if_match=None,
                base_checksums=None,
                max_entries=LIMIT,
                author=AUTHOR,
                deletes=["gone.md"],
            )
        with pytest.raises(StaleBase):
            store.put(
                REPO,
                {"MEMORY.md": "y\n"},
                if_match=None,
                base_checksums={"MEMORY.md": STALE},
                max_entries=LIMIT,
                author=AUTHOR,
                deletes=["a.md"],
            )
        assert current_head(store) == head
        assert texts_of(store) == {"MEMORY.md": "x\n", "a.md": "a1"}


# -- delta pull ------------------------------------------------------------------------


class TestChangesSince:
    @pytest.fixture
    def history(self, store: Store) -> Store:
        """v1 a,b,c; v2 b changed; v3 c deleted; v4 d added."""
        put(store, {"a.md": "a1", "b.md": "b1", "c.md": "c1"})
        put(store, {"b.md": "b2"})
        store.delete(REPO, "c.md", if_match=None, author=AUTHOR)
        put(store, {"d.md": "d1"})
        return store

    def test_only_later_changes_and_deletes_are_returned(self, history: Store) -> None:
        delta = history.changes_since(REPO, 1)
        assert delta is not None
        assert delta.texts == {"b.md": "b2", "d.md": "d1"}
        assert delta.checksums == {"b.md": entry_checksum("b2"), "d.md": entry_checksum("d1")}
        assert delta.deleted == ["c.md"]
        assert delta.head == current_head(history)

    def test_window_excludes_earlier_changes(self, history: Store) -> None:
        delta = history.changes_since(REPO, 3)
        assert delta is not None
        assert (delta.texts, delta.deleted) == ({"d.md": "d1"}, [])

    def test_since_zero_returns_every_live_entry(self, history: Store) -> None:
        delta = history.changes_since(REPO, 0)
        assert delta is not None
        assert delta.texts == {"a.md": "a1", "b.md": "b2", "d.md": "d1"}

    def test_current_version_returns_nothing(self, history: Store) -> None:
        delta = history.changes_since(REPO, 4)
        assert delta is not None
        assert (delta.texts, delta.checksums, delta.deleted) == ({}, {}, [])
        assert delta.head.version == 4

    def test_future_version_is_gone(self, history: Store) -> None:
        with pytest.raises(HistoryGone):
            history.changes_since(REPO, 5)

    def test_deleted_then_recreated_key_is_a_change_not_a_delete(self, store: Store) -> None:
        put(store, {"x.md": "x1", "y.md": "y1"})
        store.delete(REPO, "x.md", if_match=None, author=AUTHOR)
        put(store, {"x.md": "x2"})
        store.delete(REPO, "y.md", if_match=None, author=AUTHOR)
        store.restore(REPO, "y.md", 1, max_entries=LIMIT, author=AUTHOR)
        delta = store.changes_since(REPO, 1)
        assert delta is not None
        assert delta.texts == {"x.md": "x2", "y.md": "y1"}
        assert delta.deleted == []

    def test_applying_delta_reproduces_the_snapshot(self, history: Store) -> None:
        older = {"a.md": "a1", "b.md": "b1", "c.md": "c1"}
        delta = history.changes_since(REPO, 1)
        assert delta is not None
        merged = {key: body for key, body in older.items() if key not in delta.deleted}
        merged.update(delta.texts)
        assert merged == texts_of(history)
        assert expected_repo_checksum(merged) == delta.head.checksum


# -- history and restore ---------------------------------------------------------------


class TestHistory:
    @pytest.fixture
    def history(self, store: Store) -> Store:
        """a.md: v1 put by alice, v2 put by bob, v3 delete by carol, v4 restore of v1 by dave."""
        put(store, {"a.md": "first"}, author="alice")
        put(store, {"a.md": "second"}, author="bob")
        store.delete(REPO, "a.md", if_match=None, author="carol")
        store.restore(REPO, "a.md", 1, max_entries=LIMIT, author="dave")
        return store

    def test_key_history_lists_every_version_with_op_and_author(self, history: Store) -> None:
        items = history.key_history(REPO, "a.md")
        assert [(i.version, i.op, i.author, i.checksum) for i in items] == [
            (1, "put", "alice", entry_checksum("first")),
            (2, "put", "bob", entry_checksum("second")),
            (3, "delete", "carol", None),
            (4, "restore", "dave", entry_checksum("first")),
        ]
        assert all(item.key == "a.md" and item.text is None for item in items)
        assert all(item.at.utcoffset() == timedelta(0) for item in items)
        assert [item.at for item in items] == sorted(item.at for item in items)

    def test_key_version_returns_old_text(self, history: Store) -> None:
        old = history.key_version(REPO, "a.md", 2)
        assert (old.text, old.checksum, old.op, old.author) == (
            "second",
            entry_checksum("second"),
            "put",
            "bob",
        )

    def test_unknown_key_version_or_repo_is_not_found(self, history: Store) -> None:
        with pytest.raises(NotFound):
            history.key_history(REPO, "nope.md")
        with pytest.raises(NotFound):
            history.key_history("acme/never", "a.md")
        with pytest.raises(NotFound):
            history.key_version(REPO, "a.md", 99)
        with pytest.raises(NotFound):
            history.key_version("acme/never", "a.md", 1)

    def test_restore_makes_old_text_current_as_new_version(self, store: Store) -> None:
        put(store, {"a.md": "first", "b.md": "b"})
        put(store, {"a.md": "second"})
        result = store.restore(REPO, "a.md", 1, max_entries=LIMIT, author="dave")
        assert result.changed_keys == ["a.md"]
        assert result.head.version == 3
        assert result.head == current_head(store)
        assert_consistent(store, {"a.md": "first", "b.md": "b"})
        delta = store.changes_since(REPO, 2)
        assert delta is not None
        assert delta.texts == {"a.md": "first"}

    def test_restore_is_itself_recoverable(self, store: Store) -> None:
        put(store, {"a.md": "first"})
        put(store, {"a.md": "second"})
        store.restore(REPO, "a.md", 1, max_entries=LIMIT, author=AUTHOR)
        store.restore(REPO, "a.md", 2, max_entries=LIMIT, author=AUTHOR)
        assert texts_of(store) == {"a.md": "second"}
        restored = store.key_version(REPO, "a.md", 3)
        assert (restored.op, restored.text) == ("restore", "first")
        store.restore(REPO, "a.md", 3, max_entries=LIMIT, author=AUTHOR)
        assert texts_of(store) == {"a.md": "first"}
        assert current_head(store).version == 5

    def test_restore_of_a_delete_version_is_not_found(self, history: Store) -> None:
        before = current_head(history)
        with pytest.raises(NotFound):
            history.restore(REPO, "a.md", 3, max_entries=LIMIT, author=AUTHOR)
        assert current_head(history) == before

    def test_restore_of_unknown_version_or_repo_is_not_found(self, history: Store) -> None:
        with pytest.raises(NotFound):
            history.restore(REPO, "a.md", 99, max_entries=LIMIT, author=AUTHOR)
        with pytest.raises(NotFound):
            history.restore(REPO, "b.md", 1, max_entries=LIMIT, author=AUTHOR)
        with pytest.raises(NotFound):
            history.restore("acme/never", "a.md", 1, max_entries=LIMIT, author=AUTHOR)

    def test_restoring_the_current_text_is_a_no_op(self, history: Store) -> None:
        before = current_head(history)
        # v4 already restored v1's text, so restoring v1 or v4 changes nothing.
        for version in (1, 4):
            result = history.restore(REPO, "a.md", version, max_entries=LIMIT, author=AUTHOR)
            assert result.changed_keys == []
            assert result.head == before
        assert len(history.key_history(REPO, "a.md")) == 4

    def test_overwritten_and_deleted_texts_stay_recoverable(self, history: Store) -> None:
        texts = [history.key_version(REPO, "a.md", v).text for v in (1, 2, 3, 4)]
        assert texts == ["first", "second", None, "first"]


class TestLog:
    @pytest.fixture
    def commits(self, store: Store) -> Store:
        """v1 a,b by alice; v2 a changed and b deleted by bob; v3 a deleted by carol;
        v4 a restored from v1 by dave; v5 c by alice."""
        put(store, {"a.md": "a1", "b.md": "b1"}, author="alice")
        store.put(
            REPO,
            {"a.md": "a2"},
            if_match=None,
            base_checksums=None,
            max_entries=LIMIT,
            author="bob",
            deletes=["b.md"],
        )
        store.delete(REPO, "a.md", if_match=None, author="carol")
        store.restore(REPO, "a.md", 1, max_entries=LIMIT, author="dave")
        put(store, {"c.md": "c1"}, author="alice")
        return store

    def test_commits_come_newest_first_with_author_ops_and_keys(self, commits: Store) -> None:
        page = commits.log(REPO)
        summary = [(c.version, c.author, c.ops, c.keys, c.key_count) for c in page.commits]
        none = {"put": 0, "delete": 0, "restore": 0}
        assert summary == [
            (5, "alice", {**none, "put": 1}, ["c.md"], 1),
            (4, "dave", {**none, "restore": 1}, ["a.md"], 1),
            (3, "carol", {**none, "delete": 1}, ["a.md"], 1),
            (2, "bob", {**none, "put": 1, "delete": 1}, ["a.md", "b.md"], 2),
            (1, "alice", {**none, "put": 2}, ["a.md", "b.md"], 2),
        ]
        assert page.next_before is None
        assert all(c.at.utcoffset() == timedelta(0) for c in page.commits)
        assert [c.at for c in page.commits] == sorted((c.at for c in page.commits), reverse=True)

    def test_pages_follow_next_before_to_the_end(self, commits: Store) -> None:
        seen: list[list[int]] = []
        before: int | None = None
        while True:
            page = commits.log(REPO, before=before, limit=2)
            seen.append([c.version for c in page.commits])
            if page.next_before is None:
                break
            before = page.next_before
        assert seen == [[5, 4], [3, 2], [1]]
        assert commits.log(REPO, limit=5).next_before is None
        assert commits.log(REPO, before=1).commits == []

    def test_author_since_and_key_filter_the_commits(self, commits: Store) -> None:
        def versions(**filters: object) -> list[int]:
            return [c.version for c in commits.log(REPO, **filters).commits]  # type: ignore[arg-type]

        assert versions(author="alice") == [5, 1]
        assert versions(author="nobody") == []
        assert versions(key="a.md") == [4, 3, 2, 1]
        assert versions(key="b.md", author="bob") == [2]
        page = commits.log(REPO, author="alice", limit=1)
        assert ([c.version for c in page.commits], page.next_before) == ([5], 5)
        # A commit filtered by key is still summarized whole.
        assert commits.log(REPO, key="b.md", limit=1).commits[0].keys == ["a.md", "b.md"]
        moments = {c.version: c.at for c in commits.log(REPO).commits}
        since = moments[3]
        assert versions(since=since) == [v for v in (5, 4, 3, 2, 1) if moments[v] >= since]
        eastern = since.astimezone(timezone(timedelta(hours=5)))
        assert versions(since=eastern) == versions(since=since)
        assert versions(since=datetime.now(UTC) + timedelta(days=1)) == []

    def test_keys_are_capped_at_20_in_code_point_order(self, store: Store) -> None:
        keys = [f"n{i:02d}.md" for i in range(25)] + ["Z.md", "é.md", "a/b.md"]
        put(store, {key: key for key in keys})
        (commit,) = store.log(REPO).commits
        assert commit.keys == sorted(keys)[:20]
        assert (commit.key_count, commit.ops["put"]) == (28, 28)

    def test_unknown_repo_is_not_found_and_a_bad_limit_refused(self, commits: Store) -> None:
        with pytest.raises(NotFound):
            commits.log("acme/never")
        with pytest.raises(NotFound):
            commits.deleted_keys("acme/never")
        for limit in (0, 201):
            with pytest.raises(BadRequest):
                commits.log(REPO, limit=limit)

    def test_deleted_keys_are_those_not_live_with_their_last_text(self, store: Store) -> None:
        put(store, {"a.md": "a1", "b.md": "b1", "c.md": "c1", "d.md": "d1"})  # v1
        put(store, {"c.md": "c2"})  # v2
        store.delete(REPO, "b.md", if_match=None, author="bob")  # v3
        put(store, {"b.md": "b again"})  # v4: b is live again
        store.delete(REPO, "c.md", if_match=None, author="carol")  # v5
        store.delete(REPO, "d.md", if_match=None, author=AUTHOR)  # v6
        store.restore(REPO, "d.md", 1, max_entries=LIMIT, author=AUTHOR)  # v7
        store.delete(REPO, "d.md", if_match=None, author="dave")  # v8
        deleted = store.deleted_keys(REPO)
        assert [(d.key, d.version, d.author, d.last_version) for d in deleted] == [
            ("d.md", 8, "dave", 7),
            ("c.md", 5, "carol", 2),
        ]
        assert deleted[0].at == store.log(REPO, limit=1).commits[0].at
        store.restore(REPO, "c.md", 2, max_entries=LIMIT, author=AUTHOR)
        assert [d.key for d in store.deleted_keys(REPO)] == ["d.md"]


class TestPruneHistory:
    @pytest.fixture
    def pruned(self, store: Store) -> tuple[Store, RepoHead, int]:
        """v1 a,c; v2 a changed; v3 c deleted; v4 b added; then prune everything prunable."""
        put(store, {"a.md": "a1", "c.md": "c1"})
        put(store, {"a.md": "a2"})
        store.delete(REPO, "c.md", if_match=None, author=AUTHOR)
        put(store, {"b.md": "b1"})
        head = current_head(store)
        removed = store.prune_history(datetime.now(UTC) + timedelta(days=1))
        return store, head, removed

    def test_old_rows_go_and_the_newest_per_key_stays(
        self, pruned: tuple[Store, RepoHead, int]
    ) -> None:
        store, _, removed = pruned
        assert removed == 2
        assert [(i.version, i.op) for i in store.key_history(REPO, "a.md")] == [(2, "put")]
        assert [(i.version, i.op) for i in store.key_history(REPO, "c.md")] == [(3, "delete")]
        assert [(i.version, i.op) for i in store.key_history(REPO, "b.md")] == [(4, "put")]
        with pytest.raises(NotFound):
            store.key_version(REPO, "a.md", 1)

    def test_live_data_and_head_are_untouched(self, pruned: tuple[Store, RepoHead, int]) -> None:
        store, head, _ = pruned
        assert current_head(store) == head
        assert_consistent(store, {"a.md": "a2", "b.md": "b1"})

    def test_since_below_the_floor_is_gone_but_above_still_works(
        self, pruned: tuple[Store, RepoHead, int]
    ) -> None:
        store, _, _ = pruned
        with pytest.raises(HistoryGone):
            store.changes_since(REPO, 0)
        delta = store.changes_since(REPO, 1)
        assert delta is not None
        assert delta.texts == {"a.md": "a2", "b.md": "b1"}
        assert delta.deleted == ["c.md"]

    def test_pruning_again_removes_nothing(self, pruned: tuple[Store, RepoHead, int]) -> None:
        store, _, _ = pruned
        assert store.prune_history(datetime.now(UTC) + timedelta(days=1)) == 0

    def test_cutoff_in_the_past_keeps_everything(self, store: Store) -> None:
        put(store, {"a.md": "a1"})
        put(store, {"a.md": "a2"})
        assert store.prune_history(datetime.now(UTC) - timedelta(days=1)) == 0
        assert len(store.key_history(REPO, "a.md")) == 2
        assert store.changes_since(REPO, 0) is not None


# -- content fidelity ------------------------------------------------------------------


class TestContent:
    def test_unicode_keys_and_texts_round_trip_exactly(self, store: Store) -> None:
        nfd_text = unicodedata.normalize("NFD", "café déjà vu")
        texts = {
            "決定/データベース.md": "PostgreSQL を使う。\n理由: 共有しやすい。\n",
            "emoji/🚀-launch.md": "ship it 🚀🎉 👩‍👩‍👧‍👦\n",
            unicodedata.normalize("NFC", "notes/café.md"): nfd_text,
            "mixed/Ωmega-ü.md": "tabs\tand\r\nCRLF\rCR\u2028LS\ufeffBOM-in-middle",
        }
        assert nfd_text != unicodedata.normalize("NFC", nfd_text)
        put(store, texts)
        snapshot = full_snapshot(store)
        assert snapshot.texts == texts
        for key, body in snapshot.texts.items():
            assert body.encode("utf-8") == texts[key].encode("utf-8")
        assert {k.encode("utf-8") for k in snapshot.texts} == {k.encode("utf-8") for k in texts}
        assert_consistent(store, texts)

    def test_keys_differing_only_in_case_or_trailing_space_stay_distinct(
        self, store: Store
    ) -> None:
        texts = {"Notes.md": "upper", "notes.md": "lower", "notes.md ": "space", "notes": "x"}
        put(store, texts)
        assert_consistent(store, texts)

    def test_large_entry_round_trips(self, store: Store) -> None:
        large = "".join(f"line {n:06} ✓ {'x' * 40}\n" for n in range(4_000))
        assert len(large.encode("utf-8")) > 200_000
        put(store, {"big.md": large})
        assert texts_of(store)["big.md"] == large
        delta = store.changes_since(REPO, 0)
        assert delta is not None
        assert delta.texts["big.md"] == large
        assert store.key_version(REPO, "big.md", 1).text == large

    @pytest.mark.parametrize("bad_text", ["before\x00after", "lone \ud800 surrogate"])
    def test_text_that_not_every_backend_can_store_is_refused(
        self, store: Store, bad_text: str
    ) -> None:
        # PostgreSQL cannot store NUL; no backend accepts what another would refuse.
        with pytest.raises(BadRequest) as refused:
            put(store, {"ok.md": "fine", "bad.md": bad_text})
        assert refused.value.details["keys"][0]["key"] == "bad.md"
        assert store.head(REPO) is None


_SEGMENTS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=8)
_KEYS = st.lists(_SEGMENTS, min_size=1, max_size=3).map("/".join)
_TEXTS = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=64)
_property_repos = itertools.count()


class TestProperties:
    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(texts=st.dictionaries(_KEYS, _TEXTS, min_size=1, max_size=8))
    def test_put_then_snapshot_returns_exactly_the_texts(
        self, store: Store, texts: dict[str, str]
    ) -> None:
        # `d` and `d/n.md` together are refused (TestPathClash); here only storable sets.
        assume(not path_clashes(texts, []))
        repo = f"prop/r{next(_property_repos)}"
        result = put(store, texts, repo=repo)
        snapshot = full_snapshot(store, repo)
        assert snapshot.texts == texts
        assert snapshot.checksums == {key: entry_checksum(body) for key, body in texts.items()}
        assert snapshot.head.checksum == repo_checksum(snapshot.checksums)
        assert snapshot.head.checksum == expected_repo_checksum(texts)
        assert result.head == snapshot.head
        assert result.changed_keys == sorted(texts)


# -- tokens ----------------------------------------------------------------------------


def race_for_one_name(create: Callable[[int], object]) -> list[str]:
    """`create(n)` in WRITERS threads released at once; each one's outcome, `created` or
    `refused` (`DuplicateTokenName`)."""
    barrier = threading.Barrier(WRITERS)
    outcomes: list[str] = []
    guard = threading.Lock()

    def attempt(n: int) -> None:
        barrier.wait(timeout=JOIN_TIMEOUT_S)
        try:
            create(n)
            outcome = "created"
        except DuplicateTokenName:
            outcome = "refused"
        with guard:
            outcomes.append(outcome)

    threads = [threading.Thread(target=attempt, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=JOIN_TIMEOUT_S)
    return outcomes


def test_find_tokens_reads_many_at_once_revoked_or_not(store: Store) -> None:
    ids = [f"id{n:04d}" for n in range(503)]  # more than one IN list of 500
    for lookup_id in ids:
        store.create_token(
            lookup_id=lookup_id,
            secret_hash=hashlib.sha256(lookup_id.encode()).hexdigest(),
            name=lookup_id,
            repo_pattern="*",
            read_only=False,
        )
    assert store.revoke_token("id0007") == 1
    found = store.find_tokens([*ids, "nobody", "id0001"])
    assert sorted(found) == ids
    assert found["id0007"].revoked_at is not None
    assert found["id0008"] == store.find_token("id0008")
    assert store.find_tokens([]) == {}


class TestTokens:
    def create(self, store: Store, lookup_id: str, name: str, *, read_only: bool = False) -> None:
        store.create_token(
            lookup_id=lookup_id,
            secret_hash=hashlib.sha256(lookup_id.encode()).hexdigest(),
            name=name,
            repo_pattern="acme/*",
            read_only=read_only,
        )

    def revoked_at(self, store: Store, lookup_id: str) -> datetime | None:
        token = store.find_token(lookup_id)
        assert token is not None, f"no token {lookup_id}"
        return token.revoked_at

    def test_create_and_find(self, store: Store) -> None:
        before = datetime.now(UTC) - timedelta(seconds=5)
        record = store.create_token(
            lookup_id="lk1",
            secret_hash="ab" * 32,
            name="laptop",
            repo_pattern="acme/widgets",
            read_only=True,
        )
        assert (record.lookup_id, record.name, record.repo_pattern) == (
            "lk1",
            "laptop",
            "acme/widgets",
        )
        assert (record.read_only, record.secret_hash, record.revoked_at) == (
            True,
            "ab" * 32,
            None,
        )
        assert record.created_at.utcoffset() == timedelta(0)
        assert before <= record.created_at <= datetime.now(UTC) + timedelta(seconds=5)
        assert store.find_token("lk1") == record
        assert store.find_token("unknown") is None

    def test_list_is_oldest_first(self, store: Store) -> None:
        for n in range(3):
            self.create(store, f"lk{n}", f"token-{n}", read_only=n == 1)
        listed = store.list_tokens()
        assert [t.lookup_id for t in listed] == ["lk0", "lk1", "lk2"]
        assert [t.read_only for t in listed] == [False, True, False]

    def test_revoke_by_name_revokes_the_live_token_of_that_name(self, store: Store) -> None:
        self.create(store, "lk1", "ci")
        self.create(store, "lk2", "laptop")
        assert store.revoke_token("ci") == 1
        self.create(store, "lk3", "ci")
        assert store.revoke_token("ci") == 1
        assert store.revoke_token("ci") == 0
        revoked = [self.revoked_at(store, lookup) is not None for lookup in ("lk1", "lk2", "lk3")]
        assert revoked == [True, False, True]

    def test_revoke_by_lookup_id(self, store: Store) -> None:
        self.create(store, "lk1", "laptop")
        self.create(store, "lk2", "desktop")
        assert store.revoke_token("lk2") == 1
        assert self.revoked_at(store, "lk1") is None
        second = store.find_token("lk2")
        assert second is not None
        assert second.revoked_at is not None
        assert second.revoked_at.utcoffset() == timedelta(0)
        assert second.revoked_at >= second.created_at

    def test_revoke_of_unknown_returns_zero(self, store: Store) -> None:
        self.create(store, "lk1", "laptop")
        assert store.revoke_token("nobody") == 0
        assert self.revoked_at(store, "lk1") is None

    def test_expiry_is_kept_and_a_token_without_one_never_expires(self, store: Store) -> None:
        now = datetime.now(UTC)
        soon = now + timedelta(days=90)
        record = store.create_token(
            lookup_id="lk1",
            secret_hash="ab" * 32,
            name="ci",
            repo_pattern="*",
            read_only=False,
            expires_at=soon,
        )
        found = store.find_token("lk1")
        assert found == record
        assert found.expires_at is not None
        assert abs(found.expires_at - soon) < timedelta(seconds=1)
        assert found.expires_at.utcoffset() == timedelta(0)
        assert not found.expired(now)
        assert found.expired(soon + timedelta(seconds=1))
        self.create(store, "lk2", "laptop")
        forever = store.find_token("lk2")
        assert forever is not None
        assert forever.expires_at is None
        assert not forever.expired(now + timedelta(days=36500))

    def test_a_live_name_cannot_be_taken_again(self, store: Store) -> None:
        self.create(store, "lk1", "ci")
        with pytest.raises(DuplicateTokenName) as refused:
            self.create(store, "lk2", "ci")
        assert refused.value.existing.lookup_id == "lk1"
        assert "'ci'" in str(refused.value)
        assert store.find_token("lk2") is None
        assert [t.lookup_id for t in store.list_tokens()] == ["lk1"]

    def test_a_revoked_name_can_be_taken_again(self, store: Store) -> None:
        self.create(store, "lk1", "ci")
        store.revoke_token("ci")
        self.create(store, "lk2", "ci")
        assert [t.name for t in store.list_tokens()] == ["ci", "ci"]

    def test_creating_one_name_at_once_exactly_one_wins(self, store: Store) -> None:
        outcomes = race_for_one_name(lambda n: self.create(store, f"lk{n}", "ci"))
        assert sorted(outcomes) == ["created"] + ["refused"] * (WRITERS - 1)
        assert [t.name for t in store.list_tokens()] == ["ci"]

    def test_expired_tokens_still_hold_their_name_until_revoked(self, store: Store) -> None:
        store.create_token(
            lookup_id="lk1",
            secret_hash="ab" * 32,
            name="ci",
            repo_pattern="*",
            read_only=False,
            expires_at=datetime.now(UTC) - timedelta(hours=1),
        )
        with pytest.raises(DuplicateTokenName):
            self.create(store, "lk2", "ci")


# -- repos, for the operator ------------------------------------------------------------


class TestRepos:
    def test_list_shows_each_repo_with_entries_bytes_version_and_last_write(
        self, store: Store
    ) -> None:
        assert store.list_repos() == []
        put(store, {"a.md": "héllo", "b.md": ""}, repo="acme/b")
        put(store, {"a.md": "x" * 1000}, repo="acme/a")
        last = put(store, {"a.md": "y" * 10}, repo="acme/a").head
        listed = store.list_repos()
        assert [s.repo for s in listed] == ["acme/a", "acme/b"]
        first, second = listed
        assert (first.entries, first.bytes, first.version) == (1, 10, 2)
        assert first.last_modified == last.last_modified
        assert (second.entries, second.bytes, second.version) == (2, len("héllo".encode()), 1)
        assert store.repo_summary("acme/a") == first
        assert store.repo_summary("acme/none") is None

    def test_a_repo_whose_entries_were_all_deleted_is_listed_empty(self, store: Store) -> None:
        put(store, {"a.md": "a"})
        store.delete(REPO, "a.md", if_match=None, author=AUTHOR)
        summary = store.repo_summary(REPO)
        assert summary is not None
        assert (summary.entries, summary.bytes, summary.version) == (0, 0, 2)

    def test_delete_removes_entries_and_history_and_only_that_repo(self, store: Store) -> None:
        put(store, {"a.md": "a", "b.md": "b"})
        put(store, {"a.md": "a2"})
        put(store, {"keep.md": "k"}, repo="acme/other")
        removed = store.delete_repo(REPO)
        assert removed is not None
        assert (removed.repo, removed.entries, removed.history) == (REPO, 2, 3)
        assert store.head(REPO) is None
        assert store.snapshot(REPO, with_texts=True) is None
        assert store.changes_since(REPO, 0) is None
        assert store.heads([REPO, "acme/other"]).keys() == {"acme/other"}
        with pytest.raises(NotFound):
            store.key_history(REPO, "a.md")
        with pytest.raises(NotFound):
            store.delete(REPO, "b.md", if_match=None, author=AUTHOR)
        assert [s.repo for s in store.list_repos()] == ["acme/other"]
        assert store.repo_summary(REPO) is None
        assert texts_of(store, "acme/other") == {"keep.md": "k"}
        assert store.delete_repo(REPO) is None
        assert store.delete_repo("acme/never") is None

    def test_a_deleted_repo_written_again_continues_its_versions(self, store: Store) -> None:
        put(store, {"a.md": "old"})
        old = put(store, {"b.md": "old"}).head
        store.delete_repo(REPO)
        with pytest.raises(PreconditionFailed):
            put(store, {"c.md": "new"}, if_match=["*"])
        new = put(store, {"c.md": "new"}).head
        assert new.version == old.version + 1
        assert_consistent(store, {"c.md": "new"})
        with pytest.raises(HistoryGone):
            store.changes_since(REPO, old.version - 1)
        delta = store.changes_since(REPO, old.version)
        assert delta is not None
        assert delta.texts == {"c.md": "new"}
        assert [item.version for item in store.key_history(REPO, "c.md")] == [new.version]
        assert [s.repo for s in store.list_repos()] == [REPO]


# -- concurrency -----------------------------------------------------------------------


class TestConcurrentWriters:
    def test_same_if_match_exactly_one_wins(self, store: Store) -> None:
        old = put(store, {"shared.md": "v0", "other.md": "o"}).head
        calls = [
            (lambda n=n: put(store, {"shared.md": f"writer {n}"}, if_match=[old.checksum]))
            for n in range(WRITERS)
        ]
        results, errors = run_together(calls)
        assert len(results) == 1, errors
        assert len(errors) == WRITERS - 1
        assert all(isinstance(error, PreconditionFailed) for error in errors), errors
        winner = results[0].head
        assert winner.version == old.version + 1
        assert {e.current_checksum for e in errors if isinstance(e, PreconditionFailed)} == {
            winner.checksum
        }
        assert current_head(store) == winner
        assert_consistent(store, {"shared.md": texts_of(store)["shared.md"], "other.md": "o"})
        assert texts_of(store)["shared.md"].startswith("writer ")
        assert len(store.key_history(REPO, "shared.md")) == 2

    def test_same_base_exactly_one_wins(self, store: Store) -> None:
        old = put(store, {"shared.md": "v0"}).head
        base = {"shared.md": entry_checksum("v0")}
        calls = [
            (lambda n=n: put(store, {"shared.md": f"writer {n}"}, base=base))
            for n in range(WRITERS)
        ]
        results, errors = run_together(calls)
        assert len(results) == 1, errors
        assert all(isinstance(error, StaleBase) for error in errors), errors
        assert len(errors) == WRITERS - 1
        assert current_head(store).version == old.version + 1
        winner_text = texts_of(store)["shared.md"]
        expected = [{"key": "shared.md", "serverChecksum": entry_checksum(winner_text)}]
        assert all(
            isinstance(error, StaleBase) and error.details["conflicts"] == expected
            for error in errors
        )
        assert len(store.key_history(REPO, "shared.md")) == 2

    def test_creating_same_new_key_in_new_repo_exactly_one_wins(self, store: Store) -> None:
        calls = [
            (lambda n=n: put(store, {"new.md": f"writer {n}"}, base={"new.md": None}))
            for n in range(WRITERS)
        ]
        results, errors = run_together(calls)
        assert len(results) == 1, errors
        assert all(isinstance(error, StaleBase) for error in errors), errors
        assert current_head(store).version == 1
        assert len(store.key_history(REPO, "new.md")) == 1

    @pytest.mark.parametrize("existing", [True, False], ids=["existing-repo", "new-repo"])
    def test_a_file_and_a_directory_of_the_same_name_never_both_win(
        self, store: Store, existing: bool
    ) -> None:
        if existing:
            put(store, {"base.md": "b"})
        keys = ["d", "d/n.md"]
        calls = [(lambda n=n: put(store, {keys[n % 2]: f"writer {n}"})) for n in range(WRITERS)]
        results, errors = run_together(calls)
        assert all(isinstance(error, PathClash) for error in errors), errors
        live = set(texts_of(store)) - {"base.md"}
        assert live in ({"d"}, {"d/n.md"})
        # Every writer of the key that won the first commit succeeds; every other is refused.
        assert len(results) == WRITERS // 2
        refused = {
            key for error in errors if isinstance(error, PathClash) for key in error.details["keys"]
        }
        assert refused == set(keys) - live

    @pytest.mark.parametrize("existing", [True, False], ids=["existing-repo", "new-repo"])
    def test_writers_of_different_keys_all_succeed(self, store: Store, existing: bool) -> None:
        start = put(store, {"base.md": "b"}).head.version if existing else 0
        calls = [(lambda n=n: put(store, {f"writer-{n}.md": f"text {n}"})) for n in range(WRITERS)]
        results, errors = run_together(calls)
        assert errors == []
        assert sorted(r.head.version for r in results) == list(
            range(start + 1, start + WRITERS + 1)
        )
        expected = {f"writer-{n}.md": f"text {n}" for n in range(WRITERS)}
        if existing:
            expected["base.md"] = "b"
        assert current_head(store).version == start + WRITERS
        assert_consistent(store, expected)
        delta = store.changes_since(REPO, start)
        assert delta is not None
        assert set(delta.texts) == {f"writer-{n}.md" for n in range(WRITERS)}

    def test_readers_never_see_a_half_applied_write(self, store: Store) -> None:
        keys = [f"k{n}.md" for n in range(5)]
        put(store, dict.fromkeys(keys, "round 0"))
        rounds = 20
        torn: list[str] = []
        done = threading.Event()

        def write() -> CommitResult:
            try:
                result = put(store, dict.fromkeys(keys, "round 0"))
                for n in range(1, rounds + 1):
                    result = put(store, dict.fromkeys(keys, f"round {n}"))
                return result
            finally:
                done.set()

        def read() -> CommitResult:
            seen = 0
            while not done.is_set() or seen == 0:
                snapshot = full_snapshot(store)
                seen += 1
                if len(set(snapshot.texts.values())) != 1:
                    torn.append(f"mixed texts at v{snapshot.head.version}")
                if snapshot.head.checksum != expected_repo_checksum(snapshot.texts):
                    torn.append(f"checksum does not match texts at v{snapshot.head.version}")
                if snapshot.texts[keys[0]] != f"round {snapshot.head.version - 1}":
                    torn.append(f"texts of another version at v{snapshot.head.version}")
            return CommitResult(head=snapshot.head, changed_keys=[])

        results, errors = run_together([write, read, read, read])
        assert errors == []
        assert len(results) == 4
        assert torn == []
        assert current_head(store).version == rounds + 1


# -- commits from several processes: cached live keys never show -------------------------


def naive_clashes(new_keys: Sequence[str], live: Sequence[str]) -> bool:
    """Whether writing `new_keys` next to `live` makes a key both a file and a directory."""
    every = set(live) | set(new_keys)
    return any(
        other.startswith(key + "/") or key.startswith(other + "/")
        for key in set(new_keys) - set(live)
        for other in every
    )


# Keys that clash with each other (`d`, `d/n.md`, `d/e/f.md`) and keys that do not.
_POOL = ["a.md", "b.md", "d", "d/n.md", "d/e/f.md", "e/x.md", "e/y.md", "z/z.md"]
_OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("put"),
            st.integers(0, 1),
            st.dictionaries(st.sampled_from(_POOL), st.sampled_from(["1", "2", "3"]), max_size=3),
        ),
        st.tuples(st.just("delete"), st.integers(0, 1), st.sampled_from(_POOL)),
        st.tuples(st.just("restore"), st.integers(0, 1), st.sampled_from(_POOL), st.integers(0, 9)),
        st.tuples(st.just("delete_repo"), st.integers(0, 1)),
        st.tuples(st.just("prune"), st.integers(0, 1)),
    ),
    min_size=1,
    max_size=25,
)


@pytest.fixture
def two_stores(store: SqlStore, database_url: str) -> Iterator[tuple[SqlStore, SqlStore]]:
    """Two stores on one database, as two server processes would have (SQLite: one file)."""
    other = SqlStore(database_url)
    yield store, other
    other.close()


def assert_matches(stores: Sequence[Store], model: Mapping[str, str] | None, repo: str) -> None:
    """Every store reports exactly `model` (None: the repo holds no data), with the ETag
    and entry checksums a from-scratch computation gives."""
    for each in stores:
        if model is None:
            assert each.head(repo) is None
            continue
        assert_consistent(each, model, repo)


class TestCommitsFromSeveralProcesses:
    @settings(
        max_examples=30,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(ops=_OPS)
    def test_any_sequence_from_two_stores_gives_the_recomputed_checksum(
        self, two_stores: tuple[SqlStore, SqlStore], ops: list[tuple[object, ...]]
    ) -> None:
        repo = f"procs/r{next(_property_repos)}"
        model: dict[str, str] | None = None
        for op in ops:
            kind, which = op[0], op[1]
            assert isinstance(which, int)
            writer = two_stores[which]
            if kind == "put":
                entries = op[2]
                assert isinstance(entries, dict)
                live = model or {}
                changed = {k: v for k, v in entries.items() if live.get(k) != v}
                if changed and naive_clashes(list(changed), list(live)):
                    with pytest.raises(PathClash):
                        put(writer, entries, repo=repo)
                else:
                    result = put(writer, entries, repo=repo)
                    if changed or model is not None:
                        model = {**live, **entries}
                    assert result.changed_keys == sorted(changed)
                    if model is not None:
                        assert result.head.checksum == expected_repo_checksum(model)
            elif kind == "delete":
                key = op[2]
                assert isinstance(key, str)
                if model is None or key not in model:
                    with pytest.raises(NotFound):
                        writer.delete(repo, key, if_match=None, author=AUTHOR)
                else:
                    del model[key]
                    result = writer.delete(repo, key, if_match=None, author=AUTHOR)
                    assert result.head.checksum == expected_repo_checksum(model)
            elif kind == "restore":
                key, pick = op[2], op[3]
                assert isinstance(key, str)
                assert isinstance(pick, int)
                try:
                    kept = [i for i in writer.key_history(repo, key) if i.op != "delete"]
                except NotFound:
                    kept = []
                if model is None or not kept:
                    continue
                item = kept[pick % len(kept)]
                old = writer.key_version(repo, key, item.version).text
                assert old is not None
                if key not in model and naive_clashes([key], list(model)):
                    with pytest.raises(PathClash):
                        writer.restore(repo, key, item.version, max_entries=LIMIT, author=AUTHOR)
                else:
                    model[key] = old
                    result = writer.restore(
                        repo, key, item.version, max_entries=LIMIT, author=AUTHOR
                    )
                    assert result.head.checksum == expected_repo_checksum(model)
            elif kind == "delete_repo":
                writer.delete_repo(repo)
                model = None
            else:
                writer.prune_history(datetime.now(UTC) + timedelta(days=1))
            assert_matches(two_stores, model, repo)

    def test_a_large_repo_written_alternately_by_two_stores(
        self, two_stores: tuple[SqlStore, SqlStore]
    ) -> None:
        # More keys than one block of the cached key list holds, so blocks split.
        texts = {f"t{n % 7}/note-{n:04d}.md": f"note {n}" for n in range(1_500)}
        first, _second = two_stores
        put(first, texts, max_entries=10_000)
        for round_ in range(12):
            writer = two_stores[round_ % 2]
            batch = {f"t{n % 7}/new-{round_}-{n:03d}.md": f"r{round_}" for n in range(0, 700, 7)}
            batch[f"t{round_ % 7}/note-{round_ * 100:04d}.md"] = f"rewritten {round_}"
            result = put(writer, batch, max_entries=10_000)
            texts.update(batch)
            assert result.head.checksum == expected_repo_checksum(texts)
            gone = sorted(texts)[round_ * 50 : round_ * 50 + 3]
            for key in gone:
                result = two_stores[1 - round_ % 2].delete(REPO, key, if_match=None, author=AUTHOR)
                del texts[key]
            assert result.head.checksum == expected_repo_checksum(texts)
            with pytest.raises(PathClash):
                put(writer, {sorted(texts)[round_] + "/under.md": "x"}, max_entries=10_000)
        assert_matches(two_stores, texts, REPO)

    def test_a_repo_deleted_by_another_store_is_not_resurrected(
        self, two_stores: tuple[SqlStore, SqlStore]
    ) -> None:
        first, second = two_stores
        put(first, {"a.md": "a", "d/n.md": "n"})
        second.delete_repo(REPO)
        # The first store last saw a.md and d/n.md: neither may come back, nor clash.
        result = put(first, {"d": "now a file"})
        assert result.head.checksum == expected_repo_checksum({"d": "now a file"})
        assert_matches(two_stores, {"d": "now a file"}, REPO)
        second.delete_repo(REPO)
        put(second, {"b.md": "b"})
        result = put(first, {"c.md": "c"})
        assert result.head.checksum == expected_repo_checksum({"b.md": "b", "c.md": "c"})
        assert_matches(two_stores, {"b.md": "b", "c.md": "c"}, REPO)


def test_delete_spaces_removes_every_row_of_those_spaces_and_nothing_else(store: SqlStore) -> None:
    """`person delete`'s store side: the spaces of one prefix go, rows and all, in one
    transaction; a name that only matches as a LIKE pattern (`_`) is not touched."""

    def write(repo: str, key: str, text: str) -> None:
        store.put(repo, {key: text}, if_match=None, base_checksums=None, max_entries=9, author="a")

    write("~a_b/acme/app", "one.md", "1")
    write("~a_b/acme/app", "one.md", "2")
    write("~a_b/~", "g.md", "g")
    store.delete("~a_b/~", "g.md", if_match=None, author="a")
    write("~axb/acme/app", "theirs.md", "kept")
    write(REPO, "team.md", "kept")
    store.set_review(REPO, True)
    store.propose(
        REPO,
        {"team.md": "proposed"},
        if_match=None,
        base_checksums=None,
        max_entries=9,
        author="a_b",
        max_pending=9,
    )
    removed = store.delete_spaces("~a_b/")
    assert (removed.spaces, removed.entries, removed.history, removed.proposals) == (
        ["~a_b/acme/app", "~a_b/~"],
        1,
        4,
        0,
    )
    assert sorted(r.repo for r in store.list_repos()) == sorted(["~axb/acme/app", REPO])
    assert store.head("~a_b/acme/app") is None
    assert store.pending_count(REPO) == 1
    assert store.delete_spaces("~a_b/").spaces == []
    # A later write starts the space again from its first version.
    write("~a_b/~", "g.md", "again")
    head = store.head("~a_b/~")
    assert head is not None
    assert head.version == 1
