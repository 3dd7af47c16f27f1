"""Server settings, read from `MEMSYNC_*` environment variables.

One `Settings` object is built per application (`create_app(settings)`), never a
module-level global, so tests can run one app per database.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, SettingsConfigDict

from memsync_protocol.keys import (
    MAX_BODY_BYTES,
    MAX_ENTRIES,
    MAX_ENTRY_BYTES,
    MAX_KEY_BYTES,
    MAX_KEY_SEGMENTS,
)

# The database settings are read and checked by `database_url`, without pydantic (the
# token commands use it alone); `Settings` uses the same functions. The names below are
# imported from here too.
from sync_server.database_url import (
    DEFAULT_DATA_DIR,
    MASKED_URL_UNREADABLE,
    default_database_url,
    masked_url,
    parse_database_url,
    read_password_file,
    resolve_database_url,
    sqlite_url,
    with_password,
)

__all__ = [
    "DEFAULT_DATA_DIR",
    "MASKED_URL_UNREADABLE",
    "Settings",
    "masked_url",
    "parse_database_url",
    "read_password_file",
    "sqlite_url",
    "with_password",
]


def _problem(error: ValueError) -> PydanticCustomError:
    """A validation error whose message is `error`'s alone (no "Value error, " prefix)."""
    return PydanticCustomError("database_setting", "{problem}", {"problem": str(error)})


class Settings(BaseSettings):
    """Everything an operator can set; defaults are the protocol's (docs/protocol.md 3.8)."""

    model_config = SettingsConfigDict(env_prefix="MEMSYNC_", extra="ignore", frozen=True)

    # The two password settings come before database_url: its validator merges them in.
    database_password: SecretStr | None = Field(
        default=None,
        description="the PostgreSQL password, any characters, kept out of the URL; "
        "empty counts as unset",
    )
    database_password_file: Path | None = Field(
        default=None,
        description="a file holding the PostgreSQL password (a Docker or compose secret); "
        "its content minus one trailing newline",
    )
    database_url: str = Field(
        default_factory=default_database_url,
        description="SQLAlchemy URL; sqlite:///path (default ./data/memsync.sqlite3) "
        "or postgresql+psycopg://user@host/db. After validation it holds the password "
        "given apart, so it is never shown: use masked_url().",
        repr=False,
    )
    organization_id: str = Field(default="memsync", min_length=1, max_length=200)
    max_entries: int = Field(default=MAX_ENTRIES, ge=1)
    max_entry_bytes: int = Field(default=MAX_ENTRY_BYTES, ge=1)
    max_body_bytes: int = Field(default=MAX_BODY_BYTES, ge=1)
    max_key_bytes: int = Field(default=MAX_KEY_BYTES, ge=1, le=4096)
    max_key_segments: int = Field(default=MAX_KEY_SEGMENTS, ge=1, le=256)
    max_pending_proposals: int = Field(
        default=200,
        ge=1,
        description="in a reviewed repo, how many proposals one person may have waiting "
        "for review; past it a write is refused (409 too_many_proposals)",
    )
    rate_limit_burst: int = Field(default=300, ge=0, description="0 turns rate limiting off")
    rate_limit_per_second: float = Field(default=30.0, gt=0)
    history_days: int | None = Field(
        default=None, ge=1, description="keep history this many days; unset keeps it forever"
    )
    token_cache_seconds: float = Field(
        default=2.0,
        ge=0,
        description="how long a process trusts a token lookup; a revocation takes effect "
        "within this time in every server process",
    )
    auto_migrate: bool = Field(default=True, description="upgrade the schema on start")
    compression: bool = Field(
        default=True,
        description="gzip answers of 1 KB or more to clients that accept it, and accept "
        'gzip request bodies (listed as "gzip" in `supports`); false sends and accepts '
        "only plain bodies",
    )
    response_cache_bytes: int = Field(
        default=64 * 1024 * 1024, ge=0, description="memory for cached GET bodies"
    )
    events_heartbeat_seconds: float = Field(
        default=15.0,
        gt=0,
        le=3600,
        description="a keep-alive comment on an idle event stream this often, so proxies "
        "keep it open and a vanished client's slot is freed",
    )
    max_streams_per_token: int = Field(
        default=8, ge=1, description="open event streams one token may hold per process"
    )
    events_poll_seconds: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description="on SQLite, how often a process with open event streams reads the heads "
        "of their repos to see other processes' commits (one query for all streams)",
    )

    sqlite_synchronous: Literal["normal", "full"] = Field(
        default="normal",
        description="SQLite only: normal survives a crash of the server process but may "
        "lose the last commits to an OS crash or power loss; full syncs every commit to "
        "disk first (slower writes)",
    )

    ui_secret: str | None = Field(
        default=None,
        min_length=32,
        description="the key that signs the web page's session cookies (/ui/); unset, the "
        "server makes a random one once and keeps it in the database, shared by every process",
    )

    @field_validator("database_password_file")
    @classmethod
    def _readable_password_file(cls, value: Path | None) -> Path | None:
        if value is not None:
            try:
                read_password_file(value)
            except ValueError as error:
                raise _problem(error) from None
        return value

    @field_validator("database_url")
    @classmethod
    def _known_database(cls, value: str, info: ValidationInfo) -> str:
        # `database_url.database_settings` reads the same three settings for the token
        # commands: both go through `resolve_database_url`.
        secret: SecretStr | None = info.data.get("database_password")
        try:
            return resolve_database_url(
                value,
                None if secret is None else secret.get_secret_value(),
                info.data.get("database_password_file"),
            )
        except ValueError as error:
            raise _problem(error) from None

    @field_validator("sqlite_synchronous", mode="before")
    @classmethod
    def _folded(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("max_body_bytes")
    @classmethod
    def _body_holds_an_entry(cls, value: int) -> int:
        if value < 1024:
            raise ValueError("MEMSYNC_MAX_BODY_BYTES below 1024 would refuse every request")
        return value
