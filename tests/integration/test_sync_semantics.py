"""How memsync settles what two teammates do to the same notes, through the real CLI.

Each test is one promise a message makes: a file deleted here comes back with the next
pull, a teammate's restore reaches me, `restore` and `resolve` never displace an edit
silently, a note deleted for the team while I edited it waits for my decision, edits to
different lines merge as git merges them, and `status` and `diff` work offline.
"""

from __future__ import annotations

from pathlib import Path

from sync_server.config import Settings
from tests.integration.users import User, make_user
from tests.liveserver import LiveServer, run_live_server

FIVE_LINES = "one\ntwo\nthree\nfour\nfive\n"


def synced(alice: User, bob: User, key: str, text: str) -> None:
    """`key` holds `text` on the server and in both team dirs."""
    alice.write(key, text)
    assert alice.run("push").returncode == 0
    assert bob.run("pull").returncode == 0
    assert bob.read(key) == text


def test_a_file_deleted_here_comes_back_even_when_the_server_has_nothing_new(
    alice: User, bob: User
) -> None:
    synced(alice, bob, "a.md", "kept\n")
    assert alice.json("pull")["written"] == []  # now alice knows the server's ETag
    (alice.team / "a.md").unlink()
    status = alice.run("status")
    assert "deleted locally: a.md (the next pull restores it" in status.stdout
    pulled = alice.json("pull")  # the server answers 304
    assert pulled["not_modified"] is True
    assert pulled["restored"] == ["a.md"]
    assert alice.read("a.md") == "kept\n"
    # The same when the server's answer is a delta that does not mention the key.
    (alice.team / "a.md").unlink()
    bob.write("b.md", "bob's\n")
    assert bob.run("push").returncode == 0
    text = alice.run("pull")
    assert text.returncode == 0, text.stderr
    assert "restored: a.md" in text.stdout
    assert alice.read("a.md") == "kept\n"
    assert alice.read("b.md") == "bob's\n"


def test_a_file_deleted_here_comes_back_without_the_base_store(alice: User, bob: User) -> None:
    synced(alice, bob, "a.md", "kept\n")
    (alice.team / "a.md").unlink()
    for path in (alice.home / ".state").rglob("objects.sqlite3*"):
        path.unlink()
    assert alice.json("pull")["written"] == ["a.md"]
    assert alice.read("a.md") == "kept\n"


