"""Who changed what, through the real `memsync` CLI and a real server: `log` (two
authors, --author, --since, -n across pages, --json, --deleted), `show KEY@N`, `diff
KEY@N..M` and `restore` without a version (undo rm) or --before TIME.

One server for the module. The story (alice and bob, tokens named after them, on
`acme/app`) is told once and only read; a test that writes uses a repo of its own.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, update

from sync_server.config import Settings
from sync_server.storage.schema import history, repos
from tests.integration.test_errors_in_words import on_terminal
from tests.integration.users import REPO, User, make_user
from tests.liveserver import LiveServer, run_live_server

_repos = itertools.count(1)


@dataclass
class Story:
    server: LiveServer
    alice: User
    bob: User
    root: Path


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    """v1 alice puts notes/a.md and b.md; v2 bob edits notes/a.md; v3 alice adds five
    notes; v4 bob deletes b.md."""
    root = tmp_path_factory.mktemp("history-cli")
    settings = Settings(database_url=f"sqlite:///{root / 'memsync.sqlite3'}")
    with run_live_server(settings) as server:
        alice = make_user("alice", root, server, server.token(name="alice"))
        bob = make_user("bob", root, server, server.token(name="bob"))
        alice.write("notes/a.md", "one\n")
        alice.write("b.md", "bee\n")
        alice.json("push")
        bob.json("pull")
        bob.write("notes/a.md", "one\ntwo\n")
        bob.json("push")
        alice.json("pull")
        for index in range(1, 6):
            alice.write(f"many/n{index}.md", f"note {index}\n")
        alice.json("push")
        bob.json("pull")
        bob.json("rm", "b.md")
        yield Story(server, alice, bob, root)


def teammate(story: Story, user: User, repo: str) -> User:
    """`user`'s token on another repo, with a home of its own."""
    other = make_user(f"{user.name}-{repo.replace('/', '-')}", story.root, story.server, "")
    other.env.update(MEMSYNC_TOKEN=user.env["MEMSYNC_TOKEN"], MEMSYNC_REPO=repo)
    return other


def fresh_repo() -> str:
    return f"acme/app-{next(_repos)}"


def backdate(server: LiveServer, repo: str, version: int, when: datetime) -> None:
    """Make `version` of `repo` look written at `when` (a story told over days, no sleep)."""
    with server.store.engine.begin() as connection:
        repo_id = connection.execute(select(repos.c.id).where(repos.c.name == repo)).scalar_one()
        connection.execute(
            update(history)
            .where(history.c.repo_id == repo_id, history.c.version == version)
            .values(at=when)
        )


def lines(user: User, *args: str, expect: int = 0) -> list[str]:
    result = user.run(*args)
    assert result.returncode == expect, (result.stdout, result.stderr)
    return result.stdout.splitlines()


def test_log_lists_commits_newest_first_with_both_authors(story: Story) -> None:
    shown = lines(story.alice, "log")
    assert [line.split()[0] for line in shown] == ["v4", "v3", "v2", "v1"]
    assert [line.split()[3] for line in shown] == ["bob", "alice", "bob", "alice"]
    assert shown[0].endswith("  delete b.md  [cli]")
    # A push says how it was made (no checkout here: no commit to name).
    assert shown[1].endswith("  put many/n1.md, many/n2.md and 3 more  [cli]")
    assert shown[3].endswith("  put b.md, notes/a.md  [cli]")
    assert [line.split()[0] for line in lines(story.alice, "log", "--author", "bob")] == [
        "v4",
        "v2",
    ]
    assert lines(story.alice, "log", "--author", "carol") == []


def test_log_json_and_since(story: Story) -> None:
    body = story.bob.json("log", "-n", "2")
    assert body["repo"] == REPO
    assert body["next_before"] is not None  # two more are older
    newest, second = body["commits"]
    assert newest["version"] == 4
    assert (newest["ops"]["delete"], newest["keys"]) == (1, ["b.md"])
    assert (second["author"], second["key_count"], len(second["keys"])) == ("alice", 5, 5)
    since = second["at"]
    recent = story.bob.json("log", "--since", since)["commits"]
    assert {commit["version"] for commit in recent} >= {3, 4}
    assert all(commit["at"] >= since for commit in recent)
    assert story.bob.json("log", "--since", "2h")["commits"] == story.bob.json("log")["commits"]
    assert story.bob.json("log", "--since", "2999-01-01")["commits"] == []
    bad = story.bob.run("log", "--since", "last tuesday")
    assert bad.returncode == 2
    assert bad.stderr.startswith("memsync: --since 'last tuesday' is not a time")


