"""The database schema as SQLAlchemy Core tables.

Alembic migrations (`migrations/versions/`) create and evolve these tables; this module
is what the queries are written against. Types are portable: no dialect-only column
types, so the same schema runs on SQLite, PostgreSQL and PostgreSQL-compatible
distributed databases.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    false,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

metadata = MetaData()

# SQLite only autoincrements an INTEGER PRIMARY KEY (its rowid); elsewhere use 64 bits.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class UtcDateTime(TypeDecorator[datetime]):
    """A timestamp that is always timezone-aware UTC in Python, on every backend.

    SQLite keeps no zone, so values come back naive; they were written as UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


repos = Table(
    "repos",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("name", String(255), nullable=False, unique=True),
    Column("version", BigInteger, nullable=False),
    Column("checksum", String(71), nullable=False),
    Column("entry_count", Integer, nullable=False),
    # Versions at or below this may have lost history to pruning: `since` answers 410.
    Column("history_floor", BigInteger, nullable=False),
    Column("last_modified", UtcDateTime, nullable=False),
    # Set by `memsync-server repo delete`: the repo reads as never written, but the row
    # stays so a later write continues its version numbers (no cached body or client
    # base can mistake a new version 1 for the old one).
    Column("deleted_at", UtcDateTime, nullable=True),
)

entries = Table(
    "entries",
    metadata,
    Column("repo_id", BigInteger, ForeignKey("repos.id"), primary_key=True),
    Column("key", Text, primary_key=True),
    Column("text", Text, nullable=False),
    Column("checksum", String(71), nullable=False),
    # The repo version at which this entry last changed: `since` reads it.
    Column("version", BigInteger, nullable=False),
    Index("ix_entries_repo_version", "repo_id", "version"),
    # Covers the (key, checksum) reads of the hashes view and of a commit whose cached
    # live keys (`live.LiveKeys`) must be read again, so they never read the texts.
    Index("ix_entries_repo_key_checksum", "repo_id", "key", "checksum"),
)

history = Table(
    "history",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("repo_id", BigInteger, ForeignKey("repos.id"), nullable=False),
    Column("key", Text, nullable=False),
    Column("version", BigInteger, nullable=False),
    Column("op", String(16), nullable=False),
    Column("checksum", String(71), nullable=True),
    Column("text", Text, nullable=True),
    Column("author", String(255), nullable=False),
    Column("at", UtcDateTime, nullable=False),
    # The reviewer who accepted the proposal this row came from (NULL: a plain write).
    Column("accepted_by", String(255), nullable=True),
    # How the version was made (memsync_protocol.provenance, compact JSON; NULL: unknown).
    Column("provenance", Text, nullable=True),
    Index("ix_history_repo_key_version", "repo_id", "key", "version", unique=True),
    Index("ix_history_repo_version", "repo_id", "version"),
)

tokens = Table(
    "tokens",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("lookup_id", String(32), nullable=False, unique=True),
    Column("name", String(255), nullable=False),
    Column("repo_pattern", String(255), nullable=False),
    Column("read_only", Boolean, nullable=False),
    Column("secret_hash", String(64), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("revoked_at", UtcDateTime, nullable=True),
    Column("expires_at", UtcDateTime, nullable=True),
    Column("reviewer", Boolean, nullable=False, server_default=false()),
    # The person the token belongs to (its personal spaces); NULL: none (only --person).
    Column("person", String(100), nullable=True),
)

# Whether repos matching a pattern (`owner/name`, `owner/*`, `*`) are reviewed: the most
# specific pattern matching a repo decides (docs/protocol.md section 3.12).
repo_policies = Table(
    "repo_policies",
    metadata,
    Column("pattern", String(255), primary_key=True),
    Column("review", Boolean, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
)

# Writes kept back for review, never part of any read view until accepted.
proposals = Table(
    "proposals",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("repo_id", BigInteger, ForeignKey("repos.id"), nullable=False),
    # The token name of the author; `agent` names the agent when the client said.
    Column("author", String(255), nullable=False),
    # Whose proposal it is: the token's person (`~` + its name when it has none), so every
    # token of that person lists and replaces it (docs/protocol.md 3.12). Always
    # written; nullable only because migration 0009 added it without a table rebuild.
    Column("person", String(255), nullable=True),
    Column("agent", String(255), nullable=True),
    Column("created_at", UtcDateTime, nullable=False),
    # The team's version the proposal was written against.
    Column("base_version", BigInteger, nullable=False),
    Column("status", String(16), nullable=False),
    Column("decided_by", String(255), nullable=True),
    Column("decided_at", UtcDateTime, nullable=True),
    Column("reason", Text, nullable=True),
    Column("accepted_version", BigInteger, nullable=True),
    Column("replaced_by", BigInteger, nullable=True),
    # The write's provenance, given to the version its accept commits.
    Column("provenance", Text, nullable=True),
    Index("ix_proposals_repo_status", "repo_id", "status"),
    Index("ix_proposals_repo_person_status", "repo_id", "person", "status"),
)

# The keys of a proposal. The base text is kept with it, so an accept can merge even
# after history pruning dropped that version.
proposal_entries = Table(
    "proposal_entries",
    metadata,
    Column("proposal_id", BigInteger, ForeignKey("proposals.id"), primary_key=True),
    Column("key", Text, primary_key=True),
    Column("op", String(16), nullable=False),
    Column("text", Text, nullable=True),
    Column("checksum", String(71), nullable=True),
    Column("base_checksum", String(71), nullable=True),
    Column("base_text", Text, nullable=True),
)

# Random secrets the server makes once and every process sharing the database reads:
# the web page's session-cookie key (unless MEMSYNC_UI_SECRET sets one).
server_secrets = Table(
    "server_secrets",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", String(255), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
)
