"""The Alembic migrations build exactly the schema the queries are written against."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from memsync_protocol.checksums import EMPTY_REPO_CHECKSUM, entry_checksum, repo_checksum
from sync_server.storage.schema import metadata
from sync_server.storage.sql import SqlStore
from tests.schema_revisions import move_schema


def test_migrated_database_matches_schema_module(store: SqlStore) -> None:
    with store.engine.connect() as connection:
        context = MigrationContext.configure(connection)
        assert compare_metadata(context, metadata) == []
        assert context.get_current_revision() is not None


def test_migrate_twice_changes_nothing(store: SqlStore) -> None:
    before = sorted(inspect(store.engine).get_table_names())
    store.migrate()
    assert sorted(inspect(store.engine).get_table_names()) == before
    assert {"repos", "entries", "history", "tokens"} <= set(before)


def test_0005_recomputes_every_repos_checksum_and_back(store: SqlStore, database_url: str) -> None:
    texts = {f"notes/{n:03d}.md": f"note {n}\n" for n in range(300)}
    store.put("acme/big", texts, if_match=None, base_checksums=None, max_entries=2000, author="a")
    store.put(
        "acme/one", {"x.md": "hi"}, if_match=None, base_checksums=None, max_entries=9, author="a"
    )
    store.put(
        "acme/gone", {"y.md": "y"}, if_match=None, base_checksums=None, max_entries=9, author="a"
    )
    store.delete("acme/gone", "y.md", if_match=None, author="a")
    repos = ("acme/big", "acme/one", "acme/gone")

    def stored() -> dict[str, tuple[int, str, dict[str, str]]]:
        found = {}
        for repo in repos:
            snapshot = store.snapshot(repo, with_texts=False)
            assert snapshot is not None
            found[repo] = (snapshot.head.version, snapshot.head.checksum, snapshot.checksums)
        return found

    at_head = stored()
    for _version, checksum, checksums in at_head.values():
        assert checksum == repo_checksum(checksums, 2)
    assert at_head["acme/gone"][1] == EMPTY_REPO_CHECKSUM

    # Down to 0004: the checksums an older server computed (definition 1), nothing else.
    move_schema(database_url, "0004", down=True)
    older = stored()
    for repo, (version, checksum, checksums) in older.items():
        assert (version, checksums) == (at_head[repo][0], at_head[repo][2])
        assert checksum == repo_checksum(checksums, 1)
    assert older["acme/one"][1] == (
        "sha256:280aa069243b70ff23e1b9ea25c75236352e541e91d7d2dd35fd38fbc2b09c94"
    )

    # Up again: definition 2 for every repo, and commits go on from there.
    move_schema(database_url, "head")
    assert stored() == at_head
    result = store.put(
        "acme/big",
        {"notes/000.md": "changed\n"},
        if_match=[at_head["acme/big"][1]],
        base_checksums=None,
        max_entries=2000,
        author="a",
    )
    texts["notes/000.md"] = "changed\n"
    assert result.head.checksum == repo_checksum(
        {key: entry_checksum(text) for key, text in texts.items()}, 2
    )


def test_0009_gives_each_proposal_its_tokens_person(store: SqlStore, database_url: str) -> None:
    """An old proposal belongs to its token's person, else to the name it was stored with."""
    for number, (name, person) in enumerate(
        [("alice-laptop", None), ("alice-laptop", "alice"), ("Bob", None), ("Kim Lee", None)]
    ):
        store.create_token(
            lookup_id=f"id{number}",
            secret_hash=f"{number:064d}",
            name=name,
            repo_pattern="*",
            read_only=False,
            person=person,
        )
        store.revoke_token(f"id{number}")  # a revoked token still names its person
    for author in ("alice-laptop", "Bob", "Kim Lee", "ghost"):
        store.propose(
            "acme/app",
            {f"{author}.md": author},
            if_match=None,
            base_checksums=None,
            max_entries=9,
            author=author,
            max_pending=9,
        )
    move_schema(database_url, "0008", down=True)
    move_schema(database_url, "0009")
    owners = {p.author: p.person for p in store.proposals("acme/app")}
    assert owners == {"alice-laptop": "alice", "Bob": "bob", "Kim Lee": "Kim Lee", "ghost": "ghost"}
    assert [p.author for p in store.proposals("acme/app", person="alice")] == ["alice-laptop"]
    move_schema(database_url, "head")


def test_0010_keeps_a_tokens_person_only_where_its_name_was_in_use(
    store: SqlStore, database_url: str
) -> None:
    """A live token keeps its name's person only when the name is that person exactly
    and the person has a space; proposals of the others become their token's own."""
    tokens = [
        ("alice", None, False),  # her agent memory exists: kept, and written down
        ("ALICE", None, False),  # folded to alice before: no person now
        ("zed", None, True),  # revoked: no person
        ("ci", None, False),  # no space of ci: no person
        ("bob-laptop", "bob", False),  # explicit: as it was
        ("Kim Lee", None, False),
    ]
    for number, (name, person, revoked) in enumerate(tokens):
        store.create_token(
            lookup_id=f"id{number}",
            secret_hash=f"{number:064d}",
            name=name,
            repo_pattern="*",
            read_only=False,
            person=person,
        )
        if revoked:
            store.revoke_token(f"id{number}")
    for space in ("~alice/~", "~zed/~", "~bob/acme/app"):
        store.put(
            space, {"n.md": "x"}, if_match=None, base_checksums=None, max_entries=9, author="a"
        )
    for author, person in [
        ("alice", "alice"),
        ("ALICE", "alice"),
        ("bob-laptop", "bob"),
        ("Kim Lee", "Kim Lee"),
        ("ci", "ci"),
    ]:
        store.propose(
            "acme/app",
            {f"{author}.md": author},
            if_match=None,
            base_checksums=None,
            max_entries=9,
            author=author,
            person=person,
            max_pending=9,
        )
    move_schema(database_url, "0009", down=True)
    move_schema(database_url, "head")
    persons = {t.name: t.person for t in store.list_tokens()}
    assert persons == {
        "alice": "alice",
        "ALICE": None,
        "zed": None,
        "ci": None,
        "bob-laptop": "bob",
        "Kim Lee": None,
    }
    owners = {p.author: p.person for p in store.proposals("acme/app")}
    assert owners == {
        "alice": "alice",
        "ALICE": "~ALICE",
        "bob-laptop": "bob",
        "Kim Lee": "~Kim Lee",
        "ci": "~ci",
    }
    move_schema(database_url, "0009", down=True)
    owners = {p.author: p.person for p in store.proposals("acme/app")}
    assert owners["ALICE"] == "alice"
    assert owners["Kim Lee"] == "Kim Lee"
    move_schema(database_url, "head")