def test_log_n_pages_through_next_before(story: Story) -> None:
    repo = fresh_repo()
    for version in range(1, 206):
        author = "alice" if version % 2 else "bob"
        story.server.store.put(
            repo,
            {f"k{version % 7}.md": f"text {version}\n"},
            if_match=None,
            base_checksums=None,
            max_entries=100,
            author=author,
        )
    reader = teammate(story, story.alice, repo)
    shown = lines(reader, "log", "-n", "203")
    assert [line.split()[0] for line in shown] == [f"v{n}" for n in range(205, 2, -1)]
    assert len(lines(reader, "log")) == 20
    body = reader.json("log", "-n", "204", "--author", "bob")
    assert [commit["version"] for commit in body["commits"]] == list(range(204, 0, -2))
    assert body["next_before"] is None


def test_log_deleted_names_who_and_how_to_undo(story: Story) -> None:
    [line] = lines(story.alice, "log", "--deleted")
    assert line.startswith("v4  ")
    assert line.endswith("  bob  delete b.md  (memsync restore b.md)")
    [row] = story.alice.json("log", "--deleted")["deleted"]
    assert (row["key"], row["author"], row["version"], row["last_version"]) == (
        "b.md",
        "bob",
        4,
        1,
    )


def test_log_key_keeps_working(story: Story) -> None:
    body = story.alice.json("log", "notes/a.md")
    assert [item["version"] for item in body["versions"]] == [1, 2]
    assert [item["author"] for item in body["versions"]] == ["alice", "bob"]
    assert len(lines(story.alice, "log", "notes/a.md")) == 2


def test_show_prints_a_version_or_the_current_text(story: Story) -> None:
    assert story.alice.run("show", "notes/a.md@1").stdout == "one\n"
    assert story.alice.run("show", "notes/a.md").stdout == "one\ntwo\n"
    assert story.alice.run("show", "b.md@1").stdout == "bee\n"
    gone = story.alice.run("show", "b.md")
    assert gone.returncode == 2
    assert "b.md was deleted for the team in version 4 by bob" in gone.stderr
    assert "`memsync show b.md@1`" in gone.stderr
    for args, words in [
        (("show", "nope.md"), "nope.md: no such note on the server"),
        (("show", "notes/a.md@9"), "no version notes/a.md@9 on the server"),
        (("show", "notes/a.md@1..2"), "give one version here"),
    ]:
        result = story.alice.run(*args)
        assert (result.returncode, result.stdout) == (2, ""), args
        assert words in result.stderr


def test_diff_between_versions_coloured_on_a_terminal_plain_when_piped(story: Story) -> None:
    result = story.alice.run("diff", "notes/a.md@1..2")
    assert result.returncode == 0, result.stderr
    assert "\x1b[" not in result.stdout
    assert result.stdout.startswith("== notes/a.md: v1 (alice, ")
    assert ") against v2 (bob, " in result.stdout
    assert "--- notes/a.md@1\n+++ notes/a.md@2\n" in result.stdout
    assert " one\n+two\n" in result.stdout
    assert story.alice.run("diff", "notes/a.md@1").stdout == result.stdout  # v2 is current
    coloured = on_terminal(story.alice, "diff", "notes/a.md@1..2")
    assert "\x1b[32m+two\x1b[0m" in coloured.screen
    assert [line for line in coloured.lines() if line] == result.stdout.splitlines()
    body = story.alice.json("diff", "notes/a.md@2..1")
    assert (body["from"]["version"], body["to"]["version"]) == (2, 1)
    assert "-two\n" in body["diff"]
    deleted = story.alice.json("diff", "b.md@1..4")
    assert deleted["to"]["op"] == "delete"
    assert "-bee\n" in deleted["diff"]


