"""Agent integrations behind one interface (`sync_client/agents/`): where each agent's
settings live, what setup writes there and takes back, and what doctor can check."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

import pytest

from sync_client.agents import AGENTS, agent
from sync_client.agents.base import McpJsonAgent
from sync_client.agents.files import Files
from sync_client.errors import ConfigError


def env_of(home: Path) -> dict[str, str]:
    return {"HOME": str(home), "XDG_STATE_HOME": str(home / ".state")}


def test_the_four_agents_in_the_order_setup_lists_them() -> None:
    assert AGENTS == ("claude-code", "codex", "gemini", "qwen", "cursor")
    assert [agent(name).name for name in AGENTS] == list(AGENTS)
    with pytest.raises(ConfigError, match="unknown agent 'vim': choose one of claude-code"):
        agent("vim")


@pytest.mark.parametrize(
    ("name", "files"),
    [
        ("claude-code", [".claude/settings.json", ".claude.json"]),
        ("codex", [".codex/hooks.json", ".codex/config.toml"]),
        ("gemini", [".gemini/settings.json"]),
        ("qwen", [".qwen/settings.json"]),
        ("cursor", [".cursor/mcp.json"]),
    ],
)
def test_each_agent_says_where_its_user_settings_live(
    tmp_path: Path, name: str, files: list[str]
) -> None:
    assert agent(name).settings_files(tmp_path, env_of(tmp_path)) == [
        tmp_path / file for file in files
    ]


def test_codex_home_and_claude_config_dir_move_the_settings(tmp_path: Path) -> None:
    env = {**env_of(tmp_path), "CODEX_HOME": str(tmp_path / "cx"), "CLAUDE_CONFIG_DIR": "/cc"}
    assert agent("codex").settings_files(tmp_path, env) == [
        tmp_path / "cx" / "hooks.json",
        tmp_path / "cx" / "config.toml",
    ]
    assert agent("claude-code").settings_files(tmp_path, env) == [
        Path("/cc/settings.json"),
        Path("/cc/.claude.json"),
    ]


def test_claude_code_codex_qwen_and_gemini_have_a_hook_to_check(tmp_path: Path) -> None:
    env = env_of(tmp_path)
    for name in ("claude-code", "codex", "qwen", "gemini"):
        assert agent(name).hook_installed(env, tmp_path) is False
    assert agent("cursor").hook_installed(env, tmp_path) is None
    files = Files(env)
    for name in ("claude-code", "codex", "qwen", "gemini"):
        agent(name).apply(files, tmp_path, env, mcp=False, uninstall=False)
        assert agent(name).hook_installed(env, tmp_path) is True
    assert not agent("claude-code").uses_mcp(False)
    assert all(agent(name).uses_mcp(False) for name in ("codex", "gemini", "qwen", "cursor"))


def test_only_claude_code_names_a_team_dir_for_doctor_to_compare(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    env = {**env_of(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / "cc")}
    sanitized = re.sub("[^A-Za-z0-9]", "-", str(root.resolve()))
    expected = tmp_path / "cc" / "projects" / sanitized / "memory" / "team"
    assert agent("claude-code").team_dir(root, tmp_path, env) == expected
    for name in ("codex", "gemini", "cursor"):
        assert agent(name).team_dir(root, tmp_path, env) is None


class _Editor(McpJsonAgent):
    """A fifth agent: one class naming its settings file."""

    name = "editor"
    relative_path: ClassVar[str] = ".editor/mcp.json"


def test_a_fifth_agent_with_a_json_mcp_file_is_one_class(tmp_path: Path) -> None:
    env: Mapping[str, str] = env_of(tmp_path)
    path = tmp_path / ".editor" / "mcp.json"
    path.parent.mkdir()
    path.write_text('{"mcpServers": {"other": {"command": "x"}}}')
    before = path.read_bytes()
    editor = _Editor()
    [added] = editor.apply(Files(env), tmp_path, env, mcp=False, uninstall=False)
    assert added.added == ["MCP server memsync"]
    assert set(json.loads(path.read_text())["mcpServers"]) == {"other", "memsync"}
    [removed] = editor.apply(Files(env), tmp_path, env, mcp=False, uninstall=True)
    assert removed.removed == ["MCP server memsync"]
    assert path.read_bytes() == before
