"""The team's MEMORY.md in the sync, through the real CLI and real servers.

Each test is a promise: two teammates who each add a line keep both (also with
watchers), the index's health is reported everywhere with its fix, `memsync index
--fix` repairs it as an ordinary edit, `memsync rm` takes a note's index line with it in
one commit, an index that cannot be shared is loud, and a note deleted here says how to
delete it for the team.
"""

from __future__ import annotations

import functools
import random
import string
import time
from pathlib import Path

import httpx

from tests.integration.users import REPO, User, make_user
from tests.integration.watchkit import WatchProcess, server_entries, wait_until, watch_state
from tests.liveserver import LiveServer

INDEX = "# Team memory\n\n- [DB](db.md) — we use Postgres 16\n"
API = "/v1/team_memory"


def note(name: str, description: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n\n{description}.\n"


def aws_access_key() -> str:
    """An AWS access key ID the scanner flags (random, so never a real one)."""
    rng = random.Random(11)
    return "AKIA" + "".join(rng.choices(string.ascii_uppercase + "234567", k=16))


def seeded(alice: User, *others: User) -> None:
    """The index and its one note on the server and in every team dir."""
    alice.write("MEMORY.md", INDEX)
    alice.write("db.md", note("db", "we use Postgres 16"))
    assert alice.run("push").returncode == 0
    for other in others:
        assert other.run("pull").returncode == 0


def has_pulled(user: User) -> bool:
    """Whether the user's watcher has done its first pull."""
    return bool((watch_state(user) or {}).get("last_pull"))


def add_note(user: User, key: str, line: str) -> None:
    """What an agent does: a new note, and one line for it at the end of the index."""
    user.write(key, note(key.removesuffix(".md"), f"{user.name}'s fact"))
    user.write("MEMORY.md", user.read("MEMORY.md") + line)


def test_two_teammates_appending_an_index_line_keep_both(
    alice: User, bob: User, live: LiveServer, tmp_path: Path
) -> None:
    carol = make_user("carol", tmp_path, live, live.token(name="carol"))
    seeded(alice, bob, carol)
    add_note(alice, "cache.md", "- [Cache](cache.md) — alice's fact\n")
    add_note(bob, "queue.md", "- [Queue](queue.md) — bob's fact\n")
    add_note(carol, "auth.md", "- [Auth](auth.md) — carol's fact\n")
    assert alice.run("sync").returncode == 0
    synced = bob.run("sync")
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert "merged: MEMORY.md: you and the server added lines at the same place; both kept" in (
        synced.stdout
    )
    carol_sync = carol.json("sync")
    assert carol_sync["pull"]["merged_additions"] == ["MEMORY.md"]
    assert carol_sync["push"]["uploaded"] == ["MEMORY.md", "auth.md"]
    expected = (
        INDEX
        + "- [Cache](cache.md) — alice's fact\n"
        + "- [Queue](queue.md) — bob's fact\n"
        + "- [Auth](auth.md) — carol's fact\n"
    )
    assert server_entries(live)["MEMORY.md"] == expected
    for user in (alice, bob):
        assert user.run("pull").returncode == 0
    for user in (alice, bob, carol):
        assert user.read("MEMORY.md") == expected
        assert user.json("status")["index"]["problems"] == []


def test_two_agents_appending_a_fact_to_one_note_keep_both(alice: User, bob: User) -> None:
    seeded(alice, bob)
    alice.write("db.md", alice.read("db.md") + "- Backups run nightly.\n")
    bob.write("db.md", bob.read("db.md") + "- Backups run nightly.\n- Replicas: two.\n")
    assert alice.run("push").returncode == 0
    merged = bob.json("sync")
    assert merged["pull"]["merged_additions"] == ["db.md"]
    assert merged["pull"]["conflicts"] == []
    # The line both added is kept once.
    assert bob.read("db.md").endswith(
        "we use Postgres 16.\n- Backups run nightly.\n- Replicas: two.\n"
    )


def test_changing_the_same_line_is_still_a_conflict(alice: User, bob: User) -> None:
    seeded(alice, bob)
    alice.write("MEMORY.md", INDEX.replace("Postgres 16", "Postgres 17"))
    bob.write("MEMORY.md", INDEX.replace("Postgres 16", "Postgres 15"))
    assert alice.run("push").returncode == 0
    pulled = bob.json("pull", expect=3)
    assert [row["key"] for row in pulled["conflicts"]] == ["MEMORY.md"]
    assert pulled["merged_additions"] == []


def test_three_watchers_each_adding_a_note_end_with_one_index_listing_all(
    live: LiveServer, tmp_path: Path, watchers: list[WatchProcess]
) -> None:
    users = [make_user(name, tmp_path, live, live.token(name=name)) for name in ("al", "bo", "cy")]
    seeded(*users)
    for user in users:
        watchers.append(WatchProcess(user.env, user.home, "--debounce", "0.3"))
    for user in users:
        assert wait_until(functools.partial(has_pulled, user))
    time.sleep(0.5)
    for user in users:  # within the same second
        add_note(user, f"{user.name}.md", f"- [{user.name}]({user.name}.md) — {user.name}'s fact\n")
    lines = {f"- [{user.name}]({user.name}.md) — {user.name}'s fact\n" for user in users}

    def everywhere() -> bool:
        server = server_entries(live).get("MEMORY.md", "")
        return all(
            all(line in user.read("MEMORY.md") for line in lines)
            and user.read("MEMORY.md") == server
            for user in users
        )

    assert wait_until(everywhere, timeout=40), [watcher.log() for watcher in watchers]
    final = users[0].read("MEMORY.md")
    assert final.startswith(INDEX)
    assert sorted(final[len(INDEX) :].splitlines(keepends=True)) == sorted(lines)
    for watcher in watchers:
        assert "conflict on MEMORY.md (edited)" not in watcher.log()


def test_the_index_health_is_reported_by_status_push_doctor_and_index(alice: User) -> None:
    lines = "".join(f"- [n{n}](n{n}.md) — fact {n}\n" for n in range(259))
    alice.write("MEMORY.md", "# Index\n" + lines + "- [Gone](gone.md) — deleted long ago\n")
    for n in range(259):
        alice.write(f"n{n}.md", note(f"n{n}", f"fact {n}"))
    alice.write("stray.md", "No frontmatter, listed nowhere.\n")
    pushed = alice.run("push")
    assert pushed.returncode == 0, pushed.stderr
    out = pushed.stdout
    assert "index: MEMORY.md has 261 lines and " in out
    assert "Claude Code loads only the first 200 lines and 25,000 characters, so 61 lines" in out
    assert "index: MEMORY.md line 261 links to gone.md, which does not exist" in out
    assert "index: no line of MEMORY.md links to stray.md: Claude Code will not find it" in out
    assert "index: stray.md has no name or description in its frontmatter" in out
    status = alice.run("status")
    assert status.returncode == 0
    assert "`memsync index --fix` removes the line" in status.stdout
    report = alice.json("status")["index"]
    kinds = [row["kind"] for row in report["problems"]]
    assert kinds == ["too-long", "dangling", "orphan", "no-frontmatter"]
    assert report["claude_code"]["loaded_lines"] == 200
    doctor = alice.run("doctor")
    assert doctor.returncode == 0, doctor.stdout
    assert (
        "warn index: MEMORY.md: longer than Claude Code loads; 1 line(s) linking" in doctor.stdout
    )
    checked = alice.run("index")
    assert checked.returncode == 3
    assert checked.stdout.count("index: ") == 4


def test_index_lists_a_screenful_of_each_kind_and_json_lists_every_one(alice: User) -> None:
    lines = "".join(f"- [Gone {n}](gone{n}.md) — deleted long ago\n" for n in range(300))
    alice.write("MEMORY.md", "# Index\n" + lines)
    checked = alice.run("index")
    assert checked.returncode == 3
    shown = checked.stdout.splitlines()
    assert shown[1] == "index: MEMORY.md line 2 links to gone0.md, which does not exist" + (
        " (`memsync index --fix` removes the line)"
    )
    assert shown[-1] == (
        "index: 280 more index lines that link to missing notes"
        " (`memsync index --json` lists every one)"
    )
    assert len(shown) == 22  # the index is too long, 20 dangling lines, the count
    listed = alice.json("index", expect=3)["problems"]
    assert [row["target"] for row in listed if row["kind"] == "dangling"] == [
        f"gone{n}.md" for n in range(300)
    ]
    fixed = alice.run("index", "--fix")
    assert fixed.stdout.splitlines()[20:22] == [
        "removed: 280 more lines (`memsync index --fix --json` lists every one)",
        "MEMORY.md is healthy: 1 line, every note listed, Claude Code loads all of it",
    ]


def test_index_fix_is_an_ordinary_edit_that_syncs(alice: User, bob: User) -> None:
    seeded(alice, bob)
    kept = "# Team memory\n\n- [DB](db.md) — we use Postgres 16\n- [Old](old.md) — gone\nprose\n"
    alice.write("MEMORY.md", kept)
    alice.write("new.md", note("new", "a new fact"))
    assert alice.run("index").returncode == 3
    fixed = alice.run("index", "--fix")
    assert fixed.returncode == 0, fixed.stdout
    assert "added: a line for new.md to MEMORY.md" in fixed.stdout
    assert "removed: MEMORY.md line 4 (it linked to old.md, which does not exist)" in fixed.stdout
    expected = (
        "# Team memory\n\n- [DB](db.md) — we use Postgres 16\nprose\n- [new](new.md) — a new fact\n"
    )
    assert alice.read("MEMORY.md") == expected
    assert alice.json("status")["modified"] == ["MEMORY.md"]
    assert alice.run("push").returncode == 0
    assert bob.run("pull").returncode == 0
    assert bob.read("MEMORY.md") == expected
    again = alice.json("index", "--fix")
    assert again["fixed"]["changed"] is False
    assert again["problems"] == []


def test_rm_takes_the_index_line_in_the_same_commit(
    alice: User, bob: User, live: LiveServer
) -> None:
    seeded(alice, bob)
    add_note(alice, "cache.md", "- [Cache](cache.md) — redis\n")
    assert alice.run("push").returncode == 0
    assert bob.run("pull").returncode == 0
    removed = alice.run("rm", "cache.md")
    assert removed.returncode == 0, removed.stderr
    assert "removed MEMORY.md line 4 (linking to cache.md) in the same commit" in removed.stdout
    assert alice.read("MEMORY.md") == INDEX
    with live.client(live.token()) as client:
        index_versions = client.get(f"{API}/history", params={"repo": REPO, "key": "MEMORY.md"})
        note_versions = client.get(f"{API}/history", params={"repo": REPO, "key": "cache.md"})
    assert index_versions.json()[-1]["version"] == note_versions.json()[-1]["version"]
    assert note_versions.json()[-1]["op"] == "delete"
    assert alice.json("status")["modified"] == []
    assert bob.run("pull").returncode == 0
    assert bob.read("MEMORY.md") == INDEX
    assert not (bob.team / "cache.md").exists()
    # --keep-index leaves the line.
    add_note(alice, "queue.md", "- [Queue](queue.md) — sqs\n")
    assert alice.run("push").returncode == 0
    kept = alice.json("rm", "queue.md", "--keep-index")
    assert kept["index_lines_removed"] == []
    assert "- [Queue](queue.md)" in alice.read("MEMORY.md")


def test_rm_when_a_teammate_changed_the_index_leaves_the_edit_for_the_next_sync(
    alice: User, bob: User
) -> None:
    seeded(alice, bob)
    add_note(alice, "cache.md", "- [Cache](cache.md) — redis\n")
    assert alice.run("push").returncode == 0
    assert bob.run("pull").returncode == 0
    add_note(bob, "queue.md", "- [Queue](queue.md) — sqs\n")
    assert bob.run("push").returncode == 0
    removed = alice.run("rm", "cache.md")
    assert removed.returncode == 0
    assert "it goes to the team with the next push" in removed.stdout
    assert alice.run("sync").returncode == 0
    assert bob.run("pull").returncode == 0
    assert bob.read("MEMORY.md") == INDEX + "- [Queue](queue.md) — sqs\n"


def test_a_put_that_deletes_refuses_bad_requests_and_changes_nothing(
    live: LiveServer, alice: User
) -> None:
    seeded(alice)
    with live.client(live.token()) as client:
        before = client.get(API, params={"repo": REPO}).json()["version"]
        both = client.put(
            API,
            params={"repo": REPO},
            json={"entries": {"db.md": "x\n"}, "deletes": ["db.md"]},
        )
        missing = client.put(
            API,
            params={"repo": REPO},
            json={"entries": {"MEMORY.md": "x\n"}, "deletes": ["nope.md"]},
        )
        bad_key = client.put(API, params={"repo": REPO}, json={"entries": {}, "deletes": ["../x"]})
        after = client.get(API, params={"repo": REPO}).json()["version"]
    assert both.status_code == 400
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "no entry 'nope.md'"
    assert bad_key.status_code == 400
    assert after == before


def test_an_index_that_cannot_be_shared_is_loud(
    alice: User, bob: User, watchers: list[WatchProcess]
) -> None:
    seeded(alice, bob)
    secret = aws_access_key()
    alice.write("MEMORY.md", INDEX + f"- deploy key {secret}\n")
    status = alice.run("status")
    assert status.returncode == 3
    assert (
        "index NOT SHARED: MEMORY.md is not being sent to the team: contains a secret "
        "(AWS access key ID) on line 4: remove it"
    ) in status.stdout
    assert secret not in status.stdout
    assert alice.json("status", expect=3)["index_blocked"]["reason"] == "secret"
    doctor = alice.run("doctor")
    assert "FAIL index: MEMORY.md is not being shared with the team" in doctor.stdout
    watcher = WatchProcess(alice.env, alice.home, "--debounce", "0.3")
    watchers.append(watcher)
    assert wait_until(lambda: "NOT SHARED" in watcher.log()), watcher.log()
    # The same file again (touched): no second ERROR; a new version of it: one more.
    (alice.team / "MEMORY.md").touch()
    alice.write("extra.md", note("extra", "x"))
    time.sleep(1.5)
    assert watcher.log().count("NOT SHARED") == 1
    alice.write("MEMORY.md", INDEX + f"- deploy key {secret} again\n")
    assert wait_until(lambda: watcher.log().count("NOT SHARED") == 2), watcher.log()
    assert "ERROR" in watcher.log() or "error" in watcher.log()
    assert secret not in watcher.log()
    alice.write("MEMORY.md", INDEX + "- [extra](extra.md) — x\n")
    assert wait_until(lambda: "extra.md" in bob.run("pull").stdout + bob.read("MEMORY.md"))


def test_a_note_deleted_here_comes_back_with_the_way_to_delete_it(
    alice: User, bob: User, watchers: list[WatchProcess]
) -> None:
    seeded(alice, bob)
    (bob.team / "db.md").unlink()
    bob.write("other.md", note("other", "x"))
    alice.write("MEMORY.md", INDEX + "- [x](x.md)\n")
    alice.write("x.md", note("x", "x"))
    assert alice.run("push").returncode == 0
    pulled = bob.run("pull")
    assert (
        "restored: db.md, deleted here: `memsync rm db.md` deletes it for the team" in pulled.stdout
    )
    assert (bob.team / "db.md").exists()
    (bob.team / "db.md").unlink()
    watcher = WatchProcess(bob.env, bob.home, "--debounce", "0.3")
    watchers.append(watcher)
    line = "restored db.md, deleted here: `memsync rm db.md` deletes it for the team"
    assert wait_until(lambda: line in watcher.log()), watcher.log()
    assert (bob.team / "db.md").exists()
    time.sleep(1)
    assert watcher.log().count(line) == 1


def test_the_server_lists_put_deletes_in_supports(live: LiveServer) -> None:
    """A server lists the extension, so a client knows it may send `deletes`."""
    with httpx.Client(base_url=live.base_url) as client:
        token = live.token()
        client.headers["Authorization"] = f"Bearer {token}"
        client.put(API, params={"repo": REPO}, json={"entries": {"a.md": "a\n"}})
        supports = client.get(API, params={"repo": REPO, "view": "hashes"}).json()["supports"]
    assert "put-deletes" in supports


def test_the_team_index_deleted_is_named_with_the_way_back_and_comes_back(
    alice: User, bob: User, live: LiveServer, tmp_path: Path
) -> None:
    """`rm MEMORY.md` asks for its flag; once deleted, every place that notices names who
    and `memsync restore MEMORY.md`; `index --fix` brings the team's back (its heading,
    order and wording); `restore MEMORY.md` works after a rebuild."""
    from mcp import ClientSession

    from tests.integration.test_mcp import _call, _data, _talk

    seeded(alice, bob)
    refused = alice.run("rm", "MEMORY.md")
    assert refused.returncode == 2
    assert "`memsync rm MEMORY.md` deletes the team's index for every teammate" in refused.stderr
    assert server_entries(live)["MEMORY.md"] == INDEX
    deleted = alice.run("rm", "MEMORY.md", "--delete-team-index")
    assert deleted.returncode == 0, deleted.stderr
    version = alice.json("log", "MEMORY.md")["versions"][-1]["version"]
    by = f"deleted for the team by alice (version {version})"
    status = bob.run("status")
    assert status.returncode == 3
    assert by in status.stdout
    assert "`memsync restore MEMORY.md`" in status.stdout
    assert "everything is in sync" not in status.stdout
    assert bob.run("pull").returncode == 0
    index = bob.run("index")
    assert index.returncode == 3
    assert by in index.stdout
    assert "creates it" not in index.stdout
    doctor = bob.run("doctor")
    assert f"the team's MEMORY.md was {by}" in doctor.stdout
    assert "run `memsync restore MEMORY.md`" in doctor.stdout
    block = bob.run("context", "--no-pull").stdout
    assert f"The team MEMORY.md was {by}: do not start a new index" in block
    assert "the first team note you save starts it" not in block

    async def conversation(session: ClientSession) -> None:
        found = _data(await _call(session, "memory_index"))
        assert f"The team MEMORY.md was {by}" in found["summary"]
        assert "memsync restore MEMORY.md" in found["summary"]

    _talk(bob, tmp_path, conversation)
    # `index --fix` brings back the team's last version, never one from frontmatter.
    fixed = bob.run("index", "--fix")
    assert fixed.returncode == 0, fixed.stdout
    assert f"restored: MEMORY.md, the team's index {by}, from its last version (1)" in fixed.stdout
    assert bob.read("MEMORY.md") == INDEX
    assert bob.run("push").returncode == 0
    assert server_entries(live)["MEMORY.md"] == INDEX
    # Deleted again and rebuilt from frontmatter (as an old client did): the restore
    # brings back the team's, keeping the rebuild's line of a note it lacks.
    assert alice.run("pull").returncode == 0
    assert alice.run("rm", "MEMORY.md", "--delete-team-index").returncode == 0
    alice.write("new.md", note("new", "a new fact"))
    alice.write("MEMORY.md", "- [db](db.md) — we use Postgres 16\n- [new](new.md) — a new fact\n")
    assert alice.run("push").returncode == 0
    restored = alice.run("restore", "MEMORY.md")
    assert restored.returncode == 0, restored.stderr
    assert alice.read("MEMORY.md") == INDEX + "- [new](new.md) — a new fact\n"
    assert server_entries(live)["MEMORY.md"] == INDEX + "- [new](new.md) — a new fact\n"
