"""sync_client.notes: search ranking, the note cache, and every refusal of a write."""

from __future__ import annotations

import os
import random
import string
from pathlib import Path

import pytest

from memsync_protocol.keys import MAX_ENTRY_BYTES
from sync_client.config import ClientConfig
from sync_client.notes import (
    NoteCache,
    NoteError,
    NoteRefused,
    index_view,
    push_words,
    read_note,
    search,
    write_refusal,
)
from sync_client.push import PushResult
from sync_client.state import SyncState


def aws_access_key() -> str:
    """An AWS access key ID the scanner flags (random, so never a real one)."""
    rng = random.Random(7)
    return "AKIA" + "".join(rng.choices(string.ascii_uppercase + "234567", k=16))


def _note(name: str, description: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n\n{body}\n"


def _write(team: Path, key: str, text: str, *, age_seconds: int = 60) -> None:
    path = team / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    # Older than the racy window, as notes are: the cache trusts their stat.
    then = path.stat().st_mtime - age_seconds
    os.utime(path, (then, then))


@pytest.fixture
def team(tmp_path: Path) -> Path:
    team = tmp_path / "team"
    team.mkdir()
    body = "The staging cluster runs on Kubernetes. " * 20
    _write(team, "body-only.md", _note("Cluster notes", "how the cluster is set up", body))
    _write(team, "named.md", _note("Kubernetes upgrades", "when we upgrade", "Every quarter."))
    _write(team, "described.md", _note("Upgrades", "the kubernetes version policy", "N-1."))
    _write(team, "unrelated.md", _note("Lunch", "where we eat", "Tacos on Friday."))
    _write(team, "MEMORY.md", "- [Lunch](unrelated.md) — kubernetes is not here\n")
    return team


def test_a_name_or_description_match_outranks_a_body_only_match(team: Path) -> None:
    hits = search(NoteCache(team).notes(), "kubernetes")
    assert [hit.key for hit in hits] == ["named.md", "described.md", "body-only.md"]
    assert hits[0].score > hits[1].score > hits[2].score > 0
    assert hits[0].name == "Kubernetes upgrades"
    assert hits[2].snippet.startswith("The staging cluster runs on Kubernetes.")
    assert len(hits[2].snippet) <= 162


def test_ties_are_in_key_order_and_the_order_is_stable(tmp_path: Path) -> None:
    team = tmp_path / "team"
    for key in ("c.md", "a.md", "b.md"):
        _write(team, key, _note("Same", "the same note", "Identical body."))
    notes = NoteCache(team).notes()
    first = search(notes, "identical")
    assert [hit.key for hit in first] == ["a.md", "b.md", "c.md"]
    assert search(notes, "identical") == first
    assert search(notes, "identical", limit=2) == first[:2]


def test_the_index_is_not_a_note_and_nothing_matches_nothing(team: Path) -> None:
    notes = NoteCache(team).notes()
    assert "MEMORY.md" not in notes
    assert search(notes, "") == []
    assert search(notes, "zeppelin") == []
    view = index_view(team, notes)
    assert (view.exists, view.notes) == (True, 4)
    assert "4 notes" in view.summary()


def test_the_cache_rereads_only_changed_files_and_forgets_deleted_ones(team: Path) -> None:
    cache = NoteCache(team)
    first = cache.notes()
    assert cache.notes()["named.md"] is first["named.md"]  # unchanged: not read again
    _write(team, "named.md", _note("Helm charts", "chart layout", "Charts live in deploy/."))
    (team / "unrelated.md").unlink()
    _write(team, ".hidden.md", "hidden\n")
    _write(team, "draft.md~", "leftover\n")
    again = cache.notes()
    assert again["named.md"].name == "Helm charts"
    assert again["described.md"] is first["described.md"]
    assert set(again) == {"body-only.md", "described.md", "named.md"}


@pytest.mark.parametrize(
    ("key", "words"),
    [
        ("../outside.md", "'..' segment"),
        ("/etc/passwd", "absolute path"),
        ("a\\b.md", "backslash"),
        ("%2e%2e/x.md", "decodes"),
    ],
)
def test_read_never_leaves_the_team_dir(team: Path, key: str, words: str) -> None:
    (team.parent / "outside.md").write_text("not yours\n", encoding="utf-8")
    with pytest.raises(NoteError, match=words):
        read_note(team, key)


def test_read_a_missing_note_or_through_a_symlink_is_refused(team: Path) -> None:
    with pytest.raises(NoteError, match=r"there is no note nope\.md"):
        read_note(team, "nope.md")
    (team.parent / "secret.md").write_text("outside\n", encoding="utf-8")
    (team / "link.md").symlink_to(team.parent / "secret.md")
    with pytest.raises(NoteError, match="symbolic link"):
        read_note(team, "link.md")
    assert read_note(team, "named.md").startswith("---\nname: Kubernetes upgrades")


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("../x.md", "invalid-key"),
        ("/abs.md", "invalid-key"),
        ("a\\b.md", "invalid-key"),
        (".hidden.md", "hidden"),
        ("notes/.git/config", "hidden"),
        ("draft.md.swp", "editor-leftover"),
        ("backup.md~", "editor-leftover"),
        ("MEMORY.md.tmp.12345.1764612345678", "editor-leftover"),
        ("notes/db (conflicted copy).md", "editor-leftover"),
    ],
)
def test_a_key_no_sync_would_send_is_refused(team: Path, key: str, reason: str) -> None:
    rows = write_refusal(team, key, "fine\n", SyncState())
    assert [row["reason"] for row in rows] == [reason]
    message = str(NoteRefused(key, rows))
    assert "nothing was written" in message


