"""`memsync mcp` spoken to over stdio by the SDK's own client, against a live server.

Bob pushes a note, Alice pulls it; an agent of Alice's (the MCP client here) finds it,
reads it, is refused a note holding a credential (with the reason, and nothing reaches
the server) and writes one that lands in her team dir and, with no watcher running, on
the server at once.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, Implementation, TextContent

from tests.integration.test_skips import aws_access_key
from tests.integration.users import User
from tests.integration.watchkit import server_entries
from tests.liveserver import LiveServer

TOOLS = {"memory_index", "read_note", "search_notes", "write_note", "note_history", "verify_note"}
# The MCP client's own name and version, as its `initialize` says them: the agent of
# every write and verification made through it.
CLIENT = Implementation(name="test-agent", version="1.2.3")
AGENT = {"agent": "test-agent", "agentVersion": "1.2.3"}
# Bounds on the whole conversation and on each call: a hung server fails the test.
SESSION_SECONDS = 30
CALL_SECONDS = 15

DEPLOY = (
    "---\n"
    "name: Deploying the app\n"
    "description: how releases go out, and the staging gate\n"
    "---\n\n"
    "Releases go out from main through the staging gate; ask in #ops first.\n"
)


def _text(result: CallToolResult) -> str:
    return "".join(item.text for item in result.content if isinstance(item, TextContent))


def _data(result: CallToolResult) -> Any:
    assert not result.isError, _text(result)
    if result.structuredContent is not None:
        return result.structuredContent
    return json.loads(_text(result))


Conversation = Callable[[ClientSession], Awaitable[None]]


def _talk(user: User, tmp_path: Path, conversation: Conversation) -> None:
    """Run `memsync mcp` as `user` (their env, in their home) and hold `conversation`."""
    script = user.script or Path(sys.executable).with_name("memsync")
    parameters = StdioServerParameters(
        command=str(script), args=["mcp"], env=user.env, cwd=str(user.home)
    )
    log = tmp_path / f"mcp-{user.name}.log"

    async def main() -> None:
        with log.open("w", encoding="utf-8") as errlog:
            async with (
                stdio_client(parameters, errlog=errlog) as (read, write),
                ClientSession(read, write, client_info=CLIENT) as session,
            ):
                await asyncio.wait_for(session.initialize(), CALL_SECONDS)
                await asyncio.wait_for(conversation(session), SESSION_SECONDS)

    try:
        asyncio.run(main())
    except BaseException:
        print(log.read_text(encoding="utf-8"))
        raise


async def _call(session: ClientSession, tool: str, **arguments: Any) -> CallToolResult:
    return await asyncio.wait_for(session.call_tool(tool, arguments), CALL_SECONDS)


def test_an_agent_finds_reads_and_writes_team_notes_through_memsync_mcp(
    alice: User, bob: User, live: LiveServer, tmp_path: Path
) -> None:
    bob.write("topics/deploy.md", DEPLOY)
    bob.write("topics/lunch.md", "---\nname: Lunch\ndescription: where we eat\n---\n\nTacos.\n")
    assert bob.run("push").returncode == 0
    pulled = alice.run("pull")
    assert pulled.returncode == 0, pulled.stderr
    before = server_entries(live)
    secret = aws_access_key()

    async def conversation(session: ClientSession) -> None:
        listed = await asyncio.wait_for(session.list_tools(), CALL_SECONDS)
        assert {tool.name for tool in listed.tools} == TOOLS
        assert len(listed.tools) == len(TOOLS)

        index = _data(await _call(session, "memory_index"))
        assert index["team_dir"] == str(alice.team)
        assert index["notes"] == 2
        assert index["index_exists"] is False
        assert "no MEMORY.md" in index["summary"]

        found = _data(await _call(session, "search_notes", query="staging releases"))
        assert [row["key"] for row in found["results"]] == ["topics/deploy.md"]
        assert found["results"][0]["name"] == "Deploying the app"
        assert "staging gate" in found["results"][0]["snippet"]

        read = await _call(session, "read_note", key=found["results"][0]["key"])
        assert not read.isError
        assert _data(read)["text"] == DEPLOY

        escape = await _call(session, "read_note", key="../../.config/memsync/credentials.toml")
        assert escape.isError
        assert "'..' segment" in _text(escape)
        missing = await _call(session, "read_note", key="topics/nope.md")
        assert missing.isError
        assert "there is no note topics/nope.md" in _text(missing)

        leaked = f"---\nname: AWS\ndescription: keys\n---\n\naws_access_key_id = {secret}\n"
        refused = await _call(session, "write_note", key="topics/aws.md", text=leaked)
        assert refused.isError
        words = _text(refused)
        assert "nothing was written" in words
        assert "line 6" in words
        assert secret not in words
        assert not (alice.team / "topics" / "aws.md").exists()

        note = "---\nname: Database\ndescription: which database we use\n---\n\nPostgreSQL 16.\n"
        written = _data(await _call(session, "write_note", key="topics/db.md", text=note))
        assert written["written"] is True
        assert written["sync"] == "uploaded", written
        assert "pushed" in written["detail"]

        history = _data(await _call(session, "note_history", key="topics/db.md"))
        assert [row["op"] for row in history["versions"]] == ["put"]
        assert history["versions"][0]["author"] == "alice"
        # How each version was made, as the server keeps it (docs/protocol.md 3.13).
        assert history["versions"][0]["provenance"] == {"via": "mcp", **AGENT}
        assert history["versions"][0]["accepted_by"] is None
        bobs = _data(await _call(session, "note_history", key="topics/deploy.md"))
        assert bobs["versions"][0]["provenance"] == {"via": "cli"}  # bob's `memsync push`

        # A verification through MCP is named for the client, as its writes are.
        verified = _data(await _call(session, "verify_note", key="topics/db.md"))
        assert verified["commit"] is None  # alice's home is no git checkout
        newest = _data(await _call(session, "note_history", key="topics/db.md"))["versions"]
        assert [row["op"] for row in newest] == ["put", "verify"]
        assert newest[-1]["provenance"] == {"via": "mcp", **AGENT}
        # Reviewed, and alice no reviewer: her client's free text is kept from history.
        live.store.set_review(alice.env["MEMSYNC_REPO"], True)
        verified = _data(await _call(session, "verify_note", key="topics/db.md"))
        assert (
            "the repo is reviewed and you are not a reviewer: its history keeps no agent, "
            "agentVersion of your verification" in verified["summary"]
        )
        newest = _data(await _call(session, "note_history", key="topics/db.md"))["versions"]
        assert newest[-1]["provenance"] == {"via": "mcp"}
        live.store.set_review(alice.env["MEMSYNC_REPO"], False)

    _talk(alice, tmp_path, conversation)

    assert alice.read("topics/db.md").endswith("PostgreSQL 16.\n")
    after = server_entries(live)
    assert "topics/aws.md" not in after
    assert set(after) == {*before, "topics/db.md"}
    assert after["topics/db.md"] == alice.read("topics/db.md")
    assert all(secret not in text for text in after.values())


def test_write_note_with_the_server_down_keeps_the_note_and_says_so(
    alice: User, tmp_path: Path
) -> None:
    alice.env["MEMSYNC_SERVER"] = "http://127.0.0.1:9"
    alice.env["MEMSYNC_TIMEOUT"] = "2"

    async def conversation(session: ClientSession) -> None:
        written = _data(await _call(session, "write_note", key="a.md", text="a note\n"))
        assert written["sync"] == "push-failed"
        assert "the next sync" in written["detail"]
        history = await _call(session, "note_history", key="a.md")
        assert history.isError
        assert "cannot get the history of a.md" in _text(history)

    _talk(alice, tmp_path, conversation)
    assert alice.read("a.md") == "a note\n"


INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test-agent", "version": "1.2.3"},
        },
    }
)


def test_memsync_mcp_ends_quietly_when_stdin_closes_or_on_ctrl_c(tmp_path: Path) -> None:
    """An agent closing the connection (at once, or after `initialize`) and a Ctrl-C
    each end `memsync mcp` with exit 0 and nothing on stderr. No server is asked."""
    team = tmp_path / "team"
    team.mkdir()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / ".config"),
        "XDG_STATE_HOME": str(tmp_path / ".state"),
        "MEMSYNC_SERVER": "http://127.0.0.1:9",
        "MEMSYNC_TOKEN": "mst_" + "a" * 24,
        "MEMSYNC_REPO": "acme/app",
        "MEMSYNC_DIR": str(team),
    }
    script = Path(sys.executable).with_name("memsync")

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [str(script), "mcp"],
            env=env,
            cwd=tmp_path,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    # All three at once: each pays the SDK's import.
    processes = closed, _, interrupted = start(), start(), start()
    try:
        for process in processes:
            assert process.stdin is not None
            assert process.stdout is not None
            if process is not closed:
                process.stdin.write(INITIALIZE.encode() + b"\n")
                process.stdin.flush()
                answer = json.loads(process.stdout.readline())
                assert answer["result"]["serverInfo"]["name"] == "memsync"
            if process is not interrupted:
                process.stdin.close()
        interrupted.send_signal(signal.SIGINT)
        for process in processes:
            assert process.wait(timeout=CALL_SECONDS) == 0
            assert process.stderr is not None
            assert process.stderr.read().decode() == ""
    finally:
        for process in processes:
            process.kill()
            process.wait()
            for stream in (process.stdin, process.stdout, process.stderr):
                if stream is not None:
                    stream.close()
