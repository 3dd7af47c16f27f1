"""`memsync setup gemini`: Gemini CLI's session hooks and trusted MCP server, reversibly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sync_client.agent_hooks import SHAPES, output
from sync_client.agent_setup import SetupError, setup
from sync_client.agents.files import mcp_entry
from sync_client.agents.gemini import TRUST_NOTE, hook_commands

USER_SETTINGS = (
    '{\n  "theme": "GitHub",\n  "hooks": {"SessionStart": [{"matcher": "startup", '
    '"hooks": [{"type": "command", "command": "echo mine"}]}]},\n'
    '  "mcpServers": {"other": {"command": "x"}}\n}\n'
)


def env_of(home: Path) -> dict[str, str]:
    return {"HOME": str(home), "XDG_STATE_HOME": str(home / ".state")}


def settings_of(home: Path, text: str | None = None) -> Path:
    path = home / ".gemini" / "settings.json"
    if text is not None:
        path.parent.mkdir(parents=True)
        path.write_text(text)
    return path


def test_setup_adds_the_hooks_and_the_trusted_server_and_uninstall_gives_the_file_back(
    tmp_path: Path,
) -> None:
    path = settings_of(tmp_path, USER_SETTINGS)
    env = env_of(tmp_path)
    result = setup("gemini", env)
    assert result["changed"]
    assert TRUST_NOTE in result["notes"]
    assert len([note for note in result["notes"] if "memsync login" in note]) == 1
    data = json.loads(path.read_text())
    assert data["theme"] == "GitHub"
    start, end = hook_commands()
    assert start.endswith(" context --hook --agent gemini")
    groups = data["hooks"]["SessionStart"]
    assert groups[0]["hooks"] == [{"type": "command", "command": "echo mine"}]
    # Gemini CLI compares a SessionStart matcher to the source as a plain string.
    ours = [group["matcher"] for group in groups[1:]]
    assert ours == ["startup", "resume", "clear"]
    assert all(group["hooks"][0]["timeout"] == 15_000 for group in groups[1:])
    assert data["hooks"]["SessionEnd"] == [
        {"hooks": [{"type": "command", "command": end, "timeout": 15_000}]}
    ]
    assert data["mcpServers"] == {
        "other": {"command": "x"},
        "memsync": {**mcp_entry(False), "trust": True},
    }
    assert not setup("gemini", env)["changed"]
    removed = setup("gemini", env, uninstall=True)
    assert TRUST_NOTE not in removed["notes"]
    assert path.read_text() == USER_SETTINGS


def test_uninstall_removes_a_file_setup_made_and_keeps_what_the_user_added_since(
    tmp_path: Path,
) -> None:
    env = env_of(tmp_path)
    path = settings_of(tmp_path)
    setup("gemini", env)
    setup("gemini", env, uninstall=True)
    assert not path.exists()
    setup("gemini", env)
    data = json.loads(path.read_text())
    data["theme"] = "Dracula"
    path.write_text(json.dumps(data))
    setup("gemini", env, uninstall=True)
    assert json.loads(path.read_text()) == {"theme": "Dracula"}


@pytest.mark.parametrize(
    "text",
    [
        '{"theme": "GitHub",',  # cut short
        '{"hooks": []}',  # hooks not an object
        '{"mcpServers": {"memsync": {"command": "someone-else"}}}',  # not this memsync's
    ],
)
def test_a_file_memsync_will_not_edit_is_left_as_it_was(tmp_path: Path, text: str) -> None:
    path = settings_of(tmp_path, text)
    with pytest.raises(SetupError):
        setup("gemini", env_of(tmp_path))
    assert path.read_text() == text


def test_the_untrusted_server_an_older_setup_registered_is_taken_over(tmp_path: Path) -> None:
    older = {"mcpServers": {"memsync": mcp_entry(False)}}
    path = settings_of(tmp_path, json.dumps(older))
    setup("gemini", env_of(tmp_path))
    assert json.loads(path.read_text())["mcpServers"]["memsync"]["trust"] is True


def test_the_hook_prints_the_block_as_additional_context_naming_the_mcp_tools() -> None:
    shape = SHAPES["gemini"]
    assert shape.limit == 10_000
    assert shape.note is not None
    assert "`write_note`" in shape.note
    printed = json.loads(output("# Team memory for acme/app\n", shape))
    assert printed == {
        "hookSpecificOutput": {
            "hookEventName": "SessionStart",
            "additionalContext": "# Team memory for acme/app\n",
        }
    }


@pytest.mark.parametrize(
    "order", [["--hook", "--agent", "gemini"], ["--agent", "gemini", "--hook"]]
)
def test_the_hook_outside_a_synced_repo_prints_nothing_and_exits_0(
    tmp_path: Path, order: list[str]
) -> None:
    """The fast path (the hook's own order) and click's (any other) agree."""
    done = subprocess.run(
        [sys.executable, "-c", "from sync_client.launch import main; main()", "context", *order],
        cwd=tmp_path,
        env={**env_of(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