def test_a_secret_is_refused_with_its_rule_and_line_never_its_value(team: Path) -> None:
    secret = aws_access_key()
    text = f"# deploy\n\naws_access_key_id = {secret}\n"
    rows = write_refusal(team, "creds.md", text, SyncState())
    assert [(row["reason"], row["line"]) for row in rows] == [("secret", 3)]
    message = str(NoteRefused("creds.md", rows))
    assert "on line 3" in message
    assert str(rows[0]["label"]) in message
    assert secret not in message
    assert secret[4:] not in message


def test_text_and_size_rules_are_a_push_s_including_a_limit_the_server_taught(
    team: Path,
) -> None:
    rows = write_refusal(team, "nul.md", "a\x00b\n", SyncState())
    assert [row["reason"] for row in rows] == ["invalid-text"]
    big = "x" * (MAX_ENTRY_BYTES + 1)
    rows = write_refusal(team, "big.md", big, SyncState())
    assert [row["reason"] for row in rows] == ["too-large"]
    assert "250,000" in str(NoteRefused("big.md", rows))
    taught = SyncState(max_entry_bytes=1_000)
    rows = write_refusal(team, "mid.md", "y" * 1_001, taught)
    assert [(row["reason"], row["max_bytes"]) for row in rows] == [("too-large", 1_000)]
    assert write_refusal(team, "mid.md", "y" * 1_000, taught) == []


def test_a_file_folder_clash_and_memsyncignore_are_refused(team: Path) -> None:
    rows = write_refusal(team, "named.md/inner.md", "x\n", SyncState(), ["named.md"])
    assert [row["reason"] for row in rows] == ["path-clash"]
    (team / ".memsyncignore").write_text("scratch/\n", encoding="utf-8")
    rows = write_refusal(team, "scratch/today.md", "x\n", SyncState())
    assert [row["reason"] for row in rows] == ["ignored"]
    assert write_refusal(team, "MEMORY.md", "- [a](a.md) — a\n", SyncState()) == []


def test_what_a_push_did_with_a_note_is_said_truly_to_the_agent(tmp_path: Path) -> None:
    """A proposal waiting, and one rejected whose text the agent wrote again before a
    pull put the team's back: neither is "the server has this text already"."""
    config = ClientConfig("http://s.test", "t", "acme/app", tmp_path, tmp_path / "state")
    waiting = PushResult(waiting=["notes/a.md"])
    assert push_words(config, "notes/a.md", waiting)[0] == "proposed"
    row = {"key": "notes/a.md", "id": 4, "status": "rejected", "by": "carol", "reason": "no"}
    sync, words = push_words(config, "notes/a.md", PushResult(reviewed=[row]))
    assert sync == "skipped"
    assert words.startswith("written here, not proposed again: notes/a.md: rejected by carol")
    assert push_words(config, "notes/a.md", PushResult())[0] == "unchanged"
