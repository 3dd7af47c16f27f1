"""Integration fixtures: a real server on loopback over each storage backend."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sync_server.config import Settings
from tests.integration.users import REPO, User, make_user
from tests.integration.watchkit import WatchProcess
from tests.liveserver import LiveServer, run_live_server

API = "/v1/team_memory"
__all__ = ["API", "REPO"]


@pytest.fixture
def server(database_url: str) -> Iterator[LiveServer]:
    """A live server on SQLite, and again on PostgreSQL."""
    with run_live_server(Settings(database_url=database_url)) as live:
        yield live


@pytest.fixture
def token(server: LiveServer) -> str:
    """A read-write token for every repo."""
    return server.token("*", name="alice")


@pytest.fixture
def api(server: LiveServer, token: str) -> Iterator[httpx.Client]:
    """An authenticated client of the live server."""
    with server.client(token) as client:
        yield client


@pytest.fixture
def live(sqlite_database_url: str) -> Iterator[LiveServer]:
    """A live server on SQLite, for tests of the client's behaviour."""
    with run_live_server(Settings(database_url=sqlite_database_url)) as server:
        yield server


@pytest.fixture
def alice(live: LiveServer, tmp_path: Path) -> User:
    """A developer with her own HOME and team dir, on `live`."""
    return make_user("alice", tmp_path, live, live.token(name="alice"))


@pytest.fixture
def bob(live: LiveServer, tmp_path: Path) -> User:
    """Her teammate, on the same server and repo."""
    return make_user("bob", tmp_path, live, live.token(name="bob"))


@pytest.fixture
def watchers() -> Iterator[list[WatchProcess]]:
    """`memsync watch` processes a test starts; each is killed at teardown."""
    started: list[WatchProcess] = []
    yield started
    for process in started:
        process.kill()


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A loopback server that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        for connection in accepted:
            connection.close()
        listener.close()
