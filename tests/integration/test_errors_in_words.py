"""What a person sees when things go wrong or take time, through the real CLI: failures
named in words (and as one JSON object with `--json`), retries said on a terminal,
Ctrl-C saying what was done, progress bars and a coloured diff on a terminal only, and
the first push into a repo saying it creates the team memory.

"On a terminal" runs the CLI under a real pseudo-terminal (`os.openpty`), read in a
bounded loop; the same commands piped must not show any of it.
"""

from __future__ import annotations

import fcntl
import http.server
import json
import os
import random
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sync_server.config import Settings
from tests.integration.users import REPO, User, make_user
from tests.integration.watchkit import Proxy, server_entries, wait_until
from tests.liveserver import LiveServer, run_live_server

CLASS_NAMES = ("Error(", "Exception", "Timeout(", "httpx", "httpcore", "Traceback")
RETRY_LINE = re.compile(
    r"^memsync: (server unreachable|rate limited|server busy \(\d+\)), "
    r"retrying in \d+(\.\d)? s \((\d)/4\)$"
)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass
class Terminal:
    """A finished CLI run whose stderr (and stdout, unless piped) was a terminal."""

    returncode: int
    screen: str  # what the terminal received, "\r\n" read as "\n"
    stdout: str  # the pipe's bytes when stdout was not the terminal

    def lines(self) -> list[str]:
        """The lines left on the terminal: colour and cursor codes dropped, and what a
        carriage return went back over (a progress bar's earlier frames) overwritten."""
        return [line.split("\r")[-1] for line in ANSI.sub("", self.screen).split("\n")]


def on_terminal(
    user: User,
    *args: str,
    env: dict[str, str] | None = None,
    stdout_piped: bool = False,
    interrupt_when: Callable[[str], bool] | None = None,
    again_when: Callable[[str], bool] | None = None,
    timeout: float = 60.0,
) -> Terminal:
    """Run `memsync ARGS` with stderr (and stdout unless `stdout_piped`) on a new
    pseudo-terminal 200 columns wide; send SIGINT once `interrupt_when(screen)` holds,
    and a second one once `again_when(screen)` holds after it."""
    memsync = str(Path(sys.executable).with_name("memsync"))
    primary, secondary = os.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    process = subprocess.Popen(
        [memsync, *args],
        env={**user.env, "TERM": "xterm-256color", **(env or {})},
        cwd=user.home,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if stdout_piped else secondary,
        stderr=secondary,
    )
    os.close(secondary)
    piped = -1 if process.stdout is None else process.stdout.fileno()
    received = {primary: bytearray()}
    if piped >= 0:
        received[piped] = bytearray()
    open_fds = list(received)
    interrupted = False
    deadline = time.monotonic() + timeout
    try:
        while open_fds:
            if time.monotonic() > deadline:
                raise AssertionError(f"memsync {args} did not finish in {timeout} s")
            ready, _, _ = select.select(open_fds, [], [], 0.05)
            for fd in ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # EIO: the terminal's other end is closed
                    chunk = b""
                if chunk:
                    received[fd].extend(chunk)
                else:
                    open_fds.remove(fd)
            screen = received[primary].decode("utf-8", "replace")
            if interrupt_when is not None and not interrupted and interrupt_when(screen):
                process.send_signal(signal.SIGINT)
                interrupted = True
            elif interrupted and again_when is not None and again_when(screen):
                process.send_signal(signal.SIGINT)
                again_when = None
        returncode = process.wait(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=15)
        os.close(primary)
        if process.stdout is not None:
            process.stdout.close()
    stdout = received.get(piped, b"")
    return Terminal(
        returncode=returncode,
        screen=received[primary].decode("utf-8", "replace").replace("\r\n", "\n"),
        stdout=bytes(stdout).decode("utf-8", "replace"),
    )


def one_error_object(stdout: str) -> dict[str, object]:
    """The single `{"error": {...}}` object a failing `--json` command prints."""
    lines = stdout.splitlines()
    assert len(lines) == 1, stdout
    body = json.loads(lines[0])
    assert list(body) == ["error"], body
    error = body["error"]
    assert isinstance(error, dict)
    return error


# --- failures in words --------------------------------------------------------------


