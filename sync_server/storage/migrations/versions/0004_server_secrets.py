"""Secrets the server makes once and shares between its processes (the web page's key).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-10
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create `server_secrets` (name, value, created_at)."""
    op.create_table(
        "server_secrets",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.String(255), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    """Drop `server_secrets`."""
    op.drop_table("server_secrets")
