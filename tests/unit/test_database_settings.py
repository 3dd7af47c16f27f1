"""The token commands read the database settings without pydantic
(`database_url.database_settings`): the same URL, and the same first problem in the
same words, as `Settings` for every environment; and a plain SQLite URL is read,
and masked, as SQLAlchemy reads it. Fast: no database."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from sqlalchemy.engine import make_url

from sync_server.cli import main
from sync_server.config import Settings
from sync_server.database_url import (
    DatabaseSettings,
    SettingError,
    database_settings,
    masked_url,
    plain_sqlite_database,
)

PG = "postgresql+psycopg://memsync@db:5432/memsync"


def _clean_environ(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for name in list(os.environ):
        if name.lower().startswith("memsync_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def _by_settings() -> DatabaseSettings | tuple[str, str]:
    """What `Settings` makes of the environment: its database, or (field, message)."""
    try:
        settings = Settings()
    except ValidationError as error:
        first = error.errors()[0]
        return str(first["loc"][0]), first["msg"]
    return DatabaseSettings(
        url=settings.database_url, url_given="database_url" in settings.model_fields_set
    )


def _by_hand() -> DatabaseSettings | tuple[str, str]:
    try:
        return database_settings(os.environ)
    except SettingError as error:
        return error.field, error.problem


def _environments(tmp: Path) -> list[dict[str, str]]:
    good, empty, newlines, latin1 = (tmp / name for name in ("good", "empty", "nl", "latin1"))
    good.write_text("pw\n", encoding="utf-8")
    empty.write_text("\n", encoding="utf-8")
    newlines.write_text("p w\n\n", encoding="utf-8")
    latin1.write_bytes("pässword".encode("latin-1"))
    url = "MEMSYNC_DATABASE_URL"
    password = "MEMSYNC_DATABASE_PASSWORD"
    password_file = "MEMSYNC_DATABASE_PASSWORD_FILE"
    return [
        {},
        {url: "sqlite:////tmp/x/memsync.sqlite3"},
        {url: "sqlite:///relative/memsync.sqlite3"},
        {url: "sqlite:///a%20b/%7Ememsync%zz.sqlite3"},
        {url: "sqlite:///memsync.sqlite3?timeout=5"},
        {url: "sqlite:///a@b/memsync.sqlite3"},
        {url: "sqlite:///a@b@c/memsync.sqlite3"},
        {url: "sqlite:///"},
        {url: "sqlite://"},
        {url: "sqlite:"},
        {url: "sqlite:///:memory:"},
        {url: ""},
        {url: "mysql://x/y"},
        {url: "postgresql://memsync@db/memsync"},
        {url: PG},
        {url: "postgresql+psycopg://memsync:QJ@KX@db/memsync"},
        {url: "postgresql+psycopg://memsync:QJ:KX@db:59x9/memsync"},
        {url: PG, password: "s3cret @:/%"},
        {url: PG, password: ""},
        {url: "postgresql+psycopg://memsync:pw@db/memsync", password: "pw2"},
        {url: PG + "?password=pw", password: "pw2"},
        {url: PG, password_file: str(good)},
        {url: PG, password_file: str(newlines)},
        {url: PG, password_file: str(empty)},
        {url: PG, password_file: str(latin1)},
        {url: PG, password_file: str(tmp / "missing")},
        {url: PG, password_file: str(tmp)},
        {url: PG, password_file: ""},
        {url: PG, password_file: str(good), password: "pw"},
        {url: PG, password_file: str(tmp / "missing"), password: "pw"},
        {url: "mysql://x/y", password_file: str(tmp / "missing")},
        {url: "sqlite:////tmp/x.sqlite3", password: "pw"},
        {url: "sqlite:////tmp/x.sqlite3", password_file: str(good)},
        {password: "pw"},
        {url.lower(): PG, password.lower(): "pw"},
        {"Memsync_Database_Url": "sqlite:////tmp/mixed-case.sqlite3"},
    ]


def test_every_environment_reads_as_settings_reads_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    for env in _environments(tmp_path):
        _clean_environ(monkeypatch, env)
        assert _by_hand() == _by_settings(), env


def test_a_bad_setting_is_the_same_line_from_the_token_commands_and_the_others(
    tmp_path: Path,
) -> None:
    runner = CliRunner()
    env = {
        "MEMSYNC_DATABASE_URL": PG,
        "MEMSYNC_DATABASE_PASSWORD": "pw",
        "MEMSYNC_DATABASE_PASSWORD_FILE": str(tmp_path / "missing"),
    }
    for bad in (env, {"MEMSYNC_DATABASE_URL": "mysql://x/y"}):
        token_list = runner.invoke(main, ["token", "list"], env=bad)
        repo_list = runner.invoke(main, ["repo", "list"], env=bad)
        assert token_list.exit_code == repo_list.exit_code == 2
        assert token_list.output == repo_list.output
        assert token_list.output.startswith("memsync-server: bad setting MEMSYNC_DATABASE_")


# Any text after `sqlite:///`: letters, '%' escapes (good and broken), spaces, '+', '#'.
_PATH_TEXT = st.lists(
    st.sampled_from([*"ab/ .:+#%~é\n", "%20", "%2F", "%25", "%zz", "%7E", "%C3%A9"]),
    max_size=20,
).map("".join)


@given(_PATH_TEXT)
def test_a_plain_sqlite_url_reads_and_masks_as_sqlalchemy_does(path: str) -> None:
    url = "sqlite:///" + path
    assert plain_sqlite_database(url) == make_url(url).database
    assert masked_url(url) == make_url(url).render_as_string(hide_password=True)


def test_only_plain_sqlite_urls_are_read_by_hand() -> None:
    for url in (PG, "sqlite:///x?mode=ro", "sqlite:///a@b", "sqlite://", "sqlite:/x"):
        assert plain_sqlite_database(url) is None


def test_sqlite_synchronous_is_normal_unless_full_is_chosen(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`MEMSYNC_SQLITE_SYNCHRONOUS` (docs/operators.md, "Durability"): the server's
    store commits with SQLite's `synchronous` at NORMAL (1) or, chosen, FULL (2)."""
    from sqlalchemy import text

    from sync_server.app import create_app
    from sync_server.config import sqlite_url

    seen = []
    for chosen in (None, " FULL "):
        _clean_environ(
            monkeypatch, {} if chosen is None else {"MEMSYNC_SQLITE_SYNCHRONOUS": chosen}
        )
        monkeypatch.setenv("MEMSYNC_DATABASE_URL", sqlite_url(tmp_path / "m.sqlite3"))
        app = create_app(Settings())
        with app.state.store.engine.connect() as connection:
            seen.append(connection.execute(text("PRAGMA synchronous")).scalar())
        app.state.store.close()
    assert seen == [1, 2]
    monkeypatch.setenv("MEMSYNC_SQLITE_SYNCHRONOUS", "off")
    with pytest.raises(ValidationError, match="'normal' or 'full'"):
        Settings()
