"""The storage contract of provenance and verification (docs/protocol.md 3.13), on
SQLite and PostgreSQL: provenance round-trips through history and the log, absent
provenance reads as before, a verification changes no read, and migration 0007 goes
both ways keeping every row."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect

from sync_server.errors import NoTeamMemory, NotFound
from sync_server.storage.base import ProposalResult, Store
from sync_server.storage.sql import SqlStore
from tests.schema_revisions import move_schema

REPO = "acme/provenance"
LIMIT = 100
SEEN = {
    "via": "watcher",
    "agent": "claude-code",
    "agentVersion": "2.1.197",
    "session": "3f1c<b>",
    "commit": "a" * 40,
}


def test_provenance_round_trips_through_history_and_log(store: Store) -> None:
    store.put(
        REPO,
        {"a.md": "one"},
        if_match=None,
        base_checksums=None,
        max_entries=LIMIT,
        author="alice",
        provenance=SEEN,
    )
    store.put(
        REPO, {"b.md": "two"}, if_match=None, base_checksums=None, max_entries=LIMIT, author="bob"
    )
    store.restore(REPO, "a.md", 1, max_entries=LIMIT, author="bob", provenance={"via": "web"})
    store.delete(REPO, "b.md", if_match=None, author="carol", provenance={"via": "cli"})
    [first] = store.key_history(REPO, "a.md")
    assert first.provenance == SEEN
    assert store.key_version(REPO, "a.md", 1).provenance == SEEN
    [written, deleted] = store.key_history(REPO, "b.md")
    assert written.provenance is None
    assert deleted.provenance == {"via": "cli"}
    commits = store.log(REPO).commits
    assert [commit.provenance for commit in commits] == [{"via": "cli"}, None, SEEN]
    # A log without a verification counts exactly the three ops it always did.
    assert all(set(commit.ops) == {"put", "delete", "restore"} for commit in commits)


def test_verify_adds_a_version_and_changes_no_read(store: Store) -> None:
    store.put(
        REPO,
        {"a.md": "one", "b.md": "two"},
        if_match=None,
        base_checksums=None,
        max_entries=LIMIT,
        author="alice",
    )
    before = store.snapshot(REPO, with_texts=True)
    assert before is not None
    checked = {"via": "cli", "commit": "b" * 40}
    result = store.verify(REPO, "a.md", author="bob", provenance=checked)
    after = store.snapshot(REPO, with_texts=True)
    assert after is not None
    assert result.head.version == before.head.version + 1 == after.head.version
    assert after.head.checksum == before.head.checksum == result.head.checksum
    assert (after.texts, after.checksums) == (before.texts, before.checksums)
    delta = store.changes_since(REPO, before.head.version)
    assert delta is not None
    assert (delta.texts, delta.deleted) == ({}, [])
    newest = store.key_history(REPO, "a.md")[-1]
    assert (newest.op, newest.author, newest.provenance) == ("verify", "bob", checked)
    assert newest.checksum == before.checksums["a.md"]
    [commit, _] = store.log(REPO).commits
    assert (commit.ops["verify"], commit.author) == (1, "bob")
    # The next write commits on top of it as usual.
    store.put(
        REPO,
        {"a.md": "three"},
        if_match=[after.head.checksum],
        base_checksums=None,
        max_entries=LIMIT,
        author="alice",
    )


def test_verify_of_a_key_that_is_not_live_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        store.verify(REPO, "a.md", author="bob")
    store.put(
        REPO, {"a.md": "one"}, if_match=None, base_checksums=None, max_entries=LIMIT, author="alice"
    )
    store.delete(REPO, "a.md", if_match=None, author="alice")
    with pytest.raises(NotFound):
        store.verify(REPO, "a.md", author="bob")


def test_0007_adds_and_drops_the_column_keeping_rows(store: SqlStore, database_url: str) -> None:
    store.put(
        REPO,
        {"a.md": "one"},
        if_match=None,
        base_checksums=None,
        max_entries=LIMIT,
        author="alice",
        provenance={"via": "cli"},
    )
    move_schema(database_url, "0006", down=True)
    columns = {column["name"] for column in inspect(store.engine).get_columns("history")}
    assert "provenance" not in columns
    move_schema(database_url, "0007")
    again = SqlStore(database_url)
    try:
        [item] = again.key_history(REPO, "a.md")
    finally:
        again.close()
    assert (item.author, item.provenance) == ("alice", None)


def test_a_proposal_keeps_its_provenance_for_the_version_its_accept_commits(
    store: Store,
) -> None:
    store.put(
        REPO, {"a.md": "one"}, if_match=None, base_checksums=None, max_entries=LIMIT, author="carol"
    )
    proposed = store.propose(
        REPO,
        {"a.md": "two"},
        if_match=None,
        base_checksums=None,
        max_entries=LIMIT,
        author="alice",
        max_pending=10,
        provenance=SEEN,
    )
    assert isinstance(proposed, ProposalResult)
    assert proposed.proposal.provenance == SEEN
    store.accept_proposal(REPO, proposed.proposal.id, reviewer="carol", max_entries=LIMIT)
    newest = store.key_history(REPO, "a.md")[-1]
    assert (newest.author, newest.accepted_by, newest.provenance) == ("alice", "carol", SEEN)


def test_sources_are_the_newest_write_or_verification_of_each_live_key(store: Store) -> None:
    with pytest.raises(NoTeamMemory):
        store.sources(REPO)
    store.put(
        REPO,
        {"a.md": "one", "b.md": "two", "c.md": "three"},
        if_match=None,
        base_checksums=None,
        max_entries=LIMIT,
        author="alice",
        provenance=SEEN,
    )
    store.put(
        REPO, {"b.md": "2"}, if_match=None, base_checksums=None, max_entries=LIMIT, author="bob"
    )
    store.verify(REPO, "c.md", author="carol", provenance={"via": "cli", "commit": "c" * 40})
    store.put(
        REPO,
        {"d.md": "four"},
        if_match=None,
        base_checksums=None,
        max_entries=LIMIT,
        author="bob",
        deletes=["a.md"],
    )
    found = store.sources(REPO)
    assert set(found) == {"b.md", "c.md", "d.md"}  # the deleted key is absent
    assert (found["b.md"].version, found["b.md"].author, found["b.md"].commit) == (2, "bob", None)
    assert (found["c.md"].version, found["c.md"].author) == (3, "carol")
    assert found["c.md"].commit == "c" * 40
    assert (found["d.md"].version, found["d.md"].author) == (4, "bob")
    store.restore(REPO, "a.md", 1, max_entries=LIMIT, author="carol")
    restored = store.sources(REPO)["a.md"]
    assert (restored.version, restored.author, restored.commit) == (5, "carol", None)
