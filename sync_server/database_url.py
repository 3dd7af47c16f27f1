"""The database settings: MEMSYNC_DATABASE_URL and the password given apart from it.

One implementation of how they are read and checked, without pydantic: `config.Settings`
validates its three database fields with these functions, and the token commands
(`memsync-server token ...`), which need nothing else, read them with
`database_settings()` alone, so they start without importing pydantic. SQLAlchemy is
imported only to parse a URL other than a plain `sqlite:///PATH`, whose one parse
(`plain_sqlite_database`) is SQLAlchemy's `make_url` done by hand.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

if TYPE_CHECKING:
    # Imported where used: SQLAlchemy takes a fifth of a second to import.
    from sqlalchemy.engine import URL

DEFAULT_DATA_DIR = Path("data")
ENV_PREFIX = "MEMSYNC_"
# The database fields of `config.Settings`, in its order (the order it checks them in).
DATABASE_FIELDS = ("database_password", "database_password_file", "database_url")


def sqlite_url(path: Path) -> str:
    """The SQLAlchemy URL of a SQLite database file."""
    return f"sqlite:///{path.resolve()}"


def default_database_url() -> str:
    """`./data/memsync.sqlite3`, from the current directory, as a URL."""
    return sqlite_url(DEFAULT_DATA_DIR / "memsync.sqlite3")


_ENCODE_HINT = (
    "percent-encode an '@', ':' or '/' in the user or password (%40, %3A, %2F; "
    "'%' itself as %25), or give the password apart in MEMSYNC_DATABASE_PASSWORD"
)
# Everything before the query string: where a bare '@' may appear once, ending USER[:PASS].
_BEFORE_QUERY = re.compile(r"[^?]*")
MASKED_URL_UNREADABLE = "(a malformed database URL)"
_PLAIN_SQLITE = "sqlite:///"
_SCHEMES = ("sqlite", "postgresql", "postgresql+psycopg")


def plain_sqlite_database(url: str) -> str | None:
    """The database (file name) of a `sqlite:///PATH` URL with no '?' and no '@' in it,
    exactly as SQLAlchemy's `make_url(url).database` reads it; None for any other URL.

    With no '@' there is no user part, and with no '?' no query: `make_url` then takes
    everything after `sqlite:///` as the database, percent-decoded. A URL this does not
    cover goes to `make_url` itself.
    """
    if not url.startswith(_PLAIN_SQLITE) or "?" in url or "@" in url:
        return None
    return unquote(url[len(_PLAIN_SQLITE) :])


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
    if isinstance(url, str):
        database = plain_sqlite_database(url)
        if database is not None:
            # What `make_url(url).render_as_string()` gives, without SQLAlchemy.
            return _PLAIN_SQLITE + quote(database, safe=" +/")
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


def password_apart(password: str | None, password_file: Path | None) -> str | None:
    """MEMSYNC_DATABASE_PASSWORD (empty counts as unset) or the content of
    MEMSYNC_DATABASE_PASSWORD_FILE; a ValueError when both are set."""
    if password_file is None:
        return password or None
    if password:
        raise ValueError(
            "MEMSYNC_DATABASE_PASSWORD and MEMSYNC_DATABASE_PASSWORD_FILE are both set: give one"
        )
    return read_password_file(password_file)


def resolve_database_url(value: str, password: str | None, password_file: Path | None) -> str:
    """The URL to connect with: `value` checked, `postgresql://` made explicit, and the
    password given apart merged in. A ValueError names the problem, never the password."""
    scheme = value.split(":", 1)[0]
    if scheme not in _SCHEMES:
        raise ValueError("MEMSYNC_DATABASE_URL must be sqlite:///PATH or postgresql+psycopg://...")
    if scheme == "postgresql":
        # Plain postgresql:// would pick psycopg2, which we do not ship.
        value = "postgresql+psycopg" + value[len("postgresql") :]
    # A plain SQLite URL always parses (and holds no password): no SQLAlchemy for it.
    url = None if plain_sqlite_database(value) is not None else parse_database_url(value)
    given = password_apart(password, password_file)
    if given is None:
        return value
    if scheme == "sqlite":
        raise ValueError("it is SQLite, which takes no password; unset the password")
    assert url is not None  # only a plain SQLite URL skipped the parse
    if url.password is not None or "password" in url.query:
        raise ValueError(
            "it holds a password and MEMSYNC_DATABASE_PASSWORD(_FILE) gives one too: give it once"
        )
    return with_password(value, given)


class SettingError(ValueError):
    """A database setting that cannot work: `field` (`database_url`, ...) and why."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field
        self.problem = problem

    @property
    def variable(self) -> str:
        """The environment variable: `MEMSYNC_DATABASE_URL`, ..."""
        return f"{ENV_PREFIX}{self.field.upper()}"


@dataclass(frozen=True, slots=True)
class DatabaseSettings:
    """The database to use. `url` holds the password given apart: show `masked_url(url)`.
    `url_given`: whether MEMSYNC_DATABASE_URL was set (else it is the default file)."""

    url: str
    url_given: bool

    def __repr__(self) -> str:
        return f"DatabaseSettings(url={masked_url(self.url)!r}, url_given={self.url_given})"


def database_settings(environ: Mapping[str, str]) -> DatabaseSettings:
    """The database settings of `environ`, read and checked as `config.Settings` reads
    and checks them (names in any case, as pydantic-settings reads them; the first
    problem in its field order), or a `SettingError`. The other settings are not read."""
    env = {name.lower(): value for name, value in environ.items()}
    prefix = ENV_PREFIX.lower()
    password = env.get(f"{prefix}database_password")
    file_value = env.get(f"{prefix}database_password_file")
    password_file = None if file_value is None else Path(file_value)
    if password_file is not None:
        try:
            read_password_file(password_file)
        except ValueError as error:
            raise SettingError("database_password_file", str(error)) from None
    given = env.get(f"{prefix}database_url")
    try:
        url = resolve_database_url(
            default_database_url() if given is None else given, password, password_file
        )
    except ValueError as error:
        raise SettingError("database_url", str(error)) from None
    return DatabaseSettings(url=url, url_given=given is not None)
