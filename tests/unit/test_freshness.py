"""`sync_client.freshness.report`: the pure parts on texts, the check on small real git repos."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from memsync_protocol.checksums import entry_checksum
from memsync_protocol.keys import MAX_ENTRY_BYTES
from sync_client.freshness import report as freshness
from sync_client.freshness import stale_notes
from sync_client.freshness.report import History, changed_ranges, check, check_one

DAY = 86_400
# 2026-01-01T12:00:00Z
START = 1_767_268_800


def _git(checkout: Path, *arguments: str, at: int = START) -> str:
    stamp = f"@{at} +0000"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(checkout),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "T",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "T",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_AUTHOR_DATE": stamp,
        "GIT_COMMITTER_DATE": stamp,
    }
    done = subprocess.run(
        ["git", *arguments], cwd=checkout, env=env, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def _repo(tmp_path: Path) -> tuple[Path, Path]:
    checkout, team = tmp_path / "repo", tmp_path / "team"
    (checkout / "src").mkdir(parents=True)
    team.mkdir()
    (checkout / "src" / "a.py").write_text("".join(f"x{n} = {n}\n" for n in range(1, 31)))
    _git(checkout, "init", "-q")
    _git(checkout, "add", ".")
    _git(checkout, "commit", "-qm", "one")
    return checkout, team


def _note(team: Path, key: str, text: str, at: float) -> None:
    path = team / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (at, at))


def test_changed_ranges_are_read_in_the_old_files_lines() -> None:
    old = b"".join(b"line %d\n" % n for n in range(1, 31))
    new = old.replace(b"line 10\n", b"ten\n").replace(b"line 20\n", b"line 20\nnew\nnew\n")
    new = new.replace(b"line 25\nline 26\nline 27\n", b"")
    ranges = changed_ranges(old, new)
    assert ranges == [(10, 1), (20, 0), (25, 3)]
    overlaps = freshness._overlaps
    assert overlaps(ranges, (10, 10))
    assert not overlaps(ranges, (11, 19))
    # An insertion after line 20 lands inside 20-21, not after 21.
    assert overlaps(ranges, (20, 21))
    assert not overlaps(ranges, (21, 24))
    assert overlaps(ranges, (27, 40))
    assert changed_ranges(old, old) == []


def test_history_finds_the_commit_of_a_time_and_counts_the_commits_since() -> None:
    log = "".join(
        f"\x1e{sha * 40}\x1f{stamp}\x1f{subject}\n\n{files}\n"
        for sha, stamp, subject, files in (
            ("c", 300, "third", "src/a.py"),
            ("b", 200, "second", "src/a.py\nsrc/b.py"),
            ("a", 100, "first", "src/a.py\nsrc/b.py"),
        )
    )
    history = History.parse(log)
    assert history.at_time(50) is None
    assert history.at_time(100) == "a" * 40
    assert history.at_time(250) == "b" * 40
    count, newest = history.since("a" * 40, "src/a.py")
    assert count == 2
    assert newest is not None
    assert newest.subject == "third"
    assert history.since("c" * 40, "src/a.py") == (0, None)


def test_outside_a_git_checkout_nothing_is_checked(tmp_path: Path) -> None:
    _note(tmp_path, "n.md", "src/a.py:3\n---\nexpires: 2000-01-01\n", START)
    report = check(tmp_path, tmp_path, None)
    assert report.stale == []
    assert report.unchecked is not None
    assert "not a git checkout" in report.unchecked


def test_whole_files_ranges_reverts_and_expiry(tmp_path: Path) -> None:
    checkout, team = _repo(tmp_path)
    written = START + DAY // 2
    _note(team, "whole.md", "All of `src/a.py` matters.\n", written)
    _note(team, "far.md", "See src/a.py:28-30.\n", written)
    _note(team, "expired.md", "---\nname: e\nexpires: 2026-01-02\n---\nhi\n", written)
    _note(team, "review.md", "---\nreview-after: 3 days\n---\nhi\n", written)
    _note(team, "later.md", "src/a.py:1\n", START + 10 * DAY)
    # A bare path in a sentence names a file without citing it; a description's path
    # does not make the body's line citation one of the whole file.
    _note(team, "prose.md", "See src/a.py for the values.\n", written)
    _note(team, "described.md", "---\ndescription: `src/a.py`\n---\n`src/a.py:28`\n", written)

    source = checkout / "src" / "a.py"
    original = source.read_text()
    source.write_text(original.replace("x1 = 1\n", "x1 = 100\n"))
    _git(checkout, "commit", "-qam", "two", at=START + DAY)
    now = START + 2 * DAY
    stale = {note.key: note for note in check(checkout, team, None, now=now).stale}
    assert sorted(stale) == ["expired.md", "whole.md"]
    assert [reason.kind for reason in stale["whole.md"].reasons] == ["changed"]
    assert stale["expired.md"].reasons[0].words().startswith("expired on 2026-01-02")
    # An expired note is said to be expired, not to cite changed code.
    _, said = check_one(checkout, team, None, "expired.md", (team / "expired.md").read_text())
    assert said.startswith("may no longer be true: expired on 2026-01-02")
    assert said.endswith("check that it still holds first")
    _, said = check_one(checkout, team, None, "whole.md", (team / "whole.md").read_text())
    assert said.endswith("check it against the code first")
    # Three days after it was written, the review is due.
    later = {note.key for note in check(checkout, team, None, now=START + 4 * DAY).stale}
    assert "review.md" in later

    # Changed and changed back: the code is what the note saw, so it is fresh again.
    source.write_text(original)
    _git(checkout, "commit", "-qam", "three", at=START + DAY + 60)
    stale_keys = {note.key for note in check(checkout, team, None, now=now).stale}
    assert stale_keys == {"expired.md"}


def test_a_record_gives_the_commit_while_the_note_is_unchanged(tmp_path: Path) -> None:
    checkout, team = _repo(tmp_path)
    first = _git(checkout, "rev-parse", "HEAD")
    text = "The first line is src/a.py:1.\n"
    # Written (by its mtime) after the change below; recorded at the first commit.
    _note(team, "n.md", text, START + 5 * DAY)
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    record = {"checksum": entry_checksum(text), "commit": first, "at": START}
    (state_dir / freshness.RECORD_FILE).write_text(json.dumps({"notes": {"n.md": record}}))
    source = checkout / "src" / "a.py"
    source.write_text(source.read_text().replace("x1 = 1\n", "x1 = 2\n"))
    _git(checkout, "commit", "-qam", "two", at=START + DAY)

    [note] = check(checkout, team, state_dir).notes
    assert note.written_at.source == "record"
    assert note.stale
    # Once the note is edited the record no longer speaks for it: its mtime does.
    _note(team, "n.md", text + "Still true.\n", START + 5 * DAY)
    [note] = check(checkout, team, state_dir).notes
    assert note.written_at.source == "mtime"
    assert not note.stale


def test_the_cached_answer_follows_head_and_the_notes(tmp_path: Path) -> None:
    checkout, team = _repo(tmp_path)
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    _note(team, "n.md", "src/a.py:1\n", START + DAY // 2)
    assert stale_notes._head_from_files(checkout) == _git(checkout, "rev-parse", "HEAD")
    assert stale_notes.stale_kinds_cached(checkout, team, state_dir) == {}
    source = checkout / "src" / "a.py"
    source.write_text(source.read_text().replace("x1 = 1\n", "x1 = 2\n"))
    _git(checkout, "commit", "-qam", "two", at=START + DAY)
    assert stale_notes.stale_kinds_cached(checkout, team, state_dir) == {"n.md": ["lines"]}
    _git(checkout, "pack-refs", "--all")
    assert stale_notes._head_from_files(checkout) == _git(checkout, "rev-parse", "HEAD")
    _note(team, "n.md", "src/a.py:1 again\n", time.time())
    assert stale_notes.stale_kinds_cached(checkout, team, state_dir) == {}


def test_the_note_size_limit_is_the_protocols() -> None:
    assert freshness._MAX_NOTE_BYTES == MAX_ENTRY_BYTES


def test_the_servers_source_replaces_a_pull_record_for_the_same_text(tmp_path: Path) -> None:
    from sync_client.freshness.sources import learn

    checkout, team = _repo(tmp_path)
    first = _git(checkout, "rev-parse", "HEAD")
    source = checkout / "src" / "a.py"
    source.write_text(source.read_text().replace("x1 = 1\n", "x1 = 2\n"))
    _git(checkout, "commit", "-qam", "two", at=START + DAY)
    second = _git(checkout, "rev-parse", "HEAD")
    text, other = "The first line is src/a.py:1.\n", "Cites src/a.py:1 too.\n"
    _note(team, "n.md", text, START + 5 * DAY)
    _note(team, "m.md", other, START + 5 * DAY)
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    pulled = {"checksum": entry_checksum(text), "commit": second, "at": START + 2 * DAY}
    (state_dir / freshness.RECORD_FILE).write_text(json.dumps({"notes": {"n.md": pulled}}))
    assert not check(checkout, team, state_dir).stale

    row = {"checksum": entry_checksum(text), "at": "2026-01-01T12:00:00Z", "author": "alice"}
    # A version without a commit only says a time: the pull's commit stands.
    assert learn(team, state_dir, {"n.md": {**row, "commit": None}}) == 0
    # The writer's commit does replace it; a row for another text is ignored.
    sources = {"n.md": {**row, "commit": first}, "m.md": {**row, "commit": first}}
    assert learn(team, state_dir, sources) == 1
    assert learn(team, state_dir, sources) == 0  # nothing new: the file is not rewritten
    report = check(checkout, team, state_dir)
    assert [note.key for note in report.stale] == ["n.md"]
    written = report.of("n.md")
    assert written is not None
    assert (written.written_at.source, written.written_at.commit) == ("server", first)
    # A commit this checkout lacks (another clone's) counts by the version's time.
    unknown = {"m.md": {**row, "checksum": entry_checksum(other), "commit": "e" * 40}}
    assert learn(team, state_dir, unknown) == 1
    judged = check(checkout, team, state_dir).of("m.md")
    assert judged is not None
    assert (judged.base, judged.stale) == (first, True)
