"""A watcher that heals the moment the fault does: real watcher processes, a real
server on loopback that goes away and comes back on the same port, real inotify
limits (in a user namespace of their own), real files.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.integration.test_skips import aws_access_key
from tests.integration.users import User, make_user
from tests.integration.watchkit import (
    Proxy,
    WatchProcess,
    memsync_command,
    server_entries,
    wait_until,
    watch_server,
    watch_state,
)
from tests.liveserver import LiveServer, free_port

DEBOUNCE = 0.3
FAST = ("--debounce", str(DEBOUNCE), "--poll-interval", "600")
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z memsync watch: ")


def _settled(user: User) -> bool:
    state = watch_state(user)
    return bool(state and state.get("live") == "events" and state["last_pull"])


def _start(user: User, watchers: list[WatchProcess], *args: str) -> WatchProcess:
    process = WatchProcess(user.env, user.home, *FAST, *args)
    watchers.append(process)
    assert wait_until(lambda: _settled(user)), process.log()
    time.sleep(0.3)  # the first push after the pull (a no-op when nothing is new)
    return process


class RestartableServer:
    """One server's database and port: `stop()` takes it away, `start()` brings the
    same server back (same data, same URL)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self._stack: ExitStack | None = None
        self.live: LiveServer | None = None

    def start(self) -> LiveServer:
        self._stack = ExitStack()
        self.live = self._stack.enter_context(watch_server(self.folder, port=self.port))
        return self.live

    def stop(self) -> None:
        if self._stack is not None:
            self._stack.close()
            self._stack = None


@pytest.fixture
def restartable(tmp_path: Path) -> Iterator[RestartableServer]:
    server = RestartableServer(tmp_path)
    server.start()
    yield server
    server.stop()


def test_after_an_outage_a_note_written_during_it_reaches_the_teammate_at_once(
    restartable: RestartableServer, tmp_path: Path, watchers: list[WatchProcess]
) -> None:
    live = restartable.live
    assert live is not None
    alice = make_user("alice", tmp_path, live, live.token(name="alice"))
    bob = make_user("bob", tmp_path, live, live.token(name="bob"))
    writer = _start(alice, watchers)
    reader = _start(bob, watchers)

    restartable.stop()
    alice.write("during.md", "written while the server was away\n")
    # Long enough for the push to fail and back off several times (1, 2, 4, 8 s...).
    assert wait_until(lambda: writer.log().count("push failed") >= 3, timeout=20), writer.log()
    time.sleep(6)
    attempts = writer.log().count("push failed")
    restartable.start()
    back = time.monotonic()

    assert wait_until(lambda: (bob.team / "during.md").exists(), timeout=15), reader.log()
    arrived = time.monotonic() - back
    assert arrived < DEBOUNCE + 2.0, (arrived, writer.log(), reader.log())
    assert (bob.team / "during.md").read_text() == "written while the server was away\n"
    # Both are back on the stream within 2 s of the server's return.
    assert wait_until(lambda: _settled(alice) and _settled(bob), timeout=2.0)
    assert "the server answers again" in reader.log()
    # While it was away the push was retried with backoff, not in a loop.
    assert attempts <= 6, writer.log()


def test_a_restarted_server_has_every_watcher_back_on_its_stream_at_once(
    restartable: RestartableServer, tmp_path: Path, watchers: list[WatchProcess]
) -> None:
    live = restartable.live
    assert live is not None
    users = [make_user(name, tmp_path, live, live.token(name=name)) for name in ("a", "b", "c")]
    for user in users:
        _start(user, watchers)
    restartable.stop()
    assert wait_until(lambda: all(watch_state(u)["live"] == "poll" for u in users))  # type: ignore[index]
    time.sleep(3)
    restartable.start()
    back = time.monotonic()
    assert wait_until(lambda: all(_settled(user) for user in users), timeout=5)
    assert time.monotonic() - back < 2.0, [w.log() for w in watchers]


def _unshare_available() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "--user", "--map-root-user", "true"], capture_output=True, check=False
    )
    return probe.returncode == 0


def test_without_inotify_the_watcher_polls_says_why_once_and_switches_back(
    restartable: RestartableServer, tmp_path: Path, watchers: list[WatchProcess]
) -> None:
    """In a user namespace of its own the watcher gets no inotify instance at all
    (`max_inotify_instances` = 0 there); nothing else on the machine is touched."""
    if not _unshare_available():
        if os.environ.get("CI"):
            pytest.fail("unshare --user is needed for the inotify test in CI")
        pytest.skip("unshare --user is not available here")
    live = restartable.live
    assert live is not None
    alice = make_user("alice", tmp_path, live, live.token(name="alice"))
    bob = make_user("bob", tmp_path, live, live.token(name="bob"))
    limits = "/proc/sys/user/max_inotify_instances"
    freed = tmp_path / "free-inotify"
    # The shell sets the namespace's limit to 0, raises it again when the test says
    # so (the limit "frees up"), and runs the watcher.
    script = (
        f"echo 0 > {limits}; "
        f"(while [ ! -e {freed} ] && kill -0 $$ 2>/dev/null; do sleep 0.1; done; "
        f"echo 128 > {limits}) & "
        f'exec "$0" "$@"'
    )
    watcher = WatchProcess(
        alice.env,
        alice.home,
        *FAST,
        command=["unshare", "--user", "--map-root-user", "sh", "-c", script, *memsync_command()],
    )
    watchers.append(watcher)
    assert wait_until(lambda: _settled(alice)), watcher.log()
    log = watcher.log()
    assert "no inotify instance is left (fs.inotify.max_user_instances)" in log, log
    assert "sudo sysctl fs.inotify.max_user_instances=" in log
    assert "polling every 2 s instead" in log
    shown = alice.run("status")
    assert "no inotify left: polling the team dir" in shown.stdout, shown.stdout

    alice.write("polled.md", "found by a stat walk\n")
    assert wait_until(lambda: "polled.md" in server_entries(live), timeout=10), watcher.log()
    bob.write("to-alice.md", "from bob\n")
    bob.json("push")
    assert wait_until(lambda: (alice.team / "to-alice.md").exists(), timeout=10)
    assert watcher.log().count("cannot watch for file changes") == 1

    freed.touch()
    assert wait_until(lambda: "file events are available again" in watcher.log(), timeout=45)
    assert wait_until(lambda: watch_state(alice)["file_events"] == "system")  # type: ignore[index]
    alice.write("evented.md", "seen by inotify again\n")
    assert wait_until(lambda: "evented.md" in server_entries(live), timeout=5), watcher.log()


