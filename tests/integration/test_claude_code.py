"""The real Claude Code CLI, headless, against a fake Anthropic API: team memory reaches
the agent.

Each session is `claude -p ... --output-format json` (Claude Code 2.1.197, installed by
scripts/ensure-claude-code) with ANTHROPIC_BASE_URL on `FakeAnthropic`, which scripts the
model's turns and records what Claude Code sent: the system prompt, the messages (hook
output arrives as a `system` message), and the tool_results of scripted tool calls.
Teammates have fresh HOMEs and real git checkouts of acme/app without MEMSYNC_DIR, so
memsync's default team dir (`~/.claude/projects/<root>/memory/team`) applies; one real
memsync server on loopback serves the module, each test on its own repo.

The first tests pin what Claude Code itself does (the private MEMORY.md and a
SessionStart hook's stdout reach the model, a hook's output over 10,000 characters is cut
to a preview, writes under the project's memory folder need no permission); the rest
drive memsync's `setup claude-code`, `context`, `watch` and `mcp` through it.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from watchdog.events import FileSystemEvent, FileSystemEventHandler

from sync_server.config import Settings, sqlite_url
from tests.integration.claudekit import (
    CLAUDE_CODE_VERSION,
    ClaudeRun,
    Teammate,
    git,
    make_teammate,
    require_claude,
    run_claude,
    session,
)
from tests.integration.fake_anthropic import FakeAnthropic, Recorded, text, tool_use
from tests.integration.watchkit import WatchProcess, server_entries, wait_until, watch_state
from tests.liveserver import LiveServer, run_live_server

HOOK_LIMIT = 10_000
MATCHERS = {"startup", "resume", "clear", "compact"}
NOTE = "---\nname: deploy\ndescription: how we deploy\n---\nDeploy with BLUE-GREEN-7731.\n"
INDEX_LINE = "- [Deploy](notes/deploy.md) — BOB-INDEX-LINE-5521"
_repos = itertools.count(1)


@pytest.fixture(scope="module")
def claude() -> Path:
    """The pinned Claude Code binary (a skip on a developer machine without it, in CI a
    failure)."""
    return require_claude()


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as api:
        yield api


@pytest.fixture(scope="module")
def team_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One memsync server for the module; each test uses its own repo."""
    folder = tmp_path_factory.mktemp("claude-code-server")
    settings = Settings(database_url=sqlite_url(folder / "memsync.sqlite3"), token_cache_seconds=0)
    with run_live_server(settings) as server:
        yield server


@pytest.fixture
def repo() -> str:
    return f"acme/app-{next(_repos)}"


@pytest.fixture
def alice(team_server: LiveServer, repo: str, tmp_path: Path) -> Teammate:
    return make_teammate("alice", tmp_path, team_server, team_server.token(), repo=repo)


@pytest.fixture
def bob(team_server: LiveServer, repo: str, tmp_path: Path) -> Teammate:
    return make_teammate("bob", tmp_path, team_server, team_server.token(), repo=repo)


def write_settings(user: Teammate, settings: dict[str, Any]) -> Path:
    path = user.home / ".claude" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    return path


def memory_folder_in_prompt(request: Recorded) -> Path:
    """The private memory folder Claude Code's system prompt names."""
    found = re.search(r"persistent file-based memory at `([^`]+)`", request.system_text())
    assert found, request.system_text()[:3000]
    return Path(found.group(1))


def hook_block(run: ClaudeRun) -> str:
    """The one SessionStart hook output the session's first request carries."""
    outputs = run.first().hook_outputs("SessionStart")
    assert len(outputs) == 1, outputs
    return outputs[0]


def push_note(bob: Teammate, index: str) -> None:
    """Bob writes the deploy note and `index` as the team MEMORY.md, and pushes."""
    bob.write("notes/deploy.md", NOTE)
    bob.write("MEMORY.md", index)
    bob.ok("push")


def memsync_words(command: str) -> list[str] | None:
    """The arguments of a hook command that runs an absolute `.../memsync`; None for
    any other command."""
    words = shlex.split(command)
    program = Path(words[0]) if words else Path()
    if not (program.is_absolute() and program.name == "memsync"):
        return None
    assert program.is_file(), command
    return words[1:]


