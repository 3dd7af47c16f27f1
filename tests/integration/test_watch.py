"""`memsync watch`: real watcher processes, real files, a real server on loopback.

Each watcher talks to the server through `Proxy`, which plays the network: it counts
requests (so "at most one request" is measured, not assumed) and on demand answers
503/429 or holds PUTs. Teammates (`bob`) talk to the server directly with the CLI.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.users import User, make_user
from tests.integration.watchkit import (
    Proxy,
    WatchProcess,
    server_entries,
    wait_until,
    watch_server,
    watch_state,
)
from tests.liveserver import LiveServer

REPO = "acme/app"
API = "/v1/team_memory"
FAST = ("--debounce", "0.3", "--poll-interval", "600")


@pytest.fixture
def live(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    """A server that notices a revoked token at once; `@pytest.mark.parametrize` of
    `server_settings` may add settings."""
    with watch_server(tmp_path, **getattr(request, "param", {})) as server:
        yield server


@pytest.fixture
def proxy(live: LiveServer) -> Iterator[Proxy]:
    forwarder = Proxy(live.base_url)
    yield forwarder
    forwarder.close()


@pytest.fixture
def alice(live: LiveServer, proxy: Proxy, tmp_path: Path) -> User:
    """The watcher's user: her requests go through the proxy."""
    user = make_user("alice", tmp_path, live, live.token(name="alice"))
    user.env["MEMSYNC_SERVER"] = proxy.url
    return user


@pytest.fixture
def bob(live: LiveServer, tmp_path: Path) -> User:
    """A teammate on another machine, straight to the server."""
    return make_user("bob", tmp_path, live, live.token(name="bob"))


def start_watch(user: User, watchers: list[WatchProcess], *args: str) -> WatchProcess:
    """Start `memsync watch` and wait until its first sync is done (or suppressed)."""
    process = WatchProcess(user.env, user.home, *args)
    watchers.append(process)

    def settled() -> bool:
        state = watch_state(user)
        return bool(state and state.get("live") and (state["last_pull"] or state["suppressed"]))

    assert wait_until(settled), process.log()
    time.sleep(0.5)  # the first push after the pull (a no-op when nothing is new)
    return process


def test_start_syncs_both_ways_then_pushes_each_edit_and_idles_without_requests(
    alice: User, bob: User, live: LiveServer, proxy: Proxy, watchers: list[WatchProcess]
) -> None:
    bob.write("team.md", "from bob\n")
    bob.json("push")
    alice.write("mine.md", "written while no watcher ran\n")
    watcher = start_watch(alice, watchers, *FAST)
    assert alice.read("team.md") == "from bob\n"
    assert wait_until(lambda: "mine.md" in server_entries(live)), watcher.log()

    alice.write("decisions/db.md", "Use PostgreSQL.\n")
    assert wait_until(lambda: server_entries(live).get("decisions/db.md") == "Use PostgreSQL.\n"), (
        watcher.log()
    )
    time.sleep(1.0)
    idle = proxy.control.mark()
    time.sleep(2.0)
    assert proxy.control.count(since=idle) == 0

    state = watch_state(alice)
    assert state is not None
    assert state["running"] is True
    assert state["suppressed"] is None
    assert state["counters"]["pushes"] >= 2
    assert state["last_push"] is not None
    status = alice.json("status")
    assert status["watcher"]["running"] is True
    assert status["watcher"]["pid"] == watcher.process.pid
    code, took = watcher.terminate()
    assert code == 0
    assert took < 3
    assert alice.json("status")["watcher"]["running"] is False
    assert (
        watcher.log()
        .splitlines()[-1]
        .endswith(
            " memsync watch: INFO stopped on SIGTERM: acme/app: nothing was waiting to be pushed"
        )
    )
    # The log names keys and counts, never a note's text.
    assert "PostgreSQL" not in watcher.log()