def test_each_skipped_file_is_logged_once_per_version_with_its_fix_and_a_timestamp(
    restartable: RestartableServer, tmp_path: Path, watchers: list[WatchProcess]
) -> None:
    live = restartable.live
    assert live is not None
    alice = make_user("alice", tmp_path, live, live.token(name="alice"))
    watcher = _start(alice, watchers)
    secret = aws_access_key()
    alice.write("creds.md", f"aws_access_key_id = {secret}\n")
    (alice.team / "latin1.md").write_bytes("caf\xe9\n".encode("latin-1"))
    (alice.team / "link.md").symlink_to(alice.team / "latin1.md")
    # A name that is not UTF-8 (a Latin-1 é), a binary file, a NUL in a note: each a
    # skip with its fix, never a traceback, and the rest (the index check too) goes on.
    (alice.team / os.fsdecode(b"caf\xe9.md")).write_bytes(b"named in Latin-1\n")
    (alice.team / "diagram.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00")
    alice.write("nul.md", "a\x00b\n")
    alice.write("fine.md", "a note\n")
    assert wait_until(lambda: "fine.md" in server_entries(live)), watcher.log()
    assert wait_until(lambda: "not sending link.md" in watcher.log()), watcher.log()
    for _ in range(3):  # more pushes: nothing new is said about the same files
        alice.write("fine.md", f"a note, edit {_}\n")
        time.sleep(DEBOUNCE + 0.5)
    assert wait_until(lambda: server_entries(live).get("fine.md") == "a note, edit 2\n")
    alice.write("later.md", "a note written after them\n")
    assert wait_until(lambda: "index: later.md has no name" in watcher.log()), watcher.log()
    assert sorted(server_entries(live)) == ["fine.md", "later.md"]
    log = watcher.log()
    assert log.count("not sending creds.md: contains a secret") == 1, log
    assert log.count("not sending latin1.md: not UTF-8 text; save it as UTF-8") == 1, log
    assert log.count("not sending link.md: a symbolic link") == 1, log
    assert (
        log.count(
            "not sending caf\\xe9.md: invalid name: the name is not valid UTF-8; rename it "
            "(in a shell: mv $'caf\\xe9.md' NEW-NAME)"
        )
        == 1
    ), log
    assert log.count("not sending diagram.png: a binary file, not text") == 1, log
    assert log.count("not sending nul.md: invalid text: the text contains a NUL") == 1, log
    assert not any(word in log for word in ("Traceback", "Logging error", "UnicodeEncodeError"))
    assert secret not in log
    assert all(STAMP.match(line) for line in log.splitlines()), log
    # A new version of a skipped file is said again.
    alice.write("creds.md", f"still: aws_access_key_id = {secret}\n")
    assert wait_until(lambda: watcher.log().count("not sending creds.md") == 2), watcher.log()

    shown = alice.run("status")
    assert shown.returncode == 3, shown.stdout + shown.stderr
    everything = alice.run("status", "--all")
    assert everything.returncode == 0  # nothing enrolled: `--all` lists enrolled repos
    enrolled = alice.run("enable", "--json")
    assert enrolled.returncode == 0, enrolled.stderr
    # The foreground watcher's state is the enrolled repo's: `--all` shows its skips.
    everything = alice.run("status", "--all")
    assert everything.returncode == 3, everything.stdout + everything.stderr
    assert "  skipped: creds.md: contains a secret" in everything.stdout
    assert "  skipped: latin1.md: not UTF-8 text" in everything.stdout
    rows = json.loads(alice.run("status", "--all", "--json").stdout)["repos"]
    assert {row["key"] for row in rows[0]["watcher"]["skipped"]} == {
        "creds.md",
        "latin1.md",
        "link.md",
        "caf\\xe9.md",
        "diagram.png",
        "nul.md",
    }


def test_the_pushing_watcher_does_not_fetch_its_own_commit_back(
    restartable: RestartableServer, tmp_path: Path, watchers: list[WatchProcess]
) -> None:
    live = restartable.live
    assert live is not None
    proxy = Proxy(live.base_url)
    try:
        alice = make_user("alice", tmp_path, live, live.token(name="alice"))
        alice.env["MEMSYNC_SERVER"] = proxy.url
        watcher = _start(alice, watchers)
        alice.write("first.md", "the repo's first commit (its push asks for the head)\n")
        assert wait_until(lambda: "first.md" in server_entries(live))
        time.sleep(0.5)
        mark = proxy.control.mark()
        for key in ("own-0.md", "own-1.md", "own-2.md"):
            alice.write(key, "mine\n")
            assert wait_until(lambda key=key: key in server_entries(live))  # type: ignore[misc]
            time.sleep(0.5)  # the commit's event reaches the watcher's stream
        assert proxy.control.count(since=mark, method="PUT") == 3, watcher.log()
        assert proxy.control.count(since=mark, method="GET") == 0, proxy.control.requests
    finally:
        proxy.close()
