"""The review gate on the wire (docs/protocol.md section 3.12), against one live server.

alice (two tokens, one per machine) and bob write without review rights, carol is a
reviewer, rita only reads. Each
test has its own reviewed repo, so nothing here touches another test's repos, and the
repos of every other test file are not reviewed.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from memsync_protocol.checksums import entry_checksum
from sync_server.config import Settings, sqlite_url
from tests.liveserver import LiveServer, run_live_server
from tests.pgcluster import PostgresCluster

API = "/v1/team_memory"
MAX_PENDING = 3
_repos = itertools.count(1)


@dataclass
class Team:
    server: LiveServer
    alice: httpx.Client
    bob: httpx.Client
    carol: httpx.Client
    rita: httpx.Client
    # alice's token on her other machine: another name, the same person.
    alice_desktop: httpx.Client


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def team(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Team]:
    """One server per backend for the whole module (on PostgreSQL, proposal events
    travel through NOTIFY like commits)."""
    database_url = sqlite_url(tmp_path_factory.mktemp("review-api") / "memsync.sqlite3")
    cluster: PostgresCluster | None = None
    if request.param == "postgresql":
        cluster = request.getfixturevalue("postgres_cluster")
        database_url = cluster.create_database()
    settings = Settings(database_url=database_url, max_pending_proposals=MAX_PENDING)
    try:
        yield from _serve(settings)
    finally:
        if cluster is not None:
            cluster.drop_database(database_url.rsplit("/", 1)[1])


def _serve(settings: Settings) -> Iterator[Team]:
    with run_live_server(settings) as server:
        clients = [
            server.client(server.token(name="alice", person="alice")),
            server.client(server.token(name="bob")),
            server.client(server.token(name="carol", reviewer=True)),
            server.client(server.token(name="rita", read_only=True)),
            server.client(server.token(name="alice-desktop", person="alice")),
        ]
        yield Team(server, *clients)
        for client in clients:
            client.close()


@pytest.fixture
def repo(team: Team) -> str:
    """A fresh reviewed repo holding `MEMORY.md` and `a.md`, written by carol."""
    name = f"acme/reviewed-{next(_repos)}"
    team.server.store.set_review(name, True)
    written = put(team.carol, name, {"MEMORY.md": "# Index\n- [a](a.md)\n", "a.md": "one\ntwo\n"})
    assert written.status_code == 200, written.text
    return name


def put(client: httpx.Client, repo: str, entries: dict[str, str], **extra: Any) -> httpx.Response:
    return client.put(API, params={"repo": repo}, json={"entries": entries, **extra})


def get(client: httpx.Client, repo: str, **params: Any) -> dict[str, Any]:
    answer = client.get(API, params={"repo": repo, **params})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def proposals(client: httpx.Client, repo: str, **params: Any) -> list[dict[str, Any]]:
    answer = client.get(f"{API}/proposals", params={"repo": repo, **params})
    assert answer.status_code == 200, answer.text
    listed: list[dict[str, Any]] = answer.json()["proposals"]
    return listed


def decide(
    client: httpx.Client, repo: str, proposal_id: int, verb: str, **body: Any
) -> httpx.Response:
    return client.post(
        f"{API}/proposals/{proposal_id}/{verb}", params={"repo": repo}, json=body or None
    )


def propose(client: httpx.Client, repo: str, entries: dict[str, str]) -> dict[str, Any]:
    answer = put(client, repo, entries)
    assert answer.status_code == 202, answer.text
    proposal: dict[str, Any] = answer.json()["proposal"]
    return proposal


def error_code(answer: httpx.Response) -> Any:
    return answer.json()["error"]["details"].get("error_code")


def test_a_write_becomes_a_proposal_that_no_other_read_shows(team: Team, repo: str) -> None:
    before = get(team.bob, repo)
    answer = put(team.alice, repo, {"a.md": "one\ntwo\nalice's guess\n", "new.md": "n\n"})
    assert answer.status_code == 202
    body = answer.json()
    assert answer.headers["ETag"] == f'"{before["checksum"]}"'
    assert {key: body[key] for key in ("checksum", "version", "updatedKeys")} == {
        "checksum": before["checksum"],
        "version": before["version"],
        "updatedKeys": [],
    }
    assert body["entryCount"] == 2
    assert "review" in body["supports"]
    assert body["proposal"] == {
        "id": body["proposal"]["id"],
        "status": "pending",
        "keys": ["a.md", "new.md"],
        "baseVersion": before["version"],
    }
    # No read of anyone else includes the pending text; each says how many wait for them.
    for client, reviewer, pending in (
        (team.bob, False, 0),
        (team.rita, False, 0),
        (team.alice, False, 1),
        (team.carol, True, 1),
    ):
        full = get(client, repo)
        assert full["content"]["entries"] == before["content"]["entries"]
        review = {"on": True, "reviewer": reviewer, "pending": pending}
        assert full["review"] == review
        assert get(client, repo, view="hashes")["review"] == review
        delta = get(client, repo, since=0)
        assert "alice's guess" not in json.dumps(delta)
        assert delta["review"] == review
    assert get(team.bob, repo, key="a.md")["content"] == "one\ntwo\n"
    # A write that changes nothing answers 200, as ever; a repo not reviewed has no field.
    assert put(team.alice, repo, {"a.md": "one\ntwo\n"}).status_code == 200
    assert put(team.alice, "acme/not-reviewed-here", {"x.md": "x"}).status_code == 200
    assert "review" not in get(team.alice, "acme/not-reviewed-here")
    assert team.alice.get("/v1/token").json()["reviewer"] is False
    assert team.carol.get("/v1/token").json()["reviewer"] is True


def test_who_sees_which_proposals(team: Team, repo: str) -> None:
    mine = propose(team.alice, repo, {"a.md": "one\ntwo\nthree\n"})
    theirs = propose(team.bob, repo, {"b.md": "Deploys go through staging first.\n"})
    assert [p["id"] for p in proposals(team.alice, repo)] == [mine["id"]]
    assert [p["id"] for p in proposals(team.bob, repo)] == [theirs["id"]]
    assert proposals(team.rita, repo) == []
    listed = proposals(team.carol, repo)
    assert [p["id"] for p in listed] == [theirs["id"], mine["id"]]
    assert listed[1]["author"] == "alice"
    assert listed[1]["keys"] == [
        {
            "key": "a.md",
            "op": "put",
            "checksum": entry_checksum("one\ntwo\nthree\n"),
            "baseChecksum": entry_checksum("one\ntwo\n"),
        }
    ]
    assert "similar" not in listed[1]
    with_texts = proposals(team.carol, repo, texts=1)[1]
    assert with_texts["keys"][0]["text"] == "one\ntwo\nthree\n"
    assert with_texts["keys"][0]["baseText"] == "one\ntwo\n"
    assert with_texts["keys"][0]["teamText"] == "one\ntwo\n"
    assert with_texts["similar"] == []
    # Similar notes come from the ranked search, caught up with the team's commits.
    assert proposals(team.carol, repo, texts=1)[0]["similar"] == []
    staging = "---\nname: Staging deploys\n---\nEvery deploy goes through staging.\n"
    assert put(team.carol, repo, {"staging.md": staging}).status_code == 200
    assert proposals(team.carol, repo, texts=1)[0]["similar"] == [
        {"key": "staging.md", "title": "Staging deploys"}
    ]
    # One proposal: its author and reviewers read it; anyone else gets a 404.
    one = team.alice.get(f"{API}/proposals/{mine['id']}", params={"repo": repo})
    assert one.status_code == 200
    assert one.json()["keys"][0]["teamChecksum"] == entry_checksum("one\ntwo\n")
    for client, proposal_id in ((team.bob, mine["id"]), (team.carol, 10**9)):
        missing = client.get(f"{API}/proposals/{proposal_id}", params={"repo": repo})
        assert missing.status_code == 404
        assert error_code(missing) == "not_found"
    # A repo that is not reviewed and has no proposals: an empty list, not a 404.
    empty = team.bob.get(f"{API}/proposals", params={"repo": "acme/never-written"})
    assert empty.json() == {
        "repo": "acme/never-written",
        "review": {"on": False, "reviewer": False},
        "proposals": [],
    }


def test_a_persons_tokens_share_their_proposals(team: Team, repo: str) -> None:
    """A proposal is its person's: alice's other token lists, reads and replaces it;
    bob, another person, still sees nothing of hers."""
    laptop = propose(team.alice, repo, {"a.md": "one\ntwo\nfrom the laptop\n", "l.md": "l\n"})
    listed = proposals(team.alice_desktop, repo)
    assert [(p["id"], p["author"], p["person"]) for p in listed] == [
        (laptop["id"], "alice", "alice")
    ]
    assert get(team.alice_desktop, repo)["review"]["pending"] == 1
    one = team.alice_desktop.get(f"{API}/proposals/{laptop['id']}", params={"repo": repo})
    assert one.status_code == 200
    # The desktop's write of a shared key replaces the laptop's and carries its l.md.
    desktop = propose(team.alice_desktop, repo, {"a.md": "one\ntwo\nfrom the desktop\n"})
    assert desktop["keys"] == ["a.md", "l.md"]
    mine = proposals(team.alice, repo, status="all")
    assert [(p["id"], p["status"], p["author"], p["person"]) for p in mine] == [
        (desktop["id"], "pending", "alice-desktop", "alice"),
        (laptop["id"], "replaced", "alice", "alice"),
    ]
    assert mine[1]["replacedBy"] == desktop["id"]
    assert proposals(team.bob, repo, status="all") == []
    for proposal_id in (laptop["id"], desktop["id"]):
        hidden = team.bob.get(f"{API}/proposals/{proposal_id}", params={"repo": repo})
        assert hidden.status_code == 404
    assert get(team.bob, repo)["review"]["pending"] == 0
    assert [p["person"] for p in proposals(team.carol, repo)] == ["alice"]
    # The outcome reaches the laptop, whose proposal lives on as the desktop's.
    assert decide(team.carol, repo, desktop["id"], "accept").status_code == 200
    outcomes = proposals(team.alice, repo, status="decided")
    assert [(p["id"], p["status"]) for p in outcomes] == [
        (desktop["id"], "accepted"),
        (laptop["id"], "replaced"),
    ]


def test_accept_commits_as_the_author_and_logs_the_reviewer(team: Team, repo: str) -> None:
    proposal = propose(team.alice, repo, {"a.md": "one\ntwo\nthree\n"})
    refused = decide(team.alice, repo, proposal["id"], "accept")
    assert refused.status_code == 403
    assert decide(team.rita, repo, proposal["id"], "accept").status_code == 403
    accepted = decide(team.carol, repo, proposal["id"], "accept")
    assert accepted.status_code == 200, accepted.text
    body = accepted.json()
    assert body["updatedKeys"] == ["a.md"]
    assert body["proposal"]["status"] == "accepted"
    assert body["proposal"]["decidedBy"] == "carol"
    assert body["proposal"]["acceptedVersion"] == body["version"]
    assert get(team.bob, repo, key="a.md")["content"] == "one\ntwo\nthree\n"
    commit = team.bob.get(f"{API}/log", params={"repo": repo}).json()["commits"][0]
    assert (commit["author"], commit["acceptedBy"]) == ("alice", "carol")
    versions = team.bob.get(f"{API}/history", params={"repo": repo, "key": "a.md"}).json()
    assert "acceptedBy" not in versions[0]
    assert versions[-1]["acceptedBy"] == "carol"
    again = decide(team.carol, repo, proposal["id"], "accept")
    assert again.status_code == 409
    assert again.json()["error"]["details"] == {
        "error_code": "proposal_decided",
        "status": "accepted",
    }
    assert get(team.bob, repo)["review"]["pending"] == 0


def test_two_appends_both_accepted_and_an_overlap_refused(team: Team, repo: str) -> None:
    first = propose(team.alice, repo, {"MEMORY.md": "# Index\n- [a](a.md)\n- [b](b.md)\n"})
    second = propose(team.bob, repo, {"MEMORY.md": "# Index\n- [a](a.md)\n- [c](c.md)\n"})
    assert decide(team.carol, repo, first["id"], "accept").status_code == 200
    assert decide(team.carol, repo, second["id"], "accept").status_code == 200
    assert get(team.bob, repo, key="MEMORY.md")["content"] == (
        "# Index\n- [a](a.md)\n- [b](b.md)\n- [c](c.md)\n"
    )
    overlap = propose(team.alice, repo, {"a.md": "one\nTWO\n"})
    assert put(team.carol, repo, {"a.md": "one\nzwei\n"}).status_code == 200
    head = get(team.bob, repo)
    refused = decide(team.carol, repo, overlap["id"], "accept")
    assert refused.status_code == 409
    assert refused.json()["error"]["details"] == {
        "error_code": "proposal_conflict",
        "conflicts": [
            {
                "key": "a.md",
                "teamChecksum": entry_checksum("one\nzwei\n"),
                "baseChecksum": entry_checksum("one\ntwo\n"),
            }
        ],
    }
    assert get(team.bob, repo) == head
    assert [p["id"] for p in proposals(team.alice, repo)] == [overlap["id"]]


def test_reject_needs_a_reason(team: Team, repo: str) -> None:
    proposal = propose(team.alice, repo, {"a.md": "a guess\n"})
    for reason in ("", "   ", "x" * 501, "bell\a", 7, None):
        answer = decide(team.carol, repo, proposal["id"], "reject", reason=reason)
        assert answer.status_code == 400, (reason, answer.text)
    assert decide(team.alice, repo, proposal["id"], "reject", reason="mine").status_code == 403
    answer = decide(team.carol, repo, proposal["id"], "reject", reason=" not true:\nsee a.md ")
    assert answer.status_code == 200
    rejected = answer.json()["proposal"]
    assert (rejected["status"], rejected["decidedBy"], rejected["reason"]) == (
        "rejected",
        "carol",
        "not true:\nsee a.md",
    )
    assert get(team.bob, repo, key="a.md")["content"] == "one\ntwo\n"
    assert proposals(team.alice, repo) == []
    assert proposals(team.alice, repo, status="decided")[0]["reason"] == "not true:\nsee a.md"
    later = decide(team.carol, repo, proposal["id"], "accept")
    assert error_code(later) == "proposal_decided"


def test_replacing_the_bound_and_deletes(team: Team, repo: str) -> None:
    first = propose(team.alice, repo, {"x.md": "1"})
    second = propose(team.alice, repo, {"x.md": "2", "y.md": "y"})
    old = team.alice.get(f"{API}/proposals/{first['id']}", params={"repo": repo}).json()
    assert (old["status"], old["replacedBy"]) == ("replaced", second["id"])
    removal = team.alice.delete(API, params={"repo": repo, "key": "a.md"})
    assert removal.status_code == 202
    assert removal.json()["proposal"]["keys"] == ["a.md"]
    restore = team.alice.post(
        f"{API}/restore", params={"repo": repo}, json={"key": "MEMORY.md", "version": 1}
    )
    assert restore.status_code == 200  # the team already has that text: nothing to propose
    propose(team.alice, repo, {"z.md": "z"})
    refused = put(team.alice, repo, {"w.md": "w"})
    assert refused.status_code == 409
    assert refused.json()["error"]["details"] == {"error_code": "too_many_proposals", "max": 3}
    assert len(proposals(team.alice, repo)) == MAX_PENDING
    # Bob's bound is his own; carol (a reviewer) commits directly.
    propose(team.bob, repo, {"w.md": "w"})
    assert put(team.carol, repo, {"w.md": "w"}).status_code == 200


def test_bad_parameters_are_400s(team: Team, repo: str) -> None:
    for path, params in (
        ("/proposals", {"status": "open"}),
        ("/proposals", {"texts": "maybe"}),
        ("/proposals/0", {}),
        ("/proposals/abc", {}),
        ("/proposals/99999999999999999999", {}),
    ):
        answer = team.carol.get(f"{API}{path}", params={"repo": repo, **params})
        assert answer.status_code == 400, (path, params, answer.text)
    blank_agent = team.alice.put(
        API,
        params={"repo": repo},
        json={"entries": {"q.md": "q"}},
        headers={"X-Memsync-Agent": "a\tb"},
    )
    assert blank_agent.status_code == 400
    assert error_code(blank_agent) == "invalid_agent"
    named = team.alice.put(
        API,
        params={"repo": repo},
        json={"entries": {"q.md": "q"}},
        headers={"X-Memsync-Agent": "claude-code"},
    )
    assert proposals(team.carol, repo)[0]["agent"] == "claude-code"
    assert named.status_code == 202


def test_proposal_events_reach_the_repo_stream(team: Team, repo: str) -> None:
    lines: list[str] = []
    opened = threading.Event()

    def listen() -> None:
        with team.carol.stream(
            "GET", f"{API}/events", params={"repo": repo}, timeout=httpx.Timeout(10.0)
        ) as stream:
            for line in stream.iter_lines():
                opened.set()
                lines.append(line)
                if len([item for item in lines if item.startswith('data: {"id"')]) == 2:
                    return

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    assert opened.wait(10)
    proposal = propose(team.alice, repo, {"a.md": "e\n"})
    decide(team.carol, repo, proposal["id"], "reject", reason="no")
    listener.join(10)
    assert not listener.is_alive()
    frames = [line for line in lines if line.startswith('data: {"id"')]
    assert frames == [
        f'data: {{"id": {proposal["id"]}, "status": "pending"}}',
        f'data: {{"id": {proposal["id"]}, "status": "rejected"}}',
    ]


def test_the_review_setting_and_whose_proposal_reach_each_stream(team: Team, repo: str) -> None:
    """Each stream opens with whether the repo is reviewed and its token reviews, hears
    every change of the setting made elsewhere (here: the store, as `memsync-server
    repo set` does), hears `on` before the first proposal after a switch-on, and is
    told which proposals are its person's."""
    heard: dict[str, list[str]] = {"alice-desktop": [], "bob": [], "carol": []}
    opened = threading.Barrier(4, timeout=10)

    def listen(client: httpx.Client, events: list[str]) -> None:
        with client.stream(
            "GET", f"{API}/events", params={"repo": repo}, timeout=httpx.Timeout(10.0)
        ) as stream:
            kind = ""
            for line in stream.iter_lines():
                if line.startswith("event: "):
                    kind = line.removeprefix("event: ")
                elif line.startswith("data: ") and kind in ("review", "proposal"):
                    events.append(f"{kind} {line.removeprefix('data: ')}")
                    if len(events) == 1:
                        opened.wait()
                if events and events[-1].startswith("proposal") and '"rejected"' in events[-1]:
                    return

    clients = {"alice-desktop": team.alice_desktop, "bob": team.bob, "carol": team.carol}
    listeners = [
        threading.Thread(target=listen, args=(clients[name], heard[name]), daemon=True)
        for name in heard
    ]
    for listener in listeners:
        listener.start()
    opened.wait()

    def told(name: str, event: str) -> bool:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if event in heard[name]:
                return True
            time.sleep(0.05)
        return False

    team.server.store.set_review(repo, False)
    for name in heard:
        assert told(name, f'review {{"on": false, "reviewer": {json.dumps(name == "carol")}}}')
    team.server.store.set_review(repo, True)
    proposal = propose(team.alice, repo, {"a.md": "e\n"})  # before any poll heard the change
    decide(team.carol, repo, proposal["id"], "reject", reason="no")
    for listener in listeners:
        listener.join(10)
        assert not listener.is_alive()
    number = proposal["id"]
    for name, events in heard.items():
        reviewer = json.dumps(name == "carol")
        mine = ', "mine": true' if name == "alice-desktop" else ""
        assert events == [
            f'review {{"on": true, "reviewer": {reviewer}}}',
            f'review {{"on": false, "reviewer": {reviewer}}}',
            f'review {{"on": true, "reviewer": {reviewer}}}',
            f'proposal {{"id": {number}, "status": "pending"{mine}}}',
            f'proposal {{"id": {number}, "status": "rejected"{mine}}}',
        ], name


