"""`snapshot seed --update`'s three-way rule, and where Claude Code keeps an agent's memory.

In process, no server and no subprocess: the decision of one note (`merge_outcome`), the
base a marker records (`recorded_base`), whole seeds on temporary folders, and the
memory dir of an agent type in each scope.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from memsync_protocol.checksums import entry_checksum, repo_checksum
from sync_client.errors import ConfigError
from sync_client.snapshot import (
    MARKER,
    Memory,
    Outcome,
    agent_memory_dir,
    export_snapshot,
    merge_outcome,
    recorded_base,
    seed,
    seed_lines,
)
from sync_client.team_files import UnsafeKey

A, B, C = entry_checksum("a\n"), entry_checksum("b\n"), entry_checksum("c\n")
T1 = "2026-11-30T09:00:00Z"
T2 = "2026-11-30T10:00:00Z"


@pytest.mark.parametrize(
    ("base", "local", "snapshot", "outcome"),
    [
        # Nobody changed it, or both made the same change.
        (A, A, A, "unchanged"),
        (A, B, B, "unchanged"),
        (None, None, None, "unchanged"),
        (A, None, None, "unchanged"),
        # Only the subagent changed it: its change stays.
        (A, B, A, "kept-local-edit"),
        (A, None, A, "kept-local-removal"),
        (None, A, None, "own"),
        # Only the snapshot changed it: the snapshot's.
        (A, A, B, "updated"),
        (None, None, A, "added"),
        (A, A, None, "removed"),
        # Both changed it.
        (A, B, C, "saved-copy"),
        (None, A, B, "saved-copy"),  # both created it, differently
        (A, None, B, "restored"),
        (A, B, None, "kept-removed-in-snapshot"),
    ],
)
def test_merge_outcome(
    base: str | None, local: str | None, snapshot: str | None, outcome: Outcome
) -> None:
    assert merge_outcome(base, local, snapshot) == outcome


def test_an_empty_base_is_the_two_way_rule() -> None:
    # Before markers recorded entries: differing notes are replaced (saved), none removed.
    assert merge_outcome(None, A, B) == "saved-copy"
    assert merge_outcome(None, None, A) == "added"
    assert merge_outcome(None, A, None) == "own"


def _marker(entries: dict[str, str], repo: str | None = "acme/app") -> dict[str, object]:
    return {
        "syncedFrom": T1,
        "checksum": repo_checksum(entries, 1),
        "repo": repo,
        "version": 1,
        "entries": entries,
    }


def test_recorded_base_only_from_a_whole_marker_of_the_same_repo() -> None:
    entries = {"a.md": A, "dir/b.md": B}
    assert recorded_base(_marker(entries), "acme/app") == entries
    assert recorded_base(None, "acme/app") is None
    old = _marker(entries)
    del old["entries"]  # a marker from before per-note checksums
    assert recorded_base(old, "acme/app") is None
    assert recorded_base(_marker(entries), "acme/other") is None
    assert recorded_base(_marker(entries, repo=None), None) == entries
    tampered = _marker(entries)
    tampered["checksum"] = repo_checksum({"a.md": A}, 1)
    assert recorded_base(tampered, "acme/app") is None
    for key in ("../x.md", ".hidden", "dir/.snapshot-synced.json", "snapshot.json"):
        assert recorded_base(_marker({key: A}), "acme/app") is None, key
    assert recorded_base(_marker({"a.md": "not a checksum"}), "acme/app") is None


class Dirs:
    """A snapshot folder, a memory dir and a saves dir under one tmp folder."""

    def __init__(self, root: Path) -> None:
        self.snapshot = root / "snapshots" / "reviewer"
        self.memory = root / "memory"
        self.saves = root / "saves"

    def export(self, texts: dict[str, str], updated_at: str) -> None:
        self.snapshot.mkdir(parents=True, exist_ok=True)
        export_snapshot(Memory("acme/app", 1, updated_at, dict(texts)), self.snapshot)

    def write(self, key: str, text: str) -> None:
        path = self.memory / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def files(self) -> dict[str, str]:
        return {
            path.relative_to(self.memory).as_posix(): path.read_text()
            for path in sorted(self.memory.rglob("*"))
            if path.is_file() and path.name != MARKER
        }


@pytest.fixture
def dirs(tmp_path: Path) -> Dirs:
    return Dirs(tmp_path)


def test_update_merges_each_note_three_ways(dirs: Dirs) -> None:
    dirs.export(
        {
            "edited.md": "v1\n",
            "theirs.md": "v1\n",
            "both.md": "v1\n",
            "gone.md": "v1\n",
            "gone-edited.md": "v1\n",
            "deleted.md": "v1\n",
            "same.md": "v1\n",
        },
        T1,
    )
    first = seed(dirs.snapshot, dirs.memory, "initialize", dirs.saves)
    assert [note["outcome"] for note in first["notes"]] == ["added"] * 7
    marker = json.loads((dirs.memory / MARKER).read_text())
    assert marker["entries"]["same.md"] == entry_checksum("v1\n")

    dirs.write("edited.md", "the agent's\n")
    dirs.write("both.md", "the agent's\n")
    dirs.write("gone-edited.md", "the agent's\n")
    dirs.write("own.md", "the agent's own\n")
    (dirs.memory / "deleted.md").unlink()
    dirs.export(
        {
            "edited.md": "v1\n",
            "theirs.md": "v2\n",
            "both.md": "v2\n",
            "deleted.md": "v1\n",
            "same.md": "v1\n",
            "new.md": "v2\n",
        },
        T2,
    )
    result = seed(dirs.snapshot, dirs.memory, "update", dirs.saves)
    assert result["merge"] == "three-way"
    outcomes = {note["key"]: note["outcome"] for note in result["notes"]}
    assert outcomes == {
        "both.md": "saved-copy",
        "deleted.md": "kept-local-removal",
        "edited.md": "kept-local-edit",
        "gone-edited.md": "kept-removed-in-snapshot",
        "gone.md": "removed",
        "new.md": "added",
        "theirs.md": "updated",
    }
    assert result["written"] == ["both.md", "new.md", "theirs.md"]
    assert result["removed"] == ["gone.md"]
    assert result["unchanged"] == 1
    [saved] = result["saved"]
    assert saved["key"] == "both.md"
    assert Path(saved["saved_to"]).read_text() == "the agent's\n"
    assert Path(saved["saved_to"]).is_relative_to(dirs.saves)
    assert dirs.files() == {
        "both.md": "v2\n",
        "edited.md": "the agent's\n",
        "gone-edited.md": "the agent's\n",
        "new.md": "v2\n",
        "own.md": "the agent's own\n",
        "same.md": "v1\n",
        "theirs.md": "v2\n",
    }
    lines = seed_lines(result)
    assert lines[0].endswith("(update, three-way): 3 written, 1 removed, 1 unchanged")
    assert "kept local edit: edited.md (the snapshot did not change it)" in lines
    assert "updated: theirs.md (the snapshot changed it; you had not)" in lines
    assert f"saved: both.md: your copy is at {saved['saved_to']}" in lines
    assert "removed: gone.md (the snapshot removed it; you had not changed it)" in lines

    # The base is now this snapshot: the kept edit is still the agent's, nothing is saved.
    again = seed(dirs.snapshot, dirs.memory, "update", dirs.saves)
    assert [note["outcome"] for note in again["notes"]] == ["kept-local-removal", "kept-local-edit"]
    assert again["written"] == again["saved"] == []


def test_an_old_marker_updates_two_ways(dirs: Dirs) -> None:
    dirs.export({"a.md": "v1\n", "b.md": "v1\n"}, T1)
    seed(dirs.snapshot, dirs.memory, "initialize", dirs.saves)
    marker = json.loads((dirs.memory / MARKER).read_text())
    del marker["entries"]  # as an older memsync wrote it
    (dirs.memory / MARKER).write_text(json.dumps(marker))
    dirs.write("a.md", "the agent's\n")
    dirs.export({"a.md": "v1\n"}, T2)
    result = seed(dirs.snapshot, dirs.memory, "update", dirs.saves)
    assert result["merge"] == "two-way"
    assert [(note["key"], note["outcome"]) for note in result["notes"]] == [("a.md", "saved-copy")]
    assert dirs.files() == {"a.md": "v1\n", "b.md": "v1\n"}  # b.md: not known to be ours
    assert any(
        line.startswith("note: no record of what the last seed wrote")
        for line in seed_lines(result)
    )
    # The seed recorded its entries: the next update is three-way again.
    assert seed(dirs.snapshot, dirs.memory, "update", dirs.saves)["merge"] == "three-way"


def test_a_note_that_became_a_folder_and_back(dirs: Dirs) -> None:
    dirs.export({"d": "a note\n"}, T1)
    seed(dirs.snapshot, dirs.memory, "initialize", dirs.saves)
    dirs.export({"d/n.md": "now a folder\n"}, T2)
    result = seed(dirs.snapshot, dirs.memory, "update", dirs.saves)
    assert (result["removed"], result["written"]) == (["d"], ["d/n.md"])
    assert dirs.files() == {"d/n.md": "now a folder\n"}
    dirs.export({"d": "a note again\n"}, "2026-11-30T11:00:00Z")
    result = seed(dirs.snapshot, dirs.memory, "update", dirs.saves)
    assert (result["removed"], result["written"]) == (["d/n.md"], ["d"])
    assert dirs.files() == {"d": "a note again\n"}


def test_an_agent_note_in_the_way_refuses_the_whole_update(dirs: Dirs) -> None:
    dirs.export({"a.md": "v1\n"}, T1)
    seed(dirs.snapshot, dirs.memory, "initialize", dirs.saves)
    dirs.write("d", "the agent's note\n")
    dirs.export({"a.md": "v2\n", "d/n.md": "a folder now\n"}, T2)
    with pytest.raises(UnsafeKey, match="not a directory"):
        seed(dirs.snapshot, dirs.memory, "update", dirs.saves)
    assert dirs.files() == {"a.md": "v1\n", "d": "the agent's note\n"}


def test_a_forged_marker_cannot_remove_anything_outside(dirs: Dirs, tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("v1\n")
    dirs.export({"a.md": "v1\n"}, T1)
    seed(dirs.snapshot, dirs.memory, "initialize", dirs.saves)
    entries = {"../outside.md": entry_checksum("v1\n"), "a.md": entry_checksum("v1\n")}
    (dirs.memory / MARKER).write_text(json.dumps(_marker(entries)))
    result = seed(dirs.snapshot, dirs.memory, "update", dirs.saves)
    assert result["merge"] == "two-way"
    assert result["removed"] == []
    assert outside.read_text() == "v1\n"


# --- where an agent type's memory is ---------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def test_memory_dir_of_each_scope(project: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {"HOME": str(home)}
    inside = project / "src"
    inside.mkdir()
    assert agent_memory_dir(inside, env, "code-reviewer", "project") == (
        project / ".claude" / "agent-memory" / "code-reviewer"
    )
    assert agent_memory_dir(inside, env, "code-reviewer", "local") == (
        project / ".claude" / "agent-memory-local" / "code-reviewer"
    )
    assert agent_memory_dir(inside, env, "code-reviewer", "user") == (
        home / ".claude" / "agent-memory" / "code-reviewer"
    )
    configured = {"HOME": str(home), "CLAUDE_CONFIG_DIR": str(tmp_path / "claude")}
    assert agent_memory_dir(tmp_path, configured, "a", "user") == (
        tmp_path / "claude" / "agent-memory" / "a"
    )
    made = agent_memory_dir(inside, env, "a", "local", create=True)
    assert made.is_dir()
    with pytest.raises(ConfigError, match="not inside a git repository"):
        agent_memory_dir(tmp_path, env, "a", "project")


@pytest.mark.parametrize("name", ["../x", "..", ".hidden", "a/b", "", "a\\b", "-x", "x" * 101])
def test_agent_types_that_could_leave_the_folder_are_refused(project: Path, name: str) -> None:
    with pytest.raises(ConfigError, match="agent type"):
        agent_memory_dir(project, {"HOME": str(project)}, name, "project")
    assert not (project / ".claude").exists()


def test_a_symlink_on_the_way_is_refused(project: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project / ".claude").symlink_to(elsewhere)
    for scope in ("project", "local"):
        with pytest.raises(ConfigError, match="symbolic link"):
            agent_memory_dir(project, {}, "a", scope, create=True)
    assert list(elsewhere.iterdir()) == []
