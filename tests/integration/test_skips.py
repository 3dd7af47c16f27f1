"""Every skip says why in words, with the limit and the fix; hidden and editor files are
counted in one line; `status` shows a file the server refused as refused.

The real `memsync` CLI in a subprocess against a real server on loopback (lower limits
where a test needs the server itself to refuse an entry).
"""

from __future__ import annotations

import json
import os
import random
import string
from pathlib import Path
from typing import Any

from sync_server.config import Settings
from tests.integration.users import REPO, User, make_user
from tests.liveserver import LiveServer, run_live_server


def server_keys(live: LiveServer) -> list[str]:
    with live.client(live.token()) as client:
        answer = client.get("/v1/team_memory", params={"repo": REPO})
    if answer.status_code == 404:
        return []
    return sorted(answer.json()["content"]["entries"])


def pushed_lines(user: User, expect: int) -> list[str]:
    """The lines a human push prints, after checking its exit code."""
    result = user.run("push")
    assert result.returncode == expect, (result.returncode, result.stdout, result.stderr)
    # The team index's lines (these notes have none) are tests/integration/test_index.py's.
    return [line for line in result.stdout.splitlines() if not line.startswith("index: ")]


def aws_access_key() -> str:
    """An AWS access key ID the scanner flags (random, so never a real one)."""
    rng = random.Random(7)
    return "AKIA" + "".join(rng.choices(string.ascii_uppercase + "234567", k=16))


def test_each_skip_a_push_makes_locally_names_its_reason_limit_and_fix(
    alice: User, live: LiveServer
) -> None:
    secret = aws_access_key()
    alice.write("ok.md", "fine\n")
    alice.write("creds.md", f"# deploy\n\naws_access_key_id = {secret}\n")
    alice.write("big.md", "x" * 312_004)
    (alice.team / "latin1.md").write_bytes("caf\xe9\n".encode("latin-1"))
    alice.write("nul.md", "a\x00b\n")
    alice.write("a\\b.md", "backslash\n")
    # Neither NFC nor NFD (one é composed, one decomposed): no machine could agree on it.
    alice.write("\u00e9e\u0301.md", "mixed\n")
    (alice.team / "diagram.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00")
    (alice.team / os.fsdecode(b"caf\xe9.md")).write_bytes(b"named in Latin-1\n")
    lines = pushed_lines(alice, expect=3)
    assert "pushed 1 file(s) in 1 request(s)" in lines
    assert "skipped: creds.md: contains a secret (AWS access key ID) on line 3: remove it" in lines
    assert (
        "skipped: big.md: too large: 312,004 bytes, the server allows 250,000; "
        "shorten or split it" in lines
    )
    assert "skipped: latin1.md: not UTF-8 text; save it as UTF-8" in lines
    assert (
        "skipped: nul.md: invalid text: the text contains a NUL character; "
        "remove that character" in lines
    )
    assert "skipped: a\\b.md: invalid name: the name contains a backslash; rename it" in lines
    assert (
        "skipped: \u00e9e\u0301.md: invalid name: the name is not NFC-normalized; rename it"
        in lines
    )
    assert (
        "skipped: diagram.png: a binary file, not text: memsync syncs text notes; move it "
        "out or list it in .memsyncignore" in lines
    )
    assert (
        "skipped: caf\\xe9.md: invalid name: the name is not valid UTF-8; rename it "
        "(in a shell: mv $'caf\\xe9.md' NEW-NAME)" in lines
    )
    assert secret not in "\n".join(lines)
    assert server_keys(live) == ["ok.md"]
    # One verdict per file: `status`, another push and `memsync index` say the same.
    status = alice.json("status", expect=3)
    assert status["new"] == status["modified"] == []
    reasons = {row["key"]: row["reason"] for row in status["skipped"]}
    assert reasons["nul.md"] == "invalid-text"
    assert reasons["diagram.png"] == "binary"
    assert {row["key"]: row["reason"] for row in alice.json("push", expect=3)["skipped"]} == (
        reasons
    )
    index = alice.json("index", expect=3)
    assert {problem["key"] for problem in index["problems"]} == {"ok.md"}
    shown = alice.run("status")
    assert shown.returncode == 3, shown.stderr
    assert "skipped: caf\\xe9.md: invalid name: the name is not valid UTF-8" in shown.stdout
    assert "skipped: diagram.png: a binary file, not text" in shown.stdout


def test_too_many_entries_names_the_servers_limit_and_the_fix(
    tmp_path: Path, sqlite_database_url: str
) -> None:
    fix = "too many entries: the server allows 2; remove notes with `memsync rm`"
    with run_live_server(Settings(database_url=sqlite_database_url, max_entries=2)) as live:
        alice = make_user("alice", tmp_path, live, live.token(name="alice"))
        for name in ("a", "b", "c"):
            alice.write(f"{name}.md", f"{name}\n")
        # The first push learns the limit from the server's refusal ...
        assert f"skipped: c.md: {fix}" in pushed_lines(alice, expect=3)
        # ... the next applies it before sending anything, in the same words.
        again = pushed_lines(alice, expect=3)
        assert f"skipped: c.md: {fix}" in again
        assert "pushed 0 file(s) in 0 request(s)" in again
        pushed = alice.json("push", expect=3)
        [row] = pushed["skipped"]
        assert (row["key"], row["reason"], row["max_entries"]) == ("c.md", "too-many-entries", 2)
        assert server_keys(live) == ["a.md", "b.md"]


