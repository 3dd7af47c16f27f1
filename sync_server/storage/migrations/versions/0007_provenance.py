"""Provenance: how each version was made (docs/protocol.md 3.13).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add `history.provenance` and `proposals.provenance` (compact JSON; NULL for every
    existing row, which then reads exactly as before)."""
    with op.batch_alter_table("history") as batch:
        batch.add_column(sa.Column("provenance", sa.Text(), nullable=True))
    with op.batch_alter_table("proposals") as batch:
        batch.add_column(sa.Column("provenance", sa.Text(), nullable=True))


def downgrade() -> None:
    """Drop both columns (verifications stay as rows of op `verify`)."""
    with op.batch_alter_table("proposals") as batch:
        batch.drop_column("provenance")
    with op.batch_alter_table("history") as batch:
        batch.drop_column("provenance")
