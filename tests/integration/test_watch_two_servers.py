"""Two server processes on one PostgreSQL: a commit through either reaches a watcher on
the other within seconds, through the events stream (the poll is set far longer)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.users import make_user
from tests.integration.watchkit import WatchProcess, wait_until, watch_state
from tests.liveserver import ServerProcess, server_command
from tests.pgcluster import PostgresCluster

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture
def database_url(postgres_cluster: PostgresCluster) -> str:
    return postgres_cluster.create_database()


@pytest.fixture
def servers(database_url: str, tmp_path: Path) -> Iterator[list[ServerProcess]]:
    env = {"MEMSYNC_DATABASE_URL": database_url}
    with (
        ServerProcess(env, log_path=tmp_path / "one.log") as first,
        ServerProcess(env, log_path=tmp_path / "two.log") as second,
    ):
        yield [first, second]
    for log in ("one.log", "two.log"):
        assert "Traceback" not in (tmp_path / log).read_text()


def _token(database_url: str, name: str) -> str:
    created = subprocess.run(
        [*server_command(), "token", "create", "--repo", "*", "--name", name],
        env={**os.environ, "MEMSYNC_DATABASE_URL": database_url},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return created.stdout.splitlines()[-1]


def test_a_commit_through_either_server_reaches_a_watcher_on_the_other(
    servers: list[ServerProcess], database_url: str, tmp_path: Path
) -> None:
    first, second = servers
    alice = make_user("alice", tmp_path, first, _token(database_url, "alice"))
    bob = make_user("bob", tmp_path, second, _token(database_url, "bob"))
    watcher = WatchProcess(alice.env, alice.home, "--debounce", "0.3", "--poll-interval", "600")
    try:
        assert wait_until(lambda: (watch_state(alice) or {}).get("live") == "events"), watcher.log()
        for round_number in range(2):
            expected = f"bob's news, round {round_number}\n"
            started = time.monotonic()
            bob.write("news.md", expected)
            assert bob.run("push").returncode == 0

            def arrived(text: str = expected) -> bool:
                path = alice.team / "news.md"
                return path.exists() and path.read_text() == text

            assert wait_until(arrived, timeout=5), watcher.log()
            assert time.monotonic() - started < 5
        # And the other way: alice's edit goes up through her server, bob pulls it.
        alice.write("from-alice.md", "hello\n")
        assert wait_until(
            lambda: bob.run("pull").returncode == 0 and (bob.team / "from-alice.md").exists(),
            timeout=10,
        ), watcher.log()
        code, seconds = watcher.terminate()
        assert code == 0
        assert seconds < 3
    finally:
        watcher.kill()