def hook_commands(settings: dict[str, Any], event: str) -> list[tuple[str, str]]:
    """(matcher, command) of every command hook of `event` in `settings`."""
    return [
        (str(group.get("matcher", "")), str(hook["command"]))
        for group in settings.get("hooks", {}).get(event, [])
        for hook in group.get("hooks", [])
        if hook.get("type") == "command"
    ]


# What Claude Code 2.1.197 itself does.


def test_the_private_index_reaches_the_model(
    claude: Path, fake: FakeAnthropic, alice: Teammate
) -> None:
    alice.memory.mkdir(parents=True)
    (alice.memory / "MEMORY.md").write_text("- [Mine](mine.md) — PRIVATE-LINE-4242\n")
    run = session(claude, fake, alice, "hi", text("ok"))
    assert run.output["result"] == "ok"
    first = run.first()
    assert "PRIVATE-LINE-4242" in first.messages_text()
    assert str(alice.memory / "MEMORY.md") in first.messages_text()
    assert memory_folder_in_prompt(first) == alice.memory
    assert run.seconds < 30


def test_a_session_start_hook_reaches_the_model(
    claude: Path, fake: FakeAnthropic, alice: Teammate
) -> None:
    write_settings(
        alice,
        {
            "hooks": {
                "SessionStart": [
                    {
                        "matcher": "startup",
                        "hooks": [{"type": "command", "command": "echo MARKER-123"}],
                    }
                ]
            }
        },
    )
    run = session(claude, fake, alice, "hi", text("ok"))
    assert hook_block(run).startswith("MARKER-123")


@pytest.mark.parametrize(("size", "whole"), [(HOOK_LIMIT, True), (HOOK_LIMIT + 1, False)])
def test_a_hook_output_over_10000_characters_reaches_the_model_as_a_preview(
    claude: Path, fake: FakeAnthropic, alice: Teammate, size: int, whole: bool
) -> None:
    """Why `memsync context` keeps its block to 10,000 characters."""
    output = alice.home / "output.txt"
    output.write_text("S" * (size - 1) + "E", encoding="utf-8")
    hook = {"type": "command", "command": f"cat {shlex.quote(str(output))}"}
    write_settings(alice, {"hooks": {"SessionStart": [{"matcher": "startup", "hooks": [hook]}]}})
    block = hook_block(session(claude, fake, alice, "hi", text("ok")))
    assert block.startswith("S" * (size - 1) + "E") is whole
    assert ("<persisted-output>" in block) is not whole


def test_writes_under_the_project_memory_need_no_permission(
    claude: Path, fake: FakeAnthropic, alice: Teammate
) -> None:
    """In `-p` (no prompt to ask), Write may create files under the project's memory
    folder, the team dir included, and nowhere else without a permission rule."""
    team_note = alice.team / "notes" / "x.md"
    elsewhere = alice.checkout / "x.md"
    run = session(
        claude,
        fake,
        alice,
        "remember",
        tool_use("Write", {"file_path": str(team_note), "content": "in the team dir\n"}),
        tool_use("Write", {"file_path": str(elsewhere), "content": "in the checkout\n"}),
        text("ok"),
    )
    allowed, refused = run.last().tool_results()
    assert not allowed.is_error, allowed
    assert "created successfully" in allowed.text, allowed
    assert refused.is_error, refused
    assert "permission" in refused.text, refused
    assert team_note.read_text() == "in the team dir\n"
    assert not elsewhere.exists()
    assert [denial["tool_input"]["file_path"] for denial in run.output["permission_denials"]] == [
        str(elsewhere)
    ]


# memsync through Claude Code.


