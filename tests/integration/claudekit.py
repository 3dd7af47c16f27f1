"""Helpers of the Claude Code tests: the real `claude` CLI, headless, against the fake API.

`find_claude()` finds the pinned Claude Code (`scripts/ensure-claude-code` installs it in
`.venv/claude-code/`; MEMSYNC_CLAUDE names another binary). `require_claude()` skips the
tests on a developer machine without it and fails them in CI (`CI=true` or
MEMSYNC_REQUIRE_CLAUDE=1): there they must run.

`make_teammate` makes a user whose project is a real git checkout of acme/app with no
MEMSYNC_DIR, so memsync's default team dir (Claude Code's layout) applies.
`run_claude` runs one `claude -p` session for that user and returns its parsed JSON
output with the requests the fake API recorded.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.fake_anthropic import FakeAnthropic, Recorded, Turn
from tests.integration.users import REPO, User
from tests.integration.watchkit import memsync_command
from tests.liveserver import LiveServer

CLAUDE_CODE_VERSION = "2.1.197"
ROOT = Path(__file__).resolve().parents[2]
INSTALL_DIR = ROOT / ".venv" / "claude-code"
SESSION_TIMEOUT = 60.0


def claude_required() -> bool:
    """Whether a missing Claude Code fails the tests (CI) instead of skipping them."""
    return os.environ.get("CI", "").lower() == "true" or bool(
        os.environ.get("MEMSYNC_REQUIRE_CLAUDE")
    )


def find_claude() -> Path | None:
    """MEMSYNC_CLAUDE, or the pinned install in .venv/claude-code; None when neither."""
    named = os.environ.get("MEMSYNC_CLAUDE")
    if named:
        return Path(named) if Path(named).is_file() else None
    package = INSTALL_DIR / "node_modules" / "@anthropic-ai" / "claude-code"
    for candidate in (
        package / "bin" / "claude.exe",
        INSTALL_DIR / "node_modules" / ".bin" / "claude",
    ):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def claude_version(binary: Path) -> str:
    """`claude --version`'s first word ("2.1.197")."""
    result = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=30, check=False
    )
    words = result.stdout.split()
    return words[0] if words else ""


def require_claude() -> Path:
    """The Claude Code binary; skip (developer machine) or fail (CI) when there is none."""
    binary = find_claude()
    problem: str | None = None
    if binary is None:
        where = os.environ.get("MEMSYNC_CLAUDE") or str(INSTALL_DIR)
        problem = f"Claude Code is not installed ({where}); run scripts/ensure-claude-code"
    else:
        version = claude_version(binary)
        if version != CLAUDE_CODE_VERSION and not os.environ.get("MEMSYNC_CLAUDE"):
            problem = (
                f"{binary} is Claude Code {version or '(unknown)'}, not {CLAUDE_CODE_VERSION};"
                " run scripts/ensure-claude-code"
            )
    if problem is not None:
        if claude_required():
            pytest.fail(f"Claude Code is required here: {problem}")
        pytest.skip(problem)
    assert binary is not None
    return binary


@dataclass
class Teammate:
    """A developer with a real git checkout of acme/app and no MEMSYNC_DIR."""

    user: User
    checkout: Path

    @property
    def name(self) -> str:
        return self.user.name

    @property
    def home(self) -> Path:
        return self.user.home

    @property
    def env(self) -> dict[str, str]:
        return self.user.env

    @property
    def team(self) -> Path:
        """memsync's default team dir for the checkout."""
        return self.user.team

    @property
    def memory(self) -> Path:
        """Claude Code's private memory folder of the checkout (the team dir's parent)."""
        return self.user.team.parent

    def memsync(
        self, *args: str, cwd: Path | None = None, stdin: str = "", timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run `memsync ARGS` in the checkout (or `cwd`) with this user's environment."""
        return subprocess.run(
            [*memsync_command(), *args],
            env=self.env,
            cwd=cwd or self.checkout,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def ok(self, *args: str, cwd: Path | None = None) -> str:
        """`memsync ARGS` that must exit 0; its stdout."""
        result = self.memsync(*args, cwd=cwd)
        assert result.returncode == 0, (args, result.returncode, result.stdout, result.stderr)
        return result.stdout

    def json(self, *args: str, cwd: Path | None = None, expect: int = 0) -> Any:
        """`memsync ARGS --json`, parsed."""
        result = self.memsync(*args, "--json", cwd=cwd)
        assert result.returncode == expect, (args, result.returncode, result.stdout, result.stderr)
        return json.loads(result.stdout)

    def write(self, key: str, text: str) -> None:
        """Write `key` in the team dir."""
        self.user.write(key, text)

    def read(self, key: str) -> str:
        return self.user.read(key)


def git(cwd: Path, *args: str) -> str:
    """Run git in `cwd` (bounded); its stdout."""
    result = subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(cwd),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "Test",
            "GIT_AUTHOR_EMAIL": "test@example.com",
            "GIT_COMMITTER_NAME": "Test",
            "GIT_COMMITTER_EMAIL": "test@example.com",
        },
    )
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return result.stdout


