"""The team index is never lost: real server, real CLI, real watcher and MCP processes.

Each test is a promise of issue 26: a note, the index or the whole team dir deleted
here comes back from the team (a running watcher within its debounce, the next pull),
said once with how to delete for the team; an index rewritten to one line (a file edit
pushed, `index --fix` over a missing index, an agent's `write_note`) keeps the only line
of every note that still exists, on every machine; `memsync restore` after `memsync rm`
brings the note's index line back too.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from mcp import ClientSession

from tests.integration.conftest import API
from tests.integration.test_mcp import _call, _data, _talk
from tests.integration.users import User
from tests.integration.watchkit import WatchProcess, server_entries, wait_until, watch_state
from tests.liveserver import LiveServer

INDEX = (
    "# Team memory\n\n"
    "## Infra\n"
    "- [DB](db.md) — we use Postgres 16\n"
    "- [Cache](cache.md) — Redis in front of it\n\n"
    "## Process\n"
    "- [Deploy](deploy.md) — the staging gate\n"
)
ONE_LINE = "# Index\n- [DB](db.md) — Postgres\n"
DEBOUNCE = 0.3
# What a restore may take beyond the debounce: the supervisor's 1 s tick (a deleted
# team dir is noticed there), a scan, a write.
SLACK = 2.5


def note(name: str) -> str:
    return f"---\nname: {name}\ndescription: {name} facts\n---\n\n{name}.\n"


def seeded(alice: User, *others: User) -> None:
    """The index and its three notes on the server and in every team dir."""
    alice.write("MEMORY.md", INDEX)
    for key in ("db.md", "cache.md", "deploy.md"):
        alice.write(key, note(key.removesuffix(".md")))
    assert alice.run("push").returncode == 0
    for other in others:
        assert other.run("pull").returncode == 0


def test_a_running_watcher_restores_a_deleted_index_note_and_team_dir_saying_each_once(
    alice: User, live: LiveServer, watchers: list[WatchProcess]
) -> None:
    seeded(alice)
    before = server_entries(live)
    watcher = WatchProcess(alice.env, alice.home, "--debounce", str(DEBOUNCE))
    watchers.append(watcher)
    assert wait_until(lambda: bool((watch_state(alice) or {}).get("last_pull"))), watcher.log()

    def comes_back(*keys: str) -> None:
        assert wait_until(
            lambda: all((alice.team / key).exists() for key in keys), DEBOUNCE + SLACK
        ), watcher.log()
        for key in keys:
            assert alice.read(key) == before[key]

    (alice.team / "MEMORY.md").unlink()
    comes_back("MEMORY.md")
    (alice.team / "cache.md").unlink()
    comes_back("cache.md")
    shutil.rmtree(alice.team)
    comes_back(*before)
    time.sleep(1.0)  # a second restore line would have been said by now
    log = watcher.log()
    for key, times in (("MEMORY.md", 2), ("cache.md", 2), ("db.md", 1), ("deploy.md", 1)):
        flag = " --delete-team-index" if key == "MEMORY.md" else ""
        line = f"restored {key}, deleted here: `memsync rm {key}{flag}` deletes it for the team"
        assert log.count(line) == times, log
    # A local delete is not a team delete, and nothing new went up.
    assert server_entries(live) == before
    assert "there is no MEMORY.md" not in log


def test_an_index_rewritten_to_one_line_keeps_every_live_notes_line_on_every_machine(
    alice: User, bob: User, live: LiveServer
) -> None:
    seeded(alice, bob)
    alice.write("MEMORY.md", ONE_LINE)
    pushed = alice.run("push")
    assert pushed.returncode == 0, pushed.stderr
    for target in ("cache.md", "deploy.md"):
        assert f"kept: the line of MEMORY.md that links {target}, at its end" in pushed.stdout
    kept = (
        ONE_LINE
        + "- [Cache](cache.md) — Redis in front of it\n- [Deploy](deploy.md) — the staging gate\n"
    )
    assert alice.read("MEMORY.md") == kept  # here what was sent
    assert server_entries(live)["MEMORY.md"] == kept
    assert bob.run("pull").returncode == 0
    assert bob.read("MEMORY.md") == kept

    # Missing here: status says only that the pull restores it, and `index --fix` works
    # from the team's index, never a new one.
    (bob.team / "MEMORY.md").unlink()
    status = bob.run("status")
    assert "deleted locally: MEMORY.md (the next pull restores it" in status.stdout
    assert "no MEMORY.md" not in status.stdout
    checked = bob.run("index")
    assert "MEMORY.md is missing here; the team has one" in checked.stdout
    assert "no MEMORY.md" not in checked.stdout
    doctor = bob.run("doctor")
    assert "index: MEMORY.md is missing here; the team's has 4 lines" in doctor.stdout
    assert "no MEMORY.md" not in doctor.stdout
    fixed = bob.run("index", "--fix")
    assert "restored: MEMORY.md, the team's index" in fixed.stdout, fixed.stdout
    assert bob.read("MEMORY.md") == kept
    assert bob.run("push").returncode == 0
    assert server_entries(live)["MEMORY.md"] == kept

    # Deleted here, then written anew as one line before anything restored it.
    (bob.team / "MEMORY.md").unlink()
    bob.write("MEMORY.md", "- [Deploy](deploy.md) — new words\n")
    assert bob.json("push")["index_kept"] == [
        {"index": "MEMORY.md", "line": "- [DB](db.md) — Postgres", "targets": ["db.md"]},
        {
            "index": "MEMORY.md",
            "line": "- [Cache](cache.md) — Redis in front of it",
            "targets": ["cache.md"],
        },
    ]
    assert alice.run("pull").returncode == 0
    assert all(f"({key})" in alice.read("MEMORY.md") for key in ("db.md", "cache.md", "deploy.md"))


def test_restore_after_rm_brings_the_notes_index_line_back(alice: User, live: LiveServer) -> None:
    seeded(alice)
    assert alice.run("rm", "cache.md").returncode == 0
    assert "cache.md" not in server_entries(live)["MEMORY.md"]
    restored = alice.run("restore", "cache.md")
    assert restored.returncode == 0, restored.stderr
    assert (
        "index: put back 1 line listing cache.md at the end of MEMORY.md (from its version"
        in restored.stdout
    )
    line = "- [Cache](cache.md) — Redis in front of it\n"
    assert server_entries(live)["MEMORY.md"].endswith(line)
    assert alice.read("MEMORY.md").count(line) == 1
    assert alice.read("cache.md") == note("cache")


def test_an_agent_cannot_wipe_the_team_index_through_mcp(
    alice: User, bob: User, live: LiveServer, tmp_path: Path
) -> None:
    seeded(alice, bob)
    (bob.team / "MEMORY.md").unlink()

    async def conversation(session: ClientSession) -> None:
        index = _data(await _call(session, "memory_index"))
        assert index["index_exists"] is True
        assert index["index"] == INDEX
        assert "missing here, so this is the team's" in index["summary"]
        written = _data(await _call(session, "write_note", key="MEMORY.md", text="# wiped\n"))
        assert written["sync"] == "uploaded", written
        assert "kept 3 lines of the old MEMORY.md" in written["detail"]

    _talk(bob, tmp_path, conversation)
    team_index = server_entries(live)["MEMORY.md"]
    assert team_index.startswith("# wiped\n")
    assert all(f"({key})" in team_index for key in ("db.md", "cache.md", "deploy.md"))
    assert bob.read("MEMORY.md") == team_index


def test_a_put_from_any_api_client_that_drops_a_live_notes_index_line_is_refused(
    alice: User, bob: User, live: LiveServer
) -> None:
    seeded(alice, bob)
    before = server_entries(live)
    team = {"repo": "acme/app"}
    one_line = {"entries": {"MEMORY.md": ONE_LINE}}
    with live.client(live.token(name="old-tool", person="olga")) as tool:
        fast = tool.put(API, params=team, json=one_line)
        routed = tool.put(API, params={**team, "via": "route"}, json=one_line)  # not the fast PUT
        assert (fast.status_code, routed.status_code) == (422, 422), fast.text
        assert fast.json() == routed.json()
        error = fast.json()["error"]
        assert error["details"] == {
            "error_code": "index_lines_dropped",
            "keys": ["MEMORY.md"],
            "dropped": [{"index": "MEMORY.md", "notes": ["cache.md", "deploy.md"]}],
        }
        assert (
            "drops the only index line of 2 note(s) that stay live (cache.md, deploy.md)"
            in (error["message"])
        )
        assert server_entries(live) == before
        # What stays allowed: a note deleted with its line, a note added with its line, a
        # note that never had one, a key that is not a note, a reworded index.
        cache_line = "- [Cache](cache.md) — Redis in front of it\n"
        without_cache = INDEX.replace(cache_line, "")
        for body in (
            {"entries": {"MEMORY.md": without_cache}, "deletes": ["cache.md"]},
            {
                "entries": {
                    "MEMORY.md": without_cache + "- [Runbook](runbook.md)\n",
                    "runbook.md": "r",
                }
            },
            {"entries": {"unlisted.md": note("unlisted"), "diagram.svg": "<svg/>"}},
            {
                "entries": {
                    "MEMORY.md": "# Ours\n- [db](db.md) [deploy](deploy.md) [rb](runbook.md)\n"
                }
            },
        ):
            assert tool.put(API, params=team, json=body).status_code == 200, body
        # The person's own space keeps its index by the same rule.
        mine = {**team, "space": "personal"}
        written = {"MEMORY.md": "- [A](a.md)\n", "a.md": note("a")}
        assert tool.put(API, params=mine, json={"entries": written}).status_code == 200
        wiped = tool.put(API, params=mine, json={"entries": {"MEMORY.md": "# mine\n"}})
        assert wiped.status_code == 422
        assert wiped.json()["error"]["details"]["dropped"] == [
            {"index": "MEMORY.md", "notes": ["a.md"]}
        ]
    # The client's own push (which keeps the lines itself) goes through as before.
    assert bob.run("pull").returncode == 0
    bob.write("MEMORY.md", "# Ours\n- [db](db.md)\n")
    pushed = bob.run("push")
    assert pushed.returncode == 0, pushed.stderr
    assert "kept: the line of MEMORY.md that links deploy.md, runbook.md, at its end" in (
        pushed.stdout
    )
    assert all(
        f"({key})" in server_entries(live)["MEMORY.md"] for key in ("deploy.md", "runbook.md")
    )
    # A note a teammate wrote after bob's last pull, whose line the index already had
    # (leading nowhere then): bob's `index --fix` takes the line out, the server keeps it.
    assert alice.run("pull").returncode == 0
    alice.write("MEMORY.md", alice.read("MEMORY.md") + "- [Later](later.md) — soon\n")
    assert alice.run("push").returncode == 0
    assert bob.run("pull").returncode == 0
    alice.write("later.md", note("later"))
    assert alice.run("push").returncode == 0
    assert "removed" in bob.run("index", "--fix").stdout
    refused = bob.run("push")
    assert refused.returncode == 1
    assert (
        "the server refused MEMORY.md: the edit drops the only line of later.md, which the "
        "team has and this machine has not pulled yet (`memsync pull` fetches it, then the "
        "next push keeps its line; `memsync rm later.md` deletes a note and its line for "
        "the team)"
    ) in refused.stderr
    assert bob.run("pull").returncode == 0
    again = bob.run("push")
    assert again.returncode == 0, again.stderr
    assert "kept: the line of MEMORY.md that links later.md, at its end" in again.stdout
    assert server_entries(live)["MEMORY.md"].endswith("- [Later](later.md) — soon\n")