def test_setup_adds_the_hooks_and_a_session_gets_the_teammates_index(
    claude: Path, fake: FakeAnthropic, alice: Teammate, bob: Teammate
) -> None:
    setup = alice.memsync("setup", "claude-code")
    assert setup.returncode == 0, setup.stderr
    # The token is only in this shell: setup finishes, and says what that means.
    assert "which a Claude Code started from another terminal does not see" in setup.stderr
    settings = json.loads((alice.home / ".claude" / "settings.json").read_text())
    starts = hook_commands(settings, "SessionStart")
    assert [memsync_words(command) for _, command in starts] == [["context", "--hook"]] * len(
        starts
    )
    assert {word for matcher, _ in starts for word in matcher.split("|")} >= MATCHERS
    ends = hook_commands(settings, "SessionEnd")
    assert [memsync_words(command) for _, command in ends] == [["context", "--session-end"]]
    tool_uses = hook_commands(settings, "PostToolUse")
    assert [(matcher, memsync_words(command)) for matcher, command in tool_uses] == [
        ("Write|Edit|MultiEdit", ["context", "--tool-use"])
    ]

    push_note(bob, INDEX_LINE + "\n")
    alice.ok("pull")
    assert INDEX_LINE in alice.ok("context")
    run = session(claude, fake, alice, "hi", text("ok"))
    block = hook_block(run)
    assert f"Team memory folder: {alice.team}" in block
    assert INDEX_LINE in block
    assert "<persisted-output>" not in block

    # A Claude Code started from another terminal, where the token was never exported:
    # the synced index still reaches the model, with one line saying syncing is off.
    elsewhere = {
        name: value
        for name, value in alice.env.items()
        if name not in ("MEMSYNC_SERVER", "MEMSYNC_TOKEN")
    }
    run = run_claude(
        claude, fake, env=elsewhere, cwd=alice.checkout, prompt="hi", turns=(text("ok"),)
    )
    assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-3000:])
    block = hook_block(run)
    assert INDEX_LINE in block
    off = [line for line in block.splitlines() if "syncing is off" in line]
    assert len(off) == 1
    assert off[0].startswith("Freshness: NOT SYNCING: syncing is off on this machine")
    assert "`memsync login`" in off[0]
    assert "kept current" not in block

    # A team index too long for one hook output is cut on a line, with a pointer.
    lines = [f"- [Note {n:03d}](notes/deploy.md) — team line number {n:03d}" for n in range(600)]
    push_note(bob, "\n".join(lines) + "\n")
    alice.ok("pull")
    context = alice.ok("context")
    assert len(context) <= HOOK_LIMIT, len(context)
    assert "more lines not shown" in context
    assert str(alice.team / "MEMORY.md") in context
    block = hook_block(session(claude, fake, alice, "hi", text("ok")))
    assert "<persisted-output>" not in block
    shown = block[: block.index("more lines not shown")]
    assert lines[0] in shown
    assert lines[-1] not in block
    given = _hook_text(alice, context)
    assert len(given) <= HOOK_LIMIT
    assert block.startswith(given.strip())


def _hook_text(alice: Teammate, context: str) -> str:
    """What `memsync context --hook` gives Claude Code: its JSON additionalContext, or its
    plain stdout (the same block as `memsync context`)."""
    hook_input = json.dumps(
        {"hook_event_name": "SessionStart", "source": "startup", "cwd": str(alice.checkout)}
    )
    result = alice.memsync("context", "--hook", stdin=hook_input)
    assert result.returncode == 0, (result.stdout, result.stderr)
    try:
        parsed = json.loads(result.stdout)
    except ValueError:
        return result.stdout
    if isinstance(parsed, dict) and "hookSpecificOutput" in parsed:
        return str(parsed["hookSpecificOutput"]["additionalContext"])
    return context


