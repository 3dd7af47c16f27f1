"""The storage contract of the review gate (docs/protocol.md section 3.12), on SQLite
and PostgreSQL: policies, proposals kept out of every read, replacement, the bound,
accept (fast-forward and merge), conflicts that change nothing, reject, repo delete."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from memsync_protocol.checksums import entry_checksum
from sync_server.errors import (
    IndexLinesDropped,
    NotFound,
    PathClash,
    ProposalConflict,
    ProposalDecided,
    StaleBase,
    TooManyProposals,
)
from sync_server.review import SearchIndexes
from sync_server.storage.base import CommitResult, ProposalEntry, ProposalResult, Store
from sync_server.storage.sql_review import plan_accept

REPO = "acme/reviewed"
LIMIT = 2_000


def put(store: Store, entries: Mapping[str, str], author: str = "carol") -> CommitResult:
    return store.put(
        REPO, entries, if_match=None, base_checksums=None, max_entries=LIMIT, author=author
    )


def propose(
    store: Store,
    entries: Mapping[str, str],
    *,
    author: str = "alice",
    deletes: Sequence[str] = (),
    base: Mapping[str, str | None] | None = None,
    max_pending: int = 200,
) -> ProposalResult:
    result = store.propose(
        REPO,
        entries,
        deletes=deletes,
        if_match=None,
        base_checksums=base,
        max_entries=LIMIT,
        author=author,
        agent="claude-code",
        max_pending=max_pending,
    )
    assert isinstance(result, ProposalResult)
    return result


def texts(store: Store) -> dict[str, str]:
    snapshot = store.snapshot(REPO, with_texts=True)
    assert snapshot is not None
    return snapshot.texts


def test_policy_most_specific_pattern_decides(store: Store) -> None:
    assert not store.is_reviewed(REPO)
    store.set_review("*", True)
    assert store.is_reviewed(REPO)
    assert store.is_reviewed("other/x")
    store.set_review("acme/*", False)
    assert not store.is_reviewed(REPO)
    assert store.is_reviewed("other/x")
    store.set_review(REPO, True)
    assert store.is_reviewed(REPO)
    assert not store.is_reviewed("acme/else")
    assert store.review_policies() == {"*": True, "acme/*": False, REPO: True}


def test_a_proposal_is_in_no_read_and_keeps_its_base(store: Store) -> None:
    put(store, {"a.md": "team\n"})
    head = store.head(REPO)
    assert head is not None
    result = propose(store, {"a.md": "team\nmine\n", "b.md": "new\n"})
    assert result.head == head
    proposal = result.proposal
    assert (proposal.status, proposal.author, proposal.agent) == ("pending", "alice", "claude-code")
    assert proposal.keys == ["a.md", "b.md"]
    assert proposal.base_version == head.version
    assert store.head(REPO) == head
    assert texts(store) == {"a.md": "team\n"}
    delta = store.changes_since(REPO, 0)
    assert delta is not None
    assert set(delta.texts) == {"a.md"}
    shown = store.proposal(REPO, proposal.id)
    assert shown is not None
    by_key = {entry.key: entry for entry in shown.entries}
    assert by_key["a.md"].text == "team\nmine\n"
    assert by_key["a.md"].base_text == "team\n"
    assert by_key["a.md"].base_checksum == entry_checksum("team\n")
    assert by_key["a.md"].team_text == "team\n"
    assert by_key["b.md"].base_text is None
    assert by_key["b.md"].team_checksum is None
    assert store.pending_count(REPO) == 1
    assert store.pending_count(REPO, person="bob") == 0


def test_a_proposal_is_checked_as_a_put(store: Store) -> None:
    put(store, {"d/n.md": "x"})
    with pytest.raises(StaleBase):
        propose(store, {"a.md": "x"}, base={"a.md": entry_checksum("other")})
    with pytest.raises(NotFound):
        propose(store, {}, deletes=["missing.md"])
    with pytest.raises(PathClash):
        propose(store, {"d": "x"})
    unchanged = store.propose(
        REPO,
        {"d/n.md": "x"},
        if_match=None,
        base_checksums=None,
        max_entries=LIMIT,
        author="alice",
        max_pending=200,
    )
    assert isinstance(unchanged, CommitResult)
    assert unchanged.changed_keys == []
    assert store.proposals(REPO, status="all") == []


def test_same_author_same_key_replaces_and_carries_the_other_keys(store: Store) -> None:
    put(store, {"a.md": "a\n", "b.md": "b\n"})
    first = propose(store, {"a.md": "a1\n", "b.md": "b1\n"}).proposal
    other = propose(store, {"a.md": "bob's\n"}, author="bob").proposal
    second = propose(store, {"a.md": "a2\n", "c.md": "c\n"})
    assert second.replaced == [first.id]
    assert second.proposal.keys == ["a.md", "b.md", "c.md"]
    shown = store.proposal(REPO, second.proposal.id)
    assert shown is not None
    assert {entry.key: entry.text for entry in shown.entries} == {
        "a.md": "a2\n",
        "b.md": "b1\n",
        "c.md": "c\n",
    }
    old = store.proposal(REPO, first.id)
    assert old is not None
    assert (old.status, old.replaced_by) == ("replaced", second.proposal.id)
    pending = store.proposals(REPO)
    assert [p.id for p in pending] == [second.proposal.id, other.id]
    assert [p.id for p in store.proposals(REPO, person="alice", status="all")] == [
        second.proposal.id,
        first.id,
    ]
    assert [p.id for p in store.proposals(REPO, status="decided")] == [first.id]


def test_the_bound_refuses_and_stores_nothing(store: Store) -> None:
    put(store, {"a.md": "a\n"})
    propose(store, {"one.md": "1"}, max_pending=2)
    propose(store, {"two.md": "2"}, max_pending=2)
    with pytest.raises(TooManyProposals) as refused:
        propose(store, {"three.md": "3"}, max_pending=2)
    assert refused.value.details == {"error_code": "too_many_proposals", "max": 2}
    assert store.pending_count(REPO, person="alice") == 2
    # Replacing one of them is not a new one.
    propose(store, {"two.md": "2b"}, max_pending=2)
    assert store.pending_count(REPO, person="alice") == 2


def test_accept_fast_forward_is_one_commit_by_the_author(store: Store) -> None:
    put(store, {"a.md": "a\n", "gone.md": "g\n"})
    proposal = propose(store, {"a.md": "a2\n"}, deletes=["gone.md"]).proposal
    accepted = store.accept_proposal(REPO, proposal.id, reviewer="carol", max_entries=LIMIT)
    assert accepted.changed_keys == ["a.md", "gone.md"]
    assert texts(store) == {"a.md": "a2\n"}
    assert accepted.proposal.status == "accepted"
    assert accepted.proposal.decided_by == "carol"
    assert accepted.proposal.accepted_version == accepted.head.version
    history = store.key_history(REPO, "a.md")
    assert (history[-1].author, history[-1].accepted_by) == ("alice", "carol")
    assert history[0].accepted_by is None
    log = store.log(REPO)
    assert (log.commits[0].author, log.commits[0].accepted_by) == ("alice", "carol")
    assert log.commits[1].accepted_by is None
    with pytest.raises(ProposalDecided) as decided:
        store.accept_proposal(REPO, proposal.id, reviewer="carol", max_entries=LIMIT)
    assert decided.value.details["status"] == "accepted"


def test_accept_merges_two_appends(store: Store) -> None:
    put(store, {"MEMORY.md": "# Index\n- [a](a.md)\n"})
    mine = propose(store, {"MEMORY.md": "# Index\n- [a](a.md)\n- [b](b.md)\n"}).proposal
    theirs = propose(
        store, {"MEMORY.md": "# Index\n- [a](a.md)\n- [c](c.md)\n"}, author="bob"
    ).proposal
    store.accept_proposal(REPO, theirs.id, reviewer="carol", max_entries=LIMIT)
    store.accept_proposal(REPO, mine.id, reviewer="carol", max_entries=LIMIT)
    assert texts(store)["MEMORY.md"] == "# Index\n- [a](a.md)\n- [c](c.md)\n- [b](b.md)\n"


def test_a_write_dropping_a_live_notes_index_line_is_refused_as_a_proposal_and_a_put(
    store: Store,
) -> None:
    index = "# Index\n- [a](a.md)\n- [b](b.md)\n"
    head = put(store, {"MEMORY.md": index, "a.md": "a", "b.md": "b"}).head
    for write in (propose, put):
        with pytest.raises(IndexLinesDropped) as caught:
            write(store, {"MEMORY.md": "# Index\n- [b](b.md)\n"})
        assert caught.value.details["dropped"] == [{"index": "MEMORY.md", "notes": ["a.md"]}]
    assert (store.head(REPO), store.pending_count(REPO, person=None)) == (head, 0)
    # With the note's delete in the same write, its line may go.
    propose(store, {"MEMORY.md": "# Index\n- [b](b.md)\n"}, deletes=["a.md"])


def test_accept_refused_on_overlap_changes_nothing(store: Store) -> None:
    put(store, {"a.md": "one\ntwo\n"})
    proposal = propose(store, {"a.md": "one\nTWO\n"}).proposal
    put(store, {"a.md": "one\nzwei\n"})
    head = store.head(REPO)
    with pytest.raises(ProposalConflict) as refused:
        store.accept_proposal(REPO, proposal.id, reviewer="carol", max_entries=LIMIT)
    assert refused.value.details["conflicts"] == [
        {
            "key": "a.md",
            "teamChecksum": entry_checksum("one\nzwei\n"),
            "baseChecksum": entry_checksum("one\ntwo\n"),
        }
    ]
    assert store.head(REPO) == head
    assert texts(store) == {"a.md": "one\nzwei\n"}
    still = store.proposal(REPO, proposal.id)
    assert still is not None
    assert still.status == "pending"


def test_review_off_publishes_what_merges_and_returns_what_would_overwrite(store: Store) -> None:
    """`settle_unreviewed` (issue 37): only repos no longer reviewed, oldest first."""
    store.set_review("acme/*", True)
    put(store, {"a.md": "one\ntwo\n"})
    published = propose(store, {"b.md": "b\n"}).proposal
    overlaps = propose(store, {"a.md": "one\nTWO\n"}).proposal
    put(store, {"a.md": "one\nzwei\n"})
    still = store.propose(
        "acme/still",
        {"s.md": "s\n"},
        if_match=None,
        base_checksums=None,
        max_entries=LIMIT,
        author="alice",
        max_pending=200,
    )
    assert isinstance(still, ProposalResult)
    assert store.settle_unreviewed(max_entries=LIMIT) == []  # everything is reviewed
    store.set_review(REPO, False)
    settled = store.settle_unreviewed(max_entries=LIMIT)
    assert [(p.id, p.status, p.decided_by) for p in settled] == [
        (published.id, "accepted", None),
        (overlaps.id, "rejected", None),
    ]
    assert settled[1].reason == (
        "review was switched off; not published, as the team changed a.md since it was "
        "written, and the edits overlap"
    )
    assert texts(store) == {"a.md": "one\nzwei\n", "b.md": "b\n"}
    history = store.key_history(REPO, "b.md")
    assert (history[-1].author, history[-1].accepted_by) == ("alice", None)
    assert store.pending_count(REPO) == 0
    assert store.pending_count("acme/still") == 1


def test_reject_keeps_the_reason_and_changes_no_text(store: Store) -> None:
    put(store, {"a.md": "a\n"})
    proposal = propose(store, {"a.md": "guess\n"}).proposal
    rejected = store.reject_proposal(REPO, proposal.id, reviewer="carol", reason="not true")
    assert (rejected.status, rejected.decided_by, rejected.reason) == (
        "rejected",
        "carol",
        "not true",
    )
    assert rejected.decided_at is not None
    assert texts(store) == {"a.md": "a\n"}
    assert store.pending_count(REPO) == 0
    with pytest.raises(ProposalDecided):
        store.reject_proposal(REPO, proposal.id, reviewer="carol", reason="again")
    with pytest.raises(NotFound):
        store.reject_proposal(REPO, proposal.id + 100, reviewer="carol", reason="x")


def test_repo_delete_removes_its_proposals(store: Store) -> None:
    put(store, {"a.md": "a\n"})
    proposal = propose(store, {"a.md": "b\n"}).proposal
    store.reject_proposal(
        REPO, propose(store, {"x.md": "x"}).proposal.id, reviewer="carol", reason="no"
    )
    assert store.delete_repo(REPO) is not None
    assert store.proposals(REPO, status="all") == []
    assert store.proposal(REPO, proposal.id) is None
    assert store.pending_count(REPO) == 0


def test_a_reviewer_token_is_stored(store: Store) -> None:
    record = store.create_token(
        lookup_id="L" * 12,
        secret_hash="h" * 64,
        name="carol",
        repo_pattern="acme/*",
        read_only=False,
        reviewer=True,
    )
    assert record.reviewer
    found = store.find_token("L" * 12)
    assert found is not None
    assert found.reviewer
    assert not store.create_token(
        lookup_id="M" * 12, secret_hash="h" * 64, name="al", repo_pattern="*", read_only=False
    ).reviewer


def entry(op: str, text: str | None, base: str | None, key: str = "k.md") -> ProposalEntry:
    return ProposalEntry(
        key=key,
        op="put" if op == "put" else "delete",
        checksum=None if text is None else entry_checksum(text),
        base_checksum=None if base is None else entry_checksum(base),
        text=text,
        base_text=base,
    )


@pytest.mark.parametrize(
    ("proposed", "team", "expected"),
    [
        # the team still has the base: the proposed text
        (entry("put", "b\n", "a\n"), "a\n", ({"k.md": "b\n"}, [], 0)),
        # the team already has the proposed text: nothing
        (entry("put", "b\n", "a\n"), "b\n", ({}, [], 0)),
        # the team deleted the note since: a conflict
        (entry("put", "b\n", "a\n"), None, ({}, [], 1)),
        # a delete of an unchanged note; of a note already gone; of a moved one
        (entry("delete", None, "a\n"), "a\n", ({}, ["k.md"], 0)),
        (entry("delete", None, "a\n"), None, ({}, [], 0)),
        (entry("delete", None, "a\n"), "c\n", ({}, [], 1)),
        # two new notes at one key are whole notes: no union of additions
        (entry("put", "mine\n", None), "theirs\n", ({}, [], 1)),
    ],
)
def test_plan_accept(
    proposed: ProposalEntry,
    team: str | None,
    expected: tuple[dict[str, str], list[str], int],
) -> None:
    current = {} if team is None else {"k.md": entry_checksum(team)}
    team_texts = {} if team is None else {"k.md": team}
    upserts, deletes, conflicts = plan_accept([proposed], current, team_texts)
    assert ({key: text for key, (text, _) in upserts.items()}, deletes, len(conflicts)) == expected


def test_similar_notes_follow_the_team_s_commits(store: Store) -> None:
    indexes = SearchIndexes()
    staging = "---\nname: Staging deploys\n---\nEvery deploy goes through staging.\n"
    put(store, {"a.md": "a\n", "staging.md": staging})
    proposal = propose(store, {"b.md": "Deploys go through staging first.\n"}).proposal
    shown = store.proposal(REPO, proposal.id)
    assert shown is not None
    found = indexes.similar(store, REPO, [shown])
    assert found == {proposal.id: [{"key": "staging.md", "title": "Staging deploys"}]}
    store.delete(REPO, "staging.md", if_match=None, author="carol")
    put(store, {"ops/staging-howto.md": "How a deploy reaches staging.\n"})
    assert indexes.similar(store, REPO, [shown]) == {
        proposal.id: [{"key": "ops/staging-howto.md", "title": "ops/staging-howto.md"}]
    }


def test_similar_notes_refresh_only_a_few_answers_per_call(store: Store) -> None:
    # After an accept, a list of many proposals must not search again for each one.
    indexes = SearchIndexes(refresh=1)
    put(store, {"staging.md": "---\nname: Staging deploys\n---\nDeploys use staging.\n"})
    first = propose(store, {"b.md": "Deploys go through staging first.\n"}, author="alice")
    second = propose(store, {"c.md": "Staging deploys need a ticket.\n"}, author="dave")
    shown = [store.proposal(REPO, item.proposal.id) for item in (first, second)]
    assert all(shown)
    listed = [item for item in shown if item is not None]
    before = indexes.similar(store, REPO, listed)
    store.delete(REPO, "staging.md", if_match=None, author="carol")
    after = indexes.similar(store, REPO, listed)
    assert [after[item.id] == before[item.id] for item in listed] == [False, True]
    assert indexes.similar(store, REPO, listed)[listed[1].id] == []


def test_a_proposal_can_start_a_repo(store: Store) -> None:
    result = propose(store, {"first.md": "hello\n"})
    assert (result.head.version, result.proposal.base_version) == (0, 0)
    assert store.head(REPO) is None
    assert store.snapshot(REPO, with_texts=True) is None
    accepted = store.accept_proposal(REPO, result.proposal.id, reviewer="carol", max_entries=LIMIT)
    assert accepted.head.version == 1
    assert texts(store) == {"first.md": "hello\n"}
