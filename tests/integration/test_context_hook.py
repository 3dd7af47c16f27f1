"""`memsync context` as Claude Code runs it: real CLI, real server, no watcher.

Without a watcher the session-start hook pulls first (briefly) and the session-end hook
sends what the session wrote in the background. A hook never fails a session: not set
up prints nothing, a server that is away still gives the local block, exit 0 always.
"""

from __future__ import annotations

import json
import random
import string
import subprocess
import sys
from pathlib import Path

from tests.integration.users import User
from tests.integration.watchkit import server_entries, wait_until
from tests.liveserver import LiveServer


def hook(user: User, *flags: str) -> subprocess.CompletedProcess[str]:
    """`memsync context FLAGS` with Claude Code's hook JSON on stdin."""
    script = Path(sys.executable).with_name("memsync")
    payload = json.dumps({"cwd": str(user.home), "hook_event_name": "SessionStart"})
    return subprocess.run(
        [str(script), "context", *flags],
        input=payload,
        env=user.env,
        cwd=user.home,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_session_start_pulls_a_teammates_line_first(alice: User, bob: User) -> None:
    bob.write("MEMORY.md", "# Team\n- [DB](db.md) — Postgres 16\n")
    bob.write("db.md", "---\nname: db\ndescription: Postgres 16\n---\nPostgres 16.\n")
    assert bob.run("push").returncode == 0
    started = hook(alice, "--hook")
    assert started.returncode == 0, started.stderr
    assert "# Team memory for acme/app (shared through memsync)" in started.stdout
    assert f"Team memory folder: {alice.team}/" in started.stdout
    assert "- [DB](db.md) — Postgres 16" in started.stdout
    assert "Freshness: pulled from the team's server just now." in started.stdout
    assert alice.read("db.md").startswith("---")


def test_session_end_sends_what_the_session_wrote(alice: User, live: LiveServer) -> None:
    alice.write("notes/x.md", "---\nname: x\ndescription: the x\n---\nThe x.\n")
    ended = hook(alice, "--session-end")
    assert ended.returncode == 0, ended.stderr
    assert ended.stdout == ""
    assert wait_until(lambda: "notes/x.md" in server_entries(live), timeout=20)


def test_a_hook_never_fails_the_session(alice: User, tmp_path: Path) -> None:
    alice.write("MEMORY.md", "- [kept](kept.md) — local copy\n")
    away = dict(alice.env, MEMSYNC_SERVER="http://127.0.0.1:9")
    script = str(Path(sys.executable).with_name("memsync"))
    result = subprocess.run(
        [script, "context"], env=away, cwd=alice.home, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0
    assert "- [kept](kept.md) — local copy" in result.stdout
    assert "never synced on this machine" in result.stdout
    assert len(result.stderr.splitlines()) <= 1
    bare = {"PATH": alice.env["PATH"], "HOME": str(tmp_path / "nobody")}
    nothing = subprocess.run(
        [script, "context", "--hook"],
        env=bare,
        cwd=tmp_path,
        input="{}",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (nothing.returncode, nothing.stdout) == (0, "")


def test_the_block_says_when_the_index_here_cannot_be_shared(alice: User) -> None:
    rng = random.Random(5)
    secret = "AKIA" + "".join(rng.choices(string.ascii_uppercase + "234567", k=16))
    alice.write("MEMORY.md", f"- [a](a.md) — deploy with {secret}\n")
    block = hook(alice, "--hook", "--no-pull").stdout
    assert "the team index here is newer than the team's, and it cannot be shared" in block
    assert "(AWS access key ID) on line 1" in block
    # The block goes to the model's provider: the credential is not in it.
    assert secret not in block
    assert "- [a](a.md) — deploy with [REDACTED:" in block