def test_a_note_the_agent_writes_reaches_a_teammate_through_the_watcher(
    claude: Path,
    fake: FakeAnthropic,
    alice: Teammate,
    bob: Teammate,
    repo: str,
    team_server: LiveServer,
    watchers: list[WatchProcess],
) -> None:
    # The team's index lists a note; the agent rewrites the whole index (Write, not
    # Edit) with just its own line: the watcher's push keeps the team's line.
    # A token named for her, so history names her (the fixture's tokens are anonymous).
    alice.env["MEMSYNC_TOKEN"] = team_server.token(name="alice-writes")
    team_line = "- [DB](db.md) — Postgres 16\n"
    alice.write("db.md", "---\nname: db\ndescription: the database\n---\nPostgres 16.\n")
    alice.write("MEMORY.md", "# Team memory\n" + team_line)
    alice.ok("push")
    # The PostToolUse hook records which session wrote a note (issue 29); the
    # debounce leaves it time to run before the watcher's push.
    assert alice.memsync("setup", "claude-code").returncode == 0
    watcher = WatchProcess(alice.env, alice.checkout, "--debounce", "1.5")
    watchers.append(watcher)
    assert wait_until(lambda: "watching" in watcher.log(), 20), watcher.log()
    # The SessionEnd hook leaves the push to a watcher it sees running: wait until it is.
    assert wait_until(lambda: bool((watch_state(alice.user) or {}).get("running")), 20)
    seen = _names_created_under(alice.team)
    note = "---\nname: x\ndescription: a fact the agent learned\n---\nUse port 8788 for X.\n"
    index_line = "- [X's port](notes/x.md): X uses port 8788\n"
    try:
        run = session(
            claude,
            fake,
            alice,
            "remember that X uses port 8788",
            tool_use("Write", {"file_path": str(alice.team / "notes" / "x.md"), "content": note}),
            tool_use("Read", {"file_path": str(alice.team / "MEMORY.md")}),
            tool_use(
                "Write",
                {
                    "file_path": str(alice.team / "MEMORY.md"),
                    "content": "# Team memory\n" + index_line,
                },
            ),
            text("Saved."),
        )
    finally:
        seen.stop()
        seen.join(5)
    for request in run.main_requests()[1:]:
        for result in request.tool_results():
            assert not result.is_error, result
    assert run.output["permission_denials"] == []
    kept = "# Team memory\n" + index_line + team_line
    assert wait_until(lambda: server_entries(team_server, repo).get("MEMORY.md") == kept, 20), (
        watcher.log()
    )
    # The watcher logs what it kept once its push has returned.
    assert wait_until(
        lambda: "kept: the line of MEMORY.md that links db.md" in watcher.log(), 10
    ), watcher.log()
    assert wait_until(lambda: "notes/x.md" in server_entries(team_server, repo), 20), watcher.log()
    # Claude Code writes through temporaries (`<name>.tmp.<pid>.<hex>`): none is a note.
    temporaries = [name for name in seen.names if re.search(r"\.tmp\.\d+\.[0-9a-f]+$", name)]
    assert temporaries, seen.names
    assert set(server_entries(team_server, repo)) == {"MEMORY.md", "db.md", "notes/x.md"}
    bob.ok("pull")
    assert bob.read("notes/x.md") == note
    assert bob.read("MEMORY.md") == kept == alice.read("MEMORY.md")
    # Provenance: bob's log and the web page name alice, the watcher, Claude Code, the
    # session and alice's HEAD when she wrote.
    head = git(alice.checkout, "rev-parse", "HEAD").strip()
    expected = {
        "via": "watcher",
        "agent": "claude-code",
        "agentVersion": CLAUDE_CODE_VERSION,
        "session": run.output["session_id"],
        "commit": head,
    }
    commits = bob.json("log", "--json")["commits"]
    wrote = [c for c in commits if "notes/x.md" in c["keys"]]
    assert [(c["author"], c.get("provenance")) for c in wrote] == [("alice-writes", expected)]
    with httpx.Client(base_url=team_server.base_url, timeout=30) as page:
        signed_in = page.post("/ui/signin", data={"token": bob.env["MEMSYNC_TOKEN"]})
        assert signed_in.status_code == 303, signed_in.text[:300]
        html = page.get(f"/ui/repo/{repo}/note", params={"key": "notes/x.md"}).text
    version = html[html.index('class="version"') :]
    version = version[: version.index("</tr>")]
    for shown in ("alice-writes", "via watcher", "claude-code", run.output["session_id"], head):
        assert shown in version, version


class _Created(FileSystemEventHandler):
    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def on_created(self, event: FileSystemEvent) -> None:
        self.names.append(os.path.basename(os.fsdecode(event.src_path)))


class _Observed:
    """Every name created under a folder while it runs (for what an agent writes)."""

    def __init__(self, folder: Path) -> None:
        from watchdog.observers import Observer

        self._handler = _Created()
        self._observer = Observer()
        self._observer.schedule(self._handler, str(folder), recursive=True)
        self._observer.start()

    @property
    def names(self) -> list[str]:
        return self._handler.names

    def stop(self) -> None:
        self._observer.stop()

    def join(self, timeout: float) -> None:
        self._observer.join(timeout)


def _names_created_under(folder: Path) -> _Observed:
    return _Observed(folder)


