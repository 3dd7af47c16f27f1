"""The web page's Review inbox of a reviewed repo: pending proposals with their diffs,
and a reviewer's accept and reject.

A reviewer sees every author's pending proposals, anyone else only their own (the
service decides, as for the API's `/proposals`). Accept and reject are POSTs behind
the same CSRF token and Origin checks as delete and restore (`routes.writer`), and
then only a reviewer's: anyone else gets the 403 page. An accept the service refuses
(the team's text moved and the edits overlap, or someone decided first) is an error
page that says why; nothing changed and the proposal stays. Everything a proposal
holds (keys, texts, author, agent, reason) is someone's input and reaches the page
only through autoescape.

These routes have their own router, included before `routes.router`, whose last
route answers every other address under /ui/ with "No such page".
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from markupsafe import Markup

from sync_server.errors import ApiError
from sync_server.review import proposer
from sync_server.service import TeamMemory
from sync_server.storage.base import Proposal, ProposalEntry
from sync_server.ui import render
from sync_server.ui.routes import (
    FormDep,
    Links,
    UiProblem,
    Visitor,
    VisitorDep,
    WriterDep,
    _service,
    after_write,
    repo_of,
    shown,
    store_errors,
)

router = APIRouter(prefix="/ui", include_in_schema=False)

# A proposal shows the diffs of this many keys (a push of a whole folder can propose
# hundreds); the rest are named by count, and `memsync review show` lists them all.
KEYS_SHOWN = 50
# A key's diff is cut after this many lines, saying so.
DIFF_LINES = 400
# The inbox lists this many decided proposals under the pending ones.
DECIDED_SHOWN = 20
# The inbox shows this many pending proposals a page, with their diffs (a page of 200
# is most of a megabyte of HTML, and a tenth of a second to make on a busy server).
PAGE = 50


@dataclass(frozen=True, slots=True)
class Change:
    """One key of a proposal as the inbox shows it: what it does and its diff against
    the team's current text."""

    key: str
    kind: str  # new | edit | delete | same
    what: str
    moved: bool
    diff: list[render.DiffLine]
    cut: bool
    html: Markup  # the diff's lines, escaped, for the page's `<pre class="diff">`


@dataclass(frozen=True, slots=True)
class ProposalView:
    """A pending proposal with its changes ready for the template."""

    proposal: Proposal
    changes: list[Change]
    hidden: int


class ChangeCache:
    """The changes already worked out, by what they depend on: a proposal's text never
    changes and a checksum names the team's text, so the inbox's reload after each
    accept or reject diffs only what is new. Least recently used first out."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._changes: OrderedDict[tuple[str | None, ...], Change] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, entry: ProposalEntry, author: str) -> Change:
        """The change of `entry` (read with its texts), made once."""
        tag = (entry.key, entry.op, entry.checksum, entry.team_checksum, entry.base_checksum)
        name = (*tag, author)
        with self._lock:
            found = self._changes.get(name)
            if found is not None:
                self._changes.move_to_end(name)
                return found
        made = change_of(entry, author)
        with self._lock:
            self._changes[name] = made
            while len(self._changes) > self.size:
                self._changes.popitem(last=False)
        return made

    def clear(self) -> None:
        with self._lock:
            self._changes.clear()


# Enough for a full inbox (200 proposals) of proposals of a few keys each.
CHANGES = ChangeCache(2048)


def change_of(entry: ProposalEntry, author: str) -> Change:
    """How one proposed key differs from the team's text now: a new note, an edit, a
    delete, or already the same text (someone wrote it meanwhile)."""
    key, team = entry.key, entry.team_text
    proposed = entry.text if entry.op == "put" else None
    moved = entry.team_checksum != entry.base_checksum
    if entry.op == "delete":
        kind, what = "delete", "deleted"
        if team is None:
            kind, what = "same", "deleted (the team has no such note now)"
    elif team is None:
        kind, what = "new", "a new note"
    elif team == proposed:
        kind, what = "same", "the team's text already is this"
    else:
        kind, what = "edit", "edited"
    diff = render.unified_diff(
        team or "", proposed or "", f"{key} (the team's now)", f"{key} (proposed by {author})"
    )
    moved = moved and kind != "same"  # nothing left to merge
    shown = diff[:DIFF_LINES]
    return Change(key, kind, what, moved, shown, len(diff) > DIFF_LINES, render.diff_html(shown))


def view_of(proposal: Proposal) -> ProposalView:
    """A pending proposal (read with its texts) for the page: the diffs of its first
    `KEYS_SHOWN` keys.

    The notes on the same topic (`TeamMemory.similar`, which `memsync review` shows)
    are left out: after each commit (each accept) it searches again for every
    proposal, seconds for a page in a repo of 2,000 notes (docs/benchmarks.md).
    """
    entries = proposal.entries
    changes = [CHANGES.get(entry, proposal.author) for entry in entries[:KEYS_SHOWN]]
    return ProposalView(proposal, changes, max(0, len(entries) - KEYS_SHOWN))


def may_decide(service: TeamMemory, who: Visitor) -> bool:
    """Whether the visitor may accept and reject: a reviewer's token that can write."""
    return who.can_write and service.is_reviewer(who.principal)


