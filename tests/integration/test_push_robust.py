"""One bad file never blocks the others; a dry run shows what a push would do; a sync
whose push fails still reports its pull.

The real `memsync` CLI against a real server on loopback (lower limits where a test
needs the server to refuse an entry), with two users where it matters. The last tests
play a misbehaving server with an httpx `MockTransport` (it stands for a broken or
hostile server, not for any part of memsync).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from memsync_protocol.checksums import entry_checksum, repo_checksum
from sync_client.api import Api
from sync_client.errors import InvalidEntries, PermanentError
from sync_client.push import MAX_REFUSALS, push
from sync_client.workspace import Workspace
from sync_server.config import Settings
from tests.integration.users import REPO, User, make_user
from tests.liveserver import LiveServer, run_live_server

# Nothing listens here: a command that still succeeds made no request.
DEAD_SERVER = "http://127.0.0.1:9"


def offline(user: User) -> User:
    """The same user, pointed at a server that does not answer."""
    return User(user.name, user.home, user.team, {**user.env, "MEMSYNC_SERVER": DEAD_SERVER})


def server_entries(live: LiveServer) -> dict[str, str]:
    with live.client(live.token()) as client:
        answer = client.get("/v1/team_memory", params={"repo": REPO})
    if answer.status_code == 404:
        return {}
    entries: dict[str, str] = answer.json()["content"]["entries"]
    return entries


def skips(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["key"]: row for row in result["skipped"]}


def test_a_bad_file_is_skipped_with_its_reason_and_the_others_go_up(
    alice: User, bob: User, live: LiveServer
) -> None:
    alice.write("ok.md", "fine\n")
    alice.write("nul.md", "binary\x00inside\n")
    alice.write("big.md", "x" * 312_004)
    pushed = alice.json("push", expect=3)
    assert pushed["uploaded"] == ["ok.md"]
    skipped = skips(pushed)
    assert skipped["nul.md"]["reason"] == "invalid-text"
    assert (skipped["big.md"]["size"], skipped["big.md"]["max_bytes"]) == (312_004, 250_000)
    assert server_entries(live) == {"ok.md": "fine\n"}
    assert bob.json("pull")["written"] == ["ok.md"]
    human = alice.run("push")
    assert human.returncode == 3
    assert "skipped: big.md: too large: 312,004 bytes, the server allows 250,000" in human.stdout
    assert "skipped: nul.md: invalid text: the text contains a NUL character" in human.stdout


def test_a_nul_in_a_file_is_skipped_before_any_request(alice: User) -> None:
    alice.write("nul.md", "a\x00b\n")
    result = offline(alice).run("push", "--json")
    assert result.returncode == 3, result.stderr
    pushed = json.loads(result.stdout)
    assert pushed["batches"] == 0
    assert skips(pushed)["nul.md"]["reason"] == "invalid-text"


def test_an_entry_over_a_lower_server_limit_is_left_out_and_the_rest_go_up(
    tmp_path: Path, sqlite_database_url: str
) -> None:
    settings = Settings(database_url=sqlite_database_url, max_entry_bytes=1_000)
    with run_live_server(settings) as live:
        alice = make_user("alice", tmp_path, live, live.token(name="alice"))
        bob = make_user("bob", tmp_path, live, live.token(name="bob"))
        alice.write("a.md", "small\n")
        alice.write("big1.md", "é" * 750)  # 750 characters, 1,500 bytes
        alice.write("big2.md", "y" * 2_000)
        alice.write("z.md", "small too\n")
        pushed = alice.json("push", expect=3)
        assert pushed["uploaded"] == ["a.md", "z.md"]
        # The server names one key per answer; its limit, once learned, is applied
        # here, so the second big file costs no request: one refused PUT, one that went.
        assert pushed["batches"] == 2
        skipped = skips(pushed)
        assert {key: (row["size"], row["max_bytes"]) for key, row in skipped.items()} == {
            "big1.md": (1_500, 1_000),
            "big2.md": (2_000, 1_000),
        }
        assert sorted(server_entries(live)) == ["a.md", "z.md"]
        again = alice.run("push")
        assert again.returncode == 3
        assert "skipped: big1.md: too large: 1,500 bytes, the server allows 1,000" in again.stdout
        assert "pushed 0 file(s) in 0 request(s)" in again.stdout
        alice.write("big1.md", "now it fits\n")
        fixed = alice.json("push", expect=3)
        assert fixed["uploaded"] == ["big1.md"]
        assert list(skips(fixed)) == ["big2.md"]
        assert sorted(bob.json("pull")["written"]) == ["a.md", "big1.md", "z.md"]
    # The server is gone: a push that still succeeds asked it nothing.
    unchanged = alice.json("push", expect=3)
    assert list(skips(unchanged)) == ["big2.md"]


def test_a_key_the_server_refuses_is_remembered_until_the_file_changes(
    tmp_path: Path, sqlite_database_url: str
) -> None:
    settings = Settings(database_url=sqlite_database_url, max_key_bytes=24)
    long_key = "a-name-longer-than-the-server-allows.md"
    with run_live_server(settings) as live:
        alice = make_user("alice", tmp_path, live, live.token(name="alice"))
        alice.write("ok.md", "fine\n")
        alice.write(long_key, "v1\n")
        pushed = alice.json("push", expect=3)
        assert pushed["uploaded"] == ["ok.md"]
        row = skips(pushed)[long_key]
        assert row["reason"] == "invalid-key"
        assert row["detail"] == "the name is longer than 24 bytes"
        assert pushed["batches"] == 2
        alice.write(long_key, "v2\n")
        changed = alice.json("push", expect=3)
        assert changed["batches"] == 1  # tried again, refused again
        assert list(skips(changed)) == [long_key]
        assert sorted(server_entries(live)) == ["ok.md"]
    # The server is gone: the unchanged refused file is skipped without asking it.
    unchanged = alice.json("push", expect=3)
    assert list(skips(unchanged)) == [long_key]
    assert skips(unchanged)[long_key]["detail"] == "the name is longer than 24 bytes"


def test_a_refusal_that_names_no_file_fails_the_push(
    tmp_path: Path, sqlite_database_url: str
) -> None:
    settings = Settings(database_url=sqlite_database_url, max_body_bytes=1_024)
    with run_live_server(settings) as live:
        alice = make_user("alice", tmp_path, live, live.token(name="alice"))
        alice.write("a.md", "a" * 700)
        alice.write("b.md", "b" * 700)
        result = alice.run("push")
        assert result.returncode == 1
        # The failure, one line; nothing was created, so no line says it was.
        (failed,) = result.stderr.splitlines()
        assert failed.startswith("memsync: the server refused the request (413)")
        assert server_entries(live) == {}


def test_a_file_where_a_teammate_has_a_folder_is_skipped_and_the_rest_go_up(
    alice: User, bob: User, live: LiveServer
) -> None:
    bob.write("d/n.md", "bob's note\n")
    bob.json("push")
    alice.write("d", "alice's file named d\n")
    alice.write("mine.md", "my edit\n")
    pulled = alice.json("pull", expect=3)
    assert [row["key"] for row in pulled["refused"]] == ["d/n.md"]
    pushed = alice.json("push", expect=3)
    assert pushed["uploaded"] == ["mine.md"]
    row = skips(pushed)["d"]
    assert (row["reason"], row["clashes_with"]) == ("path-clash", "d/n.md")
    human = alice.run("push")
    assert human.returncode == 3
    assert (
        "skipped: d: file/folder clash with d/n.md: d is a file here but d/ is a folder on "
        "the server; rename one of them" in human.stdout
    )
    assert server_entries(live) == {"d/n.md": "bob's note\n", "mine.md": "my edit\n"}


def test_a_folder_where_the_server_has_a_file_is_skipped_without_a_request(
    tmp_path: Path, sqlite_database_url: str
) -> None:
    with run_live_server(Settings(database_url=sqlite_database_url)) as live:
        alice = make_user("alice", tmp_path, live, live.token(name="alice"))
        alice.write("d", "a file named d\n")
        alice.write("e.md", "e\n")
        alice.json("push")
        held = server_entries(live)
    assert sorted(held) == ["d", "e.md"]
    # Deleting `d` here deletes nothing for the team: the server still has the file,
    # and the bases say so, with the server gone.
    (alice.team / "d").unlink()
    alice.write("d/n.md", "a note under d/\n")
    pushed = alice.json("push", expect=3)
    row = skips(pushed)["d/n.md"]
    assert row["detail"] == "d/n.md needs a folder d/ but d is a file on the server"


def test_dry_run_lists_each_file_and_sends_nothing(
    alice: User, bob: User, live: LiveServer
) -> None:
    alice.write("a.md", "v1\n")
    alice.json("push")
    alice.write("a.md", "version two\n")
    alice.write("notes/b.md", "new ✓\n")
    alice.write("nul.md", "a\x00b\n")
    planned = alice.json("push", "--dry-run", expect=3)
    assert planned["dry_run"] is True
    assert planned["uploaded"] == []
    assert planned["would_push"] == [
        {"key": "a.md", "change": "modified", "bytes": 12},
        {"key": "notes/b.md", "change": "new", "bytes": 8},
    ]
    assert planned["batches"] == 1
    assert list(skips(planned)) == ["nul.md"]
    human = alice.run("push", "--dry-run")
    assert human.returncode == 3
    lines = human.stdout.splitlines()
    assert "would push: a.md (modified, 12 bytes)" in lines
    assert "would push: notes/b.md (new, 8 bytes)" in lines
    assert any(line.startswith("skipped: nul.md: invalid text") for line in lines)
    assert "pushed" not in human.stdout
    assert server_entries(live) == {"a.md": "v1\n"}
    assert bob.json("pull")["written"] == ["a.md"]
    (alice.team / "nul.md").unlink()
    clean = alice.run("push", "--dry-run")
    assert clean.returncode == 0, clean.stderr
    real = alice.json("push")
    assert real["dry_run"] is False
    assert real["uploaded"] == ["a.md", "notes/b.md"]


def test_a_sync_whose_push_fails_still_reports_its_pull(
    live: LiveServer, tmp_path: Path, bob: User
) -> None:
    reader = make_user("reader", tmp_path, live, live.token(name="reader", read_only=True))
    bob.write("shared.md", "line one\n")
    bob.json("push")
    reader.json("pull")
    bob.write("shared.md", "bob's line\n")
    bob.write("new.md", "from bob\n")
    bob.json("push")
    reader.write("shared.md", "reader's line\n")
    reader.write("mine.md", "cannot go up\n")
    result = reader.run("sync", "--json")
    assert result.returncode == 1
    synced = json.loads(result.stdout)
    assert synced["pull"]["written"] == ["new.md", "shared.md"]  # shared.md: a conflict
    [conflict] = synced["pull"]["conflicts"]
    assert conflict["key"] == "shared.md"
    assert Path(conflict["saved_to"]).read_text() == "reader's line\n"
    assert synced["push"] is None
    assert synced["error"]["type"] == "auth"
    assert "refused the token" in synced["error"]["message"]
    assert reader.read("new.md") == "from bob\n"
    # The same in words: the pull's lines, then the failure on one line.
    reader.write("mine.md", "still cannot go up\n")
    bob.write("later.md", "more from bob\n")
    bob.json("push")
    human = reader.run("sync")
    assert human.returncode == 1
    assert "pulled: 1 written" in human.stdout
    assert human.stderr.startswith("memsync: the server refused the token")
    assert len(human.stderr.strip().splitlines()) == 1


def _misbehaving(refuse: Any, puts: list[dict[str, Any]]) -> httpx.MockTransport:
    """A server that offers per-key bases and answers every PUT with `refuse(body)`."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            body: dict[str, Any] = {
                "organizationId": "broken",
                "repo": REPO,
                "version": 1,
                "lastModified": "2026-11-30T00:00:00Z",
                "checksum": repo_checksum({}),
                "entryChecksums": {},
                "supports": ["base-precondition"],
            }
            return httpx.Response(200, json=body)
        sent = json.loads(request.content)
        puts.append(sent)
        return httpx.Response(400, json=refuse(sent))

    return httpx.MockTransport(handler)