def test_a_proposal_names_its_agent_and_a_verification_keeps_no_free_text(
    team: Team, repo: str
) -> None:
    """Issue 37: a watcher's proposal (provenance in the body, no `X-Memsync-Agent`)
    shows its agent and session to the reviewer; a non-reviewer's verification in a
    reviewed repo publishes none of its free text to teammates' history."""
    stamp = {"via": "watcher", "agent": "claude-code", "agentVersion": "2.1.197", "session": "s-1"}
    answer = put(team.alice, repo, {"new.md": "n\n"}, provenance={**stamp, "commit": "a" * 40})
    assert answer.status_code == 202, answer.text
    (listed,) = proposals(team.carol, repo)
    assert listed["agent"] == "claude-code"
    assert listed["provenance"] == {**stamp, "commit": "a" * 40}
    one = team.carol.get(f"{API}/proposals/{listed['id']}", params={"repo": repo}).json()
    assert one["agent"] == "claude-code"
    assert one["provenance"]["session"] == "s-1"

    free = {"via": "mcp", "agent": "HELLO " * 30, "agentVersion": "v" * 200, "session": "s" * 200}
    for client, kept in ((team.alice, {"via": "mcp", "commit": "b" * 40}), (team.carol, None)):
        verified = client.post(
            f"{API}/verify",
            params={"repo": repo},
            json={"key": "a.md", "provenance": {**free, "commit": "b" * 40}},
        )
        assert verified.status_code == 200, verified.text
        history = team.bob.get(f"{API}/history", params={"repo": repo, "key": "a.md"}).json()
        if kept is not None:
            assert verified.json()["provenanceDropped"] == ["agent", "agentVersion", "session"]
            assert history[-1]["provenance"] == kept
            assert "HELLO" not in json.dumps(history)
        else:  # a reviewer's verification keeps what it says
            assert "provenanceDropped" not in verified.json()
            assert history[-1]["provenance"]["agent"] == free["agent"]
