"""`memsync context` as Claude Code runs it: real CLI, real server, real watchers.

Without a watcher the session-start hook pulls first (briefly) and the session-end hook
sends what the session wrote in the background. A hook never fails a session: not set
up prints nothing, a server that is away still gives the local block, exit 0 always.
The block tells the truth: a watcher paused on a revoked token, no token in this
session's environment, a conflict that replaced a note here, an index missing here.
"""

from __future__ import annotations

import json
import random
import socket
import string
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_watch import FAST, start_watch
from tests.integration.users import User
from tests.integration.watchkit import (
    WatchProcess,
    server_entries,
    wait_until,
    watch_server,
    watch_state,
)
from tests.liveserver import LiveServer

# What a session must never be told while nothing syncs its notes.
CURRENT = ("kept current by the memsync watcher", "less than a minute ago", "pulled from")


@pytest.fixture
def live(tmp_path: Path) -> Iterator[LiveServer]:
    """A server that notices a revoked token at once."""
    with watch_server(tmp_path) as server:
        yield server


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


def _another_terminal(user: User) -> dict[str, str]:
    """The user's environment in a terminal where the quick start's exports never ran."""
    return {
        name: value
        for name, value in user.env.items()
        if name not in ("MEMSYNC_SERVER", "MEMSYNC_TOKEN")
    }


