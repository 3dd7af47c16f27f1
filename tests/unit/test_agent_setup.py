"""`memsync setup AGENT`: keeps every other setting, idempotent, reversible, refuses junk."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from sync_client.agent_setup import SetupError, hook_commands, hook_installed, setup

USER_SETTINGS = (
    '{\n    "theme": "dark",\n    "hooks": {"SessionStart": [{"matcher": "startup", '
    '"hooks": [{"type": "command", "command": "echo mine"}]}]},\n'
    '    "permissions": {"allow": ["Bash(ls)"], "deny": ["Read(.env)"]}\n}\n'
)


def env_of(home: Path, **extra: str) -> dict[str, str]:
    return {"HOME": str(home), "XDG_STATE_HOME": str(home / ".state"), **extra}


def test_claude_code_setup_adds_hooks_and_mcp_and_keeps_the_rest(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(USER_SETTINGS)
    env = env_of(tmp_path)
    result = setup("claude-code", env, mcp=True)
    assert result["changed"]
    data = json.loads(settings.read_text())
    assert data["theme"] == "dark"
    assert data["permissions"] == {"allow": ["Bash(ls)", "mcp__memsync"], "deny": ["Read(.env)"]}
    start, end = hook_commands()
    groups = data["hooks"]["SessionStart"]
    assert groups[0]["hooks"] == [{"type": "command", "command": "echo mine"}]
    ours = {group["matcher"] for group in groups if group["hooks"][0]["command"] == start}
    assert ours == {"startup", "resume", "clear", "compact"}
    assert data["hooks"]["SessionEnd"][0]["hooks"][0]["command"] == end
    server = json.loads((tmp_path / ".claude.json").read_text())["mcpServers"]["memsync"]
    assert server["type"] == "stdio"
    assert server["args"][-1] == "mcp"
    assert hook_installed(env)
    # Twice: nothing changes.
    again = setup("claude-code", env, mcp=True)
    assert not again["changed"]
    assert json.loads(settings.read_text()) == data


def test_uninstall_gives_back_the_files_byte_for_byte(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(USER_SETTINGS)
    user_config = tmp_path / ".claude.json"
    user_config.write_text('{"numStartups": 3, "mcpServers": {"other": {"command": "x"}}}')
    before = settings.read_bytes(), user_config.read_bytes()
    env = env_of(tmp_path)
    setup("claude-code", env, mcp=True)
    removed = setup("claude-code", env, uninstall=True)
    assert removed["changed"]
    assert (settings.read_bytes(), user_config.read_bytes()) == before
    assert not hook_installed(env)


def test_uninstall_after_other_edits_removes_only_what_it_added(tmp_path: Path) -> None:
    env = env_of(tmp_path)
    setup("claude-code", env, mcp=True)
    settings = tmp_path / ".claude" / "settings.json"
    data = json.loads(settings.read_text())
    data["model"] = "opus"
    settings.write_text(json.dumps(data))
    setup("claude-code", env, uninstall=True)
    assert json.loads(settings.read_text()) == {"model": "opus"}
    assert not (tmp_path / ".claude.json").exists()  # it did not exist before


def test_claude_config_dir_moves_both_files(tmp_path: Path) -> None:
    config = tmp_path / "cc"
    env = env_of(tmp_path / "home", CLAUDE_CONFIG_DIR=str(config))
    setup("claude-code", env, mcp=True)
    assert (config / "settings.json").exists()
    assert (config / ".claude.json").exists()
    assert not (tmp_path / "home" / ".claude").exists()


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"hooks": []}'])
def test_a_file_it_cannot_edit_is_refused_and_nothing_changes(tmp_path: Path, text: str) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(text)
    with pytest.raises(SetupError):
        setup("claude-code", env_of(tmp_path), mcp=True)
    assert settings.read_text() == text
    assert not (tmp_path / ".claude.json").exists()


def test_codex_gets_its_session_hooks_and_the_mcp_server_and_is_told_to_trust_them(
    tmp_path: Path,
) -> None:
    env = env_of(tmp_path)
    codex = tmp_path / ".codex" / "config.toml"
    codex.parent.mkdir()
    codex.write_text('model = "o4"\n\n[mcp_servers.other]\ncommand = "x"\n')
    hooks = tmp_path / ".codex" / "hooks.json"
    theirs = {"matcher": "startup", "hooks": [{"type": "command", "command": "echo hi"}]}
    hooks.write_text(json.dumps({"hooks": {"SessionStart": [theirs]}}))
    before = codex.read_bytes(), hooks.read_bytes()
    result = setup("codex", env)
    assert any("/hooks" in note and "trust" in note for note in result["notes"])
    parsed = tomllib.loads(codex.read_text())
    assert parsed["model"] == "o4"
    assert parsed["mcp_servers"]["memsync"]["args"][-1] == "mcp"
    # memsync's own tools run without a question, as Claude Code's allow rule lets them.
    assert parsed["mcp_servers"]["memsync"]["default_tools_approval_mode"] == "approve"
    installed = json.loads(hooks.read_text())["hooks"]
    assert installed["SessionStart"][0] == theirs
    [ours] = installed["SessionStart"][1:]
    assert ours["matcher"] == "startup|resume|clear|compact"
    assert ours["hooks"][0]["command"].endswith(" context --hook --agent codex")
    assert installed["SessionEnd"][0]["hooks"][0]["command"].endswith(" context --session-end")
    assert not setup("codex", env)["changed"]
    setup("codex", env, uninstall=True)
    assert (codex.read_bytes(), hooks.read_bytes()) == before
    # A hook the person added meanwhile stays; memsync's go; the file is JSON-equal.
    setup("codex", env)
    edited = json.loads(hooks.read_text())
    edited["hooks"]["Stop"] = [{"hooks": [{"type": "command", "command": "echo bye"}]}]
    hooks.write_text(json.dumps(edited))
    setup("codex", env, uninstall=True)
    assert json.loads(hooks.read_text()) == {
        "hooks": {"SessionStart": [theirs], "Stop": edited["hooks"]["Stop"]}
    }
    assert codex.read_bytes() == before[0]
    # Files memsync created are removed again.
    fresh = env_of(tmp_path / "fresh")
    setup("codex", fresh)
    setup("codex", fresh, uninstall=True)
    assert not (tmp_path / "fresh" / ".codex").exists() or not any(
        (tmp_path / "fresh" / ".codex").iterdir()
    )


def test_an_earlier_codex_setup_gets_its_tools_approved_and_is_removed(tmp_path: Path) -> None:
    """A block an earlier memsync wrote (no approval) is updated, not refused as
    someone else's server, and `--uninstall` removes it either way."""
    env = env_of(tmp_path)
    setup("codex", env)
    config = tmp_path / ".codex" / "config.toml"
    current = config.read_text()
    earlier = current.replace(
        'default_tools_approval_mode = "approve"\nstartup_timeout_sec = 30\n', ""
    )
    assert earlier != current
    config.write_text('model = "o4"\n\n' + earlier)
    assert setup("codex", env)["changed"]
    assert config.read_text() == 'model = "o4"\n\n' + current
    config.write_text('model = "o4"\n\n' + earlier)
    setup("codex", env, uninstall=True)
    assert tomllib.loads(config.read_text()) == {"model": "o4"}


