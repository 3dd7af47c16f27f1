"""The real Gemini CLI, headless, against a fake Gemini API: team memory reaches the agent.

Each session is `gemini -p ... --output-format json` (Gemini CLI 0.61.0, installed by
scripts/ensure-gemini) with GOOGLE_GEMINI_BASE_URL on `FakeGemini`, which scripts the
model's turns and records what Gemini CLI sent. Teammates have fresh HOMEs and real git
checkouts; `memsync setup gemini` is the only thing that registers memsync, and each
test trusts its checkout the way a user does (`~/.gemini/trustedFolders.json`), never
through memsync. The user's settings keep Gemini CLI quiet: no usage statistics, no
update check, an API key for auth; an explicit model skips its routing calls.
One real memsync server on loopback serves the module, each test on its own repo.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sync_server.config import Settings, sqlite_url
from tests.integration.claudekit import Teammate, make_teammate
from tests.integration.fake_gemini import FakeGemini, Recorded, Turn, call, text
from tests.liveserver import LiveServer, run_live_server

GEMINI_VERSION = "0.61.0"
ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / ".venv" / "gemini" / "node_modules" / "@google" / "gemini-cli"
MODEL = "gemini-2.5-flash"
INDEX_LINE = "- [Deploy](notes/deploy.md) — BOB-INDEX-LINE-7731"
NOTE = "---\nname: port\ndescription: X's port\nmetadata:\n  type: project\n---\nPORT-8788.\n"
# What the user's settings hold before memsync's setup: nothing leaves loopback.
QUIET = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "telemetry": {"enabled": False},
}
_repos = itertools.count(1)


def require_gemini() -> Path:
    """The pinned Gemini CLI's script; skip (developer machine) or fail (CI) without it."""
    script = PACKAGE / "bundle" / "gemini.js"
    problem = None
    if not script.is_file():
        problem = f"Gemini CLI is not installed ({PACKAGE}); run scripts/ensure-gemini"
    else:
        version = json.loads((PACKAGE / "package.json").read_text())["version"]
        if version != GEMINI_VERSION:
            problem = f"{PACKAGE} is Gemini CLI {version}, not {GEMINI_VERSION}"
    if problem is not None:
        if os.environ.get("CI", "").lower() == "true" or os.environ.get("MEMSYNC_REQUIRE_GEMINI"):
            pytest.fail(f"Gemini CLI is required here: {problem}")
        pytest.skip(problem)
    return script


@pytest.fixture(scope="module")
def gemini() -> Path:
    return require_gemini()


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeGemini]:
    with FakeGemini() as api:
        yield api


@pytest.fixture(scope="module")
def team_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    folder = tmp_path_factory.mktemp("gemini-server")
    settings = Settings(database_url=sqlite_url(folder / "memsync.sqlite3"), token_cache_seconds=0)
    with run_live_server(settings) as server:
        yield server


def gemini_user(name: str, root: Path, server: LiveServer, repo: str) -> Teammate:
    """A teammate whose Gemini CLI is quiet, set up by `memsync setup gemini`, and who
    trusts the checkout in Gemini CLI themselves."""
    user = make_teammate(name, root, server, server.token(), repo=repo)
    # Gemini CLI hides every variable named like a token from MCP servers: the token
    # must be saved, as `memsync login` does.
    token = user.env.pop("MEMSYNC_TOKEN")
    done = user.memsync("login", "--token-stdin", stdin=token)
    assert done.returncode == 0, (done.stdout, done.stderr)
    settings = user.home / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps(QUIET, indent=2) + "\n", encoding="utf-8")
    done = user.memsync("setup", "gemini")
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "/permissions trust" in done.stdout  # the step memsync leaves to the user
    assert not (user.home / ".gemini" / "trustedFolders.json").exists()
    installed = json.loads(settings.read_text())
    assert installed["privacy"] == QUIET["privacy"]
    assert installed["mcpServers"]["memsync"]["trust"] is True
    trusted = {str(user.checkout): "TRUST_FOLDER"}
    (user.home / ".gemini" / "trustedFolders.json").write_text(json.dumps(trusted))
    return user


def session(
    gemini: Path, fake: FakeGemini, user: Teammate, prompt: str, *turns: Turn
) -> list[Recorded]:
    """One headless session of `user` in their checkout that must succeed; the main
    conversation's requests."""
    fake.script(*turns)
    env = {
        **user.env,
        "GEMINI_API_KEY": "fake",
        "GOOGLE_GEMINI_BASE_URL": fake.url,
        "GEMINI_CLI_NO_RELAUNCH": "true",  # one node process, not two
    }
    started = time.monotonic()
    done = subprocess.run(
        ["node", str(gemini), "-p", prompt, "--output-format", "json", "-m", MODEL],
        env=env,
        cwd=user.checkout,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    failure = (done.returncode, done.stdout[-3000:], done.stderr[-3000:])
    assert done.returncode == 0, failure
    output: dict[str, Any] = json.loads(done.stdout)
    assert "error" not in output, failure
    assert fake.remaining() == 0, failure
    assert time.monotonic() - started < 60
    return fake.main_requests()


def test_a_session_starts_with_a_teammates_index_line_and_its_mcp_note_reaches_them(
    gemini: Path, fake: FakeGemini, team_server: LiveServer, tmp_path: Path
) -> None:
    repo = f"acme/gemini-{next(_repos)}"
    bob = make_teammate("bob", tmp_path, team_server, team_server.token(), repo=repo)
    bob.write("notes/deploy.md", "---\nname: deploy\ndescription: how\n---\nBlue-green.\n")
    bob.write("MEMORY.md", INDEX_LINE + "\n")
    bob.ok("push")
    alice = gemini_user("alice", tmp_path, team_server, repo)
    requests = session(
        gemini,
        fake,
        alice,
        "remember X's port",
        call("mcp_memsync_write_note", {"key": "notes/port.md", "text": NOTE}),
        text("Saved."),
    )
    first = requests[0].texts()
    assert f"# Team memory for {repo}" in first
    assert INDEX_LINE in first
    assert "`write_note`" in first  # the block names the MCP tool to write with
    assert "mcp_memsync_write_note" in requests[0].function_names()
    (answer,) = requests[-1].function_responses()
    assert answer["name"] == "mcp_memsync_write_note"
    assert "written and pushed: the team has it" in json.dumps(answer["response"]), answer
    bob.ok("pull")
    assert bob.read("notes/port.md") == NOTE


def test_a_write_in_a_reviewed_repo_is_told_it_is_proposed(
    gemini: Path, fake: FakeGemini, team_server: LiveServer, tmp_path: Path
) -> None:
    repo = f"acme/gemini-reviewed-{next(_repos)}"
    team_server.store.set_review(repo, True)
    alice = gemini_user("alice", tmp_path, team_server, repo)
    requests = session(
        gemini,
        fake,
        alice,
        "remember X's port",
        call("mcp_memsync_write_note", {"key": "notes/port.md", "text": NOTE}),
        text("Proposed."),
    )
    (answer,) = requests[-1].function_responses()
    said = json.dumps(answer["response"])
    assert "proposed: a reviewer must accept it before teammates see it" in said, said
