"""Token expiry, and deleted repos that keep their version numbers.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

Stamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Add `tokens.expires_at` and `repos.deleted_at` (both NULL: never / not deleted)."""
    with op.batch_alter_table("tokens") as batch:
        batch.add_column(sa.Column("expires_at", Stamp, nullable=True))
    with op.batch_alter_table("repos") as batch:
        batch.add_column(sa.Column("deleted_at", Stamp, nullable=True))


def downgrade() -> None:
    """Drop both columns."""
    with op.batch_alter_table("repos") as batch:
        batch.drop_column("deleted_at")
    with op.batch_alter_table("tokens") as batch:
        batch.drop_column("expires_at")
