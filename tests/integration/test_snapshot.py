"""`memsync snapshot export` through the real CLI against a real server.

Exports of the same memory are byte-identical whether they come from the server or from
a team dir that holds the same entries, and a past version is rebuilt from history.
A seed finds Claude Code's memory dir of the agent type by itself and, on update, keeps
the subagent's edits of notes the snapshot did not change.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from memsync_protocol.checksums import repo_checksum
from sync_server.auth import mint_token
from tests.integration.users import REPO, User
from tests.liveserver import LiveServer


def files(directory: Path) -> dict[str, bytes]:
    """Every file below `directory`, by relative path, with its bytes."""
    return {
        path.relative_to(directory).as_posix(): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def export(user: User, out: Path, *args: str, expect: int = 0) -> Any:
    return user.json(
        "snapshot", "export", "--agent", "reviewer", "--out", str(out), *args, expect=expect
    )


def head(live: LiveServer) -> dict[str, Any]:
    with live.client(live.token()) as client:
        body: dict[str, Any] = client.get("/v1/team_memory", params={"repo": REPO}).json()
    return body


def test_export_from_server_is_deterministic_and_equals_an_equal_team_dir(
    alice: User, bob: User, live: LiveServer, tmp_path: Path
) -> None:
    alice.write("decisions/db.md", "Use PostgreSQL.\n")
    alice.write("été.md", "accents ✓\n")
    alice.json("push")
    first = export(alice, tmp_path / "one", "--from-server")
    export(alice, tmp_path / "two", "--from-server")
    assert first["written"] == ["decisions/db.md", "été.md"]
    one, two = files(tmp_path / "one" / "reviewer"), files(tmp_path / "two" / "reviewer")
    assert one == two
    assert sorted(one) == ["decisions/db.md", "snapshot.json", "été.md"]
    assert one["decisions/db.md"] == b"Use PostgreSQL.\n"
    manifest = json.loads(one["snapshot.json"])
    server = head(live)
    assert manifest["version"] == server["version"] == first["version"]
    assert manifest["updatedAt"] == server["lastModified"]
    assert manifest["repo"] == REPO
    assert manifest["entries"] == server["content"]["entryChecksums"]
    # Snapshot format 1 keeps the repo checksum's first definition (the server's is 2).
    assert server["checksumVersion"] == 2
    assert manifest["checksum"] == repo_checksum(manifest["entries"], 1)
    assert server["checksum"] == repo_checksum(manifest["entries"], 2)
    # Exporting again into the same folder rewrites nothing.
    assert export(alice, tmp_path / "one", "--from-server")["written"] == []

    # Bob's team dir holds the same entries after a pull: his local export is the same bytes.
    bob.json("pull")
    local = export(bob, tmp_path / "bob")
    assert local["version"] == server["version"]
    assert files(tmp_path / "bob" / "reviewer") == one


def test_local_export_of_unpushed_edits_has_no_version(alice: User, tmp_path: Path) -> None:
    alice.write("a.md", "pushed\n")
    alice.json("push")
    alice.write("a.md", "edited here\n")
    result = export(alice, tmp_path / "snap")
    manifest = json.loads((tmp_path / "snap" / "reviewer" / "snapshot.json").read_text())
    assert result["version"] is None
    assert manifest["version"] is None
    assert (tmp_path / "snap" / "reviewer" / "a.md").read_text() == "edited here\n"
    # The same files give the same bytes.
    before = files(tmp_path / "snap")
    export(alice, tmp_path / "snap")
    assert files(tmp_path / "snap") == before


def test_export_of_a_past_version(alice: User, live: LiveServer, tmp_path: Path) -> None:
    alice.write("a.md", "first\n")
    alice.write("keep.md", "unchanged\n")
    alice.json("push")  # version 1
    alice.write("a.md", "second\n")
    alice.write("new.md", "added later\n")
    alice.json("push")  # version 2
    alice.json("rm", "keep.md")  # version 3
    past = export(alice, tmp_path / "v1", "--from-server", "--version", "1")
    v1 = files(tmp_path / "v1" / "reviewer")
    assert sorted(v1) == ["a.md", "keep.md", "snapshot.json"]
    assert v1["a.md"] == b"first\n"
    assert v1["keep.md"] == b"unchanged\n"
    history = alice.json("log", "a.md")["versions"]
    assert past["version"] == 1
    assert json.loads(v1["snapshot.json"])["updatedAt"] == history[0]["at"]

    export(alice, tmp_path / "v2", "--from-server", "--version", "2")
    v2 = files(tmp_path / "v2" / "reviewer")
    assert sorted(v2) == ["a.md", "keep.md", "new.md", "snapshot.json"]
    assert v2["a.md"] == b"second\n"
    # Version 2 touched only keys unchanged since (a.md, new.md): its time still comes
    # from that commit's history rows.
    assert json.loads(v2["snapshot.json"])["updatedAt"] == history[1]["at"]

    # The newest version by number is the same export as the current one.
    export(alice, tmp_path / "v3", "--from-server", "--version", "3")
    export(alice, tmp_path / "now", "--from-server")
    assert files(tmp_path / "v3") == files(tmp_path / "now")
    assert sorted(files(tmp_path / "now" / "reviewer")) == ["a.md", "new.md", "snapshot.json"]

    # Re-exporting an older version into the same folder removes what it lacks.
    again = export(alice, tmp_path / "now", "--from-server", "--version", "1")
    assert again["removed"] == ["new.md"]
    assert files(tmp_path / "now") == files(tmp_path / "v1")

    failed = alice.run(
        "snapshot",
        "export",
        "--agent",
        "reviewer",
        "--out",
        str(tmp_path / "x"),
        "--from-server",
        "--version",
        "9",
    )
    assert failed.returncode == 1
    assert "no version 9: the server's newest is 3" in failed.stderr
    assert not (tmp_path / "x" / "reviewer").exists()
    usage = alice.run("snapshot", "export", "--agent", "reviewer", "--version", "1")
    assert usage.returncode == 2
    assert "--version needs --from-server" in usage.stderr


def test_nothing_the_scanner_flags_goes_into_a_snapshot(
    alice: User, live: LiveServer, tmp_path: Path
) -> None:
    secret = mint_token().secret
    # The client never pushes a secret; another client might have.
    with live.client(live.token()) as client:
        put = client.put(
            "/v1/team_memory",
            params={"repo": REPO},
            json={"entries": {"leak.md": f"token = {secret}\n", "ok.md": "fine\n"}},
        )
        assert put.status_code == 200
    result = export(alice, tmp_path / "server", "--from-server", expect=3)
    assert [row["key"] for row in result["skipped"]] == ["leak.md"]
    assert result["skipped"][0]["reason"] == "secret"
    assert sorted(files(tmp_path / "server" / "reviewer")) == ["ok.md", "snapshot.json"]

    alice.write("local-leak.md", f"again {secret}\n")
    alice.write("notes.md", "clean\n")
    local = alice.run("snapshot", "export", "--agent", "reviewer", "--out", str(tmp_path / "local"))
    assert local.returncode == 3
    assert "skipped: local-leak.md: contains a secret (" in local.stdout
    assert secret not in local.stdout + local.stderr
    exported = files(tmp_path / "local" / "reviewer")
    assert sorted(exported) == ["notes.md", "snapshot.json"]
    assert all(secret.encode() not in data for data in exported.values())


def test_export_into_the_repository_and_refusals(alice: User, tmp_path: Path) -> None:
    alice.write("a.md", "note\n")
    alice.json("push")
    subprocess.run(["git", "init", "-q", str(alice.home)], check=True)
    result = alice.json("snapshot", "export", "--agent", "code-reviewer", "--from-server")
    target = alice.home / ".claude" / "agent-memory-snapshots" / "code-reviewer"
    assert Path(result["snapshot"]) == target
    assert (target / "a.md").read_text() == "note\n"

    bad = alice.run("snapshot", "export", "--agent", "../evil", "--from-server")
    assert bad.returncode == 2
    assert "agent type" in bad.stderr

    # A `.claude` that is a symlink (anyone who can push to the repo controls it).
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other = tmp_path / "other-repo"
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    (other / ".claude").symlink_to(elsewhere)
    env = dict(alice.env)
    linked = subprocess.run(
        [
            str(Path(sys.executable).with_name("memsync")),
            "snapshot",
            "export",
            "--agent",
            "reviewer",
            "--from-server",
        ],
        cwd=other,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert linked.returncode == 1, linked.stderr
    assert "symbolic link" in linked.stderr
    assert list(elsewhere.iterdir()) == []


def test_a_note_that_became_a_folder_exports_into_the_same_snapshot(
    alice: User, tmp_path: Path
) -> None:
    alice.write("d", "a note\n")
    alice.json("push")
    export(alice, tmp_path / "snap", "--from-server")
    alice.json("rm", "d")
    alice.write("d/n.md", "now a folder\n")
    alice.json("push")
    result = export(alice, tmp_path / "snap", "--from-server")
    assert result["removed"] == ["d"]
    assert sorted(files(tmp_path / "snap" / "reviewer")) == ["d/n.md", "snapshot.json"]


def test_seed_finds_claude_codes_agent_memory_and_merges_three_ways(
    alice: User, tmp_path: Path
) -> None:
    subprocess.run(["git", "init", "-q", str(alice.home)], check=True)
    for key in ("edited.md", "theirs.md", "both.md"):
        alice.write(key, "v1\n")
    alice.json("push")

    def snapshot(*args: str) -> Any:
        return alice.json("snapshot", *args, "--agent", "reviewer")

    snapshot("export", "--from-server")
    memory = alice.home / ".claude" / "agent-memory" / "reviewer"  # project scope
    assert snapshot("check") == {"action": "initialize"}
    assert Path(snapshot("seed")["memory_dir"]) == memory
    assert snapshot("check") == {"action": "none"}

    # The subagent edits two notes; the team then changes two, one of them the same.
    (memory / "edited.md").write_text("the agent's\n")
    (memory / "both.md").write_text("the agent's\n")
    alice.write("theirs.md", "v2\n")
    alice.write("both.md", "v2\n")
    alice.json("push")
    snapshot("export", "--from-server")
    assert snapshot("check") == {"action": "prompt-update"}
    seeded = alice.run("snapshot", "seed", "--agent", "reviewer", "--update")
    assert seeded.returncode == 0, seeded.stderr
    lines = seeded.stdout.splitlines()
    assert lines[0] == f"seeded {memory} (update, three-way): 2 written, 0 removed, 0 unchanged"
    assert "kept local edit: edited.md (the snapshot did not change it)" in lines
    assert "updated: theirs.md (the snapshot changed it; you had not)" in lines
    [saved] = [line for line in lines if line.startswith("saved: both.md: your copy is at ")]
    assert Path(saved.rsplit(" ", 1)[1]).read_text() == "the agent's\n"
    assert (memory / "edited.md").read_text() == "the agent's\n"
    assert (memory / "theirs.md").read_text() == "v2\n"
    assert (memory / "both.md").read_text() == "v2\n"
    assert snapshot("check") == {"action": "none"}

    # The other scopes: git-ignored beside it, and the user's, under CLAUDE_CONFIG_DIR.
    assert snapshot("check", "--scope", "local") == {"action": "initialize"}
    alice.env["CLAUDE_CONFIG_DIR"] = str(tmp_path / "claude-config")
    user = snapshot("seed", "--scope", "user")
    assert Path(user["memory_dir"]) == tmp_path / "claude-config" / "agent-memory" / "reviewer"
    assert (Path(user["memory_dir"]) / "theirs.md").read_text() == "v2\n"
    both = alice.run(
        "snapshot", "check", "--agent", "reviewer", "--scope", "user", "--memory-dir", "x"
    )
    assert both.returncode == 2
    assert "pass one" in both.stderr
