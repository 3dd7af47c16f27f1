"""The real Codex CLI, headless, against a fake OpenAI API: team memory reaches the agent.

Each session is `codex exec` (Codex 0.171.0, installed by scripts/ensure-codex) with a
model provider in the user's `config.toml` whose `base_url` is `FakeOpenAI`, which
scripts the model's turns (Responses API events) and records what Codex sent: the input
items (a SessionStart hook's context arrives as a developer message) and the
`function_call_output` of a scripted call to memsync's MCP tool. Teammates have fresh
HOMEs, a `memsync login` and real git checkouts; one real memsync server on loopback
serves the module, each test on its own repo.

`memsync setup codex` never trusts its hooks: the test trusts them as the person does in
Codex's `/hooks`, through the API that screen uses (`codex app-server`: `hooks/list`,
then the listed hash written as trusted), and only memsync's, only once listed.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sync_server.config import Settings, sqlite_url
from tests.integration.claudekit import Teammate, make_teammate
from tests.integration.fake_openai import FakeOpenAI, Recorded, Turn, call, text
from tests.liveserver import LiveServer, run_live_server

CODEX_VERSION = "0.171.0"
ROOT = Path(__file__).resolve().parents[2]
INSTALL_DIR = ROOT / ".venv" / "codex"
SESSION_TIMEOUT = 90.0
# What Codex 0.171 shows its model of a hook's output (sync_client.agent_hooks).
HOOK_LIMIT_BYTES = 10_000
INDEX_LINE = "- [Deploy](notes/deploy.md) — BOB-INDEX-LINE-8812"
NOTE = "---\nname: cache\ndescription: the cache\n---\nThe cache key is CODEX-NOTE-4471.\n"
KEY_VARIABLE = "MEMSYNC_TEST_OPENAI_KEY"
# How Codex offers memsync's MCP tool: in the namespace `mcp__memsync`.
WRITE_NOTE = "mcp__memsync.write_note"
# Codex starts MCP servers beside the first turn: on a loaded machine the first request
# may go out before memsync's tools are listed, and the scripted call then finds none.
# `required` makes Codex wait for the server (as MCP_CONNECTION_NONBLOCKING=0 does for
# Claude Code's tests); a person may set it too (docs/users.md, "Codex").
WAIT_FOR_MCP = "mcp_servers.memsync.required=true"
_repos = itertools.count(1)


def codex_required() -> bool:
    """Whether a missing Codex fails the tests (CI) instead of skipping them."""
    return os.environ.get("CI", "").lower() == "true" or bool(
        os.environ.get("MEMSYNC_REQUIRE_CODEX")
    )


@pytest.fixture(scope="module")
def codex() -> Path:
    """The pinned Codex binary (MEMSYNC_CODEX names another): a skip on a developer
    machine without it, in CI a failure."""
    named = os.environ.get("MEMSYNC_CODEX")
    binary = Path(named) if named else INSTALL_DIR / "node_modules" / ".bin" / "codex"
    problem = None
    if not binary.is_file():
        problem = f"Codex is not installed ({binary}); run scripts/ensure-codex"
    else:
        version = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout.split()
        if not named and version[-1:] != [CODEX_VERSION]:
            problem = f"{binary} is not Codex {CODEX_VERSION} ({version}); run scripts/ensure-codex"
    if problem is not None:
        if codex_required():
            pytest.fail(f"Codex is required here: {problem}")
        pytest.skip(problem)
    return binary


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as api:
        yield api


@pytest.fixture(scope="module")
def team_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One memsync server for the module; each test uses its own repo."""
    folder = tmp_path_factory.mktemp("codex-server")
    settings = Settings(database_url=sqlite_url(folder / "memsync.sqlite3"), token_cache_seconds=0)
    with run_live_server(settings) as server:
        yield server


@dataclass
class CodexUser:
    """A teammate who uses Codex: logged in (`memsync login`), no MEMSYNC_* variables,
    so the hooks and the MCP server Codex starts find the server and token as any
    terminal would."""

    mate: Teammate
    env: dict[str, str]

    @property
    def codex_home(self) -> Path:
        return self.mate.home / ".codex"

    def memsync(self, *args: str) -> str:
        result = self.mate.memsync(*args)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result.stdout


