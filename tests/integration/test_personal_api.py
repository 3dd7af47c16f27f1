"""Personal spaces on the wire (docs/protocol.md 3.14): one person's tokens share
them, nobody else's token reaches them, whatever its scope, and `person delete`
leaves no note or history row behind."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import httpx

from tests.integration.conftest import API, REPO
from tests.integration.test_server_cli import run_cli
from tests.integration.test_ui import http_session
from tests.liveserver import LiveServer

MINE = {"repo": REPO, "space": "personal"}
GLOBAL = {"repo": "~", "space": "personal"}
SECRET_WORDS = "alice-private-note-3b9e"


def _put(client: httpx.Client, params: dict[str, str], entries: dict[str, str]) -> httpx.Response:
    return client.put(API, params=params, json={"entries": entries})


def test_one_persons_tokens_share_a_space_and_nobody_else_sees_it(live: LiveServer) -> None:
    laptop = live.token(REPO, name="alice-laptop", person="alice")
    desktop = live.token("*", name="alice-desktop", person="alice")
    bob_all = live.token("*", name="bob", person="bob")
    bob_read = live.token("*", name="bob-read", person="bob", read_only=True)
    live.store.set_review("*", True)  # the review gate never applies to a personal space
    with live.client(laptop) as alice, live.client(desktop) as other_machine:
        assert alice.get("/v1/token").json()["person"] == "alice"
        wrote = _put(alice, MINE, {"MEMORY.md": f"- {SECRET_WORDS}\n"})
        assert wrote.status_code == 200, wrote.text
        assert "personal" in wrote.json()["supports"]
        assert _put(alice, GLOBAL, {"reviewer/notes.md": SECRET_WORDS}).status_code == 200
        # Her team write is a proposal (review on); her own space's write was a commit.
        assert _put(alice, {"repo": REPO}, {"team.md": "team"}).status_code == 202
        assert other_machine.get(API, params=MINE).json()["content"]["entries"] == {
            "MEMORY.md": f"- {SECRET_WORDS}\n"
        }
        assert other_machine.get(API, params=GLOBAL).json()["content"]["entries"] == {
            "reviewer/notes.md": SECRET_WORDS
        }
        sources = other_machine.get(API + "/provenance", params=MINE).json()
        assert (list(sources["keys"]), sources["keys"]["MEMORY.md"]["author"]) == (
            ["MEMORY.md"],
            "alice-laptop",
        )
        # Outside the laptop token's scope, its person's space of that repo is refused too.
        assert alice.get(API, params={"repo": "acme/other", "space": "personal"}).status_code == 403
    for secret in (bob_all, bob_read):
        with live.client(secret) as bob:
            for params in (MINE, GLOBAL):
                for path in ("", "/log", "/deleted", "/provenance"):
                    answer = bob.get(API + path, params=params)
                    assert SECRET_WORDS not in answer.text
                    if path in ("", "/provenance"):
                        assert answer.status_code == 404
                        assert answer.json()["error"]["details"]["error_code"] == "no_team_memory"
                history = bob.get(API + "/history", params={**params, "key": "MEMORY.md"})
                assert history.status_code in (200, 404)
                assert SECRET_WORDS not in history.text
            # No API repo name spells a personal space's internal id.
            for spelled in ("~alice/acme/app", "~alice", "~"):
                assert bob.get(API, params={"repo": spelled}).status_code == 400
            team_log = bob.get(API + "/log", params={"repo": REPO})
            assert SECRET_WORDS not in team_log.text
            assert "MEMORY.md" not in team_log.text
        with http_session(live, secret) as page:
            listed = page.get("/ui/")
            assert "My memory" not in listed.text
            assert "~alice" not in listed.text
            assert SECRET_WORDS not in listed.text
    hostile = f"# Habits\n\n{SECRET_WORDS} <script>alert(1)</script> [x](javascript:alert(1))\n"
    with live.client(laptop) as alice:
        assert _put(alice, GLOBAL, {"habits.md": hostile}).status_code == 200
    with http_session(live, desktop) as page:
        mine = page.get("/ui/").text
        assert "My memory" in mine
        assert mine.count("your agent memory (not tied to a repo)") == 1
        assert "~alice" not in mine
        # Each space is a link: its notes listed, each note shown as the team's are.
        links = re.findall(r'<a href="(/ui/mine\?space=[^"]+)">', mine)
        assert sorted(links) == ["/ui/mine?space=acme/app", "/ui/mine?space=~"]
        space = page.get("/ui/mine?space=~")
        assert space.status_code == 200
        assert 'href="/ui/mine/note?space=~&amp;key=habits.md"' in space.text
        assert "reviewer/notes.md" in space.text
        note_url = "/ui/mine/note?space=~&key=habits.md"
        note = page.get(note_url)
        assert note.status_code == 200
        assert "<h1>Habits</h1>" in note.text
        assert SECRET_WORDS in note.text
        assert "<script>" not in note.text
        assert 'href="javascript' not in note.text
        assert "~alice" not in note.text
    # Never anyone else's: bob's token at the same address reads his own (no) memory.
    for secret in (bob_all, live.token("*", name="alice")):
        with http_session(live, secret) as page:
            for url in (note_url, "/ui/mine?space=~", "/ui/mine?space=acme/app"):
                other = page.get(url)
                assert other.status_code == 404
                assert SECRET_WORDS not in other.text
                assert "Habits" not in other.text
    # A read-only token of alice reads her space but cannot write it.
    alice_read = live.token("*", name="alice-read", person="alice", read_only=True)
    with live.client(alice_read) as reader:
        assert reader.get(API, params=MINE).status_code == 200
        assert _put(reader, MINE, {"x.md": "x"}).status_code == 403


def test_answers_name_a_space_as_its_person_knows_it(live: LiveServer) -> None:
    """No answer carries a space's internal id (`~alice/...`, which names the person):
    its `repo` is what the request said, and its messages say "your personal memory"."""
    desktop = live.token("*", name="alice-desktop", person="alice")
    nobody = live.token("*", name="Kim Lee")  # a name that is no person: no spaces
    with live.client(desktop) as alice, live.client(nobody) as kim:
        answers: list[httpx.Response] = []
        empty = alice.get(API, params={"repo": "acme/empty", "space": "personal"})
        agent = alice.get(API, params=GLOBAL)
        assert (empty.status_code, agent.status_code) == (404, 404)
        assert empty.json()["error"]["message"] == (
            "your personal memory for acme/empty holds nothing yet"
        )
        assert agent.json()["error"]["message"] == "your agent memory holds nothing yet"
        no_person = kim.get(API, params=MINE)
        assert no_person.status_code == 404
        assert "belongs to no person" in no_person.json()["error"]["message"]
        wrote = _put(alice, MINE, {"a.md": "one"})
        assert wrote.status_code == 200
        stale = alice.put(
            API, params=MINE, json={"entries": {"a.md": "two"}, "baseChecksums": {"a.md": None}}
        )
        assert stale.status_code == 409
        too_large = alice.put(
            API, params=MINE, content=b'{"entries": {"b.md": "' + b"x" * 2_100_000 + b'"}}'
        )
        assert too_large.status_code == 413
        assert _put(alice, GLOBAL, {"reviewer/notes.md": "n"}).status_code == 200
        answers += [empty, agent, no_person, wrote, stale, too_large]
        for params in (MINE, GLOBAL):
            for path in ("", "/log", "/deleted", "/provenance", "/proposals", "/proposals/1"):
                answers.append(alice.get(API + path, params=params))
        answers.append(alice.get(API, params={**MINE, "key": "a.md"}))
        answers.append(alice.get(API + "/history", params={**MINE, "key": "a.md"}))
        answers.append(alice.get(API + "/history", params={**MINE, "key": "a.md", "version": 1}))
        missing = alice.get(API + "/proposals/1", params=MINE)
        assert missing.json()["error"]["message"] == (
            "no proposal 1 in your personal memory for acme/app"
        )
    assert [answer.status_code for answer in answers][6:] == [
        *([200, 200, 200, 200, 200, 404] * 2),
        200,
        200,
        200,
    ]
    for answer in answers:
        assert "~alice" not in answer.text, answer.text
        body = answer.json()
        if answer.status_code == 200 and isinstance(body, dict):
            assert body.get("repo", REPO) in (REPO, "~")
    assert answers[6].json()["repo"] == REPO
    assert answers[12].json()["repo"] == "~"


def test_person_delete_leaves_no_row_of_their_notes(
    live: LiveServer, sqlite_database_url: str, tmp_path: Path
) -> None:
    laptop = live.token("*", name="alice-laptop", person="alice")
    bob = live.token("*", name="bob", person="bob")
    with live.client(laptop) as alice, live.client(bob) as other:
        assert _put(alice, MINE, {"a.md": SECRET_WORDS}).status_code == 200
        assert _put(alice, MINE, {"a.md": SECRET_WORDS + " v2"}).status_code == 200
        assert _put(alice, GLOBAL, {"g.md": SECRET_WORDS}).status_code == 200
        assert _put(other, MINE, {"b.md": "bob's own"}).status_code == 200
        assert alice.get(API, params=MINE).json()["version"] == 2  # the server caches it
    env = {"MEMSYNC_DATABASE_URL": sqlite_database_url}
    listed = run_cli("person", "list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    persons = {p["person"]: p for p in json.loads(listed.stdout)["persons"]}
    assert sorted(persons["alice"]["spaces"]) == [REPO, "~"]
    assert run_cli("repo", "list", "--json", env=env).stdout.count("~") == 0
    path = sqlite_database_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as database:
        ids = [
            row[0] for row in database.execute("SELECT id FROM repos WHERE name LIKE '~alice/%'")
        ]
    assert len(ids) == 2
    dry = run_cli("person", "delete", "alice", env=env)
    assert dry.returncode == 2
    assert "would delete 2 personal space(s)" in dry.stderr
    done = run_cli("person", "delete", "alice", "--yes", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "deleted 2 personal space(s) of alice: 2 entries, 3 history rows and 0 proposals; "
        "no row of them is left\n"
    )
    with sqlite3.connect(path) as database:
        # No row of any table names her spaces or holds her words: every column of every
        # table is searched, and every row keyed by a repo id her spaces had.
        leftover = 0
        tables = [
            row[0] for row in database.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        for table in tables:
            columns = [row[1] for row in database.execute(f"PRAGMA table_info({table})")]
            # Names from sqlite_master itself, not input: building the query is safe.
            for column in columns:
                matching = f"CAST({column} AS TEXT) LIKE ?"
                query = f"SELECT count(*) FROM {table} WHERE {matching} OR {matching}"  # noqa: S608
                leftover += database.execute(query, (f"%{SECRET_WORDS}%", "%~alice/%")).fetchone()[
                    0
                ]
            if "repo_id" in columns:
                query = f"SELECT count(*) FROM {table} WHERE repo_id IN (?, ?)"  # noqa: S608
                leftover += database.execute(query, ids).fetchone()[0]
        bobs = database.execute(
            "SELECT count(*) FROM entries e JOIN repos r ON e.repo_id = r.id "
            "WHERE r.name LIKE '~bob/%'"
        ).fetchone()[0]
    assert leftover == 0
    assert bobs == 1
    with live.client(laptop) as alice:
        assert alice.get(API, params=MINE).status_code == 404
        # Her space starts again from version 1; its version 2 is not the cached old one.
        assert _put(alice, MINE, {"new.md": "1"}).status_code == 200
        assert _put(alice, MINE, {"new.md": "2"}).status_code == 200
        again = alice.get(API, params=MINE).json()
        assert (again["version"], again["content"]["entries"]) == (2, {"new.md": "2"})


def test_only_person_gives_a_token_a_person(live: LiveServer, sqlite_database_url: str) -> None:
    """The issue's cases: a token `ALICE` scoped to another repo, and a new `zed` after
    the old zed's token was revoked, read no one's space; a new token given `--person
    zed` reaches it, and `token create` says so. `token list` in a pipe names in full."""
    env = {"MEMSYNC_DATABASE_URL": sqlite_database_url}

    def create(*args: str) -> str:
        made = run_cli("token", "create", "--repo", "*", *args, env=env)
        assert made.returncode == 0, made.stderr
        return made.stdout.splitlines()[-1]

    alice = live.token("*", name="alice-laptop", person="alice")
    zed = create("--name", "zed", "--person", "zed")
    with live.client(alice) as laptop, live.client(zed) as old_zed:
        assert _put(laptop, GLOBAL, {"g.md": SECRET_WORDS}).status_code == 200
        assert _put(old_zed, GLOBAL, {"z.md": "zed's own"}).status_code == 200
    assert run_cli("token", "revoke", "zed", env=env).returncode == 0
    shout = run_cli("token", "create", "--repo", "other/x", "--name", "ALICE", env=env)
    new_zed = create("--name", "zed")
    for secret in (shout.stdout.splitlines()[-1], new_zed):
        with live.client(secret) as client:
            assert client.get("/v1/token").json()["person"] is None
            for params in (GLOBAL, {"repo": "other/x", "space": "personal"}):
                answer = client.get(API, params=params)
                assert answer.status_code == 404
                assert "belongs to no person" in answer.json()["error"]["message"]
    # The operator says so: a token of zed's reaches zed's space, and is told it.
    told = run_cli("token", "create", "--repo", "*", "--name", "zed-2", "--person", "zed", env=env)
    assert told.returncode == 0, told.stderr
    assert "note: zed has personal memory on this server that no live token reaches" in (
        told.stderr
    )
    assert "memsync-server person delete zed --yes" in told.stderr
    with live.client(told.stdout.splitlines()[-1]) as client:
        assert client.get(API, params=GLOBAL).json()["content"]["entries"] == {"z.md": "zed's own"}
    long_name = "build-machine-in-the-basement-" + "x" * 60
    create("--name", long_name)
    listed = run_cli("token", "list", env={**env, "COLUMNS": "80"})
    assert long_name in listed.stdout
    assert "…" not in listed.stdout
    assert "alice-laptop" in listed.stdout
