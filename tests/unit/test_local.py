"""The team dir on disk (`sync_client.local`, `verdicts`, `team_files`): what is synced,
the stat cache, and writes, reads and removals that never leave the team dir
(docs/protocol.md 4.1, 4.2, 4.4)."""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sync_client.team_files as team_files
from memsync_protocol.checksums import entry_checksum
from memsync_protocol.keys import MAX_ENTRY_BYTES
from scanner import scan_text
from sync_client.local import LocalScan, Skipped, is_editor_leftover, scan_team_dir
from sync_client.team_files import (
    UnsafeKey,
    read_entry,
    remove_entry,
    safe_target,
    write_entries,
    write_entry,
)
from sync_client.verdicts import cache_record
from sync_server.auth import mint_token

HOUR_NS = 3600 * 1_000_000_000


def put(path: Path, content: str | bytes, *, age_ns: int = HOUR_NS) -> Path:
    """Create `path` (and its parents) holding `content`, with an mtime `age_ns` ago,
    old enough by default that the racy-mtime rule does not apply."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(content)
    set_age(path, age_ns)
    return path


def set_age(path: Path, age_ns: int) -> None:
    then = time.time_ns() - age_ns
    os.utime(path, ns=(then, then), follow_symlinks=False)


def tree(root: Path) -> set[str]:
    """Every path under `root` (symlinks listed, not followed), relative, as text."""
    found: set[str] = set()
    for directory, subdirectories, names in os.walk(root):
        for name in subdirectories + names:
            found.add(os.path.relpath(os.path.join(directory, name), root))
    return found


def secret_text() -> tuple[str, str]:
    """A note with a freshly minted credential on line 2, and that credential."""
    secret = mint_token().secret
    return f"# Deploy notes\ntoken = {secret}\n", secret


class OpenSpy:
    """Counts the files (not directories) `os.open` is asked to open, by name."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.names: list[str] = []
        real_open = os.open

        def spying_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            if not flags & os.O_DIRECTORY:
                self.names.append(os.path.basename(os.fsdecode(path)))
            return real_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", spying_open)


