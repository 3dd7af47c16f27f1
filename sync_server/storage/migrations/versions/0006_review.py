"""The review gate: repo policies, reviewer tokens, proposals, and who accepted a commit.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

Stamp = sa.DateTime(timezone=True)
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Add `repo_policies`, `proposals`, `proposal_entries`, `tokens.reviewer` (false
    for every existing token) and `history.accepted_by` (NULL: a plain write)."""
    op.create_table(
        "repo_policies",
        sa.Column("pattern", sa.String(255), primary_key=True),
        sa.Column("review", sa.Boolean(), nullable=False),
        sa.Column("updated_at", Stamp, nullable=False),
    )
    op.create_table(
        "proposals",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("repo_id", sa.BigInteger(), sa.ForeignKey("repos.id"), nullable=False),
        sa.Column("author", sa.String(255), nullable=False),
        sa.Column("agent", sa.String(255), nullable=True),
        sa.Column("created_at", Stamp, nullable=False),
        sa.Column("base_version", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("decided_by", sa.String(255), nullable=True),
        sa.Column("decided_at", Stamp, nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("accepted_version", sa.BigInteger(), nullable=True),
        sa.Column("replaced_by", sa.BigInteger(), nullable=True),
    )
    op.create_index("ix_proposals_repo_status", "proposals", ["repo_id", "status"])
    op.create_index("ix_proposals_repo_author_status", "proposals", ["repo_id", "author", "status"])
    op.create_table(
        "proposal_entries",
        sa.Column("proposal_id", sa.BigInteger(), sa.ForeignKey("proposals.id"), primary_key=True),
        sa.Column("key", sa.Text(), primary_key=True),
        sa.Column("op", sa.String(16), nullable=False),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("checksum", sa.String(71), nullable=True),
        sa.Column("base_checksum", sa.String(71), nullable=True),
        sa.Column("base_text", sa.Text(), nullable=True),
    )
    with op.batch_alter_table("tokens") as batch:
        batch.add_column(
            sa.Column("reviewer", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    with op.batch_alter_table("history") as batch:
        batch.add_column(sa.Column("accepted_by", sa.String(255), nullable=True))


def downgrade() -> None:
    """Drop what `upgrade` added (pending proposals are lost: they were never commits)."""
    with op.batch_alter_table("history") as batch:
        batch.drop_column("accepted_by")
    with op.batch_alter_table("tokens") as batch:
        batch.drop_column("reviewer")
    op.drop_table("proposal_entries")
    op.drop_index("ix_proposals_repo_author_status", table_name="proposals")
    op.drop_index("ix_proposals_repo_status", table_name="proposals")
    op.drop_table("proposals")
    op.drop_table("repo_policies")
