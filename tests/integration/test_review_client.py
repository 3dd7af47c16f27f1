"""Reviewed team memory through the real CLI, real watchers and a real Claude Code
(issue 28, points 1 to 5; the web inbox has its own tests).

alice writes without being a reviewer, bob is a teammate, carol reviews. One live server
serves the module with a bound of 2 pending proposals per author; each test has its own
repo, turned reviewed in the server's store (as `memsync-server repo set` does).
Requests are counted from the server's own `/metrics`, never by a timer.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp import ClientSession

from sync_server.auth import issue_token
from sync_server.config import Settings, sqlite_url
from tests.integration.claudekit import make_teammate, require_claude, session
from tests.integration.fake_anthropic import FakeAnthropic, text, tool_use
from tests.integration.test_mcp import _call as mcp_call
from tests.integration.test_mcp import _data as mcp_data
from tests.integration.test_mcp import _talk as mcp_talk
from tests.integration.users import User, make_user
from tests.integration.watchkit import WatchProcess, server_entries, wait_until, watch_state
from tests.liveserver import LiveServer, run_live_server, server_command

FAST = ("--debounce", "0.3")
BASE_NOTE = "---\nname: db\ndescription: the database\n---\nWe use PostgreSQL 16.\n"
_repos = itertools.count(1)


@pytest.fixture(scope="module")
def review_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    folder = tmp_path_factory.mktemp("review-server")
    settings = Settings(
        database_url=sqlite_url(folder / "memsync.sqlite3"),
        token_cache_seconds=0,
        max_pending_proposals=2,
    )
    with run_live_server(settings) as server:
        yield server


@pytest.fixture(scope="module")
def tokens(review_server: LiveServer) -> dict[str, str]:
    """One token each; carol's is a reviewer's."""
    made = {name: review_server.token(name=name) for name in ("alice", "bob")}
    _, made["carol"] = issue_token(
        review_server.store, repo_pattern="*", name="carol", reviewer=True
    )
    return made


@pytest.fixture
def repo(review_server: LiveServer) -> str:
    name = f"acme/reviewed-{next(_repos)}"
    review_server.store.set_review(name, True)
    return name


def _user(name: str, server: LiveServer, tokens: dict[str, str], repo: str, root: Path) -> User:
    user = make_user(name, root, server, tokens[name])
    user.env["MEMSYNC_REPO"] = repo
    return user


@pytest.fixture
def alice(review_server: LiveServer, tokens: dict[str, str], repo: str, tmp_path: Path) -> User:
    return _user("alice", review_server, tokens, repo, tmp_path)


@pytest.fixture
def bob(review_server: LiveServer, tokens: dict[str, str], repo: str, tmp_path: Path) -> User:
    return _user("bob", review_server, tokens, repo, tmp_path)


@pytest.fixture
def carol(review_server: LiveServer, tokens: dict[str, str], repo: str, tmp_path: Path) -> User:
    return _user("carol", review_server, tokens, repo, tmp_path)


def requests_served(server: LiveServer, token: str, method: str | None = None) -> int:
    """The team-memory requests the server has answered (its `/metrics`), of `method`."""
    with server.client(token) as client:
        text = client.get("/metrics").text
    total = 0.0
    for found in re.finditer(r"^memsync_requests_total\{([^}]*)\} (\S+)$", text, re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', found.group(1)))
        if labels.get("route", "").startswith("/v1/team_memory") and (
            method is None or labels.get("method") == method
        ):
            total += float(found.group(2))
    return int(total)


def start_watch(user: User, watchers: list[WatchProcess]) -> WatchProcess:
    """`memsync watch` for the user, once its first sync is done and the stream is live."""
    process = WatchProcess(user.env, user.home, *FAST)
    watchers.append(process)

    def settled() -> bool:
        state = watch_state(user)
        return bool(state and state.get("live") == "events" and state["last_pull"])

    assert wait_until(settled), process.log()
    return process


def test_a_proposal_reaches_nobody_until_accepted_costs_no_requests_and_a_rejection_is_undone(
    review_server: LiveServer,
    tokens: dict[str, str],
    alice: User,
    bob: User,
    carol: User,
    watchers: list[WatchProcess],
) -> None:
    carol.write("notes/db.md", BASE_NOTE)
    carol.write("MEMORY.md", "- [DB](notes/db.md) — the database\n")
    assert carol.json("push")["uploaded"] == ["MEMORY.md", "notes/db.md"]  # a reviewer's
    alice_watch = start_watch(alice, watchers)
    bob_watch = start_watch(bob, watchers)

    # 1. alice's note is a proposal: nobody else's team dir or session block has it.
    before = requests_served(review_server, tokens["carol"])
    alice.write("notes/deploy.md", "---\nname: deploy\ndescription: how\n---\nBLUE-GREEN-7731\n")
    alice.write("MEMORY.md", alice.read("MEMORY.md") + "- [Deploy](notes/deploy.md) — ALICE-LINE\n")
    assert wait_until(lambda: "for review (proposal" in alice_watch.log()), alice_watch.log()
    # 4. Nothing else changing: no resend, no polling (the PUT and at most one more).
    time.sleep(2.0)
    assert requests_served(review_server, tokens["carol"]) - before <= 2
    status = alice.run("status")
    assert status.returncode == 0, status
    assert "proposed, waiting for review: notes/deploy.md (proposal" in status.stdout
    assert "proposed, waiting for review: MEMORY.md (proposal" in status.stdout
    assert "modified:" not in status.stdout
    assert "new:" not in status.stdout
    assert "notes/deploy.md" not in server_entries(review_server, alice.env["MEMSYNC_REPO"])
    assert not (bob.team / "notes/deploy.md").exists()
    assert "ALICE-LINE" not in bob.run("context").stdout
    assert "Your proposals waiting for review" in alice.run("context").stdout

    listed = carol.json("review")
    (proposal,) = listed["proposals"]
    assert proposal["author"] == "alice"
    diffs = {row["key"]: row["diff"] for row in proposal["keys"]}
    assert "+BLUE-GREEN-7731\n" in diffs["notes/deploy.md"]
    assert "+- [Deploy](notes/deploy.md) — ALICE-LINE\n" in diffs["MEMORY.md"]
    assert "review: 1 proposal waits for review" in carol.run("status").stdout

    # A teammate's commit wakes alice's watcher: it pulls, and still sends nothing again.
    puts = requests_served(review_server, tokens["carol"], "PUT")
    carol.write("notes/carol.md", "carol's own note\n")
    carol.json("push")
    assert wait_until(lambda: (alice.team / "notes/carol.md").exists()), alice_watch.log()
    time.sleep(0.5)
    assert requests_served(review_server, tokens["carol"], "PUT") == puts + 1  # carol's only

    accepted = carol.json("review", "accept", str(proposal["id"]))
    assert accepted["accepted"][0]["id"] == proposal["id"]
    assert wait_until(lambda: (bob.team / "notes/deploy.md").exists(), timeout=5), bob_watch.log()
    assert "ALICE-LINE" in bob.read("MEMORY.md")
    assert wait_until(lambda: "accepted by carol" in alice_watch.log()), alice_watch.log()
    newest = alice.run("log").stdout.splitlines()[0]
    assert "  alice  " in newest
    assert newest.endswith("(accepted by carol)")

    # 2. Rejected with a reason: the team's text is back, alice's is saved, every
    # surface says who and why.
    alice.write("notes/db.md", BASE_NOTE.replace("PostgreSQL 16", "MongoDB"))
    assert wait_until(lambda: alice_watch.log().count("for review (proposal") == 2)
    (pending,) = carol.json("review")["proposals"]
    rejected = carol.json("review", "reject", str(pending["id"]), "--reason", "we stay on PG")
    assert rejected["status"] == "rejected"
    assert wait_until(lambda: "rejected by carol" in alice_watch.log()), alice_watch.log()
    assert alice.read("notes/db.md") == BASE_NOTE
    assert "notes/db.md: rejected by carol: 'we stay on PG'" in alice_watch.log()
    (row,) = alice.json("status", expect=3)["rejected"]
    assert (row["key"], row["by"], row["reason"]) == ("notes/db.md", "carol", "we stay on PG")
    assert Path(row["saved_to"]).read_text() == BASE_NOTE.replace("PostgreSQL 16", "MongoDB")
    assert row["saved_to"] in alice_watch.log()
    block = alice.run("context").stdout
    assert "was rejected by carol" in block
    assert json.dumps("we stay on PG") in block
    # The log names keys and reviewers, never a note's text.
    assert "MongoDB" not in alice_watch.log()
    assert server_entries(review_server, alice.env["MEMSYNC_REPO"])["notes/db.md"] == BASE_NOTE


def test_two_index_lines_both_kept_an_overlap_refused_and_the_bound_said_once(
    review_server: LiveServer, tokens: dict[str, str], alice: User, bob: User, carol: User
) -> None:
    repo = alice.env["MEMSYNC_REPO"]
    carol.write("MEMORY.md", "# Team\n- [DB](notes/db.md) — the database\n")
    carol.write("notes/db.md", BASE_NOTE)
    carol.json("push")
    alice.json("pull")
    bob.json("pull")

    # 3. Two agents each append a line to the index, as proposals; both accepted.
    alice.write("MEMORY.md", alice.read("MEMORY.md") + "- ALICE-LINE\n")
    bob.write("MEMORY.md", bob.read("MEMORY.md") + "- BOB-LINE\n")
    assert alice.json("push")["proposed"][0]["key"] == "MEMORY.md"
    assert bob.json("push")["proposed"][0]["key"] == "MEMORY.md"
    carol.json("review")  # `--all` accepts what this listing shows
    assert carol.json("review", "accept", "--all")["conflicts"] == []
    index = server_entries(review_server, repo)["MEMORY.md"]
    assert "- ALICE-LINE\n" in index
    assert "- BOB-LINE\n" in index
    pulled = alice.json("pull")  # learns the outcome: her line is in, in sync
    assert [(row["key"], row["by"]) for row in pulled["reviewed"]] == [("MEMORY.md", "carol")]
    assert alice.read("MEMORY.md") == index

    # A proposal whose base moved and overlaps the team's new text: refused, shown,
    # nothing changes, it stays pending.
    alice.write("notes/db.md", BASE_NOTE.replace("PostgreSQL 16", "PostgreSQL 17"))
    (made,) = alice.json("push")["proposed"]
    carol.write("notes/db.md", BASE_NOTE.replace("PostgreSQL 16", "PostgreSQL 15"))
    assert carol.json("push")["uploaded"] == ["notes/db.md"]
    team = server_entries(review_server, repo)
    refused = carol.run("review", "accept", str(made["id"]))
    assert refused.returncode == 3, refused
    assert "notes/db.md" in refused.stdout
    assert "overlap" in refused.stdout
    assert server_entries(review_server, repo) == team
    assert [item["id"] for item in carol.json("review")["proposals"]] == [made["id"]]
    # Pushing again does not send it: the proposal waits. The bound (2 pending per
    # author here) is a clear refusal, not tried again until the file changes.
    alice.write("notes/one.md", "one\n")
    pushed = alice.json("push")
    assert pushed["waiting"] == ["notes/db.md"]
    assert [row["key"] for row in pushed["proposed"]] == ["notes/one.md"]
    alice.write("notes/two.md", "two\n")
    result = alice.run("push")
    assert result.returncode == 3, result
    assert "not proposed: 2 proposals of yours already wait for review" in result.stdout
    puts = requests_served(review_server, tokens["carol"], "PUT")
    again = alice.json("push", expect=3)
    assert again["skipped"][0]["reason"] == "too-many-proposals"
    assert requests_served(review_server, tokens["carol"], "PUT") == puts


def test_an_agents_mcp_write_in_a_reviewed_repo_is_a_proposal_nobody_sees_until_accepted(
    review_server: LiveServer, tokens: dict[str, str], repo: str, tmp_path: Path
) -> None:
    # 5. A real Claude Code session calls memsync's MCP write_note.
    claude = require_claude()
    alice = make_teammate("alice", tmp_path, review_server, tokens["alice"], repo=repo)
    bob = make_teammate("bob", tmp_path, review_server, tokens["bob"], repo=repo)
    carol = make_teammate("carol", tmp_path, review_server, tokens["carol"], repo=repo)
    alice.json("setup", "claude-code", "--mcp")
    note = "---\nname: port\ndescription: X's port\n---\nX listens on PORT-8788.\n"
    with FakeAnthropic() as fake:
        run = session(
            claude,
            fake,
            alice,
            "remember X's port",
            tool_use("mcp__memsync__write_note", {"key": "notes/port.md", "text": note}),
            text("Proposed."),
        )
    (answer,) = run.last().tool_results()
    assert not answer.is_error, answer
    assert "proposed: a reviewer must accept it before teammates see it (proposal" in answer.text
    assert "notes/port.md" not in server_entries(review_server, repo)
    # Bob's MCP memory_index and read_note read his team dir, which a pull fills from
    # the team's commits only: another person's proposal never reaches it.
    (proposal,) = carol.json("review")["proposals"]
    assert proposal["author"] == "alice"
    assert proposal["agent"] == "claude-code"  # the MCP client's own name
    carol.ok("review", "accept", str(proposal["id"]))
    bob.ok("pull")
    assert bob.read("notes/port.md") == note


def ok(user: User, *args: str) -> str:
    done = user.run(*args)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def agent_wrote(user: User, key: str, session_id: str) -> None:
    """Claude Code's `PostToolUse` hook after its Write of `key`, as Claude Code runs it
    (`memsync context --tool-use`, its JSON on stdin)."""
    payload = {
        "session_id": session_id,
        "cwd": str(user.home),
        "hook_event_name": "PostToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": str(user.team / key)},
    }
    script = Path(sys.executable).with_name("memsync")
    subprocess.run(
        [str(script), "context", "--tool-use"],
        input=json.dumps(payload),
        text=True,
        env={**user.env, "CLAUDE_CODE_VERSION": "2.1.197"},
        cwd=user.home,
        check=True,
        timeout=30,
    )


def test_a_proposal_names_the_agent_session_that_wrote_it_and_a_later_hand_edit_none(
    alice: User, carol: User
) -> None:
    """Issue 37: a pushed proposal shows its agent and session to the reviewer; the
    hook's record is that write's only, so alice's hand edit after it names no agent."""
    note = "---\nname: port\ndescription: X's port\n---\nX listens on 8788.\n"
    alice.write("notes/port.md", note)
    agent_wrote(alice, "notes/port.md", "5e55-10n")
    (made,) = alice.json("push")["proposed"]
    (listed,) = carol.json("review")["proposals"]
    assert listed["agent"] == "claude-code"
    assert listed["provenance"]["session"] == "5e55-10n"
    shown = carol.run("review").stdout
    said = f"proposal {made['id']}: pending, by alice, agent claude-code 2.1.197, session 5e55-10n"
    assert said in shown

    alice.write("notes/port.md", note + "Checked by hand.\n")
    (again,) = alice.json("push")["proposed"]
    (listed,) = carol.json("review")["proposals"]
    assert listed["id"] == again["id"] != made["id"]
    assert listed["agent"] is None
    assert "session" not in listed.get("provenance", {})
    assert "agent" not in carol.run("review").stdout