def test_a_teammates_push_arrives_through_the_poll_when_the_stream_is_down(
    alice: User, bob: User, proxy: Proxy, watchers: list[WatchProcess]
) -> None:
    proxy.control.block_events = True
    watcher = start_watch(alice, watchers, "--debounce", "0.3", "--poll-interval", "1")
    mark = proxy.control.mark()
    bob.write("news.md", "bob's news\n")
    bob.json("push")
    assert wait_until(lambda: (alice.team / "news.md").exists(), timeout=6), watcher.log()
    assert alice.read("news.md") == "bob's news\n"
    time.sleep(4)
    # The watcher's own writes from the pull are not pushed back.
    assert proxy.control.count(since=mark, method="PUT") == 0
    assert watch_state(alice)["live"] == "poll"  # type: ignore[index]
    # A refused stream keeps its own backoff (1, 2, 4 s...): a successful poll is not
    # a reason to ask for it again, or every poll would.
    with proxy.control.lock:
        asked = [path for _, path in proxy.control.requests[mark:] if path.endswith("/events")]
    assert len(asked) <= 3, proxy.control.requests[mark:]


def test_a_teammates_push_arrives_through_the_events_stream(
    alice: User, bob: User, proxy: Proxy, watchers: list[WatchProcess]
) -> None:
    watcher = start_watch(alice, watchers, *FAST)
    assert wait_until(lambda: watch_state(alice)["live"] == "events")  # type: ignore[index]
    mark = proxy.control.mark()
    bob.write("news.md", "bob's news\n")
    bob.json("push")
    assert wait_until(lambda: (alice.team / "news.md").exists(), timeout=5), watcher.log()
    time.sleep(1.5)
    assert proxy.control.count(since=mark, method="PUT") == 0


def test_the_watcher_reconnects_to_the_stream_once_it_is_back(
    alice: User, bob: User, proxy: Proxy, watchers: list[WatchProcess]
) -> None:
    proxy.control.block_events = True
    watcher = start_watch(alice, watchers, *FAST)
    assert watch_state(alice)["live"] == "poll"  # type: ignore[index]
    proxy.control.block_events = False
    assert wait_until(
        lambda: watch_state(alice)["live"] == "events",  # type: ignore[index]
        timeout=20,
    ), watcher.log()
    bob.write("news.md", "after the reconnect\n")
    bob.json("push")
    assert wait_until(lambda: (alice.team / "news.md").exists(), timeout=5), watcher.log()


def test_with_a_revoked_token_hundreds_of_writes_make_at_most_one_request(
    alice: User, live: LiveServer, proxy: Proxy, watchers: list[WatchProcess]
) -> None:
    """The incident: a device whose token no longer works, written to all day."""
    alice.env.pop("MEMSYNC_TOKEN")
    first = live.token(name="alice-laptop")
    assert alice.run("login", "--token", first).returncode == 0
    watcher = start_watch(alice, watchers, *FAST)
    assert live.store.revoke_token("alice-laptop") == 1

    mark = proxy.control.mark()
    alice.write("burst/note-000.md", "note 0\n")
    assert wait_until(lambda: (watch_state(alice) or {}).get("suppressed") is not None)
    assert proxy.control.count(since=mark) == 1
    # Ten bursts, each followed by a pause longer than the debounce: without the
    # suppression each would be a push.
    started = time.monotonic()
    for index in range(1, 301):
        alice.write(f"burst/note-{index:03}.md", f"note {index}\n")
        time.sleep(0.6 if index % 30 == 0 else 0.002)
    assert time.monotonic() - started > 5
    time.sleep(1.0)
    assert proxy.control.count(since=mark) == 1
    state = watch_state(alice)
    assert state is not None
    assert state["suppressed"]["reason"] == "auth"
    assert "memsync login" in state["suppressed"]["waiting_for"]
    assert state["counters"]["suppressed_events"] > 0

    # No timer lifts it, and more writes still cost nothing.
    alice.write("later.md", "later\n")
    time.sleep(4)
    assert proxy.control.count(since=mark) == 1
    assert server_entries(live) == {}

    # The recovery signal: `memsync login` changes the credentials file.
    second = live.token(name="alice-laptop-2")
    assert alice.run("login", "--token", second).returncode == 0
    assert wait_until(lambda: len(server_entries(live)) == 302, timeout=20), watcher.log()
    assert wait_until(lambda: (watch_state(alice) or {}).get("suppressed") is None)
    assert first not in watcher.log()
    assert second not in watcher.log()


