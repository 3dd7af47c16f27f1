"""A wrong server is not an empty repo (docs/protocol.md 4.4, 4.5).

A mistyped URL, a URL with an extra path, or any other HTTP server must never look like
a repo with no team memory yet: push, pull, status and doctor all fail with one line
that names the URL (exit 1), and nothing is written to the team dir, the state or the
server. The other servers are real HTTP servers on loopback (stdlib `http.server`), the
memsync server is the real one reached through a URL with an extra path.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from memsync_protocol.checksums import EMPTY_REPO_CHECKSUM
from sync_server.config import Settings
from tests.integration.users import REPO, User, make_user
from tests.liveserver import LiveServer, run_live_server

HTML_404 = b"<!doctype html><title>Not Found</title><h1>404 Not Found</h1>"

# What each kind of foreign server answers to every request: status, content type, body,
# extra headers. /healthz gets the same answer as everything else.
FOREIGN_ANSWERS: dict[str, tuple[int, str, bytes, dict[str, str]]] = {
    "html-404": (404, "text/html; charset=utf-8", HTML_404, {}),
    "json-404": (404, "application/json", b'{"detail": "Not Found"}', {}),
    "html-200": (200, "text/html", b"<!doctype html><h1>Welcome to nginx!</h1>", {}),
    # Answers /healthz like a memsync server would, and everything else too.
    "status-ok-json": (200, "application/json", b'{"status": "ok"}', {}),
    "ill-typed-team-memory": (
        200,
        "application/json",
        json.dumps(
            {
                "version": "7",
                "checksum": EMPTY_REPO_CHECKSUM,
                "entryChecksums": {},
                "content": {"entries": {}, "entryChecksums": {}},
                "status": "ok",
            }
        ).encode(),
        {},
    ),
    "redirect": (302, "text/html", b"", {"Location": "https://sso.example.invalid/login"}),
}


class ForeignHandler(BaseHTTPRequestHandler):
    """Every method gets the answer of the server's `kind`, whatever the path."""

    answers: ClassVar[dict[str, tuple[int, str, bytes, dict[str, str]]]] = FOREIGN_ANSWERS

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        assert isinstance(self.server, ForeignServer)
        status, content_type, body, headers = self.answers[self.server.kind]
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)
        self.server.requests.append(f"{self.command} {self.path.split('?')[0]}")

    do_GET = do_PUT = do_POST = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test output is not the place for an access log."""


class ForeignServer(ThreadingHTTPServer):
    """A plain HTTP server that is not memsync; it remembers the requests it saw."""

    daemon_threads = True

    def __init__(self, kind: str) -> None:
        super().__init__(("127.0.0.1", 0), ForeignHandler)
        self.kind = kind
        self.requests: list[str] = []

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


@pytest.fixture
def live(sqlite_database_url: str) -> Iterator[LiveServer]:
    with run_live_server(Settings(database_url=sqlite_database_url)) as server:
        yield server


@contextmanager
def running_foreign(kind: str) -> Iterator[ForeignServer]:
    """A `ForeignServer` answering `kind`, serving on its own thread until the block ends."""
    server = ForeignServer(kind)
    thread = threading.Thread(target=server.serve_forever, name="foreign-http", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(params=sorted(FOREIGN_ANSWERS))
def foreign(request: pytest.FixtureRequest) -> Iterator[ForeignServer]:
    with running_foreign(str(request.param)) as server:
        yield server


def user_of(server_url: str, live: LiveServer, tmp_path: Path) -> User:
    """Alice, with a note in her team dir, pointed at `server_url`."""
    alice = make_user("alice", tmp_path, live, live.token(name="alice"))
    alice.env["MEMSYNC_SERVER"] = server_url
    alice.write("notes/db.md", "Use PostgreSQL.\n")
    return alice


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes() for path in root.rglob("*") if path.is_file()
    }


def learned_nothing(alice: User) -> bool:
    """No state under the user's state home records a server version, ETag or base."""
    for path in (alice.home / ".state").rglob("state.json"):
        state = json.loads(path.read_text())
        if state.get("etag") or state.get("version") or state.get("bases"):
            return False
        if state.get("supports"):
            return False
    return True


COMMANDS = [("push",), ("pull",), ("status",), ("sync",)]


