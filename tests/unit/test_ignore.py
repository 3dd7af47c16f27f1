"""The rules of `.memsyncignore` (gitignore syntax, read by `read_ignore_rules`) as the
scan of a team dir applies them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sync_client.errors import ConfigError
from sync_client.ignore_rules import IGNORE_FILE, IgnoreFileError, read_ignore_rules
from sync_client.local import LocalScan, scan_team_dir


def team_with(tmp_path: Path, patterns: str, files: list[str]) -> Path:
    team = tmp_path / "team"
    team.mkdir()
    (team / IGNORE_FILE).write_text(patterns)
    for key in files:
        path = team / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{key}\n")
    return team


def scan(team: Path, tracked: tuple[str, ...] = ()) -> LocalScan:
    return scan_team_dir(team, {}, ignore=read_ignore_rules(team).keeping(tracked))


def ignored(result: LocalScan) -> dict[str, bool]:
    return {row.key: row.folder for row in result.skipped if row.reason == "ignored"}


def test_no_ignore_file_ignores_nothing(tmp_path: Path) -> None:
    team = tmp_path / "team"
    (team / "drafts").mkdir(parents=True)
    (team / "drafts" / "a.md").write_text("a\n")
    result = scan_team_dir(team, {}, ignore=read_ignore_rules(team))
    assert list(result.checksums) == ["drafts/a.md"]
    assert result.skipped == []


def test_gitignore_patterns_comments_anchors_and_folders(tmp_path: Path) -> None:
    team = team_with(
        tmp_path,
        "# comment\n\n*.log\n/top.md\ndrafts/\nnotes/**/tmp-*.md\n\\#literal.md\n",
        [
            "a.log",
            "sub/b.log",
            "top.md",
            "sub/top.md",
            "drafts/x.md",
            "drafts/deep/y.md",
            "notes/q/tmp-1.md",
            "notes/q/real.md",
            "#literal.md",
            "keep.md",
        ],
    )
    result = scan(team)
    assert sorted(result.checksums) == ["keep.md", "notes/q/real.md", "sub/top.md"]
    # An ignored folder is reported once and never entered.
    assert ignored(result) == {
        "#literal.md": False,
        "a.log": False,
        "drafts": True,
        "notes/q/tmp-1.md": False,
        "sub/b.log": False,
        "top.md": False,
    }


def test_a_negation_re_includes_what_the_file_excluded(tmp_path: Path) -> None:
    team = team_with(tmp_path, "*.md\n!keep.md\n", ["keep.md", "drop.md", "plain.txt"])
    result = scan(team)
    assert sorted(result.checksums) == ["keep.md", "plain.txt"]
    assert ignored(result) == {"drop.md": False}


def test_a_negation_never_brings_back_a_hidden_editor_or_symlinked_file(tmp_path: Path) -> None:
    team = team_with(
        tmp_path,
        "!.hidden.md\n!*~\n!*.swp\n!link.md\n!.config/\n",
        [".hidden.md", "a.md~", "a.swp", "a.md", ".config/x.md"],
    )
    os.symlink(team / "a.md", team / "link.md")
    result = scan(team)
    assert list(result.checksums) == ["a.md"]
    reasons = {row.key: row.reason for row in result.skipped}
    assert reasons == {
        ".config": "hidden",
        ".hidden.md": "hidden",
        IGNORE_FILE: "hidden",
        "a.md~": "editor-leftover",
        "a.swp": "editor-leftover",
        "link.md": "symlink",
    }


def test_a_tracked_key_and_its_folder_are_never_ignored(tmp_path: Path) -> None:
    team = team_with(tmp_path, "notes/\n*.md\n", ["notes/db.md", "notes/new.md", "top.md"])
    result = scan(team, tracked=("notes/db.md", "top.md"))
    assert sorted(result.checksums) == ["notes/db.md", "top.md"]
    assert ignored(result) == {"notes/new.md": False}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"ok.md\n!\n", "line 2: '!' is not a valid gitignore pattern"),
        (b"../up.md\n", "line 1: '../up.md' points outside the team dir"),
        (b"!a/../../b\n", "line 1: '!a/../../b' points outside the team dir"),
        (b"/..\n", "line 1: '/..' points outside the team dir"),
        (b"a\x00b\n", "line 1: contains a NUL character"),
        (b"\xff\n", "is not UTF-8 text"),
        (b"#" * 100_001, "is larger than 100,000 bytes"),
    ],
)
def test_a_bad_ignore_file_is_a_configuration_error_naming_it(
    tmp_path: Path, content: bytes, message: str
) -> None:
    team = tmp_path / "team"
    team.mkdir()
    (team / IGNORE_FILE).write_bytes(content)
    with pytest.raises(IgnoreFileError) as raised:
        read_ignore_rules(team)
    assert isinstance(raised.value, ConfigError)  # exit 2
    assert str(raised.value).startswith(f"{team / IGNORE_FILE}: {message}")
    assert "\n" not in str(raised.value)


def test_a_symlinked_or_folder_ignore_file_is_refused_not_followed(tmp_path: Path) -> None:
    team = tmp_path / "team"
    team.mkdir()
    outside = tmp_path / "outside"
    outside.write_text("*\n")
    (team / IGNORE_FILE).symlink_to(outside)
    with pytest.raises(IgnoreFileError, match="is a symbolic link"):
        read_ignore_rules(team)
    (team / IGNORE_FILE).unlink()
    (team / IGNORE_FILE).mkdir()
    with pytest.raises(IgnoreFileError, match="is not a regular file"):
        read_ignore_rules(team)


def test_a_byte_order_mark_and_crlf_lines_are_read_as_text(tmp_path: Path) -> None:
    team = team_with(tmp_path, "", ["a.log", "b.md"])
    (team / IGNORE_FILE).write_bytes(b"\xef\xbb\xbf*.log\r\n")
    assert list(scan(team).checksums) == ["b.md"]