@pytest.mark.parametrize("live", [{"max_entries": 3}], indirect=True)
def test_too_many_entries_stops_pushing_until_a_file_is_deleted(
    alice: User, live: LiveServer, proxy: Proxy, watchers: list[WatchProcess]
) -> None:
    watcher = start_watch(alice, watchers, *FAST)
    for key in ("a.md", "b.md", "c.md", "d.md"):
        alice.write(key, f"{key}\n")
    assert wait_until(lambda: (watch_state(alice) or {}).get("suppressed") is not None)
    assert sorted(server_entries(live)) == ["a.md", "b.md", "c.md"]
    assert watch_state(alice)["suppressed"]["reason"] == "too-many-entries"  # type: ignore[index]

    mark = proxy.control.mark()
    for index in range(100):
        alice.write("d.md", f"edit {index}\n")
        alice.write("b.md", f"b edit {index}\n")
        time.sleep(0.02)
    time.sleep(2.5)
    assert proxy.control.count(since=mark) == 0

    # A note a teammate deletes for the team frees room: the watcher's pull applies the
    # delete here and pushing resumes by itself.
    with live.client(live.token(name="admin")) as client:
        assert client.delete(API, params={"repo": REPO, "key": "a.md"}).status_code == 200
    assert wait_until(lambda: "d.md" in server_entries(live), timeout=10), watcher.log()
    assert not (alice.team / "a.md").exists()
    assert "resuming after too-many-entries" in watcher.log()
    assert server_entries(live)["b.md"] == "b edit 99\n"


@pytest.mark.parametrize(("status", "name"), [(503, "unavailable"), (429, "rate limited")])
def test_transient_failures_heal_by_themselves_with_bounded_requests(
    alice: User,
    live: LiveServer,
    proxy: Proxy,
    watchers: list[WatchProcess],
    status: int,
    name: str,
) -> None:
    watcher = start_watch(alice, watchers, *FAST)
    mark = proxy.control.mark()
    proxy.control.fail_status = status
    proxy.control.fail_next = 6
    alice.write("note.md", f"pushed through {name}\n")
    assert wait_until(lambda: "note.md" in server_entries(live), timeout=30), watcher.log()
    assert proxy.control.count(since=mark) <= 6 + 3
    state = watch_state(alice)
    assert state is not None
    assert state["suppressed"] is None
    assert state["counters"]["failures"] >= 1


def test_an_edit_during_a_push_reaches_the_server(
    alice: User, live: LiveServer, proxy: Proxy, watchers: list[WatchProcess]
) -> None:
    watcher = start_watch(alice, watchers, *FAST)
    proxy.control.hold_puts = 1.5
    alice.write("first.md", "first\n")
    assert wait_until(lambda: proxy.control.count(method="PUT") >= 1)
    alice.write("second.md", "written while the first push is in flight\n")
    assert "second.md" not in server_entries(live)
    assert wait_until(
        lambda: sorted(server_entries(live)) == ["first.md", "second.md"], timeout=10
    ), watcher.log()


def test_sigterm_right_after_an_edit_still_pushes_it(
    alice: User, live: LiveServer, watchers: list[WatchProcess]
) -> None:
    watcher = start_watch(alice, watchers, "--debounce", "30", "--poll-interval", "600")
    alice.write("last-words.md", "saved just before logout\n")
    code, took = watcher.terminate()
    assert code == 0
    assert took < 2.5
    assert server_entries(live).get("last-words.md") == "saved just before logout\n"
    last = [line.split(" memsync watch: ", 1)[1] for line in watcher.log().splitlines()[-2:]]
    assert last == [
        "INFO acme/app: pushed 1 file(s)",
        "INFO stopped on SIGTERM: acme/app: pushed what was pending",
    ]


