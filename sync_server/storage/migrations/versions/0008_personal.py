"""Personal spaces: the person a token belongs to (`tokens.person`).

A personal space needs no table of its own: it is stored as a repo whose internal id
no API repo name can spell (`~person/owner/name`, `~person/~`), so history, the log,
deletes and restore work on it unchanged (docs/protocol.md 3.14).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add `tokens.person` (NULL for every existing token: its person is its name)."""
    with op.batch_alter_table("tokens") as batch:
        batch.add_column(sa.Column("person", sa.String(100), nullable=True))


def downgrade() -> None:
    """Drop `tokens.person` (tokens then belong to the person of their name again)."""
    with op.batch_alter_table("tokens") as batch:
        batch.drop_column("person")