def codex_user(name: str, root: Path, server: LiveServer, repo: str) -> CodexUser:
    mate = make_teammate(name, root, server, server.token(), repo=repo)
    token = mate.env["MEMSYNC_TOKEN"]
    env = {"PATH": mate.env["PATH"], "HOME": str(mate.home)}
    mate.user.env.clear()
    mate.user.env.update(env)
    login = mate.memsync("login", "--server", server.base_url, "--token", token)
    assert login.returncode == 0, login.stderr
    return CodexUser(mate, env)


def provider_config(fake: FakeOpenAI) -> str:
    """The user's own config.toml: a model provider at the fake API."""
    return (
        'model = "gpt-fake"\nmodel_provider = "fake"\ncheck_for_update_on_startup = false\n\n'
        "[model_providers.fake]\n"
        f'name = "fake"\nbase_url = "{fake.url}"\nwire_api = "responses"\n'
        f'env_key = "{KEY_VARIABLE}"\n'
    )


def trust_memsync_hooks(codex: Path, user: CodexUser) -> list[str]:
    """What the person does in Codex's `/hooks`: review the hooks Codex lists and trust
    memsync's, by the hash Codex lists (through `codex app-server`, the API that screen
    uses). Returns the commands trusted."""
    process = subprocess.Popen(
        [str(codex), "app-server"],
        env={**user.env, "CODEX_HOME": str(user.codex_home)},
        cwd=user.mate.checkout,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdin is not None
    assert process.stdout is not None

    def ask(number: int, method: str, params: dict[str, Any]) -> Any:
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write(json.dumps({"id": number, "method": method, "params": params}) + "\n")
        process.stdin.flush()
        while True:
            line = process.stdout.readline()
            assert line, f"codex app-server ended before answering {method}"
            message = json.loads(line)
            if message.get("id") == number:
                assert "error" not in message, message
                return message["result"]

    try:
        ask(1, "initialize", {"clientInfo": {"name": "test", "version": "1"}, "capabilities": {}})
        process.stdin.write(json.dumps({"method": "initialized"}) + "\n")
        listed = ask(2, "hooks/list", {"cwds": [str(user.mate.checkout)]})
        trusted = []
        for number, hook in enumerate(listed["data"][0]["hooks"], start=3):
            if hook["sourcePath"] != str(user.codex_home / "hooks.json"):
                continue
            assert hook["trustStatus"] == "untrusted", hook
            assert "memsync" in hook["command"], hook
            state = {"enabled": True, "trusted_hash": hook["currentHash"]}
            key_path = f"hooks.state.{json.dumps(hook['key'])}"
            ask(
                number,
                "config/value/write",
                {"keyPath": key_path, "value": state, "mergeStrategy": "replace"},
            )
            trusted.append(hook["command"])
        return trusted
    finally:
        process.stdin.close()
        process.wait(10)
        process.stdout.close()


@dataclass
class CodexRun:
    returncode: int
    stdout: str
    stderr: str
    requests: list[Recorded]
    seconds: float

    def first(self) -> Recorded:
        main = [request for request in self.requests if request.is_responses and request.main]
        assert main, f"no request reached the fake API: {self.stderr[-3000:]}"
        return main[0]


def run_codex(codex: Path, fake: FakeOpenAI, user: CodexUser, *turns: Turn) -> CodexRun:
    """One `codex exec` in the user's checkout with `turns` scripted; it must succeed."""
    fake.script(*turns)
    started = time.monotonic()
    result = subprocess.run(
        [str(codex), "exec", "--color", "never", "-c", WAIT_FOR_MCP, "hi"],
        env={**user.env, "CODEX_HOME": str(user.codex_home), KEY_VARIABLE: "sk-fake"},
        cwd=user.mate.checkout,
        capture_output=True,
        text=True,
        timeout=SESSION_TIMEOUT,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    run = CodexRun(
        result.returncode,
        result.stdout,
        result.stderr,
        fake.recorded(),
        time.monotonic() - started,
    )
    assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-3000:])
    assert fake.remaining() == 0, (fake.remaining(), run.stderr[-3000:])
    return run


