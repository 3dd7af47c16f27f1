"""Qwen Code's team folder: `memsync setup qwen`, then the real watcher syncs
`~/.qwen/projects/<checkout>/memory/team/` both ways, and the session-start hook Qwen
Code runs prints the team's index and names that folder (real CLI, real server).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

from tests.integration.test_names import checkout_user
from tests.integration.test_watch import FAST, start_watch
from tests.integration.users import User
from tests.integration.watchkit import WatchProcess, server_entries, wait_until
from tests.liveserver import LiveServer


def qwen_folder(user: User) -> Path:
    """Qwen Code's memory folder for the user's checkout, spelled out as Qwen Code 0.24.4
    names it (`<home>/.qwen/projects/<every non-alphanumeric as ->/memory`)."""
    checkout = str(user.home.resolve())
    name = "".join(char if char.isascii() and char.isalnum() else "-" for char in checkout)
    return user.home / ".qwen" / "projects" / name / "memory"


def session_start(user: User) -> str:
    """What Qwen Code's SessionStart hook prints in the user's checkout (Qwen Code sends
    the session's `cwd` as JSON on stdin); before `memsync setup qwen`, the command
    Claude Code's hook runs."""
    settings_path = user.home / ".qwen" / "settings.json"
    command = f"{Path(sys.executable).with_name('memsync')} context --hook"
    if settings_path.exists():
        settings = json.loads(settings_path.read_text())
        command = settings["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    hook = subprocess.run(
        shlex.split(command),
        input=json.dumps({"cwd": str(user.home), "hook_event_name": "SessionStart"}),
        env=user.env,
        cwd=sys.prefix,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return hook.stdout


def test_qwen_codes_team_folder_syncs_both_ways_and_starts_its_sessions(
    live: LiveServer, bob: User, tmp_path: Path, watchers: list[WatchProcess]
) -> None:
    alice = checkout_user(
        "alice", tmp_path, live, live.token(name="alice"), "https://github.com/acme/app"
    )
    before = session_start(alice)  # Claude Code's folder, remembered for the checkout
    assert "/.claude/projects/" in before
    setup = alice.json("setup", "qwen")
    assert setup["changed"] is True
    alice.team = qwen_folder(alice) / "team"
    bob.write("build.md", "Run `make check` before pushing.\n")
    bob.write("MEMORY.md", "- [Build](build.md) — make check before every push\n")
    bob.json("push")

    start_watch(alice, watchers, *FAST)
    assert alice.read("build.md") == "Run `make check` before pushing.\n"
    rows = {row["check"]: row for row in alice.json("doctor")["checks"]}
    assert rows["qwen"]["detail"] == "sessions here start with the team index"
    assert rows["claude code"]["ok"]
    assert not rows["claude code"].get("warning")

    # What a Qwen Code session in the checkout starts with (its SessionStart hook).
    block = session_start(alice)
    assert "make check before every push" in block
    assert f"{alice.team}/" in block

    # A note Qwen Code writes in that folder reaches the teammate.
    alice.write("db.md", "Use PostgreSQL 16.\n")
    assert wait_until(lambda: server_entries(live).get("db.md") == "Use PostgreSQL 16.\n")
    assert bob.json("pull")["written"] == ["db.md"]
    assert bob.read("db.md") == "Use PostgreSQL 16.\n"

    # With Claude Code set up too, the checkout keeps one folder, Claude Code's, and
    # doctor says that Qwen Code reads it but asks before writing there.
    alice.json("setup", "claude-code")
    rows = {row["check"]: row for row in alice.json("doctor")["checks"]}
    assert rows["qwen"]["warning"] is True
    assert str(alice.team) in rows["qwen"]["detail"]
    assert "/.claude/projects/" in rows["team dir"]["detail"]
