"""The pure parts of `memsync log`, `show`, `diff KEY@N..M` and `restore --before`:
KEY[@N[..M]], times, and the one-line renderings (`sync_client.history`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from sync_client.errors import ConfigError
from sync_client.history import (
    KeyRef,
    commit_lines,
    keys_words,
    ops_words,
    parse_key_ref,
    parse_time,
    wire_time,
)

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "ref"),
    [
        ("notes/a.md", KeyRef("notes/a.md")),
        ("notes/a.md@3", KeyRef("notes/a.md", 3)),
        ("notes/a.md@3..12", KeyRef("notes/a.md", 3, 12)),
        ("a.md@12..3", KeyRef("a.md", 12, 3)),  # backwards, as git allows
        ("notes/me@work.md", KeyRef("notes/me@work.md")),  # an @ in the name
        ("notes/me@work.md@2", KeyRef("notes/me@work.md", 2)),
    ],
)
def test_key_refs(text: str, ref: KeyRef) -> None:
    assert parse_key_ref(text) == ref
    assert str(ref) == text


@pytest.mark.parametrize(
    ("text", "versions", "words"),
    [
        ("../x.md", 2, "invalid key '../x.md'"),
        ("@3", 2, "invalid key ''"),
        ("a.md@", 2, "bad version in 'a.md@': write a.md@N, or a.md@N..M"),
        ("a.md@3..", 2, "bad version in 'a.md@3..'"),
        ("a.md@..4", 2, "bad version"),
        ("a.md@3...4", 2, "bad version"),
        ("a.md@0", 2, "versions start at 1"),
        ("a.md@2..0", 2, "versions start at 1"),
        ("a.md@2..3", 1, "give one version here, a.md@N"),
        ("a.md@2", 0, "without @VERSION"),
        ("a.md@", 1, "write a.md@N"),
    ],
)
def test_bad_key_refs_are_one_line(text: str, versions: int, words: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_key_ref(text, versions=versions)
    assert words in str(raised.value)
    assert "\n" not in str(raised.value)
    assert raised.value.exit_code == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2h", NOW - timedelta(hours=2)),
        ("90m", NOW - timedelta(minutes=90)),
        ("3d", NOW - timedelta(days=3)),
        ("2w", NOW - timedelta(weeks=2)),
        ("2 h ago", NOW - timedelta(hours=2)),
        ("2026-11-30T08:15:00Z", datetime(2026, 11, 30, 8, 15, tzinfo=UTC)),
        ("2026-11-30T10:15+02:00", datetime(2026, 11, 30, 8, 15, tzinfo=UTC)),
    ],
)
def test_times(text: str, expected: datetime) -> None:
    assert parse_time(text, now=NOW) == expected


def test_a_time_without_an_offset_is_local_time() -> None:
    local = datetime(2026, 11, 30).astimezone()  # midnight here
    assert parse_time("2026-11-30", now=NOW) == local.astimezone(UTC)
    assert parse_time("2026-11-30 00:00", now=NOW) == local.astimezone(UTC)
    assert wire_time(parse_time("2026-11-30T08:15:00Z")) == "2026-11-30T08:15:00Z"


@pytest.mark.parametrize("text", ["yesterdayish", "2x", "", "2026-13-01", "-2h"])
def test_bad_times_name_the_option(text: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_time(text, option="--before")
    assert str(raised.value).startswith(f"--before {text!r} is not a time: write 2026-12-01")


def test_keys_and_ops_in_words() -> None:
    assert keys_words(["a.md"], 1) == "a.md"
    assert keys_words(["a.md", "b.md", "c.md"], 3) == "a.md, b.md, c.md"
    assert keys_words(["a.md", "b.md", "c.md", "d.md"], 7) == "a.md, b.md and 5 more"
    assert keys_words(["k"] * 20, 1500) == "k, k and 1,498 more"  # the server lists 20
    assert ops_words({"put": 2, "delete": 0, "restore": 0}) == "put"
    assert ops_words({"put": 1, "delete": 1, "restore": 0}) == "put+delete"
    assert ops_words({"restore": 1}) == "restore"


def test_commit_lines_line_up() -> None:
    commits = [
        {
            "version": 42,
            "at": "2026-12-01T10:02:00Z",
            "author": "alice",
            "ops": {"put": 7},
            "keys": ["notes/a.md", "notes/b.md", "notes/c.md"],
            "key_count": 7,
        },
        {
            "version": 9,
            "at": "2026-11-30T08:00:59Z",
            "author": "bob",
            "ops": {"delete": 1},
            "keys": ["old.md"],
            "key_count": 1,
        },
    ]
    first, second = commit_lines(commits)
    shown = datetime(2026, 12, 1, 10, 2, tzinfo=UTC).astimezone().strftime("%Y-%m-%d %H:%M")
    assert first == f"v42  {shown}  alice  put notes/a.md, notes/b.md and 5 more"
    assert second.startswith("v9 ")
    assert second.endswith("  bob    delete old.md")