def test_a_refused_connection_in_json_is_one_error_object(alice: User) -> None:
    alice.env["MEMSYNC_SERVER"] = "http://127.0.0.1:9"
    result = alice.run("pull", "--json")
    assert result.returncode == 1
    error = one_error_object(result.stdout)
    assert error["type"] == "network"
    assert error["message"] == (
        "cannot reach http://127.0.0.1:9: connection refused (is the server running?)"
    )
    assert result.stderr == f"memsync: {error['message']}\n"


def test_a_server_that_never_answers_times_out_in_words(alice: User, silent_server: str) -> None:
    alice.env.update(MEMSYNC_SERVER=silent_server, MEMSYNC_TIMEOUT="0.5")
    started = time.monotonic()
    result = alice.run("pull")
    assert time.monotonic() - started < 30  # 4 attempts of 0.5 s, and the backoff
    assert result.returncode == 1
    assert result.stderr == f"memsync: {silent_server} did not answer: timed out after 0.5 s\n"
    assert result.stdout == ""


def test_a_bad_timeout_setting_is_a_usage_error(alice: User) -> None:
    alice.env["MEMSYNC_TIMEOUT"] = "soon"
    result = alice.run("pull")
    assert result.returncode == 2
    assert result.stderr.startswith("memsync: MEMSYNC_TIMEOUT must be seconds")
    assert len(result.stderr.splitlines()) == 1


def test_https_to_a_plain_http_server_says_so_in_json_too(alice: User, live: LiveServer) -> None:
    alice.env["MEMSYNC_SERVER"] = live.base_url.replace("http://", "https://")
    result = alice.run("pull", "--json")
    assert result.returncode == 1
    error = one_error_object(result.stdout)
    assert error["type"] == "network"
    server = alice.env["MEMSYNC_SERVER"]
    assert error["message"] == f"TLS handshake with {server} failed: is this an http:// server?"


def test_a_name_that_does_not_resolve_is_said(alice: User) -> None:
    alice.env["MEMSYNC_SERVER"] = "http://memsync.invalid"
    result = alice.run("pull")
    assert result.returncode == 1
    assert result.stderr == (
        "memsync: cannot reach http://memsync.invalid: name not resolved (memsync.invalid)\n"
    )


@pytest.mark.parametrize("server", ["ftp://127.0.0.1:21", "127.0.0.1:8787", "http://"])
def test_a_bad_url_scheme_is_a_usage_error_in_words(alice: User, server: str) -> None:
    alice.env["MEMSYNC_SERVER"] = server
    result = alice.run("push")
    assert result.returncode == 2
    assert "http:// or https:// URL with a host" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    as_json = alice.run("push", "--json")
    assert as_json.returncode == 2
    assert one_error_object(as_json.stdout)["type"] == "config"


def test_no_credentials_in_json_is_an_error_object_exit_2(alice: User) -> None:
    del alice.env["MEMSYNC_TOKEN"]
    alice.write("a.md", "x\n")
    result = alice.run("push", "--json")
    assert result.returncode == 2
    error = one_error_object(result.stdout)
    assert error["type"] == "no_credentials"
    assert "token" in str(error["message"])
    assert len(result.stderr.splitlines()) == 1


def test_a_bad_token_in_json_is_type_auth_with_its_status(alice: User) -> None:
    alice.env["MEMSYNC_TOKEN"] = "mst_not_a_real_token"
    result = alice.run("log", "a.md", "--json")
    assert result.returncode == 1
    error = one_error_object(result.stdout)
    assert error["type"] == "auth"
    assert error["status"] == 401
    assert "mst_not_a_real_token" not in result.stdout + result.stderr


def test_not_a_memsync_server_in_json_names_the_url_and_the_answer(
    alice: User, live: LiveServer
) -> None:
    alice.env["MEMSYNC_SERVER"] = live.base_url + "/nothing-here"
    result = alice.run("pull", "--json")
    assert result.returncode == 1
    error = one_error_object(result.stdout)
    assert error["type"] == "not_a_memsync_server"
    assert error["server"] == alice.env["MEMSYNC_SERVER"]
    assert str(error["answer"]).startswith("GET /v1/team_memory answered 404")


def test_click_usage_errors_stay_text_exit_2(alice: User) -> None:
    result = alice.run("push", "--json", "--no-such-flag")
    assert result.returncode == 2
    assert result.stdout == ""
    assert "No such option" in result.stderr