def _enroll(user: User, repo: str, team: Path) -> None:
    result = user.run("enable", "--repo", repo, "--dir", str(team), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["enabled"]["repo"] == repo


def test_watch_all_keeps_enrolled_repos_in_sync_and_apart(
    alice: User, bob: User, live: LiveServer, watchers: list[WatchProcess]
) -> None:
    for name in ("MEMSYNC_REPO", "MEMSYNC_DIR"):
        alice.env.pop(name)
    one, two, three = (alice.home / f"team-{name}" for name in ("one", "two", "three"))
    _enroll(alice, "acme/one", one)
    _enroll(alice, "acme/two", two)
    watcher = WatchProcess(
        alice.env, alice.home, "--all", "--debounce", "0.3", "--poll-interval", "1"
    )
    watchers.append(watcher)

    bob.env["MEMSYNC_REPO"] = "acme/one"
    bob.write("for-one.md", "only for acme/one\n")
    bob.json("push")
    assert wait_until(lambda: (one / "for-one.md").exists(), timeout=10), watcher.log()
    (two / "for-two.md").write_text("only for acme/two\n")
    assert wait_until(lambda: "for-two.md" in server_entries(live, "acme/two")), watcher.log()
    assert not (two / "for-one.md").exists()
    assert "for-two.md" not in server_entries(live, "acme/one")

    # Enabled while it runs: picked up; disabled: stopped.
    _enroll(alice, "acme/three", three)
    assert wait_until(lambda: three.is_dir(), timeout=10), watcher.log()
    (three / "x.md").write_text("three\n")
    assert wait_until(lambda: "x.md" in server_entries(live, "acme/three")), watcher.log()
    result = alice.run("disable", "--repo", "acme/three", "--json")
    assert result.returncode == 0
    assert len(json.loads(result.stdout)["removed"]) == 1
    assert wait_until(lambda: "acme/three: stopped" in watcher.log()), watcher.log()

    def rows() -> dict[str, Any]:
        listed = alice.run("status", "--all", "--json")
        assert listed.returncode == 0, listed.stderr
        return {row["repo"]: row for row in json.loads(listed.stdout)["repos"]}

    assert sorted(rows()) == ["acme/one", "acme/two"]
    assert all(row["watcher"]["running"] for row in rows().values())
    (three / "y.md").write_text("no longer synced\n")
    time.sleep(1.5)
    assert "y.md" not in server_entries(live, "acme/three")
    code, _ = watcher.terminate(signum=signal.SIGINT)  # Ctrl-C in its terminal
    assert code == 0
    assert not any(row["watcher"]["running"] for row in rows().values())
    assert (
        watcher.log()
        .splitlines()[-1]
        .endswith(
            " INFO stopped on SIGINT: acme/one: nothing was waiting to be pushed;"
            " acme/two: nothing was waiting to be pushed"
        )
    )


def test_a_failing_repo_never_stops_another(
    alice: User, live: LiveServer, watchers: list[WatchProcess]
) -> None:
    for name in ("MEMSYNC_REPO", "MEMSYNC_DIR"):
        alice.env.pop(name)
    alice.env["MEMSYNC_TOKEN"] = live.token("acme/good", name="scoped")
    good, bad = alice.home / "team-good", alice.home / "team-bad"
    _enroll(alice, "acme/good", good)
    _enroll(alice, "acme/bad", bad)  # the token may not reach it: 403
    watcher = WatchProcess(
        alice.env, alice.home, "--all", "--debounce", "0.3", "--poll-interval", "600"
    )
    watchers.append(watcher)
    assert wait_until(lambda: good.is_dir() and bad.is_dir())
    (bad / "x.md").write_text("refused\n")
    (good / "y.md").write_text("fine\n")
    assert wait_until(lambda: "y.md" in server_entries(live, "acme/good")), watcher.log()

    def watchers_by_repo() -> dict[str, Any]:
        listed = json.loads(alice.run("status", "--all", "--json").stdout)["repos"]
        return {row["repo"]: row["watcher"] for row in listed}

    assert wait_until(lambda: bool((watchers_by_repo()["acme/bad"] or {}).get("suppressed")))
    assert watchers_by_repo()["acme/bad"]["suppressed"]["reason"] == "auth"
    assert watchers_by_repo()["acme/good"]["suppressed"] is None
    (good / "z.md").write_text("still fine\n")
    assert wait_until(lambda: "z.md" in server_entries(live, "acme/good")), watcher.log()
    code, _ = watcher.terminate()
    assert code == 0
    stopped = watcher.log().splitlines()[-1].split(" INFO ", 1)[1]
    # A late event of z.md's write may still be flushed at stop: either is the truth.
    assert re.match(
        r"stopped on SIGTERM: acme/good: (nothing was waiting to be pushed|pushed what was "
        r"pending); acme/bad: paused \(",
        stopped,
    ), stopped
    assert stopped.endswith("); edits made here are pushed once that is fixed"), stopped


def test_pulling_a_repo_nobody_wrote_yet_twice_is_not_an_error(alice: User) -> None:
    """What a watcher's poll does all day before anyone pushes."""
    assert alice.json("pull")["written"] == []
    assert alice.json("pull")["written"] == []


def test_a_team_dir_deleted_and_made_again_is_watched_again(
    alice: User, live: LiveServer, watchers: list[WatchProcess]
) -> None:
    watcher = start_watch(alice, watchers, *FAST)
    shutil.rmtree(alice.team)
    assert wait_until(lambda: "watching it again" in watcher.log()), watcher.log()
    alice.write("after.md", "written into the new folder\n")
    assert wait_until(lambda: "after.md" in server_entries(live)), watcher.log()


def _watcher_status(user: User) -> tuple[int, dict[str, Any]]:
    """`memsync status --json`: its exit code and its `watcher` object."""
    shown = user.run("status", "--json")
    assert shown.returncode in (0, 3), shown.stderr
    watcher: dict[str, Any] = json.loads(shown.stdout)["watcher"]
    return shown.returncode, watcher


def test_a_second_watcher_stands_by_and_takes_over_when_the_first_is_killed(
    alice: User, live: LiveServer, proxy: Proxy, watchers: list[WatchProcess]
) -> None:
    _enroll(alice, "acme/app", alice.team)  # for `status --all`
    first = start_watch(alice, watchers, *FAST)
    second = WatchProcess(alice.env, alice.home, *FAST)
    watchers.append(second)
    assert wait_until(lambda: "standing by to take over" in second.log()), second.log()
    assert f"already watched by process {first.process.pid}" in second.log()
    _, watcher = _watcher_status(alice)
    assert watcher["running"]
    assert watcher["pid"] == first.process.pid
    assert watcher["standby"] == second.process.pid
    assert f"process {second.process.pid} stands by" in alice.run("status").stdout

    first.process.kill()  # kill -9: no goodbye, the kernel frees the lock
    first.process.wait(5)
    killed = time.monotonic()
    assert wait_until(lambda: "taking over" in second.log(), timeout=5), second.log()
    assert time.monotonic() - killed < 2.0, second.log()
    # From the moment it took over, `status` and `status --all` name the serving watcher,
    # never the dead one.
    _, watcher = _watcher_status(alice)
    assert (watcher["running"], watcher["pid"]) == (True, second.process.pid)
    listed = json.loads(alice.run("status", "--all", "--json").stdout)["repos"]
    assert [(row["watcher"]["running"], row["watcher"]["pid"]) for row in listed] == [
        (True, second.process.pid)
    ]
    assert f"running (pid {second.process.pid}" in alice.run("status", "--all").stdout
    # The new watcher serves the repo: an edit made now is pushed, and status says so.
    alice.write("after.md", "pushed by the second watcher\n")
    assert wait_until(lambda: "after.md" in server_entries(live), timeout=5), second.log()
    assert wait_until(lambda: _watcher_status(alice)[1]["pid"] == second.process.pid)
    _, watcher = _watcher_status(alice)
    assert watcher["running"]
    assert watcher["standby"] is None

    second.process.kill()
    second.process.wait(5)
    _, watcher = _watcher_status(alice)
    assert not watcher["running"]
    assert watcher["stale"]
    assert "stopped (it did not exit cleanly)" in alice.run("status").stdout


def test_watch_all_leaves_a_repo_another_watcher_serves_alone(
    alice: User, live: LiveServer, watchers: list[WatchProcess]
) -> None:
    solo = start_watch(alice, watchers, *FAST)
    _enroll(alice, "acme/app", alice.team)
    for name in ("MEMSYNC_REPO", "MEMSYNC_DIR"):
        alice.env.pop(name)
    every = WatchProcess(alice.env, alice.home, "--all", "--debounce", "0.3")
    watchers.append(every)
    assert wait_until(lambda: "standing by to take over" in every.log()), every.log()
    assert watch_state(alice)["pid"] == solo.process.pid  # type: ignore[index]
    alice.write("one.md", "pushed once\n")
    assert wait_until(lambda: "one.md" in server_entries(live)), solo.log()
    code, _ = every.terminate()
    assert code == 0
    assert (
        every.log()
        .splitlines()[-1]
        .endswith(" INFO stopped on SIGTERM: acme/app: it was standing by for another watcher")
    )