@router.get("/repo/{owner}/{name}/review", response_class=HTMLResponse)
def review_page(
    request: Request, owner: str, name: str, who: VisitorDep, before: int | None = None
) -> Response:
    """The pending proposals the visitor may see, newest first, `PAGE` at a time (those
    older than proposal `before`), each with its diffs; then the last few decided ones
    (with who decided and why)."""
    service = _service(request)
    repo = repo_of(owner, name, who)
    with store_errors():
        pending = service.proposals(who.principal, repo, status="pending", texts=True)
        decided = service.proposals(who.principal, repo, status="decided")[:DECIDED_SHOWN]
        total = service.pending_count(who.principal, repo)
    listed = len(pending)
    if before is not None:
        pending = [p for p in pending if p.id < before]
    page, rest = pending[:PAGE], pending[PAGE:]
    return shown(
        request,
        who,
        "review.html",
        repo=repo,
        links=Links(repo),
        reviewed=service.review_policy(repo),
        reviewer=may_decide(service, who),
        pending=[view_of(p) for p in page],
        total=total,
        unlisted=max(0, total - listed),
        before=before,
        older=page[-1].id if rest else None,
        decided=decided,
        query="",
    )


def _decider(request: Request, who: Visitor) -> TeamMemory:
    """The service, once the visitor is known to be a reviewer (else the 403 page)."""
    service = _service(request)
    if not may_decide(service, who):
        raise UiProblem(403, "Only a reviewer may accept or reject proposals.")
    return service


def _back(repo: str, form: dict[str, str]) -> str:
    """The inbox page the form was on (its `before`, when a number)."""
    before = form.get("before", "")
    return Links(repo).to("review", before=before if before.isdigit() else None)


def _proposal_id(form: dict[str, str]) -> int:
    try:
        number = int(form.get("proposal", ""))
    except ValueError:
        raise UiProblem(400, "Pick a proposal.") from None
    if not 1 <= number < 2**63:  # a database integer
        raise UiProblem(400, "Pick a proposal.")
    return number


def _refusal(number: int, error: ApiError) -> UiProblem:
    """An accept or reject the service refused, in the page's words."""
    code = error.details.get("error_code")
    if code == "proposal_conflict":
        keys = ", ".join(str(c.get("key")) for c in error.details.get("conflicts", []))
        return UiProblem(
            error.status,
            f"Proposal {number} cannot be accepted: the team's text of {keys} changed since"
            " it was written and the two edits overlap. Nothing changed; the proposal is"
            " still pending (its author can write it again on top of the team's text, or"
            " you can reject it).",
        )
    if code == "proposal_decided":
        status = error.details.get("status", "decided")
        return UiProblem(error.status, f"Proposal {number} is already {status}: nothing changed.")
    return UiProblem(error.status, str(error), headers=dict(error.headers))


@router.post("/repo/{owner}/{name}/review/accept")
def accept_proposal(
    request: Request, owner: str, name: str, who: WriterDep, form: FormDep
) -> Response:
    """Commit a pending proposal for the team, as its author's change accepted by the
    visitor (merged with the team's text when that moved and the edits do not overlap)."""
    service = _decider(request, who)
    repo = repo_of(owner, name, who)
    number = _proposal_id(form)
    try:
        result = service.accept(who.principal, repo, number)
    except ApiError as error:
        raise _refusal(number, error) from None
    notice = f"Accepted proposal {number}: version {result.head.version} for the team."
    if not result.changed_keys:
        notice = f"Accepted proposal {number}: the team already has its text, nothing changed."
    return after_write(request, who, _back(repo, form), notice)


@router.post("/repo/{owner}/{name}/review/reject")
def reject_proposal(
    request: Request, owner: str, name: str, who: WriterDep, form: FormDep
) -> Response:
    """Turn a pending proposal down with a reason its author is shown."""
    service = _decider(request, who)
    repo = repo_of(owner, name, who)
    number = _proposal_id(form)
    reason = form.get("reason", "").strip()
    if not reason:
        raise UiProblem(400, "Say why the proposal is rejected: its author is shown the reason.")
    try:
        proposal = service.reject(who.principal, repo, number, reason)
    except ApiError as error:
        raise _refusal(number, error) from None
    notice = f"Rejected proposal {number} by {proposer(proposal)}."
    return after_write(request, who, _back(repo, form), notice)