def test_a_watcher_paused_on_a_revoked_token_is_what_the_block_says(
    alice: User, live: LiveServer, watchers: list[WatchProcess]
) -> None:
    alice.env.pop("MEMSYNC_TOKEN")
    assert alice.run("login", "--token", live.token(name="alice-laptop")).returncode == 0
    alice.write("MEMORY.md", "- [DB](db.md) — Postgres 16\n")
    alice.write("db.md", "---\nname: db\ndescription: Postgres 16\n---\nPostgres 16.\n")
    watcher = start_watch(alice, watchers, *FAST)
    assert wait_until(lambda: "MEMORY.md" in server_entries(live)), watcher.log()
    block = hook(alice, "--hook").stdout
    assert "Freshness: kept current by the memsync watcher." in block
    # Every session start waits for this: with a watcher, nothing heavy is imported.
    probe = (
        "import sys; from sync_client.context import run; run(['--no-pull']);"
        "print(sorted(m for m in ('click', 'httpx', 'rich', 'watchdog', 'dataclasses',"
        " 'sync_client.config', 'scanner') if m in sys.modules), file=sys.stderr)"
    )
    probed = subprocess.run(
        [sys.executable, "-c", probe],
        env=alice.env,
        cwd=alice.home,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert "kept current by the memsync watcher" in probed.stdout
    assert probed.stderr.strip().splitlines()[-1] == "[]"

    assert live.store.revoke_token("alice-laptop") == 1
    alice.write("later.md", "---\nname: later\ndescription: x\n---\nLater.\n")
    assert wait_until(lambda: (watch_state(alice) or {}).get("suppressed") is not None)
    block = hook(alice, "--hook").stdout
    freshness = next(line for line in block.splitlines() if line.startswith("Freshness:"))
    assert freshness.startswith("Freshness: NOT SYNCING: the memsync watcher is paused")
    assert "the server refused the token" in freshness
    assert "notes saved now reach nobody" in freshness
    assert "`memsync login`" in freshness
    assert not any(words in block for words in CURRENT)
    assert "- [DB](db.md) — Postgres 16" in block

    # What the block tells the user to do is what lifts the pause.
    assert alice.run("login", "--token", live.token(name="alice-laptop-2")).returncode == 0
    assert wait_until(lambda: "later.md" in server_entries(live)), watcher.log()
    assert wait_until(lambda: "kept current by the memsync watcher" in hook(alice).stdout)
    # A watcher that stopped is said too.
    watcher.terminate()
    block = hook(alice, "--hook", "--no-pull").stdout
    assert "Watcher: not running here (stopped at " in block
    assert "kept current" not in block


def test_a_server_that_does_not_answer_is_what_the_block_says(
    alice: User, watchers: list[WatchProcess]
) -> None:
    with socket.socket() as closed:  # a loopback port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    alice.env["MEMSYNC_SERVER"] = f"http://127.0.0.1:{port}"
    watcher = WatchProcess(alice.env, alice.home, *FAST)
    watchers.append(watcher)
    assert wait_until(lambda: bool((watch_state(alice) or {}).get("unreachable_since"))), (
        watcher.log()
    )
    block = hook(alice, "--hook").stdout
    assert "Freshness: the team's server has not answered for less than a minute: notes saved" in (
        block
    )
    assert "kept here and sent when it answers; never synced on this machine." in block
    assert "kept current" not in block


def test_without_credentials_the_block_shows_the_synced_index_and_says_syncing_is_off(
    alice: User,
) -> None:
    alice.write("MEMORY.md", "- [DB](db.md) — Postgres 16\n")
    assert alice.run("sync").returncode == 0
    # The quick start: the token only in this shell. Enabling says what that means.
    enabled = alice.run("enable")
    assert enabled.returncode == 0, enabled.stderr
    assert "the token comes only from MEMSYNC_TOKEN" in enabled.stderr
    setup = alice.run("setup", "claude-code")
    assert setup.returncode == 0, setup.stderr
    assert setup.stderr.splitlines() == [
        "memsync: warning: the token comes only from MEMSYNC_TOKEN, which a Claude Code"
        " started from another terminal does not see: there, syncing is off (the session"
        " still gets the team's index as last synced, and says so); run `memsync login` to"
        " save it in credentials.toml"
    ]

    other = User(alice.name, alice.home, alice.team, _another_terminal(alice))
    started = hook(other, "--hook")
    assert started.returncode == 0, started.stderr
    block = started.stdout
    assert "- [DB](db.md) — Postgres 16" in block
    freshness = [line for line in block.splitlines() if "syncing is off" in line]
    assert len(freshness) == 1
    assert freshness[0].startswith(
        "Freshness: NOT SYNCING: syncing is off on this machine (memsync has no server URL"
        " or token here)"
    )
    assert "they were last synced less than a minute ago" in freshness[0]
    assert "the user can run `memsync login`" in freshness[0]
    assert not any(words in block for words in CURRENT[:1])

    # `memsync login` there is the fix the line names.
    login = other.run(
        "login", "--server", alice.env["MEMSYNC_SERVER"], "--token", alice.env["MEMSYNC_TOKEN"]
    )
    assert login.returncode == 0, login.stderr
    block = hook(other, "--hook").stdout
    assert "NOT SYNCING" not in block
    assert "- [DB](db.md) — Postgres 16" in block
    again = alice.run("setup", "claude-code")
    assert (again.returncode, again.stderr) == (0, "")


def test_a_conflict_that_replaced_a_note_here_is_named_with_its_saved_copy(
    alice: User, bob: User
) -> None:
    alice.write("a.md", "one\n")
    assert alice.run("push").returncode == 0
    assert bob.run("pull").returncode == 0
    bob.write("a.md", "bob's line\n")
    assert bob.run("push").returncode == 0
    alice.write("a.md", "alice's line\n")
    assert alice.run("pull").returncode == 3
    block = hook(alice, "--hook", "--no-pull").stdout
    assert "Conflicts here: memsync replaced this machine's text of these notes" in block
    line = next(line for line in block.splitlines() if line.startswith("- `a.md`: "))
    saved = Path(line.split(" saved at ", 1)[1])
    assert saved.read_text() == "alice's line\n"
    assert alice.read("a.md") == "bob's line\n"
    # The block's `--mine` puts the replaced text back; then nothing is left to say.
    kept = alice.run("resolve", "a.md", "--mine")
    assert kept.returncode == 0, kept.stderr
    assert alice.read("a.md") == "alice's line\n"
    assert "Conflicts here" not in hook(alice, "--hook", "--no-pull").stdout


def test_an_index_missing_here_shows_the_teams_never_a_new_one(alice: User) -> None:
    index = "# Team\n- [DB](db.md) — Postgres 16\n- [CI](ci.md) — GitHub Actions\n"
    alice.write("MEMORY.md", index)
    assert alice.run("push").returncode == 0
    (alice.team / "MEMORY.md").unlink()
    block = hook(alice, "--hook", "--no-pull").stdout
    assert "- [DB](db.md) — Postgres 16\n- [CI](ci.md) — GitHub Actions\n" in block
    assert "MEMORY.md is missing on this machine: shown is the team's" in block
    assert "empty or missing" not in block
    assert "starts it" not in block
    # As the block says, the next pull writes it back.
    assert alice.run("pull").returncode == 0
    assert alice.read("MEMORY.md") == index
    # A session start right after that pull still writes a missing index back first.
    (alice.team / "MEMORY.md").unlink()
    block = hook(alice, "--hook").stdout
    assert alice.read("MEMORY.md") == index
    assert "- [DB](db.md) — Postgres 16\n" in block
    assert "missing on this machine" not in block
