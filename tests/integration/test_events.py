"""Live updates over HTTP: `GET /events` as a watcher sees it, on every backend.

Streams are read with httpx `client.stream` and parsed here from the raw bytes, so the
exact framing is what is tested. Every read is bounded by the client's read timeout and
every wait by a deadline; heartbeats are set low, so an idle stream still yields a frame
(`: keep-alive`) several times a second and a reader can check its deadline.

Also with separate `memsync-server serve` processes sharing one SQLite file or one
PostgreSQL: a commit made through one reaches a stream held by the other.
"""

from __future__ import annotations

import json
import re
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from memsync_protocol.checksums import EMPTY_REPO_CHECKSUM
from sync_server.auth import issue_token
from sync_server.config import Settings, sqlite_url
from sync_server.events import LISTENER_NAME, SHUTDOWN_GRACE_SECONDS
from sync_server.storage.sql import SqlStore
from tests.integration.conftest import API, REPO
from tests.integration.test_hostile import BAD_REPOS
from tests.integration.test_server_cli import run_cli
from tests.liveserver import LiveServer, ServerProcess, run_live_server
from tests.pgcluster import PostgresCluster

CLAUDE_API = "/api/claude_code/team_memory"
HEARTBEAT = 0.2
WAIT = 10.0  # seconds an expected event may take (SQLite across processes: ~1 s)
QUIET = 1.0  # seconds of heartbeats only that show no event was sent
READ_TIMEOUT = httpx.Timeout(10.0)
MAX_FRAME_BYTES = 64_000


@dataclass(frozen=True)
class Frame:
    """One SSE frame: its lines, and its fields when it is an event."""

    lines: list[str]

    @property
    def is_keep_alive(self) -> bool:
        return self.lines == [": keep-alive"]

    @property
    def fields(self) -> dict[str, str]:
        pairs = [line.split(": ", 1) for line in self.lines]
        return {name: value for name, value in pairs}

    @property
    def version(self) -> int:
        data: dict[str, Any] = json.loads(self.fields["data"])
        assert self.fields["id"] == str(data["version"])
        assert self.fields["event"] == "commit"
        version: int = data["version"]
        return version

    @property
    def checksum(self) -> str:
        checksum: str = json.loads(self.fields["data"])["checksum"]
        return checksum


def event_lines(version: int, checksum: str) -> list[str]:
    """The exact lines of the event for one head."""
    return [
        f"id: {version}",
        "event: commit",
        f'data: {{"version": {version}, "checksum": "{checksum}"}}',
    ]


class Stream:
    """Frames of one open event stream, read from the raw bytes."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._chunks = response.iter_raw()
        self._buffer = b""

    def frame(self) -> Frame:
        """The next frame but `review` events (blocks at most the client's read timeout
        per read). The review setting each stream opens with (and its changes, none in
        this file) is tested in test_review_api.py."""
        while True:
            while b"\n\n" not in self._buffer:
                assert len(self._buffer) < MAX_FRAME_BYTES, "a frame that never ends"
                self._buffer += next(self._chunks)
            raw, self._buffer = self._buffer.split(b"\n\n", 1)
            assert b"\r" not in raw
            frame = Frame(raw.decode("utf-8").split("\n"))
            if frame.lines != ["event: review", 'data: {"on": false, "reviewer": false}']:
                return frame

    def event(self, within: float = WAIT) -> Frame:
        """The next event, skipping keep-alives; fails after `within` seconds."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            frame = self.frame()
            if not frame.is_keep_alive:
                return frame
        raise AssertionError(f"no event within {within} s")

    def quiet_for(self, seconds: float = QUIET) -> list[Frame]:
        """Every frame that arrives in the next `seconds` (at least one keep-alive)."""
        frames = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            frames.append(self.frame())
        return frames


