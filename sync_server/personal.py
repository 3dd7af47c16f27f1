"""Personal spaces: one person's own memory, per repo and one global (docs/protocol.md 3.14).

A request names a personal space with `space=personal` beside its `repo`: `repo=owner/name`
for the person's space of that repo (the token's scope must cover the repo), `repo=~` for
the person's global space. The server stores each space as a repo whose internal id no
API repo name can spell, because `~` is not a repo character:

    ~alice/acme/app     alice's space for acme/app
    ~alice/~            alice's global space

so every part of storage (history, the log, deletes, restore, events, the delta) works on
it unchanged. The person is the token's, never the request's: a token can only ever
address its own person's spaces, so another person's space is not merely refused but
unreachable, and asking for it reads the asker's own (usually empty: 404) space.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memsync_protocol.repos import normalize_repo

if TYPE_CHECKING:
    from sync_server.storage.base import RepoSummary, SpacesRemoval, Store

PERSONAL = "personal"
# `repo=~` with `space=personal`: the person's global space (not tied to a repo).
GLOBAL_REPO = "~"
MARK = "~"
_PERSON_PATTERN = re.compile(r"[a-z0-9][a-z0-9._@-]{0,99}")
PERSON_RULE = "a person must be 1 to 100 of a-z, 0-9, '.', '_', '@', '-' (starting a-z or 0-9)"


def normalize_person(value: str) -> str:
    """A person's name, case-folded; `ValueError` (`PERSON_RULE`) for anything else.

    The character set keeps `/` and `~` out, so a space's internal id always parses back.
    """
    person = value.strip().lower()
    if not _PERSON_PATTERN.fullmatch(person):
        raise ValueError(PERSON_RULE)
    return person


def proposal_owner(name: str, person: str | None) -> str:
    """Whose proposals a token's writes are (`proposals.person`): its person, so that
    every token of one person (one per machine) lists and replaces them; a token
    without a person owns its own alone, by its name after `MARK`, which no person name
    starts with (a token named `alice` with no person never shares alice's)."""
    return f"{MARK}{name}" if person is None else person


def owner_person(owner: str) -> str | None:
    """The person a stored proposal owner is (None: a token without a person's own)."""
    return None if owner.startswith(MARK) else owner


def prefix(person: str) -> str:
    """The start every internal id of this person's spaces shares."""
    return f"{MARK}{person}/"


def space_id(person: str, repo: str | None) -> str:
    """The internal repo id of `person`'s space for `repo` (None: the global space)."""
    return prefix(person) + (GLOBAL_REPO if repo is None else repo)


def is_personal(repo_id: str) -> bool:
    """Whether an internal repo id is a personal space (never a team repo)."""
    return repo_id.startswith(MARK)


def parse_space(repo_id: str) -> tuple[str, str | None]:
    """(person, repo or None for the global space) of a personal space's internal id."""
    person, _, repo = repo_id[len(MARK) :].partition("/")
    return person, None if repo == GLOBAL_REPO else repo


def wire_name(repo_id: str) -> str:
    """How a request names a repo or space (`repo=`): the team repo itself, or for a
    personal space its repo (`acme/app`) or `~`, never the internal id, which names the
    person. What every answer's `repo` field says."""
    if not is_personal(repo_id):
        return repo_id
    return parse_space(repo_id)[1] or GLOBAL_REPO


def spoken(repo_id: str) -> str:
    """A repo or space as a message to its user names it: `acme/app`, "your personal
    memory for acme/app", or "your agent memory" (the global space holds the agent
    memory, which is not per project); never the internal id."""
    if not is_personal(repo_id):
        return repo_id
    repo = parse_space(repo_id)[1]
    return "your agent memory" if repo is None else f"your personal memory for {repo}"


def wire_repo(repo: str) -> str:
    """`repo` as a personal request names it: `~` or a validated, case-folded owner/name
    (`InvalidRepoError` otherwise)."""
    return GLOBAL_REPO if repo == GLOBAL_REPO else normalize_repo(repo)


@dataclass(frozen=True, slots=True)
class PersonSummary:
    """One person as `memsync-server person list` shows them."""

    person: str
    tokens: int
    spaces: list[str] = field(default_factory=list)
    entries: int = 0


def persons(store: Store) -> list[PersonSummary]:
    """Every person with a live token or a personal space holding data, by name."""
    tokens: dict[str, int] = {}
    for record in store.list_tokens():
        who = record.person
        if who is not None and record.revoked_at is None:
            tokens[who] = tokens.get(who, 0) + 1
    spaces: dict[str, list[RepoSummary]] = {}
    for summary in store.list_repos():
        if is_personal(summary.repo):
            spaces.setdefault(parse_space(summary.repo)[0], []).append(summary)
    return [
        PersonSummary(
            person=who,
            tokens=tokens.get(who, 0),
            spaces=[parse_space(s.repo)[1] or GLOBAL_REPO for s in spaces.get(who, [])],
            entries=sum(s.entries for s in spaces.get(who, [])),
        )
        for who in sorted({*tokens, *spaces})
    ]


def delete_person(store: Store, person: str) -> SpacesRemoval:
    """Remove every personal space of `person`, in one transaction: entries, history,
    proposals and the spaces' rows themselves, so no row names them afterwards (also
    a space emptied before, which `persons` no longer counts). Tokens stay: revoke
    them apart; a later write starts a space again from version 1."""
    return store.delete_spaces(prefix(person))


@dataclass(frozen=True, slots=True)
class OwnSpace:
    """One of the signed-in person's own spaces, as the web page's "My memory" lists it."""

    label: str
    summary: RepoSummary

    @property
    def url(self) -> str:
        """Its page (`ui.mine`): the space as a request names it, never the person."""
        from urllib.parse import quote

        return f"/ui/mine?space={quote(wire_name(self.summary.repo), safe='/~')}"


def _label(repo_id: str) -> str:
    """A space's row under "My memory": its repo, or the agent memory (global)."""
    repo = parse_space(repo_id)[1]
    return "your agent memory (not tied to a repo)" if repo is None else repo


def own_spaces(store: Store, person: str | None) -> list[OwnSpace]:
    """The spaces of `person` that hold data (none for a token without a person): only
    ever the caller's own, because the person is the token's."""
    if person is None:
        return []
    mark = prefix(person)
    return [
        OwnSpace(label=_label(s.repo), summary=s)
        for s in store.list_repos()
        if s.repo.startswith(mark)
    ]
