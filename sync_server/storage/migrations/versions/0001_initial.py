"""Initial schema: repos, entries, history, tokens.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Stamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create the four tables and their indexes."""
    op.create_table(
        "repos",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(255), nullable=False, unique=True),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("checksum", sa.String(71), nullable=False),
        sa.Column("entry_count", sa.Integer, nullable=False),
        sa.Column("history_floor", sa.BigInteger, nullable=False),
        sa.Column("last_modified", Stamp, nullable=False),
    )
    op.create_table(
        "entries",
        sa.Column("repo_id", sa.BigInteger, sa.ForeignKey("repos.id"), primary_key=True),
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("checksum", sa.String(71), nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_entries_repo_version", "entries", ["repo_id", "version"])
    op.create_table(
        "history",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("repo_id", sa.BigInteger, sa.ForeignKey("repos.id"), nullable=False),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("op", sa.String(16), nullable=False),
        sa.Column("checksum", sa.String(71), nullable=True),
        sa.Column("text", sa.Text, nullable=True),
        sa.Column("author", sa.String(255), nullable=False),
        sa.Column("at", Stamp, nullable=False),
    )
    op.create_index(
        "ix_history_repo_key_version", "history", ["repo_id", "key", "version"], unique=True
    )
    op.create_index("ix_history_repo_version", "history", ["repo_id", "version"])
    op.create_table(
        "tokens",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("lookup_id", sa.String(32), nullable=False, unique=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("repo_pattern", sa.String(255), nullable=False),
        sa.Column("read_only", sa.Boolean, nullable=False),
        sa.Column("secret_hash", sa.String(64), nullable=False),
        sa.Column("created_at", Stamp, nullable=False),
        sa.Column("revoked_at", Stamp, nullable=True),
    )


def downgrade() -> None:
    """Drop everything (loses all data)."""
    op.drop_table("tokens")
    op.drop_index("ix_history_repo_version", "history")
    op.drop_index("ix_history_repo_key_version", "history")
    op.drop_table("history")
    op.drop_index("ix_entries_repo_version", "entries")
    op.drop_table("entries")
    op.drop_table("repos")