@pytest.mark.parametrize("broken", ["hooks.json", "config.toml"])
def test_codex_files_it_cannot_parse_are_refused_and_nothing_changes(
    tmp_path: Path, broken: str
) -> None:
    folder = tmp_path / "cx"
    folder.mkdir()
    texts = {"hooks.json": '{"hooks": {}}', "config.toml": 'model = "o4"\n'}
    texts[broken] = "{not json" if broken == "hooks.json" else "model = \n"
    for name, text in texts.items():
        (folder / name).write_text(text)
    with pytest.raises(SetupError, match=f"cannot parse .*{broken}"):
        setup("codex", env_of(tmp_path, CODEX_HOME=str(folder)))
    assert {name: (folder / name).read_text() for name in texts} == texts


def test_cursor_gets_the_mcp_server(tmp_path: Path) -> None:
    env = env_of(tmp_path)
    cursor = tmp_path / ".cursor" / "mcp.json"
    setup("cursor", env)
    assert json.loads(cursor.read_text())["mcpServers"]["memsync"]["args"][-1] == "mcp"
    setup("cursor", env, uninstall=True)
    assert not cursor.exists()


def test_another_server_named_memsync_is_not_overwritten(tmp_path: Path) -> None:
    cursor = tmp_path / ".cursor" / "mcp.json"
    cursor.parent.mkdir()
    cursor.write_text('{"mcpServers": {"memsync": {"command": "someone-else"}}}')
    with pytest.raises(SetupError):
        setup("cursor", env_of(tmp_path))
    assert "someone-else" in cursor.read_text()
