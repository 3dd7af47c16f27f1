"""`.memsyncignore`: files it lists are left out of push, status and the watcher.

The real `memsync` CLI (and a real `memsync watch` process) against a real server on
loopback. Like a `.gitignore`, it only concerns files the team does not have yet: a note
that has synced goes on syncing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.integration.users import REPO, User
from tests.integration.watchkit import WatchProcess, wait_until, watch_state
from tests.liveserver import LiveServer


def server_entries(live: LiveServer) -> dict[str, str]:
    with live.client(live.token()) as client:
        answer = client.get("/v1/team_memory", params={"repo": REPO})
    if answer.status_code == 404:
        return {}
    entries: dict[str, str] = answer.json()["content"]["entries"]
    return entries


def ignore(user: User, *patterns: str) -> None:
    (user.team / ".memsyncignore").write_text("".join(f"{line}\n" for line in patterns))


# Temp files of atomic writes and what merge and sync tools leave behind: never notes,
# whatever .memsyncignore says, and counted with the hidden files.
LEFTOVERS = (
    "MEMORY.md.tmp.12345.1764612345678",
    "sub/notes.md.tmp.7.1764612345678",
    "scratch.tmp",
    "notes.md.orig",
    "notes.md.rej",
    "notes (conflicted copy).md",
    "notes (Alice's conflicted copy 2026-01-02).md",
    "notes.sync-conflict-20260102-120000-ABCDEFG.md",
)


def test_listed_files_are_not_pushed_and_counted_in_one_line(
    alice: User, bob: User, live: LiveServer
) -> None:
    ignore(alice, "# my scratch space", "", "drafts/", "*.log", "/todo.md")
    alice.write("notes.md", "for the team\n")
    alice.write("drafts/idea.md", "not yet\n")
    alice.write("drafts/older.md", "not yet either\n")
    alice.write("build.log", "noise\n")
    alice.write("todo.md", "mine\n")
    alice.write("sub/todo.md", "anchored pattern: this one syncs\n")
    alice.write("2026.12.01.md", "a dated note: only looks like a temp file\n")
    for name in LEFTOVERS:
        alice.write(name, "not a note\n")
    ignored_line = (
        f"ignored {len(LEFTOVERS) + 1} hidden or leftover files,"
        " 2 files and 1 folder matched by .memsyncignore"
    )
    planned = alice.run("push", "--dry-run")
    assert planned.returncode == 0, planned.stderr
    assert [
        line.split(" (")[0] for line in planned.stdout.splitlines() if line.startswith("would")
    ] == [
        "would push: 2026.12.01.md",
        "would push: notes.md",
        "would push: sub/todo.md",
        "would push 3 file(s) in 1 request(s)",
    ]
    assert ignored_line in planned.stdout.splitlines()
    assert server_entries(live) == {}
    result = alice.run("push")
    assert result.returncode == 0, result.stderr
    # These plain notes have no index: that line is tests/integration/test_index.py's.
    assert [line for line in result.stdout.splitlines() if not line.startswith("index:")] == [
        "pushed 3 file(s) in 1 request(s)",
        ignored_line,
    ]
    assert "none of the 3 notes here" in result.stdout  # the ignored ones do not count
    # The ignore file itself is local: it never reaches the server or a teammate.
    assert sorted(server_entries(live)) == ["2026.12.01.md", "notes.md", "sub/todo.md"]
    assert sorted(bob.json("pull")["written"]) == ["2026.12.01.md", "notes.md", "sub/todo.md"]
    assert not (bob.team / ".memsyncignore").exists()
    status = alice.json("status")
    assert status["new"] == []
    ignored = {row["key"]: row.get("folder", False) for row in status["skipped"]}
    assert ignored == {
        ".memsyncignore": False,
        "build.log": False,
        "drafts": True,
        "todo.md": False,
        **{name: False for name in LEFTOVERS},
    }
    assert {row["key"] for row in status["skipped"] if row["reason"] == "editor-leftover"} == set(
        LEFTOVERS
    )
    human = alice.run("status").stdout.splitlines()
    assert "everything is in sync" in human
    assert ignored_line in human
    assert not [line for line in human if "drafts" in line or line.startswith("new:")]
    # A teammate on an older client pushed a leftover: a pull still writes what the team
    # has (nothing is lost), and it is never pushed back.
    with live.client(live.token()) as client:
        answer = client.put(
            "/v1/team_memory", params={"repo": REPO}, json={"entries": {LEFTOVERS[0]: "old\n"}}
        )
    assert answer.status_code == 200, answer.text
    assert bob.json("pull")["written"] == [LEFTOVERS[0]]
    assert bob.read(LEFTOVERS[0]) == "old\n"
    bob.write(LEFTOVERS[0], "rewritten by bob's tool\n")
    pushed = bob.json("push")
    assert pushed["uploaded"] == []
    assert [row["reason"] for row in pushed["skipped"]] == ["editor-leftover"]
    assert server_entries(live)[LEFTOVERS[0]] == "old\n"


def test_a_negation_brings_back_only_what_the_file_left_out(alice: User, live: LiveServer) -> None:
    ignore(alice, "*.md", "!keep.md", "!.hidden.md", "!notes.md~", "!link.md")
    alice.write("keep.md", "re-included\n")
    alice.write("other.md", "left out\n")
    alice.write("plain.txt", "not matched at all\n")
    alice.write(".hidden.md", "hidden stays hidden\n")
    alice.write("notes.md~", "an editor's backup stays out\n")
    os.symlink(alice.team / "keep.md", alice.team / "link.md")
    pushed = alice.json("push")
    assert sorted(pushed["uploaded"]) == ["keep.md", "plain.txt"]
    reasons = {row["key"]: row["reason"] for row in pushed["skipped"]}
    assert reasons == {
        ".hidden.md": "hidden",
        ".memsyncignore": "hidden",
        "link.md": "symlink",
        "notes.md~": "editor-leftover",
        "other.md": "ignored",
    }
    assert sorted(server_entries(live)) == ["keep.md", "plain.txt"]


def test_a_note_the_team_has_is_not_affected_as_git_does_with_tracked_files(
    alice: User, bob: User, live: LiveServer
) -> None:
    alice.write("notes/db.md", "v1\n")
    alice.json("push")
    ignore(alice, "notes/")
    alice.write("notes/db.md", "v2, edited after the ignore\n")
    alice.write("notes/new.md", "never synced: ignored\n")
    pushed = alice.json("push")
    assert pushed["uploaded"] == ["notes/db.md"]
    assert server_entries(live) == {"notes/db.md": "v2, edited after the ignore\n"}
    # A pull still writes it, and status still follows it.
    bob.json("pull")
    bob.write("notes/db.md", "v3 from bob\n")
    bob.json("push")
    assert alice.json("status")["server_changed"] == ["notes/db.md"]
    assert alice.json("pull")["written"] == ["notes/db.md"]
    assert alice.read("notes/db.md") == "v3 from bob\n"
    assert [
        row["key"] for row in alice.json("status")["skipped"] if row["reason"] == "ignored"
    ] == ["notes/new.md"]


def test_a_bad_ignore_file_is_one_error_line_exit_2_and_nothing_is_sent(
    alice: User, live: LiveServer
) -> None:
    alice.write("notes.md", "would go up\n")
    path = alice.team / ".memsyncignore"
    cases: dict[bytes, str] = {
        b"!\n": f"memsync: {path}: line 1: '!' is not a valid gitignore pattern",
        b"drafts/\n../elsewhere\n": (
            f"memsync: {path}: line 2: '../elsewhere' points outside the team dir "
            "(patterns are relative to it)"
        ),
        b"caf\xe9\n": f"memsync: {path}: is not UTF-8 text",
    }
    for content, message in cases.items():
        path.write_bytes(content)
        for command in ("push", "status"):
            result = alice.run(command)
            assert result.returncode == 2, (command, result.stdout, result.stderr)
            assert result.stderr.splitlines() == [message]
    path.unlink()
    os.symlink(alice.home / "elsewhere", path)
    (alice.home / "elsewhere").write_text("*.md\n")
    result = alice.run("push")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"memsync: {path}: is a symbolic link; it must be a file"]
    path.unlink()
    path.mkdir()
    result = alice.run("push")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"memsync: {path}: is not a regular file"]
    assert server_entries(live) == {}


def test_the_watcher_does_not_push_what_the_ignore_file_lists(
    alice: User, live: LiveServer, watchers: list[WatchProcess]
) -> None:
    ignore(alice, "scratch/")
    process = WatchProcess(alice.env, alice.home, "--debounce", "0.3", "--poll-interval", "600")
    watchers.append(process)

    def settled() -> bool:
        state = watch_state(alice)
        return bool(state and state.get("live") and state["last_pull"])

    assert wait_until(settled), process.log()
    alice.write("scratch/wip.md", "half a thought\n")
    time.sleep(0.5)
    alice.write("decisions.md", "Use PostgreSQL.\n")
    assert wait_until(lambda: "decisions.md" in server_entries(live)), process.log()
    time.sleep(1.0)
    assert sorted(server_entries(live)) == ["decisions.md"]


def test_the_watcher_follows_edits_of_the_ignore_file_and_resumes_when_a_bad_one_is_fixed(
    alice: User, live: LiveServer, watchers: list[WatchProcess]
) -> None:
    ignore(alice, "scratch/")
    alice.write("scratch/wip.md", "half a thought\n")
    process = WatchProcess(alice.env, alice.home, "--debounce", "0.3", "--poll-interval", "600")
    watchers.append(process)

    def settled() -> bool:
        state = watch_state(alice)
        return bool(state and state.get("live") and state["last_pull"])

    assert wait_until(settled), process.log()
    assert server_entries(live) == {}
    # Letting the folder in is a change the watcher acts on, with no other edit.
    ignore(alice, "*.log")
    assert wait_until(lambda: "scratch/wip.md" in server_entries(live)), process.log()
    # A bad ignore file stops the repo's syncing; fixing that file alone resumes it.
    (alice.team / ".memsyncignore").write_text("!\n")
    alice.write("decisions.md", "Use PostgreSQL.\n")
    assert wait_until(lambda: "ignore-file" in str(watch_state(alice))), process.log()
    assert "decisions.md" not in server_entries(live)
    ignore(alice, "*.log")
    assert wait_until(lambda: "decisions.md" in server_entries(live)), process.log()


def test_rm_with_a_bad_ignore_file_changes_nothing_and_an_ignored_file_is_saved(
    alice: User, bob: User, live: LiveServer
) -> None:
    bob.write("scratch.md", "bob's note\n")
    bob.json("push")
    (alice.team / ".memsyncignore").write_text("!\n")
    result = alice.run("rm", "scratch.md")
    assert result.returncode == 2
    assert "scratch.md" in server_entries(live)
    # Alice never synced it and ignores the name: her own file of that name is not
    # the team's note, so `rm` keeps a copy before removing it here.
    ignore(alice, "scratch.md")
    alice.write("scratch.md", "alice's private scratch\n")
    removed = alice.json("rm", "scratch.md")
    assert removed["saved_to"] is not None
    assert Path(removed["saved_to"]).read_text() == "alice's private scratch\n"
    assert not (alice.team / "scratch.md").exists()
    assert "scratch.md" not in server_entries(live)


def test_a_teammates_note_under_an_ignored_name_is_pulled_and_the_local_file_saved(
    alice: User, bob: User
) -> None:
    ignore(alice, "scratch.md")
    alice.write("scratch.md", "alice's private scratch\n")
    bob.write("scratch.md", "bob's shared note\n")
    bob.json("push")
    pulled = alice.json("pull", expect=3)
    [conflict] = pulled["conflicts"]
    assert (conflict["key"], conflict["kind"]) == ("scratch.md", "edited")
    assert Path(conflict["saved_to"]).read_text() == "alice's private scratch\n"
    assert alice.read("scratch.md") == "bob's shared note\n"
    # From now on the team has it: it syncs like any note.
    alice.write("scratch.md", "alice's edit of the shared note\n")
    assert alice.json("push")["uploaded"] == ["scratch.md"]