@contextmanager
def open_stream(
    client: httpx.Client,
    repo: str = REPO,
    *,
    prefix: str = API,
    last_event_id: str | None = None,
) -> Iterator[Stream]:
    """An open stream (200 asserted); closed, from the client's side, on exit."""
    headers = {} if last_event_id is None else {"Last-Event-ID": last_event_id}
    with client.stream(
        "GET", f"{prefix}/events", params={"repo": repo}, headers=headers, timeout=READ_TIMEOUT
    ) as response:
        assert response.status_code == 200, response.read()
        yield Stream(response)


def put(client: httpx.Client, entries: dict[str, str], prefix: str = API) -> dict[str, Any]:
    response = client.put(prefix, params={"repo": REPO}, json={"entries": entries})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def live_settings(database_url: str, **overrides: Any) -> Settings:
    return Settings(database_url=database_url, events_heartbeat_seconds=HEARTBEAT, **overrides)


@pytest.fixture
def live(database_url: str) -> Iterator[LiveServer]:
    """A live server with fast heartbeats, on SQLite and on PostgreSQL."""
    with run_live_server(live_settings(database_url)) as server:
        yield server


@pytest.fixture
def live_sqlite(sqlite_database_url: str) -> Iterator[LiveServer]:
    """The same on SQLite only, for what does not depend on the backend."""
    with run_live_server(live_settings(sqlite_database_url)) as server:
        yield server


@pytest.fixture
def api(live: LiveServer) -> Iterator[httpx.Client]:
    with live.client(live.token("*", name="alice")) as client:
        yield client


class TestEvents:
    def test_head_first_then_one_event_per_commit(
        self, live: LiveServer, api: httpx.Client
    ) -> None:
        with open_stream(api) as stream, open_stream(api, "acme/other") as other:
            response = stream.response
            assert response.headers["content-type"] == "text/event-stream"
            assert response.headers["cache-control"] == "no-cache"
            assert response.headers["x-accel-buffering"] == "no"
            assert stream.frame().lines == event_lines(0, EMPTY_REPO_CHECKSUM)
            assert other.frame().lines == event_lines(0, EMPTY_REPO_CHECKSUM)

            first = put(api, {"a.md": "alpha\n", "b.md": "beta\n"})
            assert stream.event().lines == event_lines(1, first["checksum"])

            deleted = api.delete(API, params={"repo": REPO, "key": "b.md"})
            assert deleted.status_code == 200
            assert stream.event().lines == event_lines(2, deleted.json()["checksum"])

            restored = api.post(
                f"{API}/restore", params={"repo": REPO}, json={"key": "b.md", "version": 1}
            )
            assert restored.status_code == 200
            assert stream.event().lines == event_lines(3, restored.json()["checksum"])
            assert restored.json()["checksum"] == first["checksum"]

            # Nothing for a repo nobody wrote.
            assert all(frame.is_keep_alive for frame in other.quiet_for(QUIET))

    def test_no_event_for_a_write_that_commits_nothing(self, api: httpx.Client) -> None:
        first = put(api, {"a.md": "alpha\n"})
        with open_stream(api) as stream:
            assert stream.frame().lines == event_lines(1, first["checksum"])
            assert put(api, {"a.md": "alpha\n"})["version"] == 1
            stale = api.put(
                API,
                params={"repo": REPO},
                json={"entries": {"a.md": "other"}},
                headers={"If-Match": '"sha256:' + "0" * 64 + '"'},
            )
            assert stale.status_code == 412
            same = api.post(
                f"{API}/restore", params={"repo": REPO}, json={"key": "a.md", "version": 1}
            )
            assert same.status_code == 200
            assert same.json()["version"] == 1
            unknown = api.delete(API, params={"repo": REPO, "key": "nope.md"})
            assert unknown.status_code == 404
            frames = stream.quiet_for(QUIET)
            assert frames, "not even a keep-alive"
            assert all(frame.is_keep_alive for frame in frames), frames
            second = put(api, {"a.md": "changed\n"})
            assert stream.event().lines == event_lines(2, second["checksum"])

    def test_last_event_id(self, api: httpx.Client) -> None:
        put(api, {"a.md": "1"})
        second = put(api, {"a.md": "2"})
        # Equal to the current version: nothing until the next commit.
        with open_stream(api, last_event_id="2") as stream:
            assert stream.frame().is_keep_alive
            third = put(api, {"a.md": "3"})
            assert stream.event().lines == event_lines(3, third["checksum"])
        # Older: the head at once (one event for the newest version, not a replay).
        with open_stream(api, last_event_id="1") as stream:
            assert stream.frame().lines == event_lines(3, third["checksum"])
            assert all(frame.is_keep_alive for frame in stream.quiet_for(QUIET))
        # Newer than the server knows, or not a version: the head.
        for value in ("99", "abc", "", "-1", "1.5"):
            with open_stream(api, last_event_id=value) as stream:
                assert stream.frame().lines == event_lines(3, third["checksum"]), value
        assert second["version"] == 2

    def test_commits_in_a_burst_end_with_the_newest_version(self, api: httpx.Client) -> None:
        with open_stream(api) as stream:
            assert stream.frame().version == 0
            last = {}
            for index in range(10):
                last = put(api, {f"n{index}.md": "x"})
            seen: list[int] = []
            deadline = time.monotonic() + WAIT
            while (not seen or seen[-1] < 10) and time.monotonic() < deadline:
                seen.append(stream.event().version)
            assert seen[-1] == 10
            assert seen == sorted(set(seen)), "versions arrive in order, each at most once"
            assert last["version"] == 10


