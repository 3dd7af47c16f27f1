"""The store's review gate: which repos are reviewed, proposals, and their accept or reject.

A proposal is a write kept back: it passes every check a PUT passes (`_planned_write`,
under the same repo lock) and is then stored in `proposals` and `proposal_entries`
instead of `entries`, so no read view ever includes it. Each key keeps the team's text
it was written against, so an accept can merge it with what the team wrote since (the
client's pull merge, `memsync_protocol.merge`) even after history pruning. An accept
is one ordinary commit (`_commit`) whose history rows name the proposal's author as the
author and the reviewer in `accepted_by`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, func, insert, select, update

from memsync_protocol.checksums import entry_checksum
from memsync_protocol.merge import merge_notes
from memsync_protocol.provenance import decode as decode_provenance
from memsync_protocol.provenance import encode as provenance_json
from sync_server.errors import (
    NotFound,
    PathClash,
    ProposalConflict,
    ProposalDecided,
    TooManyEntries,
    TooManyProposals,
)
from sync_server.personal import spoken
from sync_server.storage import schema, write_now
from sync_server.storage.base import (
    MAX_PROPOSALS_LISTED,
    Acceptance,
    CommitResult,
    Proposal,
    ProposalEntry,
    ProposalFilter,
    ProposalResult,
)
from sync_server.storage.sql_base import (
    COMMIT_CHANNEL,
    SqlBase,
    _chunks,
    _now,
    _translate_errors,
    checked_texts,
)


def policy_patterns(repo: str) -> list[str]:
    """The patterns that can decide for `repo`, most specific first."""
    owner = repo.split("/", 1)[0]
    return [repo, f"{owner}/*", "*"]


def plan_accept(
    entries: Sequence[ProposalEntry],
    current: Mapping[str, str],
    team_texts: Mapping[str, str],
) -> tuple[dict[str, tuple[str, str]], list[str], list[tuple[str, str | None, str | None]]]:
    """What accepting `entries` does to the team's keys (`current`: key -> checksum).

    Per key: nothing when the team already has the proposed text (or lacks a key it
    deletes); the proposed text or delete when the team's text is still the base;
    otherwise the three-way merge of base, proposed and team text, as a pull merges.
    A delete of a text that moved, a put over a note the team deleted since, or a merge
    that overlaps is a conflict. Returns (upserts, deletes, conflicts).
    """
    upserts: dict[str, tuple[str, str]] = {}
    deletes: list[str] = []
    conflicts: list[tuple[str, str | None, str | None]] = []
    for entry in entries:
        team = current.get(entry.key)
        if entry.op == "delete":
            if team is None:
                continue
            if team == entry.base_checksum:
                deletes.append(entry.key)
            else:
                conflicts.append((entry.key, team, entry.base_checksum))
            continue
        assert entry.text is not None
        assert entry.checksum is not None
        if team == entry.checksum:
            continue
        if team == entry.base_checksum:
            upserts[entry.key] = (entry.text, entry.checksum)
            continue
        merged = None
        if team is not None:
            # Two notes both new at the base merge as whole notes: no union of additions.
            merged = merge_notes(
                entry.base_text or "",
                entry.text,
                team_texts[entry.key],
                union=entry.base_text is not None,
            )
        if merged is None:
            conflicts.append((entry.key, team, entry.base_checksum))
        elif merged.text != team_texts[entry.key]:
            upserts[entry.key] = (merged.text, entry_checksum(merged.text))
    return upserts, sorted(deletes), conflicts


class ReviewRows(SqlBase):
    """Review policies and proposals, on the same engine and repo lock as commits.

    On PostgreSQL each new or decided proposal is announced on the commit channel,
    `{"repo", "proposal": id, "status", "person"}` (`person`: whose proposal it is),
    inside its transaction, so every server process's event streams hear it
    (`events.EventHub`); a process that only knows commits ignores it, having no
    `version`. A changed policy is announced there too, `{"review": pattern}`, so
    every process tells its streams of the repos it covers.
    """

    def _announce(
        self, connection: Connection, repo: str, proposal_id: int, status: str, person: str
    ) -> None:
        if self.dialect == "postgresql":
            notice = json.dumps(
                {"repo": repo, "proposal": proposal_id, "status": status, "person": person}
            )
            connection.execute(select(func.pg_notify(COMMIT_CHANNEL, notice)))

    # -- policies ------------------------------------------------------------------

    def set_review(self, pattern: str, review: bool) -> None:
        """Store (or replace) the policy of `pattern`."""
        table = schema.repo_policies
        statement = self._upsert(table).values(pattern=pattern, review=review, updated_at=_now())
        statement = statement.on_conflict_do_update(
            index_elements=["pattern"],
            set_={"review": statement.excluded.review, "updated_at": statement.excluded.updated_at},
        )
        with self._write() as connection:
            connection.execute(statement)
            if self.dialect == "postgresql":
                notice = json.dumps({"review": pattern})
                connection.execute(select(func.pg_notify(COMMIT_CHANNEL, notice)))

    def review_policies(self) -> dict[str, bool]:
        """Every stored pattern and its setting."""
        table = schema.repo_policies
        with self._read() as connection:
            rows = connection.execute(select(table.c.pattern, table.c.review)).all()
        return {row.pattern: bool(row.review) for row in rows}

    def is_reviewed(self, repo: str) -> bool:
        """Whether the most specific stored pattern matching `repo` says on."""
        if self.dialect == "sqlite":
            # One statement, atomic on its own: no transaction.
            with _translate_errors(), self.engine.connect() as connection:
                return self._reviewed_on(connection, repo)
        with self._read() as connection:
            return self._reviewed_on(connection, repo)

    def _reviewed_on(self, connection: Connection, repo: str) -> bool:
        """`is_reviewed` on `connection`, inside whatever transaction it has: a PUT asks
        in its own write transaction (`SqlStore.put(..., unless_reviewed=True)`)."""
        patterns = policy_patterns(repo)
        sql = self._sql
        names = dict(zip(("p0", "p1", "p2"), patterns, strict=True))
        rows = sql.on(connection).all(sql.review_flags, names)
        found = {row.pattern: bool(row.review) for row in rows}
        return next((found[pattern] for pattern in patterns if pattern in found), False)

    # -- proposals -----------------------------------------------------------------

    def propose(
        self,
        repo: str,
        entries: Mapping[str, str],
        *,
        deletes: Sequence[str] = (),
        if_match: list[str] | None,
        base_checksums: Mapping[str, str | None] | None,
        max_entries: int,
        author: str,
        person: str | None = None,
        agent: str | None = None,
        max_pending: int,
        provenance: Mapping[str, str] | None = None,
    ) -> ProposalResult | CommitResult:
        """A PUT's checks, then a proposal instead of a commit (see `Store.propose`)."""
        new_checksums = checked_texts(entries)
        owner = author if person is None else person
        proposals, keys_table = schema.proposals, schema.proposal_entries
        write_now.decline()  # a proposal reads and writes several tables: on the thread
        with self._write() as connection:
            row = self._lock_repo(connection, repo, create=True)
            live, upserts, gone = self._planned_write(
                connection,
                row,
                entries,
                new_checksums,
                deletes=deletes,
                if_match=if_match,
                base_checksums=base_checksums,
                max_entries=max_entries,
            )
            head = self._head_from_row(repo, row)
            if not upserts and not gone:
                return CommitResult(head=head, changed_keys=[])
            clashes = live.clashes(upserts)
            if clashes:
                raise PathClash(clashes)
            touched = {*upserts, *gone}
            pending = self._pending_entries(connection, row.id, owner)
            replaced = sorted(
                proposal_id
                for proposal_id, rows in pending.items()
                if touched & {item.key for item in rows}
            )
            if len(pending) - len(replaced) >= max_pending:
                raise TooManyProposals(max_pending)
            carried: dict[str, dict[str, Any]] = {}
            for proposal_id in replaced:  # oldest first: the newest text of a key wins
                for item in pending[proposal_id]:
                    carried[item.key] = {
                        "key": item.key,
                        "op": item.op,
                        "text": item.text,
                        "checksum": item.checksum,
                        "base_checksum": item.base_checksum,
                        "base_text": item.base_text,
                    }
            team_texts = self._team_texts(connection, row.id, sorted(touched & set(live.checksums)))
            for key, (body, checksum) in upserts.items():
                carried[key] = {
                    "key": key,
                    "op": "put",
                    "text": body,
                    "checksum": checksum,
                    "base_checksum": live.checksums.get(key),
                    "base_text": team_texts.get(key),
                }
            for key in gone:
                carried[key] = {
                    "key": key,
                    "op": "delete",
                    "text": None,
                    "checksum": None,
                    "base_checksum": live.checksums[key],
                    "base_text": team_texts[key],
                }
            now = _now()
            created = connection.execute(
                insert(proposals).values(
                    repo_id=row.id,
                    author=author,
                    person=owner,
                    agent=agent,
                    created_at=now,
                    base_version=row.version,
                    status="pending",
                    provenance=provenance_json(provenance),
                )
            )
            primary_key = created.inserted_primary_key
            assert primary_key is not None
            proposal_id = int(primary_key[0])
            connection.execute(
                insert(keys_table),
                [{"proposal_id": proposal_id, **carried[key]} for key in sorted(carried)],
            )
            if replaced:
                connection.execute(
                    update(proposals)
                    .where(proposals.c.id.in_(replaced))
                    .values(status="replaced", replaced_by=proposal_id, decided_at=now)
                )
            for older in replaced:
                self._announce(connection, repo, older, "replaced", owner)
            self._announce(connection, repo, proposal_id, "pending", owner)
            proposal = self._load(connection, repo, row.id, [proposal_id], texts=False)[0]
        return ProposalResult(head=head, proposal=proposal, replaced=replaced)

    def proposals(
        self,
        repo: str,
        *,
        person: str | None = None,
        status: ProposalFilter = "pending",
        texts: bool = False,
        limit: int = MAX_PROPOSALS_LISTED,
    ) -> list[Proposal]:
        """The repo's proposals newest first (only `person`'s when given)."""
        table = schema.proposals
        with self._read() as connection:
            row = self._repo_row(connection, repo)
            if row is None:
                return []
            query = select(table.c.id).where(table.c.repo_id == row.id)
            if person is not None:
                query = query.where(table.c.person == person)
            if status == "pending":
                query = query.where(table.c.status == "pending")
            elif status == "decided":
                query = query.where(table.c.status != "pending")
            ids = connection.execute(query.order_by(table.c.id.desc()).limit(limit)).scalars()
            return self._load(connection, repo, row.id, list(ids), texts=texts)

    def proposal(self, repo: str, proposal_id: int) -> Proposal | None:
        """One proposal with its texts and the team's current texts of its keys."""
        with self._read() as connection:
            row = self._repo_row(connection, repo)
            if row is None:
                return None
            found = self._load(connection, repo, row.id, [proposal_id], texts=True)
        return found[0] if found else None

    def pending_count(self, repo: str, *, person: str | None = None) -> int:
        """Pending proposals of the repo (of `person`, when given)."""
        table, repos = schema.proposals, schema.repos
        query = (
            select(func.count())
            .select_from(table.join(repos, repos.c.id == table.c.repo_id))
            .where(repos.c.name == repo, table.c.status == "pending")
        )
        if person is not None:
            query = query.where(table.c.person == person)
        with self._read() as connection:
            return int(connection.execute(query).scalar_one())

    def accept_proposal(
        self, repo: str, proposal_id: int, *, reviewer: str | None, max_entries: int
    ) -> Acceptance:
        """Commit a pending proposal (see `Store.accept_proposal`)."""
        table = schema.proposals
        with self._write() as connection:
            row = self._lock_repo(connection, repo, create=False)
            pending = self._pending_one(connection, repo, row, proposal_id)
            live = self._live_keys(connection, row)
            moved = [
                entry.key
                for entry in pending.entries
                if live.checksums.get(entry.key) not in (entry.base_checksum, entry.checksum)
                and entry.key in live.checksums
            ]
            team_texts = self._team_texts(connection, row.id, moved)
            upserts, deletes, conflicts = plan_accept(pending.entries, live.checksums, team_texts)
            if conflicts:
                raise ProposalConflict(conflicts)
            head = self._head_from_row(repo, row)
            if upserts or deletes:
                self._check_growth(row, live, upserts, deletes, max_entries)
                head = self._commit(
                    connection,
                    row,
                    live,
                    upserts=upserts,
                    deletes=deletes,
                    op="put",
                    author=pending.author,
                    accepted_by=reviewer,
                    provenance=pending.provenance,
                )
            connection.execute(
                update(table)
                .where(table.c.id == proposal_id)
                .values(
                    status="accepted",
                    decided_by=reviewer,
                    decided_at=_now(),
                    accepted_version=head.version,
                )
            )
            self._announce(connection, repo, proposal_id, "accepted", pending.person)
            proposal = self._load(connection, repo, row.id, [proposal_id], texts=False)[0]
        changed = sorted([*upserts, *deletes])
        return Acceptance(head=head, changed_keys=changed, proposal=proposal)

    def reject_proposal(
        self, repo: str, proposal_id: int, *, reviewer: str | None, reason: str
    ) -> Proposal:
        """Mark a pending proposal rejected (see `Store.reject_proposal`)."""
        table = schema.proposals
        with self._write() as connection:
            row = self._lock_repo(connection, repo, create=False)
            pending = self._pending_one(connection, repo, row, proposal_id)
            connection.execute(
                update(table)
                .where(table.c.id == proposal_id)
                .values(status="rejected", decided_by=reviewer, decided_at=_now(), reason=reason)
            )
            self._announce(connection, repo, proposal_id, "rejected", pending.person)
            return self._load(connection, repo, row.id, [proposal_id], texts=False)[0]

    def settle_unreviewed(self, *, max_entries: int) -> list[Proposal]:
        """Decide the pending proposals of every repo that is not reviewed (any more):
        see `Store.settle_unreviewed`. Each in its own transaction, oldest first."""
        table, repos = schema.proposals, schema.repos
        with self._read() as connection:
            rows = connection.execute(
                select(repos.c.name, table.c.id)
                .select_from(table.join(repos, repos.c.id == table.c.repo_id))
                .where(table.c.status == "pending")
                .order_by(table.c.id)
            ).all()
        reviewed: dict[str, bool] = {}
        settled: list[Proposal] = []
        for repo, proposal_id in rows:
            if reviewed.setdefault(repo, self.is_reviewed(repo)):
                continue
            try:
                accepted = self.accept_proposal(
                    repo, int(proposal_id), reviewer=None, max_entries=max_entries
                )
                settled.append(accepted.proposal)
            except (ProposalDecided, NotFound):
                continue  # decided (or the repo deleted) meanwhile
            except (ProposalConflict, PathClash, TooManyEntries) as error:
                reason = _unpublished_reason(error)
                try:
                    settled.append(
                        self.reject_proposal(repo, int(proposal_id), reviewer=None, reason=reason)
                    )
                except (ProposalDecided, NotFound):
                    continue
        return settled

    # -- reading proposal rows -----------------------------------------------------

    def _pending_one(
        self, connection: Connection, repo: str, row: Any, proposal_id: int
    ) -> Proposal:
        """The proposal, with its texts, when it is the repo's and pending."""
        found = [] if row is None else self._load(connection, repo, row.id, [proposal_id], True)
        if not found:
            raise NotFound(f"no proposal {proposal_id} in {spoken(repo)}")
        if found[0].status != "pending":
            raise ProposalDecided(proposal_id, found[0].status)
        return found[0]

    def _pending_entries(
        self, connection: Connection, repo_id: int, person: str
    ) -> dict[int, list[Any]]:
        """The person's pending proposals in the repo, each with its key rows."""
        table, keys = schema.proposals, schema.proposal_entries
        rows = connection.execute(
            select(table.c.id.label("proposal"), keys)
            .select_from(table.outerjoin(keys, keys.c.proposal_id == table.c.id))
            .where(
                table.c.repo_id == repo_id, table.c.person == person, table.c.status == "pending"
            )
            .order_by(table.c.id)
        ).all()
        found: dict[int, list[Any]] = {}
        for item in rows:
            found.setdefault(int(item.proposal), [])
            if item.key is not None:
                found[int(item.proposal)].append(item)
        return found

    def _team_texts(
        self, connection: Connection, repo_id: int, keys: Sequence[str]
    ) -> dict[str, str]:
        """The team's current texts of those keys that are live."""
        entries = schema.entries
        found: dict[str, str] = {}
        for chunk in _chunks(sorted(set(keys))):
            rows = connection.execute(
                select(entries.c.key, entries.c.text).where(
                    entries.c.repo_id == repo_id, entries.c.key.in_(chunk)
                )
            )
            found.update({item.key: item.text for item in rows})
        return found

    def _load(
        self, connection: Connection, repo: str, repo_id: int, ids: Sequence[int], texts: bool
    ) -> list[Proposal]:
        """Proposals of the repo by id, in the order of `ids`; with `texts`, each key's
        texts and the team's current text and checksum."""
        if not ids:
            return []
        table, keys, entries = schema.proposals, schema.proposal_entries, schema.entries
        heads = {
            item.id: item
            for item in connection.execute(
                select(table).where(table.c.repo_id == repo_id, table.c.id.in_(list(ids)))
            )
        }
        columns = [keys.c.proposal_id, keys.c.key, keys.c.op, keys.c.checksum, keys.c.base_checksum]
        if texts:
            columns += [keys.c.text, keys.c.base_text]
        by_proposal: dict[int, list[Any]] = {}
        for item in connection.execute(
            select(*columns).where(keys.c.proposal_id.in_(list(heads))).order_by(keys.c.key)
        ):
            by_proposal.setdefault(int(item.proposal_id), []).append(item)
        team: dict[str, Any] = {}
        if texts:
            wanted = sorted({item.key for rows in by_proposal.values() for item in rows})
            for chunk in _chunks(wanted):
                for item in connection.execute(
                    select(entries.c.key, entries.c.text, entries.c.checksum).where(
                        entries.c.repo_id == repo_id, entries.c.key.in_(chunk)
                    )
                ):
                    team[item.key] = item
        found: list[Proposal] = []
        for proposal_id in ids:
            head = heads.get(proposal_id)
            if head is None:
                continue
            rows = sorted(by_proposal.get(proposal_id, []), key=lambda item: item.key)
            found.append(
                Proposal(
                    id=int(head.id),
                    repo=repo,
                    author=head.author,
                    person=head.person or head.author,
                    agent=head.agent,
                    created_at=head.created_at,
                    status=head.status,
                    base_version=int(head.base_version),
                    entries=[_entry(item, team.get(item.key), texts=texts) for item in rows],
                    decided_by=head.decided_by,
                    decided_at=head.decided_at,
                    reason=head.reason,
                    accepted_version=head.accepted_version,
                    replaced_by=head.replaced_by,
                    provenance=decode_provenance(head.provenance),
                )
            )
        return found


def _unpublished_reason(error: ProposalConflict | PathClash | TooManyEntries) -> str:
    """Why a proposal was not published when review was switched off, in the words its
    author reads (a reject reason: at most 500 characters)."""
    if isinstance(error, ProposalConflict):
        keys = ", ".join(str(row["key"]) for row in error.details.get("conflicts", []))
        why = f"the team changed {keys} since it was written, and the edits overlap"
    elif isinstance(error, TooManyEntries):
        why = f"the repo would hold more than {error.details.get('max_entries')} notes"
    else:
        why = "a name in it clashes with a note the team has"
    return f"review was switched off; not published, as {why}"[:500]


def _entry(item: Any, team: Any, *, texts: bool) -> ProposalEntry:
    return ProposalEntry(
        key=item.key,
        op=item.op,
        checksum=item.checksum,
        base_checksum=item.base_checksum,
        text=item.text if texts else None,
        base_text=item.base_text if texts else None,
        team_text=None if team is None else team.text,
        team_checksum=None if team is None else team.checksum,
    )
