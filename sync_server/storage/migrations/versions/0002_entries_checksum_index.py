"""Covering index for the per-commit checksum scan.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Index (repo_id, key, checksum) so recomputing a repo checksum skips the texts."""
    op.create_index("ix_entries_repo_key_checksum", "entries", ["repo_id", "key", "checksum"])


def downgrade() -> None:
    """Drop the index."""
    op.drop_index("ix_entries_repo_key_checksum", "entries")