def commit_elsewhere(database_url: str, entries: dict[str, str]) -> str:
    """Commit through a store of its own, as another server process would; the checksum."""
    other = SqlStore(database_url)
    try:
        result = other.put(
            REPO, entries, if_match=None, base_checksums=None, max_entries=100, author="other"
        )
    finally:
        other.close()
    return result.head.checksum


class TestOtherWriters:
    def test_a_commit_by_another_process_reaches_the_stream(
        self, api: httpx.Client, database_url: str
    ) -> None:
        with open_stream(api) as stream:
            assert stream.frame().version == 0
            checksum = commit_elsewhere(database_url, {"a.md": "from elsewhere"})
            assert stream.event().lines == event_lines(1, checksum)
            checksum = commit_elsewhere(database_url, {"b.md": "again"})
            assert stream.event().lines == event_lines(2, checksum)

    @pytest.mark.postgres
    def test_the_listener_reconnects_and_misses_nothing(self, postgres_url: str) -> None:
        with (
            run_live_server(live_settings(postgres_url)) as live,
            live.client(live.token()) as client,
            open_stream(client) as stream,
        ):
            assert stream.frame().version == 0
            admin = SqlStore(postgres_url)
            try:
                with admin.engine.connect() as connection:
                    terminated: list[object] = []
                    deadline = time.monotonic() + WAIT
                    while not terminated and time.monotonic() < deadline:
                        terminated = list(
                            connection.execute(
                                text(
                                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                                    " WHERE application_name = :name"
                                    " AND datname = current_database()"
                                ),
                                {"name": LISTENER_NAME},
                            ).scalars()
                        )
                        connection.commit()
                        time.sleep(0.05)
                    assert terminated == [True]
            finally:
                admin.close()
            # Written while the listener is away: heard once it is back.
            checksum = commit_elsewhere(postgres_url, {"a.md": "while away"})
            assert stream.event().lines == event_lines(1, checksum)
            checksum = commit_elsewhere(postgres_url, {"a.md": "after"})
            assert stream.event().lines == event_lines(2, checksum)


def test_a_server_stopping_with_a_stream_open_leaves_nothing_running(database_url: str) -> None:
    before = set(threading.enumerate())
    with ExitStack() as outlives_the_server:
        with run_live_server(live_settings(database_url)) as server:
            client = outlives_the_server.enter_context(server.client(server.token()))
            stream = outlives_the_server.enter_context(open_stream(client))
            assert stream.frame().version == 0
            written = put(client, {"a.md": "x"})
            assert stream.event().lines == event_lines(1, written["checksum"])
            stopping = time.monotonic()
        assert time.monotonic() - stopping < SHUTDOWN_GRACE_SECONDS + 3
        with pytest.raises((httpx.TransportError, StopIteration)):
            stream.quiet_for(WAIT)
    deadline = time.monotonic() + WAIT
    while set(threading.enumerate()) - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not set(threading.enumerate()) - before


