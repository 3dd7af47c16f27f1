"""Qwen Code's folder rule and `memsync setup qwen`.

The expected folders were printed by Qwen Code 0.24.4's own `getAutoMemoryRoot` and
`sanitizeCwd` (its bundled `packages/core/src/memory/paths.ts`), run with node.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sync_client import qwen_code
from sync_client.agent_setup import SetupError, setup
from sync_client.agents import agent
from sync_client.config import default_team_dir

HOME = Path("/home/alice")
REPO = Path("/tmp/qprobe/repo")


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/home/alice/src/my-app", "-home-alice-src-my-app"),
        ("/home/alice/src/Ünï côde/app_v2.0", "-home-alice-src--n--c-de-app-v2-0"),
        ("/tmp/emoji🙂/x", "-tmp-emoji---x"),
        ("/" + "a" * 300, "-" + "a" * 300),  # no cut, unlike Claude Code's 200
    ],
)
def test_the_project_name_is_qwen_codes(path: str, name: str) -> None:
    assert qwen_code.sanitize_path(Path(path)) == name


@pytest.mark.parametrize(
    ("env", "memory"),
    [
        ({}, "/home/alice/.qwen/projects/-tmp-qprobe-repo/memory"),
        ({"QWEN_HOME": "/opt/qh"}, "/opt/qh/projects/-tmp-qprobe-repo/memory"),
        (
            {"QWEN_HOME": "/opt/qh", "QWEN_RUNTIME_DIR": "/opt/rt"},
            "/opt/rt/projects/-tmp-qprobe-repo/memory",
        ),
        (
            {"QWEN_RUNTIME_DIR": "/opt/rt", "QWEN_CODE_MEMORY_BASE_DIR": "/opt/mb"},
            "/opt/mb/projects/-tmp-qprobe-repo/memory",
        ),
        ({"QWEN_HOME": "~/q"}, "/home/alice/q/projects/-tmp-qprobe-repo/memory"),
    ],
)
def test_the_memory_folder_follows_qwen_codes_variables(env: dict[str, str], memory: str) -> None:
    assert qwen_code.memory_dir(REPO, HOME, env) == Path(memory)
    assert agent("qwen").team_dir(REPO, HOME, env) == Path(memory) / "team"


def test_a_worktree_has_its_own_memory_folder_and_shares_the_team_dir(tmp_path: Path) -> None:
    """Qwen Code keys a worktree by its own path; memsync keeps one team dir, the main
    checkout's."""
    main, linked = tmp_path / "app", tmp_path / "app-wt"
    git_dir = main / ".git" / "worktrees" / "app-wt"
    git_dir.mkdir(parents=True)
    (git_dir / "commondir").write_text("../..\n")
    (git_dir / "gitdir").write_text(f"{linked / '.git'}\n")
    linked.mkdir()
    (linked / ".git").write_text(f"gitdir: {git_dir}\n")
    projects = HOME / ".qwen" / "projects"
    own = projects / qwen_code.sanitize_path(linked) / "memory"
    assert qwen_code.memory_dir(linked, HOME, {}) == own
    shared = projects / qwen_code.sanitize_path(main) / "memory" / "team"
    assert agent("qwen").team_dir(linked, HOME, {}) == shared


def test_memory_kept_in_the_repository_gives_no_team_dir() -> None:
    assert agent("qwen").team_dir(REPO, HOME, {"QWEN_CODE_MEMORY_LOCAL": "1"}) is None


def env_of(home: Path) -> dict[str, str]:
    return {"HOME": str(home), "XDG_STATE_HOME": str(home / ".state")}


def test_setup_adds_the_hooks_and_the_mcp_server_and_uninstall_gives_the_file_back(
    tmp_path: Path,
) -> None:
    env = env_of(tmp_path)
    path = tmp_path / ".qwen" / "settings.json"
    path.parent.mkdir()
    path.write_text('{"model": {"name": "qwen3-coder"}, "mcpServers": {"x": {"command": "y"}}}')
    before = path.read_bytes()
    [change] = setup("qwen", env=env, mcp=False, uninstall=False)["files"]
    assert change["added"] == [
        "SessionStart hook (startup)",
        "SessionStart hook (resume)",
        "SessionStart hook (clear)",
        "SessionStart hook (compact)",
        "SessionEnd hook",
        "MCP server memsync",
    ]
    settings = json.loads(path.read_text())
    assert settings["model"] == {"name": "qwen3-coder"}
    assert set(settings["mcpServers"]) == {"x", "memsync"}
    start = settings["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert start.endswith(" context --hook")
    assert settings["hooks"]["SessionEnd"][0]["hooks"][0]["command"].endswith(
        " context --session-end"
    )
    assert agent("qwen").hook_installed(env, tmp_path) is True
    assert setup("qwen", env=env, mcp=False, uninstall=False)["changed"] is False
    setup("qwen", env=env, mcp=False, uninstall=True)
    assert path.read_bytes() == before
    assert agent("qwen").hook_installed(env, tmp_path) is False


def test_unparsable_settings_are_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / ".qwen" / "settings.json"
    path.parent.mkdir()
    path.write_text('{"hooks": ')
    with pytest.raises(SetupError, match=r"settings\.json"):
        setup("qwen", env=env_of(tmp_path), mcp=False, uninstall=False)
    assert path.read_text() == '{"hooks": '


def test_the_default_team_dir_is_the_folder_of_the_agent_set_up(tmp_path: Path) -> None:
    """Claude Code's folder unless only Qwen Code has memsync's hook; one folder either way."""
    env = env_of(tmp_path)
    root = tmp_path / "repo"
    claude = tmp_path / ".claude" / "projects" / qwen_code.sanitize_path(root) / "memory" / "team"
    qwen = tmp_path / ".qwen" / "projects" / qwen_code.sanitize_path(root) / "memory" / "team"
    assert default_team_dir(root, tmp_path, env) == claude
    setup("qwen", env=env, mcp=False, uninstall=False)
    assert default_team_dir(root, tmp_path, env) == qwen
    setup("claude-code", env=env, mcp=False, uninstall=False)
    assert default_team_dir(root, tmp_path, env) == claude