def test_a_private_note_written_on_the_other_machine_reaches_the_model(
    claude: Path, fake: FakeAnthropic, team_server: LiveServer, repo: str, tmp_path: Path
) -> None:
    # Two machines of one person, the checkout at different paths: Claude Code's private
    # memory folders differ, the personal space is one.
    laptop, desktop = (
        make_teammate(name, tmp_path, team_server, team_server.token(person="alice"), repo=repo)
        for name in ("laptop", "desktop")
    )
    assert laptop.memory != desktop.memory
    for machine in (laptop, desktop):
        machine.ok("enable", "--personal")
    laptop.memory.mkdir(parents=True)
    (laptop.memory / "MEMORY.md").write_text("- [Mine](mine.md) — LAPTOP-LINE-5151\n")
    (laptop.memory / "mine.md").write_text("---\nname: mine\ndescription: x\n---\nmine\n")
    laptop.ok("push", "--personal")
    assert "2 written" in desktop.ok("pull", "--personal")
    run = session(claude, fake, desktop, "hi", text("ok"))
    first = run.first()
    assert "LAPTOP-LINE-5151" in first.messages_text()
    assert str(desktop.memory / "MEMORY.md") in first.messages_text()
    # Nothing of it went to the team.
    assert server_entries(team_server, repo) == {}


def test_the_mcp_tools_read_a_teammates_note_and_refuse_a_credential(
    claude: Path,
    fake: FakeAnthropic,
    alice: Teammate,
    bob: Teammate,
    repo: str,
    team_server: LiveServer,
) -> None:
    alice.json("setup", "claude-code", "--mcp")
    server = json.loads((alice.home / ".claude.json").read_text())["mcpServers"]["memsync"]
    assert server["type"] == "stdio"
    assert server["args"] == ["mcp"]
    assert memsync_words(shlex.quote(server["command"])) == []
    settings = json.loads((alice.home / ".claude" / "settings.json").read_text())
    assert "mcp__memsync" in settings["permissions"]["allow"]

    push_note(bob, INDEX_LINE + "\n")
    alice.ok("pull")
    run = session(
        claude,
        fake,
        alice,
        "how do we deploy?",
        tool_use("mcp__memsync__search_notes", {"query": "deploy", "limit": 5}),
        tool_use("mcp__memsync__read_note", {"key": "notes/deploy.md"}),
        text("Blue-green."),
    )
    tools = set(run.first().tool_names())
    assert {
        f"mcp__memsync__{name}"
        for name in ("memory_index", "read_note", "search_notes", "write_note", "note_history")
    } <= tools
    found, read = run.last().tool_results()
    assert not found.is_error, found
    assert "notes/deploy.md" in found.text, found
    assert not read.is_error, read
    assert "BLUE-GREEN-7731" in read.text, read

    before = server_entries(team_server, repo)
    key_id = "AKIA" + "Z7Q2MX4KLP3RT6VW"  # a made-up AWS access key ID
    credential = f"---\nname: aws\ndescription: keys\n---\naws_access_key_id = {key_id}\n"
    run = session(
        claude,
        fake,
        alice,
        "remember the key",
        tool_use("mcp__memsync__write_note", {"key": "notes/aws.md", "text": credential}),
        text("I could not save it."),
    )
    (refused,) = run.last().tool_results()
    assert "refused" in refused.text.lower(), refused
    assert "AWS" in refused.text, refused
    assert key_id not in refused.text
    assert server_entries(team_server, repo) == before


def test_in_a_reviewed_repo_the_agent_is_told_its_note_is_proposed_until_review_is_off(
    claude: Path,
    fake: FakeAnthropic,
    alice: Teammate,
    bob: Teammate,
    repo: str,
    team_server: LiveServer,
    watchers: list[WatchProcess],
) -> None:
    """Issue 37, what the model itself reads: with a watcher running, a reviewed repo's
    session-start block says so and MCP `write_note` answers that the note goes for
    review; once review is switched off (no CLI command between), the next session is
    told neither and its note reaches a teammate."""
    push_note(bob, INDEX_LINE + "\n")
    alice.ok("pull")
    alice.json("setup", "claude-code", "--mcp")
    team_server.store.set_review(repo, True)
    watcher = WatchProcess(alice.env, alice.checkout, "--debounce", "1")
    watchers.append(watcher)
    assert wait_until(lambda: bool((watch_state(alice.user) or {}).get("running")), 20)
    reviewed = "This repo's team memory is reviewed"
    assert wait_until(lambda: reviewed in alice.ok("context", "--no-pull"), 10), watcher.log()

    def write(key: str, words: str) -> tuple[str, str]:
        note = f"---\nname: {key}\ndescription: {words}\n---\n{words}\n"
        run = session(
            claude,
            fake,
            alice,
            "remember it",
            tool_use("mcp__memsync__write_note", {"key": f"notes/{key}.md", "text": note}),
            text("Saved."),
        )
        (answer,) = run.last().tool_results()
        assert not answer.is_error, answer
        return hook_block(run), answer.text

    block, answer = write("proposed", "PROPOSED-FACT-8812")
    assert reviewed in block
    assert "BOB-INDEX-LINE-5521" in block
    assert "proposal for review, not published" in answer, answer
    assert "will sync it to the team" not in answer

    team_server.store.set_review(repo, False)
    assert wait_until(lambda: reviewed not in alice.ok("context", "--no-pull"), 10), watcher.log()
    block, answer = write("published", "PUBLISHED-FACT-4471")
    assert reviewed not in block
    assert "will sync it to the team" in answer, answer
    assert "proposal" not in answer
    assert wait_until(lambda: "notes/published.md" in server_entries(team_server, repo), 20)
    bob.ok("pull")
    assert "PUBLISHED-FACT-4471" in bob.read("notes/published.md")