def test_a_write_refused_for_an_obstacle_happens_once_the_obstacle_is_gone(
    alice: User, bob: User, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (alice.team / "d").symlink_to(outside)
    bob.write("d/n.md", "bob's note\n")
    assert bob.run("push").returncode == 0
    refused = alice.json("pull", expect=3)
    assert [row["key"] for row in refused["refused"]] == ["d/n.md"]
    assert list(outside.iterdir()) == []
    (alice.team / "d").unlink()
    pulled = alice.json("pull")  # 304: nothing new on the server
    assert pulled["written"] == ["d/n.md"]
    assert pulled["refused"] == []
    assert alice.read("d/n.md") == "bob's note\n"
    assert list(outside.iterdir()) == []


def test_a_teammates_restore_after_my_rm_reaches_me(alice: User, bob: User) -> None:
    synced(alice, bob, "a.md", "first\n")
    removed = alice.run("rm", "a.md")
    assert removed.returncode == 0, removed.stderr
    assert not (alice.team / "a.md").exists()
    assert bob.json("pull")["deleted"] == ["a.md"]
    log = bob.json("log", "a.md")["versions"]
    first = min(row["version"] for row in log if row["op"] == "put")
    restored = bob.run("restore", "a.md", "--version", str(first))
    assert restored.returncode == 0, restored.stderr
    assert bob.read("a.md") == "first\n"
    pulled = alice.json("pull")
    assert pulled["written"] == ["a.md"]
    assert alice.read("a.md") == "first\n"
    # And nothing is stale afterwards: the next teammate edit arrives too.
    bob.write("a.md", "second\n")
    assert bob.run("push").returncode == 0
    assert alice.json("pull")["written"] == ["a.md"]
    assert alice.read("a.md") == "second\n"


def test_restore_refuses_to_displace_an_unpushed_edit_unless_forced(alice: User, bob: User) -> None:
    synced(alice, bob, "a.md", "version one\n")
    bob.write("a.md", "version two\n")
    assert bob.run("push").returncode == 0
    assert alice.run("pull").returncode == 0
    alice.write("a.md", "my unpushed edit\n")
    refused = alice.run("restore", "a.md", "--version", "1")
    assert refused.returncode == 1
    assert "not pushed" in refused.stderr
    assert "--force" in refused.stderr
    assert refused.stderr.count("\n") == 1
    assert alice.read("a.md") == "my unpushed edit\n"
    assert bob.json("pull")["not_modified"] is True  # nothing happened for the team
    wrong = alice.run("restore", "a.md", "--version", "99", "--force")
    assert wrong.returncode == 1
    assert alice.read("a.md") == "my unpushed edit\n"  # a refused restore changes nothing
    assert alice.json("conflicts")["conflicts"] == []
    forced = alice.run("restore", "a.md", "--version", "1", "--force")
    assert forced.returncode == 0, forced.stderr
    assert "saved your local edit of a.md at " in forced.stdout
    saved = Path(forced.stdout.split(" at ", 1)[1].splitlines()[0])
    assert saved.read_text() == "my unpushed edit\n"
    assert alice.read("a.md") == "version one\n"
    assert bob.json("pull")["written"] == ["a.md"]
    assert bob.read("a.md") == "version one\n"


def test_an_edit_of_a_note_deleted_for_the_team_waits_for_a_decision(
    alice: User, bob: User
) -> None:
    synced(alice, bob, "a.md", "shared\n")
    assert bob.run("rm", "a.md").returncode == 0
    alice.write("a.md", "my edit\n")
    synced_now = alice.json("sync", expect=3)
    assert synced_now["pull"]["conflicts"] == [{"key": "a.md", "kind": "deleted", "saved_to": None}]
    assert synced_now["push"]["uploaded"] == []
    assert alice.read("a.md") == "my edit\n"
    # Not uploaded again until decided, however often one syncs.
    assert alice.json("push")["uploaded"] == []
    status = alice.json("status", expect=3)
    assert status["deleted_on_server"] == ["a.md"]
    assert "memsync resolve a.md --mine" in alice.run("status").stdout
    assert bob.json("pull")["not_modified"] is True
    assert not (bob.team / "a.md").exists()
    kept = alice.run("resolve", "a.md", "--mine")
    assert kept.returncode == 0, kept.stderr
    assert "kept yours and pushed it" in kept.stdout
    assert bob.json("pull")["written"] == ["a.md"]
    assert bob.read("a.md") == "my edit\n"
    assert alice.json("status")["deleted_on_server"] == []


def test_resolving_a_deletion_with_theirs_removes_the_file_and_keeps_a_copy(
    alice: User, bob: User
) -> None:
    synced(alice, bob, "a.md", "shared\n")
    assert bob.run("rm", "a.md").returncode == 0
    alice.write("a.md", "my edit\n")
    assert alice.run("pull").returncode == 3
    taken = alice.json("resolve", "a.md", "--theirs")
    assert not (alice.team / "a.md").exists()
    assert Path(taken["saved_to"]).read_text() == "my edit\n"
    assert alice.json("conflicts")["conflicts"] == []
    status = alice.json("status")
    assert status["deleted_on_server"] == []
    assert status["deleted_locally"] == []
    assert alice.json("pull")["written"] == []


def test_edits_to_different_lines_merge_like_git(alice: User, bob: User) -> None:
    synced(alice, bob, "a.md", FIVE_LINES)
    bob.write("a.md", FIVE_LINES.replace("five", "FIVE (bob)"))
    assert bob.run("push").returncode == 0
    alice.write("a.md", FIVE_LINES.replace("one", "ONE (alice)"))
    merged = alice.json("sync")
    assert merged["pull"]["merged"] == ["a.md"]
    assert merged["pull"]["conflicts"] == []
    assert merged["push"]["uploaded"] == ["a.md"]
    expected = "ONE (alice)\ntwo\nthree\nfour\nFIVE (bob)\n"
    assert alice.read("a.md") == expected
    assert bob.json("pull")["written"] == ["a.md"]
    assert bob.read("a.md") == expected
    assert alice.json("status")["modified"] == []


def test_edits_to_the_same_lines_are_a_conflict_with_no_markers(alice: User, bob: User) -> None:
    synced(alice, bob, "a.md", FIVE_LINES)
    bob.write("a.md", FIVE_LINES.replace("three", "THREE (bob)"))
    assert bob.run("push").returncode == 0
    alice.write("a.md", FIVE_LINES.replace("three", "THREE (alice)"))
    status = alice.json("status")
    assert status["both_changed"] == ["a.md"]
    assert status["modified"] == []
    assert status["server_changed"] == []
    assert "conflict: a.md changed here and on the server" in alice.run("status").stdout
    pulled = alice.run("pull")
    assert pulled.returncode == 3
    assert "pulled: 1 written (1 replaced in a conflict)" in pulled.stdout
    text = alice.read("a.md")
    assert text == FIVE_LINES.replace("three", "THREE (bob)")
    assert "<<<<<<<" not in text
    assert ">>>>>>>" not in text
    copies = alice.json("conflicts")["conflicts"]
    assert [row["key"] for row in copies] == ["a.md"]
    assert Path(copies[0]["saved_to"]).read_text() == FIVE_LINES.replace("three", "THREE (alice)")


def test_resolve_puts_my_saved_copy_back_or_settles_for_theirs(alice: User, bob: User) -> None:
    synced(alice, bob, "a.md", "base\n")
    synced(alice, bob, "b.md", "base\n")
    for key in ("a.md", "b.md"):
        bob.write(key, "bob's\n")
    assert bob.run("push").returncode == 0
    for key in ("a.md", "b.md"):
        alice.write(key, "alice's\n")
    assert alice.run("pull").returncode == 3
    assert len(alice.json("conflicts")["conflicts"]) == 2
    mine = alice.run("resolve", "a.md", "--mine")
    assert mine.returncode == 0, mine.stderr
    assert alice.read("a.md") == "alice's\n"
    theirs = alice.run("resolve", "b.md", "--theirs")
    assert theirs.returncode == 0, theirs.stderr
    assert alice.read("b.md") == "bob's\n"
    assert alice.json("conflicts")["conflicts"] == []
    assert "no saved conflict copies" in alice.run("conflicts").stdout
    assert bob.json("pull")["written"] == ["a.md"]
    assert bob.read("a.md") == "alice's\n"
    nothing = alice.run("resolve", "a.md", "--mine")
    assert nothing.returncode == 2
    assert "nothing to resolve for a.md" in nothing.stderr


def test_status_and_diff_work_offline_from_the_base_store(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'offline.sqlite3'}"
    with run_live_server(Settings(database_url=database)) as server:
        alice = make_user("alice", tmp_path, server, server.token(name="alice"))
        alice.write("edited.md", "before\n")
        alice.write("gone.md", "gone\n")
        assert alice.run("push").returncode == 0
    alice.write("edited.md", "after\n")
    alice.write("new.md", "new\n")
    (alice.team / "gone.md").unlink()
    status = alice.json("status")
    assert status["offline"]
    assert status["modified"] == ["edited.md"]
    assert status["new"] == ["new.md"]
    assert status["deleted_locally"] == ["gone.md"]
    text = alice.run("status")
    assert text.returncode == 0
    assert text.stdout.startswith("server unreachable (")
    diff = alice.json("diff", "edited.md")
    assert diff["offline"]
    [item] = diff["diffs"]
    assert "-before\n+after\n" in item["against_base"]
    assert item["against_server"] is None


def test_a_conflict_on_a_new_file_both_created(live: LiveServer, tmp_path: Path) -> None:
    carol = make_user("carol", tmp_path, live, live.token(name="carol"))
    dave = make_user("dave", tmp_path, live, live.token(name="dave"))
    carol.write("same.md", "carol's\n")
    assert carol.run("push").returncode == 0
    dave.write("same.md", "dave's\n")
    pulled = dave.json("pull", expect=3)
    assert pulled["conflicts"][0]["kind"] == "edited"
    assert dave.read("same.md") == "carol's\n"
    assert Path(pulled["conflicts"][0]["saved_to"]).read_text() == "dave's\n"