class TestHeartbeats:
    def test_idle_stream_gets_keep_alive_comments(self, live_sqlite: LiveServer) -> None:
        with live_sqlite.client(live_sqlite.token()) as client, open_stream(client) as stream:
            assert stream.frame().version == 0
            started = time.monotonic()
            beats = [stream.frame() for _ in range(4)]
            elapsed = time.monotonic() - started
            assert [frame.lines for frame in beats] == [[": keep-alive"]] * 4
            assert 4 * HEARTBEAT * 0.8 <= elapsed < 4 * HEARTBEAT + 3


class TestRefusals:
    """Errors are the usual JSON, before any stream starts."""

    def events(self, live: LiveServer, token: str | None, repo: str | None) -> httpx.Response:
        params = {} if repo is None else {"repo": repo}
        with live.client(token) as client:
            return client.get(f"{API}/events", params=params, timeout=READ_TIMEOUT)

    def test_no_or_unknown_token_is_401(self, live_sqlite: LiveServer) -> None:
        for token in (None, "mst_not_a_real_token"):
            response = self.events(live_sqlite, token, REPO)
            assert response.status_code == 401
            assert response.headers["content-type"] == "application/json"
            assert response.json()["error"]["type"] == "unauthorized"
            assert response.headers["WWW-Authenticate"].startswith("Bearer")

    def test_token_for_another_repo_is_403_and_read_only_may_watch(
        self, live_sqlite: LiveServer
    ) -> None:
        response = self.events(live_sqlite, live_sqlite.token("acme/other"), REPO)
        assert response.status_code == 403
        assert response.json()["error"]["type"] == "forbidden"
        reader = live_sqlite.token(REPO, read_only=True, name="reader")
        with live_sqlite.client(reader) as client, open_stream(client) as stream:
            assert stream.frame().version == 0

    def test_bad_or_missing_repo_is_400(self, live_sqlite: LiveServer) -> None:
        token = live_sqlite.token()
        for repo in [None, *BAD_REPOS.values()]:
            response = self.events(live_sqlite, token, repo)
            assert response.status_code == 400, repo
            assert response.json()["error"]["type"] == "invalid_request"

    def test_write_methods_are_not_allowed(self, live_sqlite: LiveServer) -> None:
        with live_sqlite.client(live_sqlite.token()) as client:
            response = client.post(f"{API}/events", params={"repo": REPO})
        assert response.status_code == 405
        assert response.json()["error"]["type"] == "method_not_allowed"


class TestStreamLimit:
    @pytest.fixture
    def limited(self, sqlite_database_url: str) -> Iterator[LiveServer]:
        # A long heartbeat: a freed slot must come from the disconnect, not a failed write.
        settings = Settings(
            database_url=sqlite_database_url, max_streams_per_token=2, events_heartbeat_seconds=30
        )
        with run_live_server(settings) as server:
            yield server

    def test_one_stream_too_many_is_429_and_a_closed_one_frees_its_slot(
        self, limited: LiveServer
    ) -> None:
        token = limited.token(name="busy")
        with limited.client(token) as client, ExitStack() as open_streams:
            # Held in a list: a dropped reader would close its connection.
            held = [open_streams.enter_context(open_stream(client)) for _ in range(2)]
            assert [stream.frame().version for stream in held] == [0, 0]
            refused = client.get(f"{API}/events", params={"repo": REPO}, timeout=READ_TIMEOUT)
            assert refused.status_code == 429
            assert refused.headers["Retry-After"] == "30"
            error = refused.json()["error"]
            assert error["type"] == "rate_limited"
            assert error["details"]["error_code"] == "too_many_streams"
            assert error["details"]["max_streams"] == 2
            assert open_gauge(client) == 2

            # Another token has its own slots; the same limit holds on the other prefix.
            with (
                limited.client(limited.token(name="other")) as other,
                open_stream(other, prefix=CLAUDE_API) as stream,
            ):
                assert stream.frame().version == 0
            refused = client.get(
                f"{CLAUDE_API}/events", params={"repo": REPO}, timeout=READ_TIMEOUT
            )
            assert refused.status_code == 429

            open_streams.close()
            deadline = time.monotonic() + 5
            while open_gauge(client) != 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert open_gauge(client) == 0
            with open_stream(client) as first, open_stream(client) as second:
                assert first.frame().version == 0
                assert second.frame().version == 0


