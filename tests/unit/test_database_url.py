"""Any database password works: percent-encoded in MEMSYNC_DATABASE_URL, or given apart
in MEMSYNC_DATABASE_PASSWORD or MEMSYNC_DATABASE_PASSWORD_FILE. A malformed URL is one
line naming the problem (exit 2), and a masked URL never shows a byte of the password.
Fast: no database."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest
from click.testing import CliRunner
from psycopg.conninfo import conninfo_to_dict
from pydantic import SecretStr, ValidationError
from sqlalchemy.engine import make_url

from sync_server.cli import main
from sync_server.config import (
    MASKED_URL_UNREADABLE,
    Settings,
    masked_url,
    parse_database_url,
    with_password,
)
from sync_server.events import listen_url

PRINTABLE = [chr(code) for code in range(0x20, 0x7F)]  # every printable ASCII and a space
BASE = "postgresql+psycopg://memsync@db:5432/memsync"


def _password(char: str) -> str:
    # Q, J and K never occur in a masked URL of BASE, so no two-character piece of the
    # password can appear there by chance.
    return f"Q{char}J{char}K"


def _pieces(password: str) -> set[str]:
    return {password[i : i + 2] for i in range(len(password) - 1)}


def _assert_hidden(shown: str, password: str) -> None:
    for piece in _pieces(password):
        assert piece not in shown, (piece, shown)


def _assert_connects_with(settings: Settings, password: str) -> None:
    assert make_url(settings.database_url).password == password
    conninfo = listen_url(settings.database_url)
    assert conninfo is not None
    assert conninfo_to_dict(conninfo)["password"] == password
    shown = masked_url(settings.database_url)
    assert shown == "postgresql+psycopg://memsync:***@db:5432/memsync"
    _assert_hidden(shown, password)
    _assert_hidden(repr(settings), password)


@pytest.mark.parametrize("char", PRINTABLE)
def test_a_percent_encoded_password_with_any_character(char: str) -> None:
    password = _password(char)
    url = f"postgresql+psycopg://memsync:{quote(password, safe='')}@db:5432/memsync"
    _assert_connects_with(Settings(database_url=url), password)


@pytest.mark.parametrize("char", PRINTABLE)
def test_a_password_given_apart_with_any_character(char: str) -> None:
    password = _password(char)
    settings = Settings(database_url=BASE, database_password=SecretStr(password))
    _assert_connects_with(settings, password)
    # Rendered back into the URL it reads back the same, however often.
    assert Settings(database_url=settings.database_url).database_url == settings.database_url


@pytest.mark.parametrize("char", PRINTABLE)
def test_a_password_file_with_any_character(char: str, tmp_path: Path) -> None:
    password = _password(char)
    secret = tmp_path / "db_password"
    secret.write_text(password + "\n", encoding="utf-8")
    _assert_connects_with(Settings(database_url=BASE, database_password_file=secret), password)


@pytest.mark.parametrize("char", PRINTABLE)
def test_a_bare_password_in_the_url_is_read_exactly_or_refused_without_it(char: str) -> None:
    password = _password(char)
    url = f"postgresql+psycopg://memsync:{password}@db:5432/memsync"
    try:
        settings = Settings(database_url=url)
    except ValidationError as error:
        message = error.errors()[0]["msg"]
        _assert_hidden(message, password)
        assert "percent-encode" in message
        assert masked_url(url) == MASKED_URL_UNREADABLE
    else:
        # Only a '%' followed by two hex digits is read as an escape; Q, J, K are not hex.
        _assert_connects_with(settings, password)


def test_a_user_with_any_character_percent_encoded() -> None:
    user = "".join(PRINTABLE)
    url = f"postgresql+psycopg://{quote(user, safe='')}@db/memsync"
    settings = Settings(database_url=url, database_password=SecretStr("pw"))
    parsed = make_url(settings.database_url)
    assert (parsed.username, parsed.password) == (user, "pw")
    conninfo = listen_url(settings.database_url)
    assert conninfo is not None
    assert conninfo_to_dict(conninfo)["user"] == user


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("postgresql+psycopg://memsync:QJ@KX@127.0.0.1:5999/db", "more than one '@'"),
        ("postgresql+psycopg://memsync:QJ@KX@127.0.0.1/db", "more than one '@'"),
        ("postgresql+psycopg://memsync:QJ@KX/db@127.0.0.1/db", "more than one '@'"),
        ("postgresql+psycopg://memsync:QJ:KX@127.0.0.1:59x9/db", "port is not a number"),
    ],
)
def test_a_malformed_url_is_one_line_without_the_password(url: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem) as raised:
        parse_database_url(url)
    _assert_hidden(str(raised.value), "QJ@KX")
    assert masked_url(url) == MASKED_URL_UNREADABLE
    result = CliRunner().invoke(main, ["migrate"], env={"MEMSYNC_DATABASE_URL": url})
    assert result.exit_code == 2
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.output.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("memsync-server: bad setting MEMSYNC_DATABASE_URL: ")
    assert problem in lines[0]
    _assert_hidden(lines[0], "QJ@KX")


def test_a_password_in_the_query_is_masked_too() -> None:
    url = "postgresql+psycopg://memsync@db/memsync?password=s3cr3t&sslmode=require"
    shown = masked_url(url)
    assert "s3cr3t" not in shown
    assert "sslmode=require" in shown


def test_the_password_file_loses_one_trailing_newline_only(tmp_path: Path) -> None:
    secret = tmp_path / "db_password"
    secret.write_text("pw\n\n", encoding="utf-8")
    settings = Settings(database_url=BASE, database_password_file=secret)
    assert make_url(settings.database_url).password == "pw\n"
    secret.write_bytes(b" pw \r\n")
    settings = Settings(database_url=BASE, database_password_file=secret)
    assert make_url(settings.database_url).password == " pw "


def _problem(**settings: object) -> str:
    with pytest.raises(ValidationError) as raised:
        Settings(**settings)  # type: ignore[arg-type]
    first = raised.value.errors()[0]
    return f"{first['loc'][0]}: {first['msg']}"


def test_password_settings_that_cannot_work_are_refused(tmp_path: Path) -> None:
    secret = tmp_path / "db_password"
    assert _problem(database_url=BASE, database_password_file=secret) == (
        f"database_password_file: cannot read {secret}: no such file or directory"
    )
    secret.write_text("\n", encoding="utf-8")
    assert _problem(database_url=BASE, database_password_file=secret) == (
        f"database_password_file: {secret} is empty"
    )
    secret.write_text("pw", encoding="utf-8")
    assert "both set" in _problem(
        database_url=BASE, database_password="pw", database_password_file=secret
    )
    assert "give it once" in _problem(
        database_url="postgresql+psycopg://memsync:pw@db/memsync", database_password="pw2"
    )
    assert "SQLite" in _problem(
        database_url="sqlite:////tmp/x.sqlite3", database_password=SecretStr("pw")
    )


def test_an_empty_password_setting_counts_as_unset() -> None:
    assert Settings(database_url=BASE, database_password=SecretStr("")).database_url == BASE


def test_with_password_replaces_nothing_else() -> None:
    url = with_password("postgresql+psycopg://memsync@db:5433/team?sslmode=require", "a b")
    parsed = make_url(url)
    assert (parsed.host, parsed.port, parsed.database, parsed.password) == (
        "db",
        5433,
        "team",
        "a b",
    )
    assert parsed.query == {"sslmode": "require"}