def test_log_json_is_one_object_with_the_versions_inside(alice: User) -> None:
    alice.write("a.md", "one\n")
    alice.json("push")
    alice.write("a.md", "two\n")
    alice.json("push")
    shown = alice.json("log", "a.md")
    assert list(shown) == ["key", "versions"]
    assert shown["key"] == "a.md"
    assert [item["op"] for item in shown["versions"]] == ["put", "put"]


# --- retries on a terminal ----------------------------------------------------------


def test_retries_are_said_on_a_terminal_one_line_each(alice: User) -> None:
    alice.env["MEMSYNC_SERVER"] = "http://127.0.0.1:9"
    shown = on_terminal(alice, "pull")
    assert shown.returncode == 1
    lines = [line for line in shown.lines() if line]
    retries = [RETRY_LINE.match(line) for line in lines[:-1]]
    assert all(retries), lines
    assert [match.group(1) for match in retries if match] == ["server unreachable"] * 3
    assert [match.group(3) for match in retries if match] == ["2", "3", "4"]
    assert lines[-1] == (
        "memsync: cannot reach http://127.0.0.1:9: connection refused (is the server running?)"
    )


class _Busy(http.server.BaseHTTPRequestHandler):
    """Every request: 503 with `Retry-After: 1`, as an overloaded server answers."""

    def do_GET(self) -> None:
        body = b'{"error": {"type": "unavailable", "message": "try again", "details": {}}}'
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Retry-After", "1")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def busy_server() -> Iterator[str]:
    """A plain-HTTP loopback server that answers every request 503."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Busy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_a_busy_server_is_said_with_its_status_on_each_retry(alice: User, busy_server: str) -> None:
    alice.env["MEMSYNC_SERVER"] = busy_server
    shown = on_terminal(alice, "pull")
    assert shown.returncode == 1
    lines = [line for line in shown.lines() if line]
    retries = [RETRY_LINE.match(line) for line in lines[:-1]]
    assert [match.group(1) for match in retries if match] == ["server busy (503)"] * 3, lines
    assert lines[-1] == "memsync: server error 503: try again"
    piped = alice.run("pull")
    assert piped.stderr == "memsync: server error 503: try again\n"


def test_retries_are_not_said_with_json_even_on_a_terminal(alice: User) -> None:
    alice.env["MEMSYNC_SERVER"] = "http://127.0.0.1:9"
    shown = on_terminal(alice, "pull", "--json", stdout_piped=True)
    assert shown.returncode == 1
    assert "retrying" not in shown.screen
    assert one_error_object(shown.stdout)["type"] == "network"


# --- Ctrl-C says what was done ------------------------------------------------------


@pytest.fixture
def slow_server(sqlite_database_url: str) -> Iterator[LiveServer]:
    """A server that takes one request a second per token after a burst of two, so a
    push of several batches waits between them, deterministically."""
    settings = Settings(
        database_url=sqlite_database_url, rate_limit_burst=2, rate_limit_per_second=1.0
    )
    with run_live_server(settings) as server:
        yield server


def test_ctrl_c_during_a_push_says_what_went_up_and_the_next_push_sends_the_rest(
    slow_server: LiveServer, tmp_path: Path
) -> None:
    alice = make_user("alice", tmp_path, slow_server, slow_server.token(name="alice"))
    bob = make_user("bob", tmp_path, slow_server, slow_server.token(name="bob"))
    keys = [f"notes/n{number:04}.md" for number in range(1200)]
    for key in keys:
        alice.write(key, f"{key}\n" + "a line of a team note\n" * 36)  # ~800 bytes
    # Batches of 200,000 bytes: six PUTs, of which the third waits on the rate limit
    # a second time; Ctrl-C lands during that wait, with two batches committed.
    shown = on_terminal(
        alice, "push", interrupt_when=lambda screen: screen.count("rate limited, retrying") >= 2
    )
    assert shown.returncode == 130
    lines = [line for line in shown.lines() if line.startswith("memsync: ")]
    assert lines[0] == f"memsync: creating team memory for {REPO} on {slow_server.base_url}"
    retries = lines[1:-1]  # one line per wait on the rate limit
    assert len(retries) >= 2, lines
    assert all(RETRY_LINE.match(line) and "rate limited" in line for line in retries), lines
    match = re.fullmatch(
        r"memsync: interrupted: uploaded ([\d,]+) of 1,200 files; "
        r"run `memsync push` again to finish",
        lines[-1],
    )
    assert match, lines
    uploaded = int(match.group(1).replace(",", ""))
    assert 0 < uploaded < 1200
    with slow_server.client(bob.env["MEMSYNC_TOKEN"]) as client:
        on_server = client.get("/v1/team_memory", params={"repo": REPO, "view": "hashes"})
    assert sorted(on_server.json()["entryChecksums"]) == keys[:uploaded]
    again = alice.json("push")
    assert again["uploaded"] == keys[uploaded:]
    assert again["conflicts"] == []
    pulled = bob.json("pull")
    assert pulled["written"] == keys
    assert all(bob.read(key) == alice.read(key) for key in keys)


@pytest.fixture
def held(live: LiveServer, alice: User) -> Iterator[tuple[User, Proxy, list[str]]]:
    """Alice pushing six new notes (three PUTs of two) through a proxy that holds each
    PUT half a second before passing it on: the server commits a held batch even when the
    client has gone meanwhile, as over a slow network."""
    proxy = Proxy(live.base_url)
    alice.env["MEMSYNC_SERVER"] = proxy.url
    keys = [f"n{number}.md" for number in range(6)]
    for key in keys:
        alice.write(key, f"{key}\n" + "a line of a team note\n" * 3600)  # ~80 KB
    proxy.control.hold_puts = 0.5
    try:
        yield alice, proxy, keys
    finally:
        proxy.close()


def test_ctrl_c_with_a_batch_in_flight_counts_what_the_server_committed(
    held: tuple[User, Proxy, list[str]], live: LiveServer
) -> None:
    alice, proxy, keys = held
    shown = on_terminal(
        alice, "push", interrupt_when=lambda _screen: proxy.control.count(method="PUT") >= 2
    )
    assert shown.returncode == 130
    lines = [line for line in shown.lines() if line.startswith("memsync: ")]
    assert lines[-2:] == [
        "memsync: stopping once the server answers for the 2 file(s) in flight"
        " (Ctrl-C again to stop now)",
        "memsync: interrupted: uploaded 4 of 6 files; run `memsync push` again to finish",
    ]
    # The count is the server's, now and once every held request has been passed on.
    assert wait_until(lambda: len(server_entries(live)) >= 4, timeout=5)
    assert sorted(server_entries(live)) == keys[:4]
    head = live.store.head(REPO)
    assert head is not None
    assert head.version == 2  # two commits: the two answered batches
    proxy.control.hold_puts = 0.0
    again = alice.json("push")
    assert again["uploaded"] == keys[4:]


def test_a_second_ctrl_c_stops_at_once_and_names_the_files_in_flight(
    held: tuple[User, Proxy, list[str]], live: LiveServer
) -> None:
    alice, proxy, keys = held
    shown = on_terminal(
        alice,
        "push",
        interrupt_when=lambda _screen: proxy.control.count(method="PUT") >= 2,
        again_when=lambda screen: "Ctrl-C again to stop now" in screen,
    )
    assert shown.returncode == 130
    assert shown.lines()[-2] == (
        "memsync: interrupted: uploaded 2 of 6 files (and maybe the 2 in flight);"
        " run `memsync push` again to finish"
    )
    # The held batch reaches the server after all; the next push sends only the rest.
    assert wait_until(lambda: len(server_entries(live)) == 4, timeout=5)
    proxy.control.hold_puts = 0.0
    again = alice.json("push")
    assert again["uploaded"] == keys[4:]
    assert again["conflicts"] == []
    assert sorted(server_entries(live)) == keys


def test_ctrl_c_during_a_pull_says_what_was_written_and_the_next_pull_writes_the_rest(
    sqlite_database_url: str, tmp_path: Path
) -> None:
    settings = Settings(database_url=sqlite_database_url, max_entries=10_000)
    with run_live_server(settings) as server:
        alice = make_user("alice", tmp_path, server, server.token(name="alice"))
        bob = make_user("bob", tmp_path, server, server.token(name="bob"))
        keys = [f"n{number:04}.md" for number in range(6000)]
        for key in keys:
            alice.write(key, f"{key}\n")
        alice.json("push")
        # The writing bar shows after the first chunk of files is written and recorded;
        # Ctrl-C then lands while the later chunks are being written.
        shown = on_terminal(
            bob, "pull", stdout_piped=True, interrupt_when=lambda screen: "writing" in screen
        )
        assert shown.returncode == 130
        last = [line for line in shown.lines() if line][-1]
        match = re.fullmatch(
            r"memsync: interrupted: wrote ([\d,]+) of 6,000 files; "
            r"run `memsync pull` again to finish",
            last,
        )
        assert match, shown.lines()
        written = int(match.group(1).replace(",", ""))
        assert 0 < written < 6000
        assert sorted(path.name for path in bob.team.iterdir()) == keys[:written]  # no temp file
        again = bob.json("pull")
        assert again["written"] == keys[written:]
        assert all(bob.read(key) == f"{key}\n" for key in keys)


def test_ctrl_c_with_json_is_an_interrupted_error_object(alice: User, silent_server: str) -> None:
    alice.env["MEMSYNC_SERVER"] = silent_server
    started = time.monotonic()
    shown = on_terminal(
        alice,
        "pull",
        "--json",
        stdout_piped=True,
        # By then it waits for an answer that never comes.
        interrupt_when=lambda _screen: time.monotonic() - started > 1.5,
    )
    assert shown.returncode == 130
    error = one_error_object(shown.stdout)
    assert error == {
        "type": "interrupted",
        "message": "interrupted: wrote 0 files; run `memsync pull` again to finish",
        "done": 0,
        "total": None,
        "command": "memsync pull",
        "in_flight": 0,
    }


# --- progress bars, colours and the first push --------------------------------------


def test_a_pull_shows_its_download_and_writes_on_a_terminal_only(alice: User, bob: User) -> None:
    # Text that gzip cannot shrink: the bar is for bytes on the wire (over 500 KB).
    for number in range(1500):
        noise = random.Random(number).randbytes(400).hex()
        alice.write(f"n{number:04}.md", f"note {number}\n{noise}\n")
    alice.json("push")
    shown = on_terminal(bob, "pull", stdout_piped=True)
    assert shown.returncode == 0
    assert "downloading" in shown.screen
    assert "writing" in shown.screen
    assert json.loads(bob.run("status", "--json").stdout)["server_changed"] == []
    assert shown.stdout.startswith("pulled: 1500 written, 0 merged, 0 deleted")
    # Piped: no bar, the same one line.
    for number in range(1500):
        alice.write(f"n{number:04}.md", f"note {number} again\n" + "more knowledge\n" * 20)
    alice.json("push")
    piped = bob.run("pull")
    assert piped.returncode == 0
    assert piped.stderr == ""
    assert piped.stdout == shown.stdout


def test_diff_is_coloured_on_a_terminal_and_plain_when_piped_or_no_color(alice: User) -> None:
    alice.write("a.md", "kept\nold line\n")
    alice.json("push")
    alice.write("a.md", "kept\nnew line\n")
    coloured = on_terminal(alice, "diff", "a.md")
    assert coloured.returncode == 0
    assert "\x1b[31m-old line\x1b[0m" in coloured.screen
    assert "\x1b[32m+new line\x1b[0m" in coloured.screen
    assert re.search(r"\x1b\[36m@@ [^\n]*@@\x1b\[0m", coloured.screen)
    plain = alice.run("diff", "a.md")
    assert "\x1b[" not in plain.stdout
    assert "-old line\n+new line\n" in plain.stdout
    assert [line for line in coloured.lines() if line] == plain.stdout.splitlines()
    no_color = on_terminal(alice, "diff", "a.md", env={"NO_COLOR": "1"})
    assert "\x1b[" not in no_color.screen
    assert "-old line\n+new line\n" in no_color.screen


def test_the_first_push_says_it_creates_the_team_memory_and_only_the_first(
    alice: User, live: LiveServer
) -> None:
    alice.write("a.md", "first note\n")
    first = alice.run("push", "--json")
    assert first.returncode == 0
    assert first.stderr == f"memsync: creating team memory for {REPO} on {live.base_url}\n"
    assert json.loads(first.stdout)["created_team_memory"] is True
    alice.write("b.md", "second note\n")
    second = alice.run("push", "--json")
    assert second.returncode == 0
    assert second.stderr == ""
    assert json.loads(second.stdout)["created_team_memory"] is False
    # Another repo on the same server is new again: a typo in its name shows.
    alice.env["MEMSYNC_REPO"] = "acme/ap"
    typo = alice.run("push")
    assert typo.stderr == f"memsync: creating team memory for acme/ap on {live.base_url}\n"