def assert_one_line_failure(alice: User, command: tuple[str, ...], url: str) -> str:
    before = snapshot(alice.team)
    result = alice.run(*command)
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert lines[0].startswith(f"memsync: {url} is not a memsync server ("), lines[0]
    assert snapshot(alice.team) == before
    assert learned_nothing(alice)
    return lines[0]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command[0])
def test_another_http_server_is_not_an_empty_repo(
    foreign: ForeignServer, live: LiveServer, tmp_path: Path, command: tuple[str, ...]
) -> None:
    alice = user_of(foreign.base_url, live, tmp_path)
    line = assert_one_line_failure(alice, command, foreign.base_url)
    assert "GET /v1/team_memory answered" in line
    # It stopped at the first answer: nothing was ever sent to be stored there.
    assert not any(request.startswith("PUT") for request in foreign.requests)


def test_the_message_says_what_answered(live: LiveServer, tmp_path: Path) -> None:
    server = ForeignServer("html-404")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        alice = user_of(server.base_url, live, tmp_path)
        line = assert_one_line_failure(alice, ("pull",), server.base_url)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert line == (
        f"memsync: {server.base_url} is not a memsync server"
        " (GET /v1/team_memory answered 404 text/html)"
    )


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command[0])
@pytest.mark.parametrize("extra", ["/typo", "/v1/team_memory", "/api"])
def test_the_memsync_server_under_a_wrong_path_is_refused(
    live: LiveServer, tmp_path: Path, command: tuple[str, ...], extra: str
) -> None:
    url = live.base_url + extra
    alice = user_of(url, live, tmp_path)
    line = assert_one_line_failure(alice, command, url)
    assert "answered 404 application/json" in line
    hint = f"give the server's base URL, {live.base_url}, without /v1/team_memory"
    assert (hint in line) == (extra == "/v1/team_memory")
    assert live.store.head(REPO) is None  # nothing was created on the real server


def test_the_right_url_still_treats_a_new_repo_as_empty(live: LiveServer, tmp_path: Path) -> None:
    alice = user_of(live.base_url, live, tmp_path)
    assert alice.json("pull")["written"] == []
    assert alice.json("push")["uploaded"] == ["notes/db.md"]
    assert live.store.head(REPO) is not None


def doctor_rows(alice: User) -> list[dict[str, Any]]:
    result = alice.run("doctor", "--json")
    assert result.returncode == 1, (result.stdout, result.stderr)
    report = json.loads(result.stdout)
    assert report["ok"] is False
    rows: list[dict[str, Any]] = report["checks"]
    return rows


def assert_doctor_fails_at_the_server(alice: User, url: str) -> None:
    rows = {row["check"]: row for row in doctor_rows(alice)}
    checks = ["config", "repo", "team dir", "server", "auth", "clock", "index", "claude code"]
    assert list(rows) == checks, rows
    server_row = rows["server"]
    assert server_row["ok"] is False
    assert server_row["detail"].startswith(f"{url} is not a memsync server (")
    assert server_row["fix"]
    assert server_row["fix"] != server_row["detail"]
    assert "MEMSYNC_SERVER" in server_row["fix"]
    # Auth is never judged against a server that is not memsync.
    for name in ("auth", "clock"):
        assert rows[name]["ok"] is False
        assert rows[name]["skipped"] is True
        assert rows[name]["detail"] == "skipped: needs a working server"
    human = alice.run("doctor")
    assert human.returncode == 1
    assert "ok   auth" not in human.stdout
    assert "auth: skipped: needs a working server" in human.stdout
    assert "FAIL server:" in human.stdout


def test_doctor_tells_another_http_server_from_memsync(
    foreign: ForeignServer, live: LiveServer, tmp_path: Path
) -> None:
    alice = user_of(foreign.base_url, live, tmp_path)
    assert_doctor_fails_at_the_server(alice, foreign.base_url)


def test_doctor_refuses_the_memsync_server_under_a_wrong_path(
    live: LiveServer, tmp_path: Path
) -> None:
    url = live.base_url + "/typo"
    alice = user_of(url, live, tmp_path)
    assert_doctor_fails_at_the_server(alice, url)


def test_doctor_passes_against_the_right_url(live: LiveServer, tmp_path: Path) -> None:
    alice = user_of(live.base_url, live, tmp_path)
    rows = alice.json("doctor")["checks"]
    assert {row["check"]: row["ok"] for row in rows} == {
        "config": True,
        "repo": True,
        "team dir": True,
        "server": True,
        "auth": True,
        "clock": True,
        "index": True,
        "claude code": True,
    }
