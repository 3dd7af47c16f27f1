"""The CLI on alice's own spaces, as she sees it: `--agents` works on her user-scope
agent memory from any folder (no checkout, no repo), with the commands and answers of
team memory; `--personal` and `--agents` together is refused in one line; and no word
the client prints on these paths names a space by the server's internal id
(`~alice/acme/app`, `~alice/~`, `~`): she knows them as "your personal memory for
acme/app" and "your agent memory"."""

from __future__ import annotations

import calendar
import dataclasses
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.integration.conftest import REPO
from tests.integration.test_personal_sync import alice_machine
from tests.integration.test_stale import _git
from tests.integration.users import User, make_user
from tests.liveserver import LiveServer

NOTE = "reviewer/notes.md"


def _anywhere(user: User) -> User:
    """`user` in a folder that is no checkout and names no repo or team dir."""
    env = {k: v for k, v in user.env.items() if k not in ("MEMSYNC_REPO", "MEMSYNC_DIR")}
    return dataclasses.replace(user, env=env)


class Said:
    """Every run's output, human and JSON, to check the words of all of them at once."""

    def __init__(self) -> None:
        self.outputs: list[str] = []

    def run(self, user: User, *args: str, expect: int = 0) -> subprocess.CompletedProcess[str]:
        result = user.run(*args)
        self.outputs.append(f"$ memsync {' '.join(args)}\n{result.stdout}{result.stderr}")
        assert result.returncode == expect, (args, result.returncode, result.stdout, result.stderr)
        return result

    def json(self, user: User, *args: str, expect: int = 0) -> Any:
        return json.loads(self.run(user, *args, "--json", expect=expect).stdout)


def test_agent_memory_from_anywhere_and_spaces_in_their_persons_words(
    live: LiveServer, tmp_path: Path
) -> None:
    said = Said()
    laptop = alice_machine(live, tmp_path, "alice-laptop", "-home-alice-src-app")
    desktop = alice_machine(live, tmp_path, "alice-desktop", "-work-clones-app")
    here, there = _anywhere(laptop), _anywhere(desktop)
    agents = laptop.home / ".claude" / "agent-memory"
    (agents / "reviewer").mkdir(parents=True)
    (agents / NOTE).write_text("prefer small diffs\n", encoding="utf-8")

    pushed = said.run(here, "push", "--agents")
    assert "creating your agent memory on" in pushed.stderr
    assert "pushed 1 file(s)" in pushed.stdout
    status = said.run(here, "status", "--agents")
    assert f"synced: {agents} <-> your agent memory" in status.stdout
    # (No root index to miss: each agent's folder has its own MEMORY.md.)
    assert "everything is in sync" in status.stdout
    (agents / NOTE).write_text("prefer small diffs\nname the test first\n", encoding="utf-8")
    said.json(here, "sync", "--agents")

    # The desktop, from its HOME (no checkout), pulls, reads the history, restores.
    said.run(there, "pull", "--agents")
    synced = desktop.home / ".claude" / "agent-memory" / NOTE
    assert synced.read_text(encoding="utf-8") == "prefer small diffs\nname the test first\n"
    log = said.json(there, "log", "--agents")
    assert [commit["version"] for commit in log["commits"]] == [2, 1]
    assert said.run(there, "show", "--agents", f"{NOTE}@1").stdout == "prefer small diffs\n"
    assert "+name the test first" in said.run(there, "diff", "--agents", f"{NOTE}@1").stdout
    restored = said.run(there, "restore", "--agents", f"{NOTE}@1")
    assert f"restored {NOTE} to version 1 (now 3)" in restored.stdout
    assert synced.read_text(encoding="utf-8") == "prefer small diffs\n"
    said.run(here, "pull", "--agents")
    assert (agents / NOTE).read_text(encoding="utf-8") == "prefer small diffs\n"

    # The private memory folder of the repo, in the same words (the watchers' lines and
    # the other commands' are checked in test_personal_sync).
    said.run(laptop, "enable", "--personal")
    (laptop.team.parent / "private.md").write_text("mine only\n", encoding="utf-8")
    pushed = said.run(laptop, "push", "--personal")
    assert f"creating your personal memory for {REPO} on" in pushed.stderr
    status = said.run(laptop, "status")
    assert f"<-> your personal memory for {REPO}" in status.stdout
    listed = said.run(laptop, "status", "--all")
    assert f"your personal memory for {REPO}  {laptop.team.parent} (minus team/)  (" in (
        listed.stdout
    )
    assert f"your agent memory  {agents}  (" in listed.stdout

    # Her home is a checkout; a team note cites a line that changed since it was
    # written: the team's status counts it, her personal memory's does not.
    (laptop.home / "a.py").write_text("one = 1\n", encoding="utf-8")
    _git(laptop.home, "init", "-q")
    _git(laptop.home, "add", "a.py")
    _git(laptop.home, "commit", "-qm", "One", day=1)
    laptop.write("cites.md", "One is `a.py:1`.\n")
    written = calendar.timegm((2026, 1, 1, 18, 0, 0))
    os.utime(laptop.team / "cites.md", (written, written))
    (laptop.home / "a.py").write_text("one = 2\n", encoding="utf-8")
    _git(laptop.home, "commit", "-qam", "Two", day=2)
    assert said.json(laptop, "status")["stale_notes"] == 1
    assert said.json(laptop, "status", "--personal")["stale_notes"] == 0

    # Both at once, or a repo with --agents: one line, exit 2, before any request.
    both = said.run(laptop, "log", "--personal", "--agents", expect=2)
    assert both.stderr == (
        "memsync: --personal and --agents name different folders: give one of them\n"
    )
    repo = said.run(here, "pull", "--agents", "--repo", REPO, expect=2)
    assert repo.stderr.count("\n") == 1
    assert "drop --repo" in repo.stderr

    # A token of no person has no space: its push says so, not "no memsync server".
    nobody = _anywhere(make_user("ci", tmp_path, live, live.token(name="ci bot")))
    (nobody.home / ".claude" / "agent-memory" / NOTE).parent.mkdir(parents=True)
    (nobody.home / ".claude" / "agent-memory" / NOTE).write_text("ci habit\n", encoding="utf-8")
    refused = said.run(nobody, "push", "--agents", expect=1)
    assert "this token belongs to no person, so it has no personal space" in refused.stderr
    missing = said.run(nobody, "restore", "--agents", NOTE, expect=2)
    assert "(it holds nothing of your agent memory yet)" in missing.stderr

    named = [line for output in said.outputs for line in output.splitlines() if "~" in line]
    assert not named, named
