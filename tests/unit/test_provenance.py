"""Provenance (docs/protocol.md 3.13): the wire's checks, what a client sends, and the
PostToolUse hook's record of which Claude Code session wrote a note."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memsync_protocol.checksums import entry_checksum
from memsync_protocol.provenance import ProvenanceError, checked, cleaned, decode, encode
from sync_client.config import resolve
from sync_client.provenance import (
    RECORD_FILE,
    for_write,
    forget,
    group_keys,
    read_records,
    record_agent_write,
    records_for,
    with_provenance,
)

HEAD = "0123456789abcdef0123456789abcdef01234567"
SUM = entry_checksum("a note")


def test_checked_keeps_known_fields_in_order_and_refuses_bad_ones() -> None:
    sent = {"commit": HEAD, "via": "cli", "hostname": "box", "agent": "<b>x</b>"}
    assert checked(sent) == {"via": "cli", "agent": "<b>x</b>", "commit": HEAD}
    assert encode(checked(sent)) == f'{{"via":"cli","agent":"<b>x</b>","commit":"{HEAD}"}}'
    assert checked(None) is None
    assert checked({"hostname": "box"}) is None
    for bad in (
        {"agent": "x" * 201},
        {"agent": "tab\there"},
        {"session": ""},
        {"via": "email"},
        {"commit": HEAD.upper()},
        {"agentVersion": 2},
    ):
        with pytest.raises(ProvenanceError):
            checked(bad)
    with pytest.raises(ProvenanceError):
        checked(["cli"])
    assert decode(encode({"via": "web"})) == {"via": "web"}
    assert decode("{not json") is None
    assert decode(None) is None


def test_cleaned_cuts_and_drops_so_a_client_write_never_fails_over_provenance() -> None:
    found = cleaned({"via": "mcp", "agent": "a\x1b[31m" + "x" * 300, "commit": "HEAD"})
    assert found is not None
    assert found["via"] == "mcp"
    assert len(found["agent"]) == 200
    assert found["agent"].isprintable()
    assert "commit" not in found
    assert cleaned({"via": "nope"}) is None
    assert checked(found) == found


def test_a_push_groups_keys_by_agent_record_and_adds_one_provenance_per_body() -> None:
    records = {"b.md": {"agent": "claude-code", "session": "s1"}}
    groups = group_keys(["c.md", "b.md", "a.md"], records)
    assert groups == [
        ({}, ["a.md", "c.md"]),
        ({"agent": "claude-code", "session": "s1"}, ["b.md"]),
    ]
    stamp = for_write("watcher", HEAD, records["b.md"])
    assert stamp == {"via": "watcher", "agent": "claude-code", "session": "s1", "commit": HEAD}
    # An MCP write's own `via` wins over the pusher's.
    assert for_write("watcher", None, {"via": "mcp"}) == {"via": "mcp"}
    body = with_provenance(b'{"entries":{"b.md":"x"}}', stamp)
    assert json.loads(body) == {"entries": {"b.md": "x"}, "provenance": stamp}
    assert with_provenance(b'{"entries":{}}', None) == b'{"entries":{}}'


def test_a_record_is_used_for_the_text_its_write_left_and_kept_until_a_push_sends_it(
    tmp_path: Path,
) -> None:
    """Issue 37: a record is that one write's; a later hand edit carries no agent."""
    assert read_records(tmp_path) == {}
    agent = {"agent": "claude-code", "session": "s1"}
    assert record_agent_write(tmp_path, "a.md", agent, checksum=entry_checksum("one"))
    assert not record_agent_write(tmp_path, "b.md", {"agent": None}, checksum=SUM)
    agent["session"] = "s2"
    assert record_agent_write(tmp_path, "a.md", agent, checksum=entry_checksum("two"))
    assert record_agent_write(tmp_path, "c.md", agent, checksum=entry_checksum("agent's"))
    texts = {"a.md": "two", "c.md": "agent's, then edited by hand", "d.md": "d"}
    assert records_for(tmp_path, texts) == ({"a.md": agent}, ["c.md"])
    # A record of the old form (no checksum) describes no text it can be checked against.
    (tmp_path / RECORD_FILE).write_text('{"keys": {"a.md": {"agent": "claude-code"}}}')
    assert records_for(tmp_path, texts) == ({}, ["a.md"])
    forget(tmp_path, ["a.md", "never.md"])
    assert read_records(tmp_path) == {}
    (tmp_path / RECORD_FILE).write_text("[broken")
    assert read_records(tmp_path) == {}


def _checkout(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    repo = tmp_path / "src" / "app"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(
        ["git", "remote", "add", "origin", "git@github.com:acme/app.git"], cwd=repo, check=True
    )
    home = tmp_path / "home"
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(home / ".state"),
        "MEMSYNC_SERVER": "http://127.0.0.1:9",
        "MEMSYNC_TOKEN": "mst_unit",
    }
    return repo, env


def test_the_hook_records_team_notes_only_and_imports_neither_click_nor_httpx(
    tmp_path: Path,
) -> None:
    repo, env = _checkout(tmp_path)
    config = resolve(server=None, token=None, repo=None, team_dir=None, cwd=repo, env=env)
    transcript = tmp_path / "session.jsonl"
    transcript.write_text('{"type":"user","version":"2.1.197","sessionId":"s1"}\n')
    code = (
        "import sys; from sync_client.provenance import run_hook; import os;"
        "run_hook(sys.stdin, os.environ);"
        "print(sorted(m for m in ('click', 'httpx', 'rich', 'watchdog') if m in sys.modules))"
    )

    def hook(file_path: Path) -> str:
        payload = {
            "session_id": "5e55-10n",
            "cwd": str(repo),
            "transcript_path": str(transcript),
            "hook_event_name": "PostToolUse",
            "tool_name": "Write",
            "tool_input": {"file_path": str(file_path), "content": "never read"},
        }
        return subprocess.run(
            [sys.executable, "-c", code],
            input=json.dumps(payload),
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout

    assert hook(repo / "README.md").strip() == "[]"
    assert hook(config.team_dir / "notes" / "x.md").strip() == "[]"
    assert read_records(config.state_dir) == {}  # no such file: no write to describe
    (config.team_dir / "notes").mkdir(parents=True)
    (config.team_dir / "notes" / "x.md").write_text("the agent's text\n")
    assert hook(config.team_dir / "notes" / "x.md").strip() == "[]"
    records = read_records(config.state_dir)
    assert records == {
        "notes/x.md": {
            "agent": "claude-code",
            "agentVersion": "2.1.197",
            "session": "5e55-10n",
            "checksum": entry_checksum("the agent's text\n"),
        }
    }
    assert "never read" not in (config.state_dir / RECORD_FILE).read_text()


def test_a_version_the_transcript_did_not_hold_yet_is_read_at_the_push(tmp_path: Path) -> None:
    transcript = tmp_path / "session.jsonl"
    transcript.write_text("")  # Claude Code has not written the session's line yet
    record = {"agent": "claude-code", "agentVersion": None, "session": "s1"}
    assert record_agent_write(tmp_path, "a.md", record, checksum=SUM, transcript=str(transcript))
    assert read_records(tmp_path) == {
        "a.md": {"agent": "claude-code", "session": "s1", "checksum": SUM}
    }
    transcript.write_text('{"type":"user","version":"2.1.197","sessionId":"s1"}\n')
    assert read_records(tmp_path) == {
        "a.md": {
            "agent": "claude-code",
            "agentVersion": "2.1.197",
            "session": "s1",
            "checksum": SUM,
        }
    }
