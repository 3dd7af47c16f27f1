"""A token has a person only when it was given one (`--person`), never by its name.

Until now a token with no stored person belonged to the person named like it (`ALICE`
to alice), so a token made for something else could read that person's spaces, and a
new token named like a revoked one read the old one's. From now on `tokens.person` is
the whole truth. What an existing database relied on is kept, and written down:

- a live token keeps the person of its name only where that name *is* a person's name
  exactly (`alice`, not `ALICE` or ` alice`) and that person has a personal space: the
  fallback was in use. Every other token with no stored person has none from now on
  (docs/operators.md, "Persons and personal spaces", says how to give one back).
- a proposal of a token without a person is owned by the token's name after `~`
  (`personal.proposal_owner`), which no person name equals; rows whose owner was only
  the name's fallback get that owner.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

# The person rule and the owner mark as they are at this revision (`sync_server.personal`).
_PERSON = re.compile(r"[a-z0-9][a-z0-9._@-]{0,99}")
_MARK = "~"

_tokens = sa.table(
    "tokens",
    sa.column("id"),
    sa.column("name", sa.String),
    sa.column("person", sa.String),
    sa.column("revoked_at"),
)
_repos = sa.table(
    "repos",
    sa.column("name", sa.String),
    sa.column("version", sa.BigInteger),
    sa.column("deleted_at"),
)
_proposals = sa.table("proposals", sa.column("author", sa.String), sa.column("person", sa.String))


def _spaces_of(connection: sa.Connection) -> set[str]:
    """The persons that have a personal space holding data (or that did)."""
    names = connection.execute(
        sa.select(_repos.c.name).where(
            _repos.c.name.startswith(_MARK, autoescape=True),
            _repos.c.version > 0,
            _repos.c.deleted_at.is_(None),
        )
    ).scalars()
    return {str(name)[len(_MARK) :].partition("/")[0] for name in names}


def upgrade() -> None:
    """Record the person of each live token that used its name's, then re-own the
    proposals whose owner was only a name's fallback."""
    connection = op.get_bind()
    with_space = _spaces_of(connection)
    for token_id, name in connection.execute(
        sa.select(_tokens.c.id, _tokens.c.name).where(
            _tokens.c.person.is_(None), _tokens.c.revoked_at.is_(None)
        )
    ).all():
        if _PERSON.fullmatch(name) and name in with_space:
            connection.execute(
                sa.update(_tokens).where(_tokens.c.id == token_id).values(person=name)
            )
    explicit: dict[str, set[str]] = {}
    for name, person in connection.execute(
        sa.select(_tokens.c.name, _tokens.c.person).where(_tokens.c.person.is_not(None))
    ).all():
        explicit.setdefault(str(name), set()).add(str(person))
    pairs = connection.execute(sa.select(_proposals.c.author, _proposals.c.person).distinct()).all()
    for author, person in pairs:
        if person is not None and (
            person.startswith(_MARK) or person in explicit.get(author, set())
        ):
            continue
        same = _proposals.c.person.is_(None) if person is None else _proposals.c.person == person
        connection.execute(
            sa.update(_proposals)
            .where(_proposals.c.author == author, same)
            .values(person=f"{_MARK}{author}")
        )


def downgrade() -> None:
    """Proposals of a token without a person go back to 0009's owner (the name's
    person, else the name). Recorded persons stay: an older server reads them as given."""
    connection = op.get_bind()
    owners = connection.execute(
        sa.select(_proposals.c.person)
        .where(_proposals.c.person.startswith(_MARK, autoescape=True))
        .distinct()
    ).scalars()
    for owner in owners:
        name = str(owner)[len(_MARK) :]
        folded = name.strip().lower()
        connection.execute(
            sa.update(_proposals)
            .where(_proposals.c.person == owner)
            .values(person=folded if _PERSON.fullmatch(folded) else name)
        )
