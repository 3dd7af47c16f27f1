"""Server settings, read from `MEMSYNC_*` environment variables.

One `Settings` object is built per application (`create_app(settings)`), never a
module-level global, so tests can run one app per database.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    # Imported where used: SQLAlchemy takes a fifth of a second to import.
    from sqlalchemy.engine import URL

DEFAULT_DATA_DIR = Path("data")


def sqlite_url(path: Path) -> str:
    """The SQLAlchemy URL of a SQLite database file."""
    return f"sqlite:///{path.resolve()}"


_ENCODE_HINT = (
    "percent-encode an '@', ':' or '/' in the user or password (%40, %3A, %2F; "
    "'%' itself as %25), or give the password apart in MEMSYNC_DATABASE_PASSWORD"
)
# Everything before the query string: where a bare '@' may appear once, ending USER[:PASS].
_BEFORE_QUERY = re.compile(r"[^?]*")
MASKED_URL_UNREADABLE = "(a malformed database URL)"


def parse_database_url(value: str) -> URL:
    """`value` parsed; a ValueError whose message never holds a byte of the password.

    A bare '@' in the password would otherwise move the rest of it into the host (and a
    masked URL would show it), or into the port (SQLAlchemy's `int()` error quotes it).
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    head = _BEFORE_QUERY.match(value)
    if head is not None and head.group().count("@") > 1:
        raise ValueError(f"it has more than one '@' before the host: {_ENCODE_HINT}")
    try:
        return make_url(value)
    except ArgumentError:
        raise ValueError(
            "it is not a database URL: expected sqlite:///PATH or "
            "postgresql+psycopg://USER[:PASSWORD]@HOST[:PORT]/DB"
        ) from None
    except ValueError:
        raise ValueError(f"its port is not a number: {_ENCODE_HINT}") from None


def masked_url(url: str | URL) -> str:
    """`url` as it may be shown or logged: the password, wherever it is, is `***`."""
    from sqlalchemy.engine import URL

    try:
        parsed = url if isinstance(url, URL) else parse_database_url(url)
    except ValueError:
        return MASKED_URL_UNREADABLE
    # libpq also takes the password as a query parameter.
    if "password" in parsed.query:
        parsed = parsed.update_query_dict({"password": "***"})
    return parsed.render_as_string(hide_password=True)


def with_password(url: str, password: str) -> str:
    """`url` with `password` set (any characters), as a string `make_url` reads back."""
    return parse_database_url(url).set(password=password).render_as_string(hide_password=False)


def _problem(error: ValueError) -> PydanticCustomError:
    """A validation error whose message is `error`'s alone (no "Value error, " prefix)."""
    return PydanticCustomError("database_setting", "{problem}", {"problem": str(error)})


def read_password_file(path: Path) -> str:
    """A password file's content without one trailing newline (Docker/compose secrets)."""
    try:
        content = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text") from None
    except OSError as error:
        reason = (error.strerror or type(error).__name__).lower()
        raise ValueError(f"cannot read {path}: {reason}") from None
    if content.endswith("\r\n"):
        content = content[:-2]
    elif content.endswith("\n"):
        content = content[:-1]
    if not content:
        raise ValueError(f"{path} is empty")
    return content


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
        default_factory=lambda: sqlite_url(DEFAULT_DATA_DIR / "memsync.sqlite3"),
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
        scheme = value.split(":", 1)[0]
        if scheme not in ("sqlite", "postgresql", "postgresql+psycopg"):
            raise ValueError(
                "MEMSYNC_DATABASE_URL must be sqlite:///PATH or postgresql+psycopg://..."
            )
        if scheme == "postgresql":
            # Plain postgresql:// would pick psycopg2, which we do not ship.
            value = "postgresql+psycopg" + value[len("postgresql") :]
        try:
            url = parse_database_url(value)
            password = cls._password_apart(info)
            if password is None:
                return value
            if scheme == "sqlite":
                raise ValueError("it is SQLite, which takes no password; unset the password")
            if url.password is not None or "password" in url.query:
                raise ValueError(
                    "it holds a password and MEMSYNC_DATABASE_PASSWORD(_FILE) gives one too: "
                    "give it once"
                )
            return with_password(value, password)
        except ValueError as error:
            raise _problem(error) from None

    @staticmethod
    def _password_apart(info: ValidationInfo) -> str | None:
        """MEMSYNC_DATABASE_PASSWORD or the content of MEMSYNC_DATABASE_PASSWORD_FILE."""
        secret: SecretStr | None = info.data.get("database_password")
        given = secret.get_secret_value() if secret is not None else ""
        path: Path | None = info.data.get("database_password_file")
        if path is None:
            return given or None
        if given:
            raise ValueError(
                "MEMSYNC_DATABASE_PASSWORD and MEMSYNC_DATABASE_PASSWORD_FILE are both set: "
                "give one"
            )
        return read_password_file(path)

    @field_validator("max_body_bytes")
    @classmethod
    def _body_holds_an_entry(cls, value: int) -> int:
        if value < 1024:
            raise ValueError("MEMSYNC_MAX_BODY_BYTES below 1024 would refuse every request")
        return value