def test_a_full_repo_lists_a_few_refused_files_and_counts_the_rest_in_one_line(
    tmp_path: Path, sqlite_database_url: str
) -> None:
    fix = "too many entries: the server allows 2; remove notes with `memsync rm`"
    with run_live_server(Settings(database_url=sqlite_database_url, max_entries=2)) as live:
        alice = make_user("alice", tmp_path, live, live.token(name="alice"))
        for name in "abcdefghij":
            alice.write(f"{name}.md", f"{name}\n")
        pushed_lines(alice, expect=3)  # learns the limit
        lines = pushed_lines(alice, expect=3)
        assert lines == [
            "pushed 0 file(s) in 0 request(s)",
            f"skipped: c.md: {fix}",
            f"skipped: d.md: {fix}",
            f"skipped: e.md: {fix}",
            f"skipped 5 more files: {fix} (`--json` lists every one)",
        ]
        skipped = alice.json("push", expect=3)["skipped"]
        assert [row["key"] for row in skipped] == [f"{name}.md" for name in "cdefghij"]


def test_a_file_folder_clash_names_the_other_key_and_the_fix(
    alice: User, bob: User, live: LiveServer
) -> None:
    bob.write("notes/db/schema.md", "bob's schema\n")
    bob.json("push")
    alice.write("notes/db", "alice's file named like bob's folder\n")
    lines = pushed_lines(alice, expect=3)
    assert (
        "skipped: notes/db: file/folder clash with notes/db/schema.md: notes/db is a file here "
        "but notes/db/ is a folder on the server; rename one of them" in lines
    )
    assert server_keys(live) == ["notes/db/schema.md"]


def test_hidden_and_editor_files_are_counted_in_one_line_not_listed(
    alice: User, live: LiveServer
) -> None:
    alice.write("notes.md", "---\nname: notes\ndescription: the notes\n---\na note\n")
    for name in (".DS_Store", "notes.md~", ".notes.md.swp", "draft.tmp", "#notes.md#"):
        alice.write(name, "not a note\n")
    alice.write(".obsidian/workspace.json", "{}\n")
    alice.write("MEMORY.md", "- [Notes](notes.md) — the notes\n")
    assert pushed_lines(alice, expect=0) == [
        "pushed 2 file(s) in 1 request(s)",
        "ignored 5 hidden or leftover files, 1 hidden folder",
    ]
    status = alice.run("status")
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert "ignored 5 hidden or leftover files, 1 hidden folder" in lines
    assert "everything is in sync" in lines
    assert not [line for line in lines if line.startswith("skipped:")]
    # --json still lists each one, by reason.
    rows = alice.json("push")["skipped"]
    assert {row["key"]: row["reason"] for row in rows}[".obsidian"] == "hidden"
    assert [row.get("folder") for row in rows if row["key"] == ".obsidian"] == [True]
    assert sorted(row["reason"] for row in rows).count("editor-leftover") == 3
    assert server_keys(live) == ["MEMORY.md", "notes.md"]


def test_status_shows_a_file_the_server_refused_as_refused_with_its_reason(
    tmp_path: Path, sqlite_database_url: str
) -> None:
    settings = Settings(database_url=sqlite_database_url, max_entry_bytes=1_000)
    with run_live_server(settings) as live:
        alice = make_user("alice", tmp_path, live, live.token(name="alice"))
        alice.write("ok.md", "fine\n")
        alice.write("big.md", "y" * 2_000)
        assert alice.json("push", expect=3)["uploaded"] == ["ok.md"]
        words = "too large: 2,000 bytes, the server allows 1,000; shorten or split it"
        status = alice.run("status")
        assert status.returncode == 3, status.stderr  # a refusal needs the person
        lines = status.stdout.splitlines()
        assert f"refused by the server: big.md: {words}" in lines
        assert "new: big.md" not in lines
        assert "everything is in sync" not in lines
        result: dict[str, Any] = alice.json("status", expect=3)
        assert result["new"] == []
        [row] = result["refused"]
        assert (row["key"], row["reason"], row["size"], row["max_bytes"]) == (
            "big.md",
            "too-large",
            2_000,
            1_000,
        )
        # Once the file changes, the refusal is not this file's any more: it is new.
        alice.write("big.md", "small now\n")
        changed = alice.json("status")
        assert (changed["new"], changed["refused"]) == (["big.md"], [])


def test_a_skip_in_json_keeps_its_fields_and_never_the_secret(alice: User) -> None:
    secret = aws_access_key()
    alice.write("creds.md", f"key {secret}\n")
    result = alice.run("push", "--json")
    assert result.returncode == 3
    [row] = json.loads(result.stdout)["skipped"]
    assert (row["reason"], row["label"], row["line"]) == ("secret", "AWS access key ID", 1)
    assert secret not in result.stdout + result.stderr