def open_gauge(client: httpx.Client) -> float:
    """`memsync_event_streams` from the server's metrics."""
    text = client.get("/metrics").text
    match = re.search(r"^memsync_event_streams (\S+)$", text, re.MULTILINE)
    assert match, "no memsync_event_streams metric"
    return float(match.group(1))


class TestPrefixes:
    def test_both_prefixes_stream_and_hear_each_other(self, live_sqlite: LiveServer) -> None:
        with (
            live_sqlite.client(live_sqlite.token()) as client,
            open_stream(client, prefix=API) as ours,
            open_stream(client, prefix=CLAUDE_API) as claude,
        ):
            assert ours.frame().version == claude.frame().version == 0
            first = put(client, {"a.md": "x"}, prefix=CLAUDE_API)
            assert ours.event().lines == claude.event().lines == event_lines(1, first["checksum"])
            second = put(client, {"a.md": "y"}, prefix=API)
            assert ours.event().lines == claude.event().lines == event_lines(2, second["checksum"])

    def test_write_answers_and_hashes_view_offer_events(self, live_sqlite: LiveServer) -> None:
        with live_sqlite.client(live_sqlite.token()) as client:
            assert "events" in put(client, {"a.md": "x"})["supports"]
            hashes = client.get(API, params={"repo": REPO, "view": "hashes"})
            assert "events" in hashes.json()["supports"]


# -- several server processes ----------------------------------------------------------


def serve_env(database_url: str) -> dict[str, str]:
    return {
        "MEMSYNC_DATABASE_URL": database_url,
        "MEMSYNC_EVENTS_HEARTBEAT_SECONDS": str(HEARTBEAT),
    }


def cli_token(env: dict[str, str]) -> str:
    created = run_cli("token", "create", "--repo", "*", "--name", "watcher", env=env)
    assert created.returncode == 0, created.stderr
    return created.stdout.splitlines()[-1]


def client_of(server: ServerProcess, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=server.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30.0
    )


def assert_commits_cross(first: ServerProcess, second: ServerProcess, token: str) -> None:
    """A commit through either process reaches a stream on the other (and its own)."""
    with (
        client_of(first, token) as one,
        client_of(second, token) as two,
        open_stream(one) as on_one,
        open_stream(two) as on_two,
    ):
        assert on_one.frame().version == on_two.frame().version == 0
        written = put(one, {"a.md": "from one"})
        assert on_two.event().lines == event_lines(1, written["checksum"])
        assert on_one.event().lines == event_lines(1, written["checksum"])
        written = put(two, {"a.md": "from two"})
        assert on_one.event().lines == event_lines(2, written["checksum"])
        assert on_two.event().lines == event_lines(2, written["checksum"])
        deleted = one.delete(API, params={"repo": REPO, "key": "a.md"})
        assert deleted.status_code == 200
        assert on_two.event().lines == event_lines(3, deleted.json()["checksum"])


REVOKED_WITHIN = 3.5  # seconds: the token check runs every MEMSYNC_TOKEN_CACHE_SECONDS (2)