@pytest.fixture
def team(tmp_path: Path) -> Path:
    directory = tmp_path / "team"
    directory.mkdir()
    return directory


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder next to the team dir that nothing may ever read or write through."""
    directory = tmp_path / "outside"
    directory.mkdir()
    return directory


@pytest.fixture
def open_spy(monkeypatch: pytest.MonkeyPatch) -> Callable[[], OpenSpy]:
    return lambda: OpenSpy(monkeypatch)


# --- the walk -----------------------------------------------------------------------


def test_scan_checksums_every_regular_file_recursively_with_sorted_keys(team: Path) -> None:
    texts = {
        "README.md": "# Team memory\n",
        "a-b.md": "dash sorts before slash\n",
        "a/b.md": "nested\n",
        "decisions/db/postgres.md": "We chose PostgreSQL.\r\nCRLF kept as is.\n",
        "décisions/base de données.md": "Décision 🐘\n",
        "日本語/メモ.md": "メモ\n",
        "empty.md": "",
        "notes": "no extension is fine\n",
    }
    for key, text in texts.items():
        put(team / key, text)

    scan = scan_team_dir(team, {})

    assert scan.checksums == {key: entry_checksum(text) for key, text in texts.items()}
    assert list(scan.checksums) == sorted(texts)
    assert scan.skipped == []
    assert sorted(scan.cache) == sorted(texts)


def test_scan_reports_every_skip_reason(team: Path, outside: Path) -> None:
    put(outside / "elsewhere.md", "outside the team dir\n")
    text, _ = secret_text()
    put(team / "kept.md", "synced\n")
    put(team / "limit.md", "x" * MAX_ENTRY_BYTES)
    put(team / "big.md", "x" * (MAX_ENTRY_BYTES + 1))
    put(team / "latin1.md", "café".encode("latin-1"))
    put(team / "deploy.md", text)
    put(team / ".DS_Store", b"\x00\x01")
    put(team / ".git" / "config", "[core]\n")
    put(team / ".git" / "objects" / "ab" / "cdef", b"blob")
    for leftover in ("notes.md~", "notes.swp", "draft.tmp", "#notes.md#"):
        put(team / leftover, "leftover\n")
    (team / "link.md").symlink_to(outside / "elsewhere.md")
    (team / "dangling.md").symlink_to(outside / "missing.md")
    (team / "linked").symlink_to(outside, target_is_directory=True)
    os.mkfifo(team / "pipe.md")
    # Neither NFC nor NFD (an NFD name is read as its NFC key, see below).
    put(team / "mixed-\u00ea\u0323.md", "not NFC\n")
    put(team / "back\\slash.md", "backslash\n")
    put(team / "%2e%2e", "decodes to ..\n")
    put(team / "bell\x07.md", "control character\n")
    put(team / "mixed-\u00ea\u0323" / "one.md", "under an invalid directory\n")
    put(team / "mixed-\u00ea\u0323" / "two.md", "reported once, with the directory\n")
    raw_name = b"bad\xff.md"
    with open(os.path.join(os.fsencode(team), raw_name), "wb") as handle:
        handle.write(b"name is not UTF-8\n")
    [finding] = scan_text(text)

    scan = scan_team_dir(team, {})

    assert scan.checksums == {
        "kept.md": entry_checksum("synced\n"),
        "limit.md": entry_checksum("x" * MAX_ENTRY_BYTES),
    }
    expected = [
        Skipped("#notes.md#", "editor-leftover"),
        Skipped("%2e%2e", "invalid-key"),
        Skipped(".DS_Store", "hidden"),
        Skipped(".git", "hidden"),
        Skipped(os.fsdecode(raw_name), "invalid-key"),
        Skipped("back\\slash.md", "invalid-key"),
        Skipped("bell\x07.md", "invalid-key"),
        Skipped("big.md", "too-large"),
        Skipped("mixed-\u00ea\u0323.md", "invalid-key"),
        Skipped("dangling.md", "symlink"),
        Skipped("deploy.md", "secret", finding.rule, finding.label, 2),
        Skipped("draft.tmp", "editor-leftover"),
        Skipped("latin1.md", "not-utf8"),
        Skipped("link.md", "symlink"),
        Skipped("linked", "symlink"),
        Skipped("mixed-\u00ea\u0323", "invalid-key"),
        Skipped("notes.md~", "editor-leftover"),
        Skipped("notes.swp", "editor-leftover"),
        Skipped("pipe.md", "not-a-regular-file"),
    ]
    assert scan.skipped == sorted(expected, key=lambda skipped: skipped.key)
    # Only content verdicts are worth caching; name and stat verdicts cost nothing.
    assert sorted(scan.cache) == ["deploy.md", "kept.md", "latin1.md", "limit.md"]


def test_scan_respects_max_bytes(team: Path) -> None:
    put(team / "ten.md", "x" * 10)
    put(team / "eleven.md", "x" * 11)

    scan = scan_team_dir(team, {}, max_bytes=10)

    assert list(scan.checksums) == ["ten.md"]
    assert scan.skipped == [Skipped("eleven.md", "too-large")]


def test_secret_is_reported_by_rule_and_line_never_by_value(team: Path) -> None:
    text, secret = secret_text()
    put(team / "deploy.md", f"{text}again: {secret}\n")

    scan = scan_team_dir(team, {})

    assert [(skipped.reason, skipped.line) for skipped in scan.skipped] == [
        ("secret", 2),
        ("secret", 3),
    ]
    assert all(skipped.rule and skipped.label for skipped in scan.skipped)
    assert "deploy.md" not in scan.checksums
    assert secret not in repr(scan)
    assert secret not in json.dumps([asdict(skipped) for skipped in scan.skipped])
    assert secret not in json.dumps(scan.cache)


def test_symlinks_are_never_followed_or_read(
    team: Path, outside: Path, open_spy: Callable[[], OpenSpy]
) -> None:
    put(outside / "target.md", "outside\n")
    put(outside / "inner" / "deep.md", "outside, deeper\n")
    (team / "link.md").symlink_to(outside / "target.md")
    (team / "notes").symlink_to(outside, target_is_directory=True)
    (team / "inside-link").symlink_to(team, target_is_directory=True)
    spy = open_spy()

    scan = scan_team_dir(team, {})

    assert scan.checksums == {}
    assert scan.skipped == [
        Skipped("inside-link", "symlink"),
        Skipped("link.md", "symlink"),
        Skipped("notes", "symlink"),
    ]
    assert spy.names == []
    assert not {"target.md", "deep.md", "inner"} & set(spy.names)


def test_a_hidden_directory_is_reported_once_and_not_descended(
    team: Path, open_spy: Callable[[], OpenSpy]
) -> None:
    put(team / ".obsidian" / "workspace.json", "{}")
    put(team / "sub" / ".cache" / "x.md", "hidden below a visible directory\n")
    spy = open_spy()

    scan = scan_team_dir(team, {})

    assert scan.skipped == [Skipped(".obsidian", "hidden"), Skipped("sub/.cache", "hidden")]
    assert "workspace.json" not in spy.names
    assert "x.md" not in spy.names


def test_a_directory_too_deep_for_a_key_is_reported_once(team: Path) -> None:
    segments = ["d"] * 33
    put(team.joinpath(*segments, "x.md"), "too deep\n")
    put(team.joinpath(*segments[:31], "ok.md"), "32 segments: still a key\n")

    scan = scan_team_dir(team, {})

    assert list(scan.checksums) == ["/".join([*segments[:31], "ok.md"])]
    assert scan.skipped == [Skipped("/".join(segments), "invalid-key")]


def test_a_missing_team_dir_has_no_files(tmp_path: Path) -> None:
    assert scan_team_dir(tmp_path / "absent", {"gone.md": [1, 2, 3, None, None]}) == LocalScan()


def test_an_unreadable_file_is_skipped_not_fatal(
    team: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tests may run as root, who reads any mode, so the refusal is simulated.
    put(team / "locked.md", "private\n")
    put(team / "open.md", "public\n")
    real_open = os.open

    def refusing_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if path == "locked.md":
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing_open)

    scan = scan_team_dir(team, {})

    assert list(scan.checksums) == ["open.md"]
    assert scan.skipped == [Skipped("locked.md", "unreadable")]


@pytest.mark.parametrize(
    ("name", "leftover"),
    [
        ("notes.md~", True),
        ("notes.swp", True),
        ("x.tmp", True),
        ("#notes.md#", True),
        ("notes.md", False),
        ("notes.tmp.md", False),
        ("#notes.md", False),
        ("swp", False),
        # The temp files of atomic writes: `<name>.tmp.<pid>.<ms>` (Node tools) and
        # `<name>.tmp.<pid>.<12 hex>` (Claude Code 2.1, seen in tests/integration).
        ("MEMORY.md.tmp.12345.1764612345678", True),
        ("MEMORY.md.tmp.23903.03f1829ddceb", True),
        ("x.md.tmp.23903.26ea9c1cb090", True),
        ("MEMORY.md.tmp.23903.03F1829DDCEB", False),
        ("MEMORY.md.tmp.23903.xyz", False),
        ("x.tmp.0.0", True),
        ("draft.tmp", True),
        ("MEMORY.md.tmp.12345", False),
        ("MEMORY.md.tmp.12345.", False),
        ("MEMORY.md.tmp.12a45.1764612345678", False),
        ("MEMORY.md.tmp.1.2.md", False),
        ("MEMORY.md.TMP.1.2", False),
        # What merge and sync tools leave behind.
        ("note.md.orig", True),
        ("note.md.rej", True),
        ("note (conflicted copy).md", True),
        ("note (Alice's conflicted copy 2026-01-02).md", True),
        ("MEMORY (conflicted copy 2026-01-02).md", True),
        ("note.sync-conflict-20260102-120000-ABCDEFG.md", True),
        ("note.md.sync-conflict-20260102-120000-ABCDEFG", True),
        # Near misses: notes whose names only look like those.
        ("tmp.md", False),
        ("tmp", False),
        ("temp.md", False),
        ("origin.md", False),
        ("orig.md", False),
        ("note.orig.md", False),
        ("reject.md", False),
        ("conflict.md", False),
        ("conflicted copy.md", False),
        ("a conflicted copy (draft).md", False),
        ("note (Conflicted Copy).md", False),
        ("sync-conflict.md", False),
        ("2026.12.01.md", False),
        ("v1.2.3.md", False),
        ("12345.1764612345678", False),
    ],
)
def test_editor_leftover_names(name: str, leftover: bool) -> None:
    assert is_editor_leftover(name) is leftover


# --- the stat cache -----------------------------------------------------------------


def test_an_unchanged_file_is_not_opened_again(team: Path, open_spy: Callable[[], OpenSpy]) -> None:
    text, _ = secret_text()
    put(team / "a.md", "alpha\n")
    put(team / "sub" / "b.md", "beta\n")
    put(team / "deploy.md", text)
    put(team / "latin1.md", b"\xe9t\xe9")
    first = scan_team_dir(team, {})
    spy = open_spy()

    second = scan_team_dir(team, first.cache)

    assert spy.names == []  # not one file opened
    assert second == first
    assert {skipped.reason for skipped in second.skipped} == {"secret", "not-utf8"}


def test_the_cache_trusts_the_stat_not_the_content(team: Path) -> None:
    """Proof the cached checksum is used without a read: same size, mtime and inode
    but new bytes still give the old checksum (the known limit of any stat cache)."""
    path = put(team / "a.md", "alpha\n")
    first = scan_team_dir(team, {})
    before = path.stat()
    with open(path, "r+b") as handle:  # in place: the inode stays
        handle.write(b"ALPHA\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))

    second = scan_team_dir(team, first.cache)

    assert second.checksums == {"a.md": entry_checksum("alpha\n")}


def test_a_changed_file_is_read_again(team: Path, open_spy: Callable[[], OpenSpy]) -> None:
    path = put(team / "a.md", "alpha\n")
    put(team / "b.md", "beta\n")
    first = scan_team_dir(team, {})
    put(path, "alpha, edited\n", age_ns=HOUR_NS // 2)
    spy = open_spy()

    second = scan_team_dir(team, first.cache)

    assert spy.names == ["a.md"]
    assert second.checksums == {
        "a.md": entry_checksum("alpha, edited\n"),
        "b.md": entry_checksum("beta\n"),
    }
    assert second.cache["a.md"][0] == path.stat().st_size


def test_a_file_edited_into_a_secret_is_reread_and_skipped(team: Path) -> None:
    path = put(team / "a.md", "harmless\n")
    first = scan_team_dir(team, {})
    text, _ = secret_text()
    put(path, text, age_ns=HOUR_NS // 2)

    second = scan_team_dir(team, first.cache)

    assert second.checksums == {}
    assert [skipped.reason for skipped in second.skipped] == ["secret"]


def test_the_cache_drops_deleted_keys(team: Path) -> None:
    put(team / "a.md", "alpha\n")
    gone = put(team / "gone" / "b.md", "beta\n")
    first = scan_team_dir(team, {})
    gone.unlink()

    second = scan_team_dir(team, {**first.cache, "never-existed.md": first.cache["a.md"]})

    assert sorted(second.cache) == ["a.md"]
    assert list(second.checksums) == ["a.md"]


def test_a_freshly_modified_file_is_not_trusted_next_time(
    team: Path, open_spy: Callable[[], OpenSpy]
) -> None:
    """Racily clean: a file modified less than 2 s before it was read may change again
    in the same mtime tick with the same size, so its row is marked to be read again."""
    path = put(team / "a.md", "alpha\n", age_ns=0)
    first = scan_team_dir(team, {})
    assert first.cache["a.md"][0] == -1

    spy = open_spy()
    second = scan_team_dir(team, first.cache)
    assert spy.names == ["a.md"]
    assert second.checksums == first.checksums

    set_age(path, HOUR_NS)
    third = scan_team_dir(team, second.cache)
    assert third.cache["a.md"][0] == path.stat().st_size
    spy.names.clear()
    scan_team_dir(team, third.cache)
    assert spy.names == []


def test_cache_record_marks_racy_rows() -> None:
    now = 10 * HOUR_NS
    assert cache_record(5, now - HOUR_NS, 7, "c", recorded_ns=now) == [
        5,
        now - HOUR_NS,
        7,
        "c",
        None,
    ]
    assert cache_record(5, now - 1, 7, "c", recorded_ns=now)[0] == -1
    # An mtime in the future (clock skew) is racy too.
    assert cache_record(5, now + HOUR_NS, 7, "c", recorded_ns=now)[0] == -1
    row = cache_record(5, 0, 7, None, [("secret", "r", "l", 3)], recorded_ns=now)
    assert row == [5, 0, 7, None, [["secret", "r", "l", 3]]]


@pytest.mark.parametrize(
    "row",
    [
        [],
        "not a row",
        None,
        [6, 0, 0, "sha256:" + "0" * 64],
        [True, 0, 0, "sha256:" + "0" * 64, None],
        ["6", 0, 0, "sha256:" + "0" * 64, None],
        ["SIZE", "MTIME", "INODE", "not a checksum", None],
        ["SIZE", "MTIME", "INODE", None, []],
        ["SIZE", "MTIME", "INODE", None, [["too-large", None, None, None]]],
        ["SIZE", "MTIME", "INODE", None, [["secret", 1, None, None]]],
        ["SIZE", "MTIME", "INODE", None, ["secret"]],
        ["SIZE", "MTIME", "INODE", "sha256:" + "0" * 64, [["not-utf8", None, None, None]]],
    ],
)
def test_a_malformed_cache_row_is_a_miss(team: Path, row: Any) -> None:
    path = put(team / "a.md", "alpha\n")
    info = path.stat()
    placeholders = {"SIZE": info.st_size, "MTIME": info.st_mtime_ns, "INODE": info.st_ino}
    if isinstance(row, list):
        row = [placeholders.get(value, value) if isinstance(value, str) else value for value in row]

    scan = scan_team_dir(team, {"a.md": row})

    assert scan.checksums == {"a.md": entry_checksum("alpha\n")}
    assert scan.skipped == []
    assert scan.cache["a.md"] == [
        info.st_size,
        info.st_mtime_ns,
        info.st_ino,
        scan.checksums["a.md"],
        None,
    ]


def test_the_cache_survives_a_json_round_trip(team: Path, open_spy: Callable[[], OpenSpy]) -> None:
    text, _ = secret_text()
    put(team / "a.md", "alpha\n")
    put(team / "deploy.md", text)
    first = scan_team_dir(team, {})
    stored = json.loads(json.dumps(first.cache))
    spy = open_spy()

    second = scan_team_dir(team, stored)

    assert spy.names == []
    assert second == first


def test_a_too_large_file_is_judged_by_stat_without_reading(
    team: Path, open_spy: Callable[[], OpenSpy]
) -> None:
    put(team / "big.md", "x" * (MAX_ENTRY_BYTES + 1))
    spy = open_spy()

    scan = scan_team_dir(team, {})

    assert scan.skipped == [Skipped("big.md", "too-large")]
    assert "big.md" not in spy.names


# --- safe_target ----------------------------------------------------------------------

TRAVERSAL_KEYS = [
    "",
    "../x",
    "..",
    "./x",
    "%2e%2e/x",
    "%2E%2E/x",
    "%252e%252e/x",
    "a%2f..%2fx",
    "a/../../x",
    "a//b",
    "a/",
    "/abs",
    "/etc/passwd",
    "C:x",
    "c:/x",
    "a\\b",
    "..\\x",
    "．．／x",
    "%ef%bc%8e%ef%bc%8e/x",
    "cafe\u0301.md",
    "a\x00b",
    "a\nb",
]


@pytest.mark.parametrize("key", TRAVERSAL_KEYS)
def test_safe_target_refuses_traversal_in_every_encoding(team: Path, key: str) -> None:
    with pytest.raises(UnsafeKey) as refused:
        safe_target(team, key)
    assert refused.value.key == key
    assert refused.value.reason
    assert isinstance(refused.value, ValueError)


def test_safe_target_returns_the_path_inside_the_team_dir(team: Path) -> None:
    assert safe_target(team, "a/b/c.md") == team / "a" / "b" / "c.md"
    put(team / "a" / "b" / "c.md", "exists\n")
    assert safe_target(team, "a/b/c.md") == team / "a" / "b" / "c.md"
    assert safe_target(team / "not-yet", "x.md") == team / "not-yet" / "x.md"


def test_a_symlinked_directory_to_outside_is_refused_and_nothing_lands_there(
    team: Path, outside: Path
) -> None:
    (team / "notes").symlink_to(outside, target_is_directory=True)

    with pytest.raises(UnsafeKey, match="symbolic link"):
        safe_target(team, "notes/x.md")
    with pytest.raises(UnsafeKey):
        write_entry(team, "notes/x.md", "escaped?\n")
    with pytest.raises(UnsafeKey):
        write_entry(team, "notes/deeper/x.md", "escaped?\n")

    assert tree(outside) == set()


def test_a_symlinked_directory_pointing_inside_is_refused_too(team: Path) -> None:
    (team / "real").mkdir()
    (team / "alias").symlink_to(team / "real", target_is_directory=True)

    with pytest.raises(UnsafeKey, match="'alias' is a symbolic link"):
        safe_target(team, "alias/x.md")
    with pytest.raises(UnsafeKey):
        write_entry(team, "alias/x.md", "through an alias\n")
    assert tree(team / "real") == set()


@pytest.mark.parametrize("points", ["inside", "outside"])
def test_a_symlinked_target_file_is_refused_everywhere(
    team: Path, outside: Path, points: str
) -> None:
    target = put((team if points == "inside" else outside) / "real.md", "original\n")
    (team / "sub").mkdir()
    (team / "sub" / "x.md").symlink_to(target)

    with pytest.raises(UnsafeKey, match="symbolic link"):
        safe_target(team, "sub/x.md")
    with pytest.raises(UnsafeKey):
        write_entry(team, "sub/x.md", "overwritten?\n")
    with pytest.raises(UnsafeKey):
        read_entry(team, "sub/x.md")
    with pytest.raises(UnsafeKey):
        remove_entry(team, "sub/x.md")

    assert target.read_text(encoding="utf-8") == "original\n"
    assert (team / "sub" / "x.md").is_symlink()


def test_a_file_in_the_middle_or_a_directory_at_the_end_is_refused(team: Path) -> None:
    put(team / "a.md", "a file\n")
    (team / "dir.md").mkdir()

    with pytest.raises(UnsafeKey, match=r"'a\.md' is not a directory"):
        safe_target(team, "a.md/x.md")
    with pytest.raises(UnsafeKey, match="not a regular file"):
        safe_target(team, "dir.md")
    with pytest.raises(UnsafeKey):
        write_entry(team, "dir.md", "over a directory?\n")


def test_the_team_dir_itself_may_be_reached_through_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real-team"
    real.mkdir()
    linked = tmp_path / "linked-team"
    linked.symlink_to(real, target_is_directory=True)

    write_entry(linked, "a/b.md", "through the team dir's own link\n")

    assert (real / "a" / "b.md").read_text(encoding="utf-8") == "through the team dir's own link\n"
    assert read_entry(linked, "a/b.md") == "through the team dir's own link\n"
    assert scan_team_dir(linked, {}).checksums == {
        "a/b.md": entry_checksum("through the team dir's own link\n")
    }


def test_a_symlink_swapped_in_after_the_check_is_still_refused(
    team: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An attacker who replaces a directory with a symlink between `safe_target` and
    the write: the write opens each directory with O_NOFOLLOW, so it is refused."""
    put(team / "notes" / "x.md", "original\n")
    real_safe_target = team_files.safe_target

    def racing_safe_target(team_dir: Path, key: str) -> Path:
        path = real_safe_target(team_dir, key)
        (team / "notes").rename(team / "moved")
        (team / "notes").symlink_to(outside, target_is_directory=True)
        return path

    monkeypatch.setattr(team_files, "safe_target", racing_safe_target)

    with pytest.raises(UnsafeKey, match="'notes' is a symbolic link"):
        write_entry(team, "notes/x.md", "escaped?\n")
    assert tree(outside) == set()

    (team / "notes").unlink()
    (team / "moved").rename(team / "notes")
    with pytest.raises(UnsafeKey):
        read_entry(team, "notes/x.md")
    (team / "notes").unlink()
    (team / "moved").rename(team / "notes")
    with pytest.raises(UnsafeKey):
        remove_entry(team, "notes/x.md")
    assert tree(outside) == set()