def _team_dir_of(user: Teammate, cwd: Path) -> Path:
    """memsync's team dir for `cwd`: the "Team memory folder:" line of `memsync context`."""
    found = re.search(r"^Team memory folder: (.+)$", user.ok("context", cwd=cwd), re.M)
    assert found, cwd
    return Path(found.group(1))


def test_worktrees_share_the_checkouts_memory_folder(
    claude: Path, fake: FakeAnthropic, alice: Teammate, bob: Teammate
) -> None:
    push_note(bob, INDEX_LINE + "\n")
    alice.ok("pull")
    beside = alice.home / "src" / "app-feature"
    git(alice.checkout, "worktree", "add", "-q", str(beside))
    git(alice.checkout, "worktree", "add", "-q", ".claude/worktrees/wt")
    for cwd in (alice.checkout, beside, alice.checkout / ".claude" / "worktrees" / "wt"):
        run = session(claude, fake, alice, "hi", text("ok"), cwd=cwd)
        private = memory_folder_in_prompt(run.first())
        team = _team_dir_of(alice, cwd)
        assert private == team.parent == alice.memory, (cwd, private, team)
        assert team == alice.team


def test_setup_then_uninstall_leaves_the_users_files_byte_for_byte(alice: Teammate) -> None:
    settings_path = write_settings(
        alice,
        {
            "model": "opus",
            "env": {"FOO": "1"},
            "permissions": {"allow": ["Bash(ls:*)", "Read"], "deny": ["Bash(rm:*)"]},
            "hooks": {
                "SessionStart": [
                    {"matcher": "startup", "hooks": [{"type": "command", "command": "echo mine"}]}
                ],
                "PreToolUse": [
                    {"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}]}
                ],
            },
            "statusLine": {"type": "command", "command": "echo ☃"},
        },
    )
    claude_json = alice.home / ".claude.json"
    claude_json.write_text(
        '{\n  "numStartups": 7,\n  "mcpServers": {\n    "other": {"type": "stdio",'
        ' "command": "/usr/bin/other", "args": []}\n  },\n  "projects": {}\n}\n',
        encoding="utf-8",
    )
    settings_before, claude_json_before = settings_path.read_bytes(), claude_json.read_bytes()

    added = alice.json("setup", "claude-code", "--mcp")
    assert isinstance(added, dict)
    settings = json.loads(settings_path.read_text())
    assert settings["model"] == "opus"
    assert settings["env"] == {"FOO": "1"}
    assert ("startup", "echo mine") in hook_commands(settings, "SessionStart")
    assert ["context", "--hook"] in [
        memsync_words(command) for _, command in hook_commands(settings, "SessionStart")
    ]
    assert {"Bash(ls:*)", "Read", "mcp__memsync"} <= set(settings["permissions"]["allow"])
    servers = json.loads(claude_json.read_text())["mcpServers"]
    assert set(servers) == {"other", "memsync"}

    removed = alice.memsync("setup", "claude-code", "--mcp", "--uninstall")
    assert removed.returncode == 0, (removed.stdout, removed.stderr)
    assert str(settings_path) in removed.stdout or "settings.json" in removed.stdout
    assert settings_path.read_bytes() == settings_before
    assert claude_json.read_bytes() == claude_json_before