@pytest.mark.parametrize(
    ("key", "words"),
    [
        (
            "no-such-note.md",
            "no-such-note.md: no such note here, in the last sync or on the server",
        ),
        ("notes/a.md@7..1", "no version notes/a.md@1 or notes/a.md@7 on the server"),
        ("../up.md", "invalid key '../up.md'"),
        ("notes/a.md@x..", "notes/a.md@x..: no such note"),  # a key: `@x..` is no version
        ("notes/a.md@1..", "bad version in 'notes/a.md@1..'"),
    ],
)
def test_diff_of_what_is_nowhere_is_an_error_naming_it(story: Story, key: str, words: str) -> None:
    result = story.alice.run("diff", key)
    assert (result.returncode, result.stdout) == (2, ""), result
    [line] = result.stderr.splitlines()
    assert words in line


def test_restore_without_a_version_undoes_rm(story: Story) -> None:
    repo = fresh_repo()
    alice, bob = teammate(story, story.alice, repo), teammate(story, story.bob, repo)
    alice.write("x.md", "first\n")
    alice.json("push")
    alice.write("x.md", "second\n")
    alice.json("push")
    bob.json("pull")
    bob.json("rm", "x.md")
    result = alice.json("restore", "x.md")
    assert result["restored"] == 2
    assert alice.read("x.md") == "second\n"
    again = alice.run("restore", "x.md")
    assert again.returncode == 2
    assert "x.md is not deleted (its version 4 is current)" in again.stderr
    assert alice.json("log", "-n", "1")["commits"][0]["ops"]["restore"] == 1
    # The rm and the restore say how they were made, as a push does.
    versions = alice.json("log", "x.md")["versions"]
    assert [(v["op"], v.get("provenance")) for v in versions[2:]] == [
        ("delete", {"via": "cli"}),
        ("restore", {"via": "cli"}),
    ]


def test_restore_before_a_time_picks_the_version_current_then(story: Story) -> None:
    repo = fresh_repo()
    alice = teammate(story, story.alice, repo)
    for text in ("monday\n", "tuesday\n", "wednesday\n"):
        alice.write("y.md", text)
        alice.json("push")
    now = datetime.now(UTC).replace(microsecond=0)
    for version, days_ago in ((1, 3), (2, 2), (3, 1)):
        backdate(story.server, repo, version, now - timedelta(days=days_ago))
    assert alice.json("restore", "y.md", "--before", "36h")["restored"] == 2
    assert alice.read("y.md") == "tuesday\n"
    stamp = (now - timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert alice.json("restore", "y.md", "--before", stamp)["restored"] == 1
    assert alice.read("y.md") == "monday\n"
    early = alice.run("restore", "y.md", "--before", "2000-01-01")
    assert early.returncode == 2
    assert "y.md did not exist yet at 2000-01-01" in early.stderr
    assert alice.json("restore", "y.md@3")["restored"] == 3  # and today's forms
    assert alice.json("restore", "y.md", "--version", "2")["restored"] == 2
    both = alice.run("restore", "y.md@1", "--before", "2h")
    assert both.returncode == 2


def test_diff_key_shows_a_saved_conflict_copy_against_the_file(story: Story) -> None:
    repo = fresh_repo()
    alice, bob = teammate(story, story.alice, repo), teammate(story, story.bob, repo)
    alice.write("c.md", "base\n")
    alice.json("push")
    bob.json("pull")
    alice.write("c.md", "alice's\n")
    alice.json("push")
    bob.write("c.md", "bob's\n")
    pulled = bob.json("pull", expect=3)
    assert [item["key"] for item in pulled["conflicts"]] == ["c.md"]
    result = bob.run("diff", "c.md")
    assert result.returncode == 0, result.stderr
    assert "== c.md: your saved copy (" in result.stdout
    assert "-alice's\n+bob's\n" in result.stdout
    [item] = json.loads(bob.run("diff", "c.md", "--json").stdout)["diffs"]
    assert item["conflict_copy"].endswith("c.md")