def test_review_switched_off_publishes_what_waits_and_returns_what_overlaps_a_newer_edit(
    review_server: LiveServer,
    repo: str,
    alice: User,
    bob: User,
    carol: User,
    watchers: list[WatchProcess],
) -> None:
    """Issue 37: `repo set --review off` strands no proposal. One that merges is the
    author's commit for the team; one that would overwrite a teammate's newer edit goes
    back to its author, whose status and pull say what happened and what to do. bob's
    watcher, which hears only the commit, learns what became of his."""
    index = "- [DB](notes/db.md) — the database\n"
    carol.write("notes/db.md", BASE_NOTE)
    carol.write("MEMORY.md", index)
    ok(carol, "push")
    ok(alice, "pull")
    bob.write("notes/bob.md", "---\nname: bob\ndescription: his\n---\nBOB-FACT\n")
    bob_watch = start_watch(bob, watchers)
    assert wait_until(lambda: "for review (proposal" in bob_watch.log()), bob_watch.log()
    (bobs,) = [row["id"] for row in bob.json("review")["proposals"]]
    alice.write("notes/deploy.md", "---\nname: deploy\ndescription: how\n---\nBLUE-GREEN\n")
    alice.write("MEMORY.md", index + "- [Deploy](notes/deploy.md) — how we deploy\n")
    published = {row["id"] for row in alice.json("push")["proposed"]}
    alice.write("notes/db.md", BASE_NOTE.replace("PostgreSQL 16", "PostgreSQL 17"))
    (overlaps,) = alice.json("push")["proposed"]
    carol.write("notes/db.md", BASE_NOTE.replace("PostgreSQL 16", "MySQL 8"))
    ok(carol, "push")

    switched = subprocess.run(
        [*server_command(), "repo", "set", repo, "--review", "off"],
        env={**os.environ, "MEMSYNC_DATABASE_URL": review_server.settings.database_url},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert switched.returncode == 0, switched.stderr
    (first,) = published
    assert (
        f"published proposal {first} in {repo} by alice (MEMORY.md, notes/deploy.md) as version"
        in switched.stdout
    )
    why = (
        "review was switched off; not published, as the team changed notes/db.md since it "
        "was written, and the edits overlap"
    )
    assert f"returned proposal {overlaps['id']} in {repo} by alice (notes/db.md): {why}" in (
        switched.stdout
    )
    said = f"notes/bob.md: proposal {bobs} published when review was switched off"
    assert wait_until(lambda: said in bob_watch.log()), bob_watch.log()
    ok(bob, "pull")
    assert bob.read("notes/deploy.md").endswith("BLUE-GREEN\n")
    assert "- [Deploy](notes/deploy.md)" in bob.read("MEMORY.md")
    assert "MySQL 8" in bob.read("notes/db.md")

    status = alice.run("status")
    assert "waiting for review" not in status.stdout, status.stdout
    assert f"notes/db.md: proposal {overlaps['id']} returned to you: {why}; the next pull" in (
        status.stdout
    )
    pulled = alice.run("pull")
    assert pulled.returncode == 0, pulled
    assert (
        f"notes/deploy.md: proposal {first} published when review was switched off: the team "
        "has it" in pulled.stdout
    )
    assert "the team's text is back and yours is saved at" in pulled.stdout
    told = "(`memsync resolve notes/db.md --mine` publishes yours in place of the team's"
    assert told in pulled.stdout
    assert "MySQL 8" in alice.read("notes/db.md")
    # What she is told to do works: her text is the team's, nothing is left waiting.
    ok(alice, "resolve", "notes/db.md", "--mine")
    assert "PostgreSQL 17" in server_entries(review_server, repo)["notes/db.md"]
    after = alice.json("status")
    assert not after.get("proposed"), after
    assert not after.get("rejected"), after
    assert "waiting" not in alice.run("push").stdout


def test_a_new_repos_first_proposals_create_nothing_and_a_push_knows_their_outcome(
    review_server: LiveServer, repo: str, alice: User, carol: User
) -> None:
    # The first proposal would start the repo: it creates nothing, and says so once.
    alice.write("notes/own.md", "first\n")
    first = alice.run("push", "--json")
    assert first.returncode == 0, first
    assert first.stderr == (
        f"memsync: no team memory for {repo} on {review_server.base_url} yet: the repo is "
        "reviewed, so your notes are proposed, waiting for review (a reviewer's accept "
        "creates it)\n"
    )
    assert json.loads(first.stdout)["created_team_memory"] is False
    (made,) = json.loads(first.stdout)["proposed"]
    alice.write("notes/two.md", "two\n")
    second = alice.run("push")
    assert second.returncode == 0, second
    assert second.stderr == ""
    assert "proposed notes/two.md for review (proposal" in second.stdout
    (other,) = [item for item in carol.json("review")["proposals"] if item["id"] != made["id"]]

    # Decided meanwhile: alice's next push asks once, and says what became of each
    # (never "waiting"); the accept is said once.
    carol.json("review", "accept", str(made["id"]))
    carol.json("review", "reject", str(other["id"]), "--reason", "not needed")
    third = alice.run("push")
    assert third.returncode == 0, third
    assert f"notes/own.md: proposal {made['id']} accepted by carol: the team has it" in third.stdout
    assert (
        "notes/two.md: rejected by carol: 'not needed'; the next pull puts the team's text "
        "back and saves yours" in third.stdout
    )
    assert "waiting for review" not in third.stdout
    assert "pushed 0 file(s)" not in third.stdout
    assert "accepted" not in alice.run("push").stdout

    # The accepted text is the base of alice's next edit, though she never pulled: her
    # own text never comes back as "changed on the server too".
    alice.write("notes/own.md", "first\nsecond\n")
    (again,) = alice.json("push")["proposed"]
    assert again["key"] == "notes/own.md"
    carol.json("review", "accept", str(again["id"]))
    assert server_entries(review_server, repo)["notes/own.md"] == "first\nsecond\n"
    assert alice.json("status")["proposed"] == []


def test_a_proposal_accepted_while_another_token_reads_is_not_shown_as_waiting(
    review_server: LiveServer, alice: User, carol: User
) -> None:
    # alice proposes, then uses a new token of hers (its answers list only its own
    # proposals): once her pull brings the accepted text, nothing says it still waits.
    alice.write("notes/mine.md", "mine\n")
    (made,) = alice.json("push")["proposed"]
    carol.json("review", "accept", str(made["id"]))
    alice.env["MEMSYNC_TOKEN"] = review_server.token(name="alice-new-laptop")
    alice.json("pull")
    assert alice.json("status")["proposed"] == []
    assert "waiting for review" not in alice.run("context").stdout


def test_the_block_mcp_and_watchers_follow_the_review_setting_and_learn_web_outcomes(
    review_server: LiveServer,
    tokens: dict[str, str],
    repo: str,
    alice: User,
    carol: User,
    watchers: list[WatchProcess],
    tmp_path: Path,
) -> None:
    """Issue 37: agents are told the server's review setting within the watcher's next
    event (no CLI command between), a reviewer's watcher logs the first proposal after
    review is switched on, and a proposal alice made on the web page is decided where
    her watcher sees it."""
    review_server.store.set_review(repo, False)
    number = next(_repos)
    alice.env["MEMSYNC_TOKEN"] = review_server.token(name=f"alice-cli-{number}", person="alice")
    web_token = review_server.token(name=f"alice-web-{number}", person="alice")
    seed = {"notes/db.md": BASE_NOTE, "MEMORY.md": "- [DB](notes/db.md) — the database\n"}
    with review_server.client(tokens["carol"]) as api:
        assert api.put(f"/v1/team_memory?repo={repo}", json={"entries": seed}).is_success
    alice_watch = start_watch(alice, watchers)
    carol_watch = start_watch(carol, watchers)
    reviewed_line = "This repo's team memory is reviewed: a note written here"
    assert reviewed_line not in alice.run("context").stdout

    # Switched on: alice writes at once; carol's watcher logs the proposal, alice's
    # block and her agent's MCP write say it is reviewed.
    review_server.store.set_review(repo, True)
    alice.write("notes/first.md", "first after the switch\n")
    assert wait_until(lambda: "waits for review" in carol_watch.log()), carol_watch.log()
    assert wait_until(lambda: reviewed_line in alice.run("context").stdout, timeout=5)

    def web_proposal_rejected() -> None:
        # Her proposal of a delete made on the web page, rejected: her watcher says so,
        # and `status` keeps it, though this machine never held it.
        with httpx.Client(base_url=review_server.base_url, timeout=30) as web:
            assert web.post("/ui/signin", data={"token": web_token}).status_code == 303
            page = f"/ui/repo/{repo}"
            form = web.get(f"{page}/note", params={"key": "notes/db.md"}).text
            csrf = re.search(r'name="csrf" value="([^"]+)"', form)
            assert csrf is not None
            deleted = web.post(
                f"{page}/delete",
                data={"key": "notes/db.md", "confirm": "yes", "csrf": csrf.group(1)},
            )
            assert deleted.status_code == 303, deleted.text[:300]
        (web,) = [
            item
            for item in carol.json("review")["proposals"]
            if any(row["op"] == "delete" for row in item["keys"])
        ]
        carol.json("review", "reject", str(web["id"]), "--reason", "keep the DB note")
        assert wait_until(lambda: "'keep the DB note'" in alice_watch.log()), alice_watch.log()
        assert (
            "notes/db.md: rejected by carol: 'keep the DB note'; it was proposed from another "
            "machine or the web page: nothing here changed" in alice_watch.log()
        )
        rejected = {row["key"]: row for row in alice.json("status")["rejected"]}
        assert rejected["notes/db.md"]["reason"] == "keep the DB note"
        assert alice.read("notes/db.md") == BASE_NOTE

        # Switched off: the block drops the line (and MCP says the note syncs).
        review_server.store.set_review(repo, False)
        assert wait_until(lambda: reviewed_line not in alice.run("context").stdout, timeout=5)

    answers: list[str] = []

    async def conversation(session: ClientSession) -> None:
        for note in ("written while reviewed\n", None, "written once review is off\n"):
            if note is None:
                await asyncio.to_thread(web_proposal_rejected)
                continue
            # (The first replaces alice's proposal of the same note: one waits.)
            result = await mcp_call(session, "write_note", key="notes/first.md", text=note)
            answers.append(mcp_data(result)["detail"])

    mcp_talk(alice, tmp_path, conversation)
    reviewed_answer, published_answer = answers
    assert "will send it as a proposal for review, not published" in reviewed_answer
    assert "`memsync status` shows its proposal number" in reviewed_answer
    assert "will sync it to the team" in published_answer
    assert "proposal" not in published_answer
    assert wait_until(
        lambda: (
            server_entries(review_server, repo).get("notes/first.md")
            == "written once review is off\n"
        )
    ), alice_watch.log()


def test_rm_in_a_reviewed_repo_proposes_the_index_line_with_the_delete(
    review_server: LiveServer, alice: User, carol: User
) -> None:
    """The proposal carries the note's delete and its index line's removal, as the web
    page's delete does: once accepted, no line leads nowhere."""
    repo = alice.env["MEMSYNC_REPO"]
    kept = "# Team\n- [DB](notes/db.md) — the database\n"
    carol.write("MEMORY.md", kept + "- [Old](notes/old.md) — old\n")
    carol.write("notes/db.md", BASE_NOTE)
    carol.write("notes/old.md", "---\nname: old\ndescription: old\n---\nold\n")
    carol.json("push")
    alice.json("pull")
    removed = alice.run("rm", "notes/old.md")
    assert removed.returncode == 0, removed.stderr
    assert "proposed deleting notes/old.md for review" in removed.stdout
    assert "proposed with it: removing MEMORY.md line 3 (linking to notes/old.md)" in removed.stdout
    (proposal,) = carol.json("review")["proposals"]
    assert {row["key"] for row in proposal["keys"]} == {"notes/old.md", "MEMORY.md"}
    assert "notes/old.md" in server_entries(review_server, repo)
    carol.json("review", "accept", str(proposal["id"]))
    entries = server_entries(review_server, repo)
    assert "notes/old.md" not in entries
    assert entries["MEMORY.md"] == kept
    alice.json("pull")
    assert alice.read("MEMORY.md") == kept
    assert not (alice.team / "notes/old.md").exists()