def _invalid(key: str) -> dict[str, Any]:
    details = {"error_code": "invalid_key", "keys": [{"key": key, "reason": "is refused"}]}
    return {"error": {"type": "invalid_request", "message": "refused", "details": details}}


def _workspace(tmp_path: Path, transport: httpx.MockTransport, files: int) -> Workspace:
    team = tmp_path / "team"
    team.mkdir()
    for index in range(files):
        (team / f"n{index:02}.md").write_text(f"note {index}\n")
    api = Api("http://broken.invalid", "t", REPO, transport=transport)
    return Workspace.open(team, tmp_path / "state", api)


def test_a_server_that_refuses_one_key_per_answer_cannot_loop_the_client(
    tmp_path: Path,
) -> None:
    puts: list[dict[str, Any]] = []
    transport = _misbehaving(lambda sent: _invalid(sorted(sent["entries"])[0]), puts)
    workspace = _workspace(tmp_path, transport, files=30)
    with pytest.raises(PermanentError, match="refused entries"):
        push(workspace)
    assert len(puts) == MAX_REFUSALS + 1
    # What it did refuse is remembered: the next push starts after those files.
    assert sorted(workspace.state.rejected) == [f"n{index:02}.md" for index in range(MAX_REFUSALS)]
    assert workspace.state.bases == {}


def test_a_refusal_naming_a_key_that_was_not_sent_is_a_failure(tmp_path: Path) -> None:
    puts: list[dict[str, Any]] = []
    transport = _misbehaving(lambda _sent: _invalid("never-sent.md"), puts)
    workspace = _workspace(tmp_path, transport, files=3)
    with pytest.raises(InvalidEntries):
        push(workspace)
    assert len(puts) == 1
    assert workspace.state.rejected == {}
    assert entry_checksum("note 0\n") not in workspace.state.bases.values()
