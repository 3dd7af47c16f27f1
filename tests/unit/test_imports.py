"""The CLI loads only what a command needs: its start-up is most of a no-op's time.

Each test runs the real command (`python -X importtime -m sync_client ...`, the form the
service files use) and reads from its import log which modules it loaded. A new
top-level import of a heavy package in a module these commands load fails here.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from scanner.engine import rules_fingerprint
from sync_client.api import Api
from sync_client.state import SyncState
from sync_client.verdicts import VERDICT_RULES
from sync_client.workspace import Workspace
from sync_server.config import Settings
from tests.integration.users import User, make_user
from tests.liveserver import run_live_server

# Loaded only for the work that needs them: a progress bar or table on a terminal
# (rich, and pygments through httpx's own CLI), a scan of a changed file (detect-secrets,
# the compiled rules), a three-way merge (merge3), `memsync watch` (watchdog), a
# .memsyncignore (pathspec).
ON_DEMAND = {"rich", "pygments", "detect_secrets", "merge3", "watchdog", "pathspec"}


def imported(user: User, *args: str) -> set[str]:
    """The modules `memsync ARGS` imported; asserts it exited 0."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "sync_client", *args],
        env=user.env,
        cwd=user.home,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    modules = set()
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            modules.add(line.rsplit("|", 1)[1].strip())
    assert "sync_client.cli" in modules  # the log is there at all
    return modules


def top_level(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


@pytest.fixture
def pushed(sqlite_database_url: str, tmp_path: Path) -> Iterator[User]:
    """A user whose two notes are pushed: the next push, pull and status are no-ops."""
    with run_live_server(Settings(database_url=sqlite_database_url)) as live:
        user = make_user("alice", tmp_path, live, live.token(name="alice"))
        user.write("notes/a.md", "# A\n\nfirst note\n")
        user.write("b.md", "second note\n")
        user.json("push")
        yield user


def test_help_loads_no_http_client_and_nothing_on_demand(tmp_path: Path) -> None:
    user = User(name="nobody", home=tmp_path, team=tmp_path / "team", env={"HOME": str(tmp_path)})
    modules = top_level(imported(user, "--help"))
    assert not modules & (ON_DEMAND | {"httpx", "httpcore", "sqlite3", "pathspec"})


def test_noop_push_sends_nothing_and_compiles_no_rules(pushed: User) -> None:
    modules = imported(pushed, "push", "--json")
    assert not top_level(modules) & (ON_DEMAND | {"httpx"})
    assert "scanner.engine" not in modules
    assert "scanner.rules" not in modules


def test_noop_pull_and_status_load_nothing_on_demand(pushed: User) -> None:
    for command in ("pull", "status"):
        modules = top_level(imported(pushed, command, "--json"))
        assert "httpx" in modules  # they do ask the server
        assert not modules & ON_DEMAND, command


def test_rules_fingerprint_is_remembered_only_for_the_same_rules_file(tmp_path: Path) -> None:
    team = tmp_path / "team"
    team.mkdir()
    (team / "a.md").write_text("a note\n", encoding="utf-8")
    with Api("http://127.0.0.1:9", "mst_unused", "acme/app") as api:
        workspace = Workspace(
            team_dir=team, state_dir=tmp_path / "state", api=api, state=SyncState()
        )
        workspace.scan()
        state = workspace.state
        assert state.scanner_rules == f"{rules_fingerprint()}+{VERDICT_RULES}"
        digest = state.scanner_rules_source
        assert digest is not None
        assert "a.md" in state.stat_cache
        # Another rules file (or new scan rules, `VERDICT_RULES`): the fingerprint is
        # computed again, the verdicts dropped.
        state.scanner_rules, state.scanner_rules_source = "stale", "another-file"
        state.stat_cache = {"gone.md": state.stat_cache["a.md"]}
        workspace.scan()
        assert state.scanner_rules == f"{rules_fingerprint()}+{VERDICT_RULES}"
        assert state.scanner_rules_source == digest
        assert set(state.stat_cache) == {"a.md"}
        # The same rules file: what the state remembers is what counts.
        state.scanner_rules = "remembered"
        workspace.scan()
        assert state.scanner_rules == "remembered"
