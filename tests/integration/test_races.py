"""Concurrent conditional writes over HTTP: exactly one wins, on every backend.

Also with two separate server processes sharing one PostgreSQL, the deployment that
the protocol allows for several hosts.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections import Counter
from pathlib import Path

import httpx
import pytest

from memsync_protocol.checksums import entry_checksum
from tests.integration.conftest import API, REPO
from tests.liveserver import LiveServer, ServerProcess, server_command
from tests.pgcluster import PostgresCluster

WRITERS = 8


def race(
    base_urls: list[str], token: str, bodies: list[dict[str, object]], headers: dict[str, str]
) -> list[int]:
    """Send one PUT per body at the same moment (round-robin over servers)."""
    barrier = threading.Barrier(len(bodies))
    statuses: list[int] = [0] * len(bodies)

    def send(index: int) -> None:
        url = base_urls[index % len(base_urls)]
        with httpx.Client(base_url=url, timeout=60.0) as client:
            barrier.wait(timeout=30)
            response = client.put(
                API,
                params={"repo": REPO},
                json=bodies[index],
                headers={"Authorization": f"Bearer {token}", **headers},
            )
            statuses[index] = response.status_code

    threads = [threading.Thread(target=send, args=(index,)) for index in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    return statuses


def current(base_url: str, token: str) -> dict[str, object]:
    with httpx.Client(base_url=base_url, timeout=30.0) as client:
        response = client.get(
            API, params={"repo": REPO}, headers={"Authorization": f"Bearer {token}"}
        )
    response.raise_for_status()
    body: dict[str, object] = response.json()
    return body


def seed(base_url: str, token: str) -> str:
    with httpx.Client(base_url=base_url, timeout=30.0) as client:
        response = client.put(
            API,
            params={"repo": REPO},
            json={"entries": {"shared.md": "v0"}},
            headers={"Authorization": f"Bearer {token}"},
        )
    response.raise_for_status()
    return response.headers["ETag"]


def assert_one_winner(statuses: list[int], loser_status: int, base_url: str, token: str) -> None:
    assert Counter(statuses) == {200: 1, loser_status: WRITERS - 1}, statuses
    state = current(base_url, token)
    assert state["version"] == 2
    winner = next(index for index, status in enumerate(statuses) if status == 200)
    content = state["content"]
    assert isinstance(content, dict)
    assert content["entries"]["shared.md"] == f"writer {winner}"


class TestOneServer:
    def test_same_if_match_exactly_one_wins(self, server: LiveServer, token: str) -> None:
        etag = seed(server.base_url, token)
        bodies: list[dict[str, object]] = [
            {"entries": {"shared.md": f"writer {index}"}} for index in range(WRITERS)
        ]
        statuses = race([server.base_url], token, bodies, {"If-Match": etag})
        assert_one_winner(statuses, 412, server.base_url, token)

    def test_same_base_exactly_one_wins(self, server: LiveServer, token: str) -> None:
        seed(server.base_url, token)
        bodies: list[dict[str, object]] = [
            {
                "entries": {"shared.md": f"writer {index}"},
                "baseChecksums": {"shared.md": entry_checksum("v0")},
            }
            for index in range(WRITERS)
        ]
        statuses = race([server.base_url], token, bodies, {})
        assert_one_winner(statuses, 409, server.base_url, token)

    def test_different_keys_all_commit(self, server: LiveServer, token: str) -> None:
        seed(server.base_url, token)
        bodies: list[dict[str, object]] = [
            {"entries": {f"own-{index}.md": "x"}, "baseChecksums": {f"own-{index}.md": None}}
            for index in range(WRITERS)
        ]
        statuses = race([server.base_url], token, bodies, {})
        assert statuses == [200] * WRITERS
        state = current(server.base_url, token)
        assert state["version"] == 1 + WRITERS
        content = state["content"]
        assert isinstance(content, dict)
        assert len(content["entries"]) == 1 + WRITERS

    @pytest.mark.parametrize("seeded", [True, False], ids=["existing-repo", "new-repo"])
    def test_a_file_and_a_directory_of_the_same_name_never_both_win(
        self, server: LiveServer, token: str, seeded: bool
    ) -> None:
        if seeded:
            seed(server.base_url, token)
        keys = ["d", "d/n.md"]
        bodies: list[dict[str, object]] = [
            {"entries": {keys[index % 2]: f"writer {index}"}} for index in range(WRITERS)
        ]
        statuses = race([server.base_url], token, bodies, {})
        content = current(server.base_url, token)["content"]
        assert isinstance(content, dict)
        won = set(content["entries"]) - {"shared.md"}
        assert won in ({"d"}, {"d/n.md"}), content
        expected = [200 if keys[index % 2] in won else 409 for index in range(WRITERS)]
        assert statuses == expected


@pytest.mark.postgres
def test_two_processes_sharing_postgresql_exactly_one_wins(
    postgres_cluster: PostgresCluster, tmp_path: Path
) -> None:
    url = postgres_cluster.create_database()
    env = {"MEMSYNC_DATABASE_URL": url}
    token = subprocess.run(
        [*server_command(), "token", "create", "--repo", "*", "--name", "racer"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.splitlines()[-1]
    with (
        ServerProcess(env, log_path=tmp_path / "one.log") as first,
        ServerProcess(env, log_path=tmp_path / "two.log") as second,
    ):
        etag = seed(first.base_url, token)
        bodies: list[dict[str, object]] = [
            {"entries": {"shared.md": f"writer {index}"}} for index in range(WRITERS)
        ]
        statuses = race([first.base_url, second.base_url], token, bodies, {"If-Match": etag})
        assert_one_winner(statuses, 412, second.base_url, token)
        bodies = [
            {
                "entries": {"shared.md": f"again {index}"},
                "baseChecksums": {"shared.md": entry_checksum(f"writer {statuses.index(200)}")},
            }
            for index in range(WRITERS)
        ]
        second_round = race([first.base_url, second.base_url], token, bodies, {})
        assert Counter(second_round) == {200: 1, 409: WRITERS - 1}
        assert current(first.base_url, token)["version"] == 3