@pytest.fixture
def repo() -> str:
    return f"acme/codex-{next(_repos)}"


def set_up(codex: Path, fake: FakeOpenAI, user: CodexUser, *, trust: bool = True) -> str:
    """The user's config, then `memsync setup codex` (which says to trust the hooks),
    then the trust step; the config as it was before setup."""
    user.codex_home.mkdir()
    config = user.codex_home / "config.toml"
    config.write_text(provider_config(fake), encoding="utf-8")
    said = user.memsync("setup", "codex")
    assert "/hooks" in said, said
    if trust:
        assert len(trust_memsync_hooks(codex, user)) == 2
    return provider_config(fake)


def test_a_codex_session_starts_with_the_teams_index_and_its_note_reaches_a_teammate(
    codex: Path, fake: FakeOpenAI, team_server: LiveServer, repo: str, tmp_path: Path
) -> None:
    """(a) bob's index line is in Codex's first request, in a block memsync fitted to
    Codex's 10,000 bytes (Codex did not cut it: no "truncated output"); (b) the note
    the model writes through memsync's MCP `write_note` reaches bob."""
    bob = codex_user("bob", tmp_path, team_server, repo)
    filler = [f"- [Topic {n}](topics/t{n}.md) — what topic {n} is about" for n in range(400)]
    bob.mate.write("notes/deploy.md", "---\nname: deploy\n---\nBlue-green.\n")
    bob.mate.write("MEMORY.md", "\n".join(["# Team", INDEX_LINE, *filler]) + "\n")
    bob.memsync("push")
    alice = codex_user("alice", tmp_path, team_server, repo)
    before = set_up(codex, fake, alice)
    # A person who uses Codex alone is not warned about Claude Code's missing hook.
    checks = json.loads(alice.mate.memsync("doctor", "--json").stdout)["checks"]
    [claude_row] = [row for row in checks if row["check"] == "claude code"]
    assert not claude_row.get("warning"), claude_row
    assert "memsync is set up in codex" in claude_row["detail"]

    run = run_codex(
        codex, fake, alice, call(WRITE_NOTE, {"key": "notes/cache.md", "text": NOTE}), text("Ok.")
    )
    first = run.first()
    [block] = [part for part in first.input_texts() if "# Team memory for" in part]
    assert f"# Team memory for {repo}" in block
    assert INDEX_LINE in block
    assert "more lines not shown" in block
    assert "write_note" in block
    assert "truncated output" not in block
    assert len(block.encode()) <= HOOK_LIMIT_BYTES
    assert WRITE_NOTE in first.tool_names()

    [answer] = run.requests[-1].tool_outputs()
    assert "notes/cache.md" in answer, answer
    assert "proposed" not in answer, answer
    bob.memsync("pull")
    assert bob.mate.read("notes/cache.md") == NOTE

    # Uninstall takes back exactly what setup added.
    alice.memsync("setup", "codex", "--uninstall")
    assert not (alice.codex_home / "hooks.json").exists()
    config = tomllib.loads((alice.codex_home / "config.toml").read_text(encoding="utf-8"))
    assert "mcp_servers" not in config
    expected = tomllib.loads(before)
    assert {key: config[key] for key in expected} == expected


def test_in_a_reviewed_repo_codex_is_told_its_note_is_proposed(
    codex: Path, fake: FakeOpenAI, team_server: LiveServer, repo: str, tmp_path: Path
) -> None:
    """(c) the tool result Codex sends back says the write waits for a reviewer."""
    team_server.store.set_review(repo, True)
    alice = codex_user("alice", tmp_path, team_server, repo)
    set_up(codex, fake, alice, trust=False)
    run = run_codex(
        codex, fake, alice, call(WRITE_NOTE, {"key": "notes/cache.md", "text": NOTE}), text("Ok.")
    )
    [answer] = run.requests[-1].tool_outputs()
    assert "proposed" in answer, answer
    assert "reviewer" in answer, answer
