"""Repo checksums by definition 2 (256 buckets), so a commit's cost does not grow with
the repo. No table changes: every repo's stored checksum is recomputed from its live
entries (docs/protocol.md section 2).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from memsync_protocol.checksums import repo_checksum

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def _recompute(version: int) -> None:
    """Set every repo's `checksum` to its live entries' repo checksum by `version`.

    One repo at a time, reading only keys and entry checksums; a repo with no live entry
    keeps the empty checksum, the same under both definitions.
    """
    connection = op.get_bind()
    repos = sa.table("repos", sa.column("id", sa.Integer), sa.column("checksum", sa.String))
    entries = sa.table(
        "entries",
        sa.column("repo_id", sa.Integer),
        sa.column("key", sa.String),
        sa.column("checksum", sa.String),
    )
    repo_ids = list(connection.execute(sa.select(repos.c.id)).scalars())
    for repo_id in repo_ids:
        rows = connection.execute(
            sa.select(entries.c.key, entries.c.checksum).where(entries.c.repo_id == repo_id)
        )
        checksum = repo_checksum([(row.key, row.checksum) for row in rows], version)
        connection.execute(sa.update(repos).where(repos.c.id == repo_id).values(checksum=checksum))


def upgrade() -> None:
    """Recompute every repo's checksum by definition 2."""
    _recompute(2)


def downgrade() -> None:
    """Recompute every repo's checksum by definition 1, for a server from before 0005."""
    _recompute(1)