def make_checkout(path: Path, repo: str = REPO) -> Path:
    """A git repository at `path` with origin `repo` on GitHub and one commit; its real
    path."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "remote", "add", "origin", f"git@github.com:{repo}.git")
    (path / "README.md").write_text("# app\n", encoding="utf-8")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "first")
    return path.resolve()


def make_teammate(
    name: str, root: Path, server: LiveServer, token: str, *, repo: str = REPO
) -> Teammate:
    """A user on `server` whose project is a fresh checkout of `repo` (default acme/app,
    origin git@github.com:acme/app.git) at `root/name/src/app`."""
    home = (root / name).resolve()
    home.mkdir(parents=True)
    checkout = make_checkout(home / "src" / "app", repo)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(home / ".state"),
        "MEMSYNC_SERVER": server.base_url,
        "MEMSYNC_TOKEN": token,
    }
    team = claude_memory_dir(home, checkout) / "team"
    return Teammate(user=User(name=name, home=home, team=team, env=env), checkout=checkout)


def sanitized(path: Path) -> str:
    """Claude Code's project folder name for `path`: each non-alphanumeric one a dash.

    (Names over 200 characters get a hash suffix; the tests' paths are shorter.)
    """
    name = re.sub(r"[^A-Za-z0-9]", "-", str(path))
    assert len(name) <= 200, name
    return name


def claude_memory_dir(home: Path, root: Path) -> Path:
    """Claude Code's private memory folder of the git root `root`."""
    return home / ".claude" / "projects" / sanitized(root) / "memory"


@dataclass
class ClaudeRun:
    """One finished `claude -p` session."""

    returncode: int
    output: dict[str, Any]
    stdout: str
    stderr: str
    requests: list[Recorded]
    seconds: float

    def main_requests(self) -> list[Recorded]:
        return [request for request in self.requests if request.is_messages and request.main]

    def first(self) -> Recorded:
        """The first request of the main conversation."""
        main = self.main_requests()
        assert main, f"no main request reached the fake API: {self.stderr[-2000:]}"
        return main[0]

    def last(self) -> Recorded:
        """The last request of the main conversation (it holds every turn)."""
        main = self.main_requests()
        assert main, f"no main request reached the fake API: {self.stderr[-2000:]}"
        return main[-1]


def claude_env(env: dict[str, str], fake: FakeAnthropic) -> dict[str, str]:
    """The user's environment plus what points Claude Code at the fake API, quietly."""
    return {
        **env,
        "ANTHROPIC_BASE_URL": fake.url,
        "ANTHROPIC_API_KEY": "sk-ant-fake",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        # Claude Code 2.1 connects MCP servers without waiting for them: under load a
        # `memsync mcp` that starts slowly would miss the first turn. "0" makes `-p`
        # wait for them before its first request.
        "MCP_CONNECTION_NONBLOCKING": "0",
        # It gives an MCP server 5 s to connect; the SDK alone takes 1-2 s to import,
        # and much longer on a loaded CI machine.
        "MCP_CONNECT_TIMEOUT_MS": "60000",
    }


def run_claude(
    binary: Path,
    fake: FakeAnthropic,
    *,
    env: dict[str, str],
    cwd: Path,
    prompt: str,
    turns: tuple[Turn, ...] = (),
    args: tuple[str, ...] = (),
    timeout: float = SESSION_TIMEOUT,
) -> ClaudeRun:
    """One `claude -p PROMPT --output-format json ARGS` session, with `turns` scripted."""
    fake.script(*turns)
    started = time.monotonic()
    result = subprocess.run(
        [str(binary), "-p", prompt, "--output-format", "json", *args],
        env=claude_env(env, fake),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    seconds = time.monotonic() - started
    try:
        output: dict[str, Any] = json.loads(result.stdout)
    except ValueError:
        output = {}
    return ClaudeRun(
        returncode=result.returncode,
        output=output,
        stdout=result.stdout,
        stderr=result.stderr,
        requests=fake.recorded(),
        seconds=seconds,
    )


def session(
    binary: Path,
    fake: FakeAnthropic,
    teammate: Teammate,
    prompt: str = "hi",
    *turns: Turn,
    args: tuple[str, ...] = (),
    cwd: Path | None = None,
) -> ClaudeRun:
    """A session of `teammate` in their checkout (or `cwd`) that must succeed."""
    run = run_claude(
        binary,
        fake,
        env=teammate.env,
        cwd=cwd or teammate.checkout,
        prompt=prompt,
        turns=turns,
        args=args,
    )
    failure = (run.returncode, run.stdout[-3000:], run.stderr[-3000:])
    assert run.returncode == 0, failure
    assert not run.output.get("is_error"), failure
    assert fake.remaining() == 0, f"{fake.remaining()} scripted turns were not asked for"
    return run