def assert_revocation_ends_streams(
    env: dict[str, str], servers: list[ServerProcess], token: str
) -> None:
    """`token revoke` in its own process ends the token's streams on every server within
    the cache window, frees their slots, and the access logs say so."""
    store = SqlStore(env["MEMSYNC_DATABASE_URL"])
    try:
        _, scraper = issue_token(store, repo_pattern="*", read_only=True, name="scraper")
    finally:
        store.close()
    with ExitStack() as stack:
        clients = [stack.enter_context(client_of(server, token)) for server in servers]
        streams = [stack.enter_context(open_stream(client)) for client in clients]
        assert all(stream.frame().version >= 0 for stream in streams)
        revoked = run_cli("token", "revoke", "watcher", env=env)
        assert revoked.returncode == 0, revoked.stderr
        since = time.monotonic()
        for stream in streams:
            with pytest.raises(StopIteration):  # the stream ends: a finished response
                stream.quiet_for(WAIT)
            assert time.monotonic() - since < REVOKED_WITHIN
        for server, client in zip(servers, clients, strict=True):
            with client_of(server, scraper) as metrics:
                assert open_gauge(metrics) == 0  # the slot is free
            refused = client.get(f"{API}/events", params={"repo": REPO}, timeout=READ_TIMEOUT)
            assert refused.status_code == 401


def assert_stream_lines(log: str, token: str) -> None:
    """A stream's open and end lines, and the refused reconnect named by its lookup id."""
    assert token not in log
    assert f"GET {API}/events 200 open repo={REPO} client=127.0.0.1 by=watcher" in log
    ended = re.search(
        rf"GET {API}/events 200 end (\d+\.\d)ms reason=token-revoked repo={REPO} "
        r"client=127.0.0.1 by=watcher$",
        log,
        re.MULTILINE,
    )
    assert ended, log[-3000:]
    assert float(ended.group(1)) > 0
    assert f"GET {API}/events 401 " in log
    assert f"by=?id:{token[4:16]}" in log


@pytest.mark.slow
def test_two_processes_sharing_one_sqlite_file(tmp_path: Path) -> None:
    env = serve_env(sqlite_url(tmp_path / "shared.sqlite3"))
    token = cli_token(env)
    with (
        ServerProcess(env, log_path=tmp_path / "one.log") as first,
        ServerProcess(env, log_path=tmp_path / "two.log") as second,
    ):
        assert_commits_cross(first, second, token)
        assert_revocation_ends_streams(env, [first, second], token)
    for log in ("one.log", "two.log"):
        assert_stream_lines((tmp_path / log).read_text(), token)


@pytest.mark.slow
@pytest.mark.postgres
def test_two_processes_sharing_one_postgresql(
    postgres_cluster: PostgresCluster, tmp_path: Path
) -> None:
    env = serve_env(postgres_cluster.create_database())
    token = cli_token(env)
    with (
        ServerProcess(env, log_path=tmp_path / "one.log") as first,
        ServerProcess(env, log_path=tmp_path / "two.log") as second,
    ):
        assert_commits_cross(first, second, token)
        assert_revocation_ends_streams(env, [first, second], token)
    for log in ("one.log", "two.log"):
        assert "Traceback" not in (tmp_path / log).read_text()
        assert_stream_lines((tmp_path / log).read_text(), token)


@pytest.mark.slow
@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_server_stops_promptly_with_a_stream_open(tmp_path: Path, signal_number: int) -> None:
    env = serve_env(sqlite_url(tmp_path / "memsync.sqlite3"))
    token = cli_token(env)
    with (
        ServerProcess(env, log_path=tmp_path / "server.log") as server,
        client_of(server, token) as client,
        open_stream(client) as stream,
    ):
        assert stream.frame().version == 0
        started = time.monotonic()
        server.process.send_signal(signal_number)
        server.process.wait(timeout=SHUTDOWN_GRACE_SECONDS + 5)
        assert time.monotonic() - started < SHUTDOWN_GRACE_SECONDS + 3
        # The stream ends with the server instead of hanging.
        with pytest.raises((httpx.TransportError, StopIteration)):
            stream.quiet_for(WAIT)
    log = (tmp_path / "server.log").read_text()
    assert "Finished server process" in log
    assert "Traceback" not in log
    assert token not in log
    assert f"GET {API}/events 200 open repo={REPO} client=127.0.0.1 by=watcher" in log
    assert re.search(rf"GET {API}/events 200 end \d+\.\dms reason=shutdown ", log), log
