"""Integration fixtures: a real server on loopback over each storage backend."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from sync_server.config import Settings
from tests.liveserver import LiveServer, run_live_server

REPO = "acme/app"
API = "/v1/team_memory"


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
