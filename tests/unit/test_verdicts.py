"""One verdict per file: the scan's (`verdicts.judge_bytes`, the name rules) is what every
surface says of a file. `status` and `push` show the scan's skip rows, the index check
counts only what the scan syncs, and MCP's `write_note` asks the same check of a text
before writing it; the words are `skip_words`' everywhere.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memsync_protocol.checksums import entry_checksum
from scanner.engine import rules_fingerprint
from sync_client.api import Api
from sync_client.index import team as team_index
from sync_client.local import Skipped, scan_team_dir, shown_key, skips_of
from sync_client.notes import write_refusal
from sync_client.push import describe_skip, push
from sync_client.skip_words import skip_words
from sync_client.state import SyncState
from sync_client.verdicts import judge_bytes
from sync_client.workspace import Workspace

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01"
LATIN1_NAME = os.fsdecode(b"caf\xe9.md")


@pytest.mark.parametrize(
    ("data", "reason", "words"),
    [
        (b"a\x00b\n", "invalid-text", "invalid text: the text contains a NUL character"),
        (PNG, "binary", "a binary file, not text"),
        ("h\u00e9".encode("utf-16"), "binary", "a binary file, not text"),
        ("caf\u00e9\n".encode("latin-1"), "not-utf8", "not UTF-8 text; save it as UTF-8"),
    ],
    ids=["nul", "png", "utf-16", "latin-1"],
)
def test_each_kind_of_bytes_gets_one_reason_and_its_fix(
    data: bytes, reason: str, words: str
) -> None:
    verdict = judge_bytes(data)
    assert verdict.checksum is None
    [row] = [item.as_row() for item in skips_of("f.md", verdict)]
    assert row["reason"] == reason
    assert skip_words(row).startswith(words)


def test_clean_text_gets_its_checksum() -> None:
    assert judge_bytes(b"fine\n") == (entry_checksum("fine\n"), [])


def test_a_name_that_is_not_utf8_is_shown_with_its_bytes_escaped() -> None:
    row = Skipped(LATIN1_NAME, "invalid-key").as_row()
    assert row["key"] == "caf\\xe9.md"
    assert skip_words(row) == (
        "invalid name: the name is not valid UTF-8; rename it "
        "(in a shell: mv $'caf\\xe9.md' NEW-NAME)"
    )
    # Printable, loggable and JSON everywhere: nothing in the row holds a surrogate.
    json.dumps(row, ensure_ascii=False).encode("utf-8")
    assert shown_key("bell\x07 a\\b \udcff.md") == "bell\\x07 a\\\\b \\xff.md"
    assert shown_key("a\\b.md") == "a\\b.md"  # printable keys are shown as they are


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    """A team dir holding one file of every kind, no server (nothing is sent)."""
    team = tmp_path / "team"
    team.mkdir()
    (team / "ok.md").write_text("---\nname: ok\ndescription: fine\n---\nfine\n")
    (team / "MEMORY.md").write_text("- [ok](ok.md) — fine\n- [nul](nul.md) — a NUL\n")
    (team / "nul.md").write_text("---\nname: nul\ndescription: has one\n---\na\x00b\n")
    (team / "diagram.png").write_bytes(PNG)
    (team / "latin1.md").write_bytes("caf\u00e9\n".encode("latin-1"))
    (team / LATIN1_NAME).write_bytes(b"a note under a Latin-1 name\n")
    for path in team.iterdir():  # older than the racy window: the stat cache trusts them
        os.utime(path, (path.stat().st_mtime - 3600,) * 2)
    api = Api("http://127.0.0.1:9", "mst_unused", "acme/app")  # never called here
    return Workspace(team_dir=team, state_dir=tmp_path / "state", api=api, state=SyncState())


EXPECTED = {
    "caf\\xe9.md": "invalid-key",
    "diagram.png": "binary",
    "latin1.md": "not-utf8",
    "nul.md": "invalid-text",
}


def test_status_push_the_index_check_and_write_note_agree_on_every_file(
    workspace: Workspace,
) -> None:
    scanned = workspace.scan()
    # `status` lists the scan's rows (`describe_skip`), and only the rest as new.
    status_rows = {
        row["key"]: row for row in (describe_skip(workspace, i.as_row()) for i in scanned.skipped)
    }
    assert {key: row["reason"] for key, row in status_rows.items()} == EXPECTED
    assert sorted(scanned.checksums) == ["MEMORY.md", "ok.md"]
    # A push (planned, nothing sent) skips the same files for the same reasons.
    planned = push(workspace, dry_run=True)
    assert {row["key"]: row for row in planned.skipped} == status_rows
    assert [row["key"] for row in planned.would_push] == ["MEMORY.md", "ok.md"]
    # The index check asks no line for a file that is not synced, and a line linking
    # one that is here (skipped) is not dangling.
    report = team_index.health(workspace.team_dir, scanned, workspace.state_dir).as_json()
    assert report["problems"] == []
    # MCP's write_note: the same check of the same text, the same row.
    text = (workspace.team_dir / "nul.md").read_text()
    assert write_refusal(workspace.team_dir, "nul.md", text, workspace.state) == [
        status_rows["nul.md"]
    ]
    # The same words wherever they are shown.
    for row in planned.skipped:
        assert skip_words(row) == skip_words(status_rows[row["key"]])


def test_a_stat_cache_of_older_rules_is_judged_again(workspace: Workspace) -> None:
    """A NUL note a scan of the older rules cached as syncable is skipped after an
    upgrade: new scan rules drop the stat cache, as new scanner rules do."""
    workspace.scan()
    workspace.state.stat_cache["nul.md"][3:] = [entry_checksum("stale\n"), None]
    assert workspace.scan().checksums.get("nul.md") is not None  # the cache is trusted
    # What the older client saved: the scanner's fingerprint alone, and the digest of
    # the rules files alone (never the digest now taken, which covers VERDICT_RULES).
    workspace.state.scanner_rules = rules_fingerprint()
    workspace.state.scanner_rules_source = "digest of the rules files alone"
    assert "nul.md" not in workspace.scan().checksums


def test_a_scan_without_state_gives_the_same_verdicts(workspace: Workspace) -> None:
    """`memsync index` and `doctor` scan without a sync state: the same rows."""
    alone = scan_team_dir(workspace.team_dir, {})
    assert {item.as_row()["key"]: item.reason for item in alone.skipped} == EXPECTED
