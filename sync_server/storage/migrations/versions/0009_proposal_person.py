"""Proposals belong to a person (`proposals.person`), not to one token's name.

A person's tokens (one per machine) see and replace each other's proposals. Existing
rows get the person of the token that made them: the token's stored person, else its
name when that is a valid person name, else the stored name as it is (a token with no
person owns its proposals alone, as before).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# The person rule of 0008 (`sync_server.personal`), kept here as it was then.
_PERSON = re.compile(r"[a-z0-9][a-z0-9._@-]{0,99}")


def _owner(author: str, persons: list[str | None]) -> str:
    """The person of the newest token named `author` (`persons`: the stored persons of
    the tokens of that name, oldest first); the name itself when there is no token."""
    if not persons:
        return author
    if persons[-1] is not None:
        return persons[-1]
    folded = author.strip().lower()
    return folded if _PERSON.fullmatch(folded) else author


def upgrade() -> None:
    """Add `proposals.person`, fill it for every row, and index it in place of the
    author index (lists and replacement now ask by person)."""
    with op.batch_alter_table("proposals") as batch:
        batch.add_column(sa.Column("person", sa.String(255), nullable=True))
    connection = op.get_bind()
    tokens = sa.table(
        "tokens", sa.column("id"), sa.column("name", sa.String), sa.column("person", sa.String)
    )
    proposals = sa.table("proposals", sa.column("author", sa.String), sa.column("person"))
    by_name: dict[str, list[str | None]] = {}
    for row in connection.execute(sa.select(tokens.c.name, tokens.c.person).order_by(tokens.c.id)):
        by_name.setdefault(str(row.name), []).append(row.person)
    authors = connection.execute(sa.select(proposals.c.author).distinct()).scalars().all()
    for author in authors:
        connection.execute(
            sa.update(proposals)
            .where(proposals.c.author == author)
            .values(person=_owner(author, by_name.get(author, [])))
        )
    # Plain index statements, and the column stays nullable in the database: on SQLite
    # anything more rebuilds `proposals`, which `proposal_entries` points at.
    op.drop_index("ix_proposals_repo_author_status", table_name="proposals")
    op.create_index("ix_proposals_repo_person_status", "proposals", ["repo_id", "person", "status"])


def downgrade() -> None:
    """Drop `proposals.person` (proposals belong to their token's name again)."""
    op.drop_index("ix_proposals_repo_person_status", table_name="proposals")
    op.create_index("ix_proposals_repo_author_status", "proposals", ["repo_id", "author", "status"])
    op.drop_column("proposals", "person")  # SQLite 3.35+ drops it in place
