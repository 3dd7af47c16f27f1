"""`memsync snapshot check` and `seed` through the real CLI, on committed snapshots.

No server is involved: a snapshot is a folder in a repository, made here by the same
`export_snapshot` the export command uses. Hostile snapshots (traversal keys, files that
do not match their checksums, symlinks) are refused and change nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memsync_protocol.checksums import entry_checksum, repo_checksum
from sync_client.snapshot import Memory, export_snapshot, manifest_bytes
from sync_server.auth import mint_token

AGENT = "reviewer"
MARKER = ".snapshot-synced.json"


class Env:
    """A user's environment, a snapshots root and a subagent memory dir."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.snapshots = root / "snapshots"
        self.memory = root / "agent-memory"
        self.state = root / "state"
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(root),
            "XDG_CONFIG_HOME": str(root / "config"),
            "XDG_STATE_HOME": str(self.state),
        }

    @property
    def snapshot(self) -> Path:
        return self.snapshots / AGENT

    def export(self, texts: dict[str, str], updated_at: str, version: int | None = 1) -> None:
        memory = Memory("acme/app", version, updated_at, dict(texts))
        self.snapshot.mkdir(parents=True, exist_ok=True)
        export_snapshot(memory, self.snapshot)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(Path(sys.executable).with_name("memsync")), "snapshot", *args],
            env=self.env,
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def check(self) -> str:
        result = self.run(
            "check", "--agent", AGENT, "--memory-dir", str(self.memory),
            "--snapshots", str(self.snapshots), "--json",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        answer: dict[str, Any] = json.loads(result.stdout)
        assert list(answer) == ["action"]
        human = self.run(
            "check", "--agent", AGENT, "--memory-dir", str(self.memory),
            "--snapshots", str(self.snapshots),
        )  # fmt: skip
        assert human.stdout == f"{answer['action']}\n"
        return str(answer["action"])

    def seed(self, *flags: str, expect: int = 0) -> Any:
        result = self.run(
            "seed", "--agent", AGENT, "--memory-dir", str(self.memory),
            "--snapshots", str(self.snapshots), *flags, "--json",
        )  # fmt: skip
        assert result.returncode == expect, (result.stdout, result.stderr)
        return json.loads(result.stdout) if expect == 0 else result.stderr

    def memory_files(self) -> dict[str, str]:
        return {
            path.relative_to(self.memory).as_posix(): path.read_text()
            for path in sorted(self.memory.rglob("*"))
            if path.is_file() and not path.is_symlink() and path.name != MARKER
        }


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


T1 = "2026-11-30T09:00:00Z"
T2 = "2026-11-30T10:00:00Z"


def test_the_three_answers(env: Env) -> None:
    assert env.check() == "none"  # no snapshot at all
    env.export({"a.md": "one\n", "dir/b.md": "two\n"}, T1)
    assert env.check() == "initialize"  # no memory dir yet
    env.memory.mkdir()
    (env.memory / ".hidden").write_text("not memory\n")
    assert env.check() == "initialize"  # hidden files are not memory
    (env.memory / "mine.md").write_text("the subagent's own note\n")
    assert env.check() == "prompt-update"  # memory, no marker
    env.seed("--update")
    assert env.check() == "none"
    env.export({"a.md": "one, revised\n", "dir/b.md": "two\n"}, T2)
    assert env.check() == "prompt-update"  # a newer snapshot
    env.seed("--update")
    assert env.check() == "none"
    # A different snapshot with the same time (two commits in one second) also asks.
    env.export({"a.md": "one, again\n"}, T2)
    assert env.check() == "prompt-update"
    # A marker that is not JSON asks too.
    env.seed("--update")
    (env.memory / MARKER).write_text("{not json")
    assert env.check() == "prompt-update"


def test_initialize_copies_and_records_synced_from(env: Env) -> None:
    env.export({"a.md": "one\n", "dir/b.md": "two\n"}, T1, version=7)
    result = env.seed()
    assert result["action"] == "initialize"
    assert result["written"] == ["a.md", "dir/b.md"]
    assert result["saved"] == []
    assert env.memory_files() == {"a.md": "one\n", "dir/b.md": "two\n"}
    marker = json.loads((env.memory / MARKER).read_text())
    assert marker["syncedFrom"] == T1
    assert marker["version"] == 7
    assert (
        marker["checksum"] == json.loads((env.snapshot / "snapshot.json").read_text())["checksum"]
    )
    # A dir that holds memory is not initialized over: nothing changes.
    (env.memory / "a.md").write_text("edited by the subagent\n")
    stderr = env.seed(expect=2)
    assert "already holds memory files" in stderr
    assert "--update" in stderr
    assert (env.memory / "a.md").read_text() == "edited by the subagent\n"


def test_update_overwrites_and_saves_local_edits(env: Env) -> None:
    env.export({"a.md": "one\n", "b.md": "two\n"}, T1)
    env.seed()
    (env.memory / "a.md").write_text("the subagent's edit\n")
    (env.memory / "own.md").write_text("the subagent's own note\n")
    env.export({"a.md": "one, revised\n", "b.md": "two\n", "c.md": "three\n"}, T2)
    result = env.seed("--update")
    assert result["written"] == ["a.md", "c.md"]
    assert result["unchanged"] == 1
    assert result["removed"] == []
    assert [row["key"] for row in result["saved"]] == ["a.md"]
    saved = Path(result["saved"][0]["saved_to"])
    assert saved.read_text() == "the subagent's edit\n"
    assert saved.is_relative_to(env.state)
    files = env.memory_files()
    assert files["a.md"] == "one, revised\n"
    assert files["c.md"] == "three\n"
    assert files["own.md"] == "the subagent's own note\n"  # --update keeps it
    human = env.run(
        "seed", "--agent", AGENT, "--memory-dir", str(env.memory),
        "--snapshots", str(env.snapshots), "--update",
    )  # fmt: skip
    assert human.returncode == 0
    assert "0 written" in human.stdout  # nothing differs any more: nothing saved again


def test_replace_makes_the_dir_equal_and_saves_what_it_removes(env: Env) -> None:
    env.export({"a.md": "one\n", "b.md": "two\n"}, T1)
    env.seed()
    (env.memory / "b.md").write_text("edited\n")
    (env.memory / "notes").mkdir()
    (env.memory / "notes" / "own.md").write_text("own\n")
    env.export({"a.md": "one\n"}, T2)
    human = env.run(
        "seed", "--agent", AGENT, "--memory-dir", str(env.memory),
        "--snapshots", str(env.snapshots), "--replace",
    )  # fmt: skip
    assert human.returncode == 0, human.stderr
    assert "saved: b.md: your copy is at " in human.stdout
    assert "saved: notes/own.md: your copy is at " in human.stdout
    assert env.memory_files() == {"a.md": "one\n"}
    assert not (env.memory / "notes").exists()
    copies = sorted((env.state / "memsync" / "snapshots").rglob("*.md"))
    assert sorted(path.read_text() for path in copies) == ["edited\n", "own\n"]
    assert env.check() == "none"


def test_a_bad_agent_type_is_a_usage_error(env: Env) -> None:
    env.export({"a.md": "one\n"}, T1)
    bad = env.run("seed", "--agent", "../x", "--memory-dir", str(env.memory))
    assert bad.returncode == 2
    assert "agent type" in bad.stderr
    assert not env.memory.exists()


def _forge(env: Env, manifest: dict[str, Any]) -> None:
    env.snapshot.mkdir(parents=True, exist_ok=True)
    (env.snapshot / "snapshot.json").write_text(json.dumps(manifest))


def test_hostile_snapshot_with_a_traversal_key(env: Env) -> None:
    (env.root / "outside.md").write_text("precious\n")
    text = "overwritten\n"
    entries = {"../outside.md": entry_checksum(text)}
    _forge(
        env,
        {
            "format": 1,
            "repo": "acme/app",
            "version": 1,
            "updatedAt": T1,
            "checksum": repo_checksum(entries, 1),
            "entries": entries,
        },
    )
    assert env.check() == "none"
    stderr = env.seed(expect=1)
    assert "refusing key '../outside.md'" in stderr
    assert (env.root / "outside.md").read_text() == "precious\n"
    assert not env.memory.exists()


def test_hostile_snapshot_whose_files_do_not_match(env: Env) -> None:
    env.export({"a.md": "one\n", "b.md": "two\n"}, T1)
    (env.snapshot / "a.md").write_text("tampered\n")
    assert env.check() == "none"
    stderr = env.seed(expect=1)
    assert "a.md does not match its checksum" in stderr
    assert not env.memory.exists()
    (env.snapshot / "a.md").unlink()
    assert "a.md is missing" in env.seed(expect=1)
    # A file the manifest does not list, and a manifest whose own checksum is wrong.
    env.export({"a.md": "one\n"}, T1)
    (env.snapshot / "extra.md").write_text("smuggled\n")
    assert "files not in snapshot.json: extra.md" in env.seed(expect=1)
    (env.snapshot / "extra.md").unlink()
    manifest = json.loads((env.snapshot / "snapshot.json").read_text())
    manifest["checksum"] = entry_checksum("something else")
    (env.snapshot / "snapshot.json").write_text(json.dumps(manifest))
    assert "checksum does not match its entries" in env.seed(expect=1)
    assert env.check() == "none"


def test_hostile_snapshot_with_a_symlinked_file(env: Env, tmp_path: Path) -> None:
    secret_place = tmp_path / "elsewhere.md"
    secret_place.write_text("one\n")
    env.export({"a.md": "one\n"}, T1)
    (env.snapshot / "a.md").unlink()
    (env.snapshot / "a.md").symlink_to(secret_place)
    assert env.check() == "none"
    assert "a.md: symlink" in env.seed(expect=1)
    # A symlinked snapshot folder is no snapshot either.
    real = tmp_path / "real"
    env.snapshot.rename(real)
    (real / "a.md").unlink()
    (real / "a.md").write_text("one\n")
    env.snapshot.symlink_to(real)
    assert env.check() == "none"
    assert "symbolic link" in env.seed(expect=1)


def test_symlinks_in_the_memory_dir_are_never_followed(env: Env, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.md").write_text("not the subagent's\n")
    env.export({"a.md": "one\n", "notes/b.md": "two\n"}, T1)
    env.memory.mkdir()
    (env.memory / "a.md").symlink_to(outside / "a.md")
    (env.memory / "notes").symlink_to(outside)
    assert env.check() == "prompt-update"
    for flags in ((), ("--update",), ("--replace",)):
        stderr = env.seed(*flags, expect=1 if flags else 2)
        assert "symbolic link" in stderr or "already holds memory" in stderr
    assert (outside / "a.md").read_text() == "not the subagent's\n"
    assert sorted(path.name for path in outside.iterdir()) == ["a.md"]
    assert not (env.memory / MARKER).exists()


def test_manifest_bytes_are_deterministic() -> None:
    texts = {"b.md": "two\n", "a.md": "one ✓\n"}
    first = manifest_bytes(Memory("acme/app", 3, T1, dict(texts)))
    second = manifest_bytes(Memory("acme/app", 3, T1, dict(reversed(list(texts.items())))))
    assert first == second
    assert first.endswith(b"}\n")
    assert json.loads(first)["entries"] == {
        "a.md": entry_checksum("one ✓\n"),
        "b.md": entry_checksum("two\n"),
    }


def test_check_outside_a_repository_is_none(env: Env) -> None:
    result = env.run("check", "--agent", AGENT, "--memory-dir", str(env.memory))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "none\n"
    seeded = env.run("seed", "--agent", AGENT, "--memory-dir", str(env.memory))
    assert seeded.returncode == 2
    assert "not inside a git repository" in seeded.stderr


def test_a_snapshot_holding_a_secret_is_not_seeded(env: Env) -> None:
    secret = mint_token().secret
    # Hand-made (an export leaves such a file out): the checksums all match.
    env.export({"a.md": "fine\n", "leak.md": f"token = {secret}\n"}, T1)
    assert env.check() == "none"
    stderr = env.seed(expect=1)
    assert "leak.md: secret" in stderr
    assert secret not in stderr
    assert not env.memory.exists()