def test_a_file_swapped_for_a_symlink_after_the_check_is_not_read(
    team: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(outside / "private.md", "not for the team\n")
    put(team / "x.md", "original\n")
    real_safe_target = team_files.safe_target

    def racing_safe_target(team_dir: Path, key: str) -> Path:
        path = real_safe_target(team_dir, key)
        (team / "x.md").unlink()
        (team / "x.md").symlink_to(outside / "private.md")
        return path

    monkeypatch.setattr(team_files, "safe_target", racing_safe_target)

    with pytest.raises(UnsafeKey, match="symbolic link"):
        read_entry(team, "x.md")


def test_a_symlink_planted_where_a_directory_is_about_to_be_made_is_refused(
    team: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_mkdir = os.mkdir

    def racing_mkdir(path: Any, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        os.symlink(outside, path, dir_fd=dir_fd)
        real_mkdir(path, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "mkdir", racing_mkdir)

    with pytest.raises(UnsafeKey, match="'new' is a symbolic link"):
        write_entry(team, "new/x.md", "escaped?\n")
    assert tree(outside) == set()


# --- write_entry, read_entry, remove_entry ---------------------------------------------


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_write_entry_is_atomic_and_returns_the_written_stat(tmp_path: Path) -> None:
    team = tmp_path / "missing" / "team"
    text = "Décision 🐘\r\nline two\n"

    size, mtime_ns, inode = write_entry(team, "a/b/c.md", text)

    path = team / "a" / "b" / "c.md"
    info = os.stat(path)
    assert (size, mtime_ns, inode) == (info.st_size, info.st_mtime_ns, info.st_ino)
    assert path.read_bytes() == text.encode("utf-8")
    assert stat.S_IMODE(info.st_mode) == 0o644 & ~current_umask()
    assert tree(team) == {"a", "a/b", "a/b/c.md"}  # no temp file left behind


def test_write_entry_replaces_an_existing_file_and_keeps_its_mode(team: Path) -> None:
    path = put(team / "a.md", "old\n")
    path.chmod(0o600)
    old_inode = path.stat().st_ino

    write_entry(team, "a.md", "new\n")

    assert path.read_text(encoding="utf-8") == "new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.stat().st_ino != old_inode  # a rename, not an in-place rewrite
    assert tree(team) == {"a.md"}


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(
    team: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(team / "a.md", "old\n")

    def failing_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "fsync", failing_fsync)

    with pytest.raises(OSError, match="I/O error"):
        write_entry(team, "a.md", "new\n")
    assert (team / "a.md").read_text(encoding="utf-8") == "old\n"
    assert tree(team) == {"a.md"}


def test_text_that_cannot_be_encoded_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(UnicodeEncodeError):
        write_entry(tmp_path / "team", "a.md", "lone surrogate \ud800")
    assert tree(tmp_path) == set()


def test_a_written_file_scans_to_the_same_checksum_and_its_row_is_racy(team: Path) -> None:
    text = "pulled from the server\n"
    size, mtime_ns, inode = write_entry(team, "pulled.md", text)
    row = cache_record(size, mtime_ns, inode, entry_checksum(text))
    assert row[0] == -1  # just written: read it once more before trusting the stat

    scan = scan_team_dir(team, {"pulled.md": row})

    assert scan.checksums == {"pulled.md": entry_checksum(text)}


def test_read_entry_reads_text_and_refuses_what_it_should(team: Path, outside: Path) -> None:
    put(team / "décisions" / "db.md", "PostgreSQL 🐘\n")
    put(team / "latin1.md", "café".encode("latin-1"))
    put(outside / "x.md", "outside\n")
    (team / "linked").symlink_to(outside, target_is_directory=True)
    os.mkfifo(team / "pipe.md")

    assert read_entry(team, "décisions/db.md") == "PostgreSQL 🐘\n"
    with pytest.raises(UnicodeDecodeError):
        read_entry(team, "latin1.md")
    with pytest.raises(FileNotFoundError):
        read_entry(team, "absent.md")
    with pytest.raises(FileNotFoundError):
        read_entry(team, "absent/x.md")
    with pytest.raises(UnsafeKey):
        read_entry(team, "linked/x.md")
    with pytest.raises(UnsafeKey, match="not a regular file"):
        read_entry(team, "pipe.md")
    with pytest.raises(UnsafeKey):
        read_entry(team, "../outside/x.md")


def test_remove_entry_prunes_emptied_parents_but_not_the_team_dir(team: Path) -> None:
    put(team / "a" / "b" / "c.md", "c\n")
    put(team / "a" / "keep.md", "keep\n")
    put(team / "solo" / "deep" / "only.md", "only\n")

    remove_entry(team, "a/b/c.md")
    remove_entry(team, "solo/deep/only.md")

    assert tree(team) == {"a", "a/keep.md"}
    remove_entry(team, "a/keep.md")
    assert team.is_dir()
    assert tree(team) == set()


def test_remove_entry_of_something_already_gone_is_quiet(tmp_path: Path) -> None:
    team = tmp_path / "team"
    remove_entry(team, "never/was.md")  # no team dir at all
    team.mkdir()
    remove_entry(team, "never/was.md")
    put(team / "dir" / "other.md", "stays\n")
    remove_entry(team, "dir/was.md")
    assert tree(team) == {"dir", "dir/other.md"}


def test_remove_entry_refuses_unsafe_keys(team: Path, outside: Path) -> None:
    put(outside / "victim.md", "keep me\n")
    (team / "linked").symlink_to(outside, target_is_directory=True)

    with pytest.raises(UnsafeKey):
        remove_entry(team, "../outside/victim.md")
    with pytest.raises(UnsafeKey):
        remove_entry(team, "linked/victim.md")
    assert (outside / "victim.md").read_text(encoding="utf-8") == "keep me\n"


# --- property: nothing ever lands outside the team dir ---------------------------------

KEY_PIECES = [
    "a", "b", "x.md", ".", "..", "/", "\\", ":", "C:", "%", "2e", "2f", "%2e", "%2F",
    "%25", "．", "／", "＼", "e\u0301", "é", "\x00", "~", " ", "out", "inlink", "file.md",
]  # fmt: skip


@contextmanager
def sandbox() -> Iterator[tuple[Path, Path]]:
    """A fresh team dir holding a symlink out and one in, next to a sibling folder."""
    with tempfile.TemporaryDirectory() as name:
        root = Path(name)
        team = root / "team"
        put(team / "file.md", "a file\n")
        (team / "sub").mkdir()
        (root / "outside").mkdir()
        (team / "out").symlink_to(root / "outside", target_is_directory=True)
        (team / "inlink").symlink_to(team / "sub", target_is_directory=True)
        # The NFD spelling of the key piece "é": a key through it must not follow it.
        (team / "e\u0301").symlink_to(root / "outside", target_is_directory=True)
        yield root, team


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(KEY_PIECES), min_size=1, max_size=8).map("".join))
def test_any_key_is_refused_or_stays_inside_the_team_dir(key: str) -> None:
    with sandbox() as (root, team):
        outside_before = tree(root) - {path for path in tree(root) if path.startswith("team/")}
        try:
            target = safe_target(team, key)
        except UnsafeKey:
            target = None
        if target is not None:
            real_team = os.path.realpath(team)
            assert os.path.commonpath([os.path.realpath(target), real_team]) == real_team
            write_entry(team, key, "written\n")
            assert read_entry(team, key) == "written\n"
            assert os.path.realpath(target).startswith(real_team + os.sep)
            remove_entry(team, key)
        else:
            with pytest.raises(UnsafeKey):
                write_entry(team, key, "written\n")
        outside_after = tree(root) - {path for path in tree(root) if path.startswith("team/")}
        assert outside_after == outside_before
        assert tree(root / "outside") == set()


def test_write_entries_writes_many_and_refuses_only_the_unsafe(tmp_path: Path) -> None:
    from sync_client.team_files import write_entries

    team = tmp_path / "team"
    outside = tmp_path / "outside"
    outside.mkdir()
    team.mkdir()
    (team / "link").symlink_to(outside)
    texts = {f"notes/n{index:02}.md": f"note {index}\n" for index in range(20)}
    texts["link/escape.md"] = "no\n"
    outcome = write_entries(team, texts)
    assert isinstance(outcome.pop("link/escape.md"), UnsafeKey)
    assert list(outside.iterdir()) == []
    for key, stat_result in outcome.items():
        assert isinstance(stat_result, tuple)
        written = (team / key).stat()
        assert stat_result == (written.st_size, written.st_mtime_ns, written.st_ino)
        assert (team / key).read_text() == texts[key]
    assert not [path for path in team.rglob(".memsync-*")]


# --- decomposed (NFD) names, as macOS writes them --------------------------------------

CAFE = "caf\u00e9.md"  # NFC: the key
CAFE_NFD = "cafe\u0301.md"  # the same name as macOS spells it on disk
RESUME = "r\u00e9sum\u00e9"
RESUME_NFD = "re\u0301sume\u0301"


def names_in(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


def test_an_nfd_name_is_scanned_under_its_nfc_key(team: Path) -> None:
    put(team / CAFE_NFD, "from a Mac\n")
    put(team / RESUME_NFD / "notes.md", "in an NFD folder\n")
    put(team / RESUME_NFD / CAFE_NFD, "both\n")

    scan = scan_team_dir(team, {})

    assert scan.checksums == {
        CAFE: entry_checksum("from a Mac\n"),
        f"{RESUME}/{CAFE}": entry_checksum("both\n"),
        f"{RESUME}/notes.md": entry_checksum("in an NFD folder\n"),
    }
    assert scan.skipped == []
    assert sorted(scan.cache) == sorted(scan.checksums)
    # The stat cache works under the NFC key: nothing is read a second time.
    again = scan_team_dir(team, scan.cache)
    assert again.checksums == scan.checksums


def test_an_nfd_file_is_read_written_and_removed_under_its_nfc_key(team: Path) -> None:
    put(team / CAFE_NFD, "mine\n", age_ns=HOUR_NS)
    (team / CAFE_NFD).chmod(0o600)
    assert read_entry(team, CAFE) == "mine\n"
    assert safe_target(team, CAFE) == team / CAFE_NFD

    size, _, inode = write_entry(team, CAFE, "a teammate's edit\n")

    assert names_in(team) == [CAFE_NFD]  # the same file, not a second one beside it
    assert (team / CAFE_NFD).read_text(encoding="utf-8") == "a teammate's edit\n"
    assert os.stat(team / CAFE_NFD).st_ino == inode
    assert size == len(b"a teammate's edit\n")
    assert stat.S_IMODE(os.stat(team / CAFE_NFD).st_mode) == 0o600
    assert scan_team_dir(team, {}).checksums == {CAFE: entry_checksum("a teammate's edit\n")}
    remove_entry(team, CAFE)
    assert names_in(team) == []


def test_nfd_directories_are_used_not_doubled(team: Path) -> None:
    put(team / RESUME_NFD / "notes.md", "old\n")

    write_entry(team, f"{RESUME}/notes.md", "new\n")
    write_entry(team, f"{RESUME}/{CAFE}", "another file in the same folder\n")

    assert names_in(team) == [RESUME_NFD]
    assert names_in(team / RESUME_NFD) == sorted(["notes.md", CAFE])
    assert read_entry(team, f"{RESUME}/notes.md") == "new\n"
    assert safe_target(team, f"{RESUME}/new.md") == team / RESUME_NFD / "new.md"
    remove_entry(team, f"{RESUME}/notes.md")
    remove_entry(team, f"{RESUME}/{CAFE}")
    assert names_in(team) == []  # the emptied NFD folder is pruned too


def test_bulk_writes_go_to_the_nfd_files_too(team: Path) -> None:
    put(team / CAFE_NFD, "old\n")
    put(team / RESUME_NFD / "notes.md", "old\n")
    texts = {CAFE: "one\n", f"{RESUME}/notes.md": "two\n", "plain.md": "three\n"}

    outcome = write_entries(team, texts)

    assert all(isinstance(result, tuple) for result in outcome.values()), outcome
    assert names_in(team) == sorted([CAFE_NFD, RESUME_NFD, "plain.md"])
    assert scan_team_dir(team, {}).checksums == {
        key: entry_checksum(text) for key, text in texts.items()
    }


def test_a_new_key_is_written_with_its_nfc_name(team: Path) -> None:
    write_entry(team, f"{RESUME}/{CAFE}", "new\n")
    assert names_in(team) == [RESUME]
    assert names_in(team / RESUME) == [CAFE]


def test_when_both_spellings_exist_the_nfc_one_is_the_entry(team: Path) -> None:
    put(team / CAFE, "nfc\n")
    put(team / CAFE_NFD, "nfd\n")
    put(team / RESUME / "a.md", "in the NFC folder\n")
    put(team / RESUME_NFD / "b.md", "in the NFD folder\n")

    scan = scan_team_dir(team, {})

    assert scan.checksums == {
        CAFE: entry_checksum("nfc\n"),
        f"{RESUME}/a.md": entry_checksum("in the NFC folder\n"),
    }
    assert scan.skipped == sorted(
        [Skipped(CAFE_NFD, "duplicate-name"), Skipped(RESUME_NFD, "duplicate-name")],
        key=lambda skipped: skipped.key,
    )
    write_entry(team, CAFE, "written\n")
    assert (team / CAFE).read_text(encoding="utf-8") == "written\n"
    assert (team / CAFE_NFD).read_text(encoding="utf-8") == "nfd\n"


def test_an_nfd_symlink_is_never_followed(team: Path, outside: Path) -> None:
    put(outside / "victim.md", "keep me\n")
    (team / RESUME_NFD).symlink_to(outside, target_is_directory=True)
    (team / CAFE_NFD).symlink_to(outside / "victim.md")

    scan = scan_team_dir(team, {})

    assert scan.checksums == {}
    assert {item.reason for item in scan.skipped} == {"symlink"}
    for key in (CAFE, f"{RESUME}/x.md"):
        with pytest.raises(UnsafeKey, match="symbolic link"):
            safe_target(team, key)
        with pytest.raises(UnsafeKey):
            write_entry(team, key, "pwned\n")
        with pytest.raises(UnsafeKey):
            read_entry(team, key)
        with pytest.raises(UnsafeKey):
            remove_entry(team, key)
    assert names_in(outside) == ["victim.md"]
    assert (outside / "victim.md").read_text(encoding="utf-8") == "keep me\n"


def test_writing_an_nfc_key_never_lists_a_directory(
    team: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(team / CAFE_NFD, "old\n")
    put(team / "plain.md", "old\n")

    def no_listing(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("a write listed a directory")

    monkeypatch.setattr(os, "scandir", no_listing)
    monkeypatch.setattr(os, "listdir", no_listing)
    write_entry(team, "plain.md", "new\n")
    write_entry(team, CAFE, "new\n")
    write_entry(team, f"{RESUME}/new.md", "new\n")
    assert read_entry(team, CAFE) == "new\n"
    remove_entry(team, CAFE)
