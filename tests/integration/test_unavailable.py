"""When the database goes away the server answers 503 JSON with Retry-After, not 500."""

from __future__ import annotations

import httpx
import pytest

from sync_server.config import Settings
from tests.integration.conftest import API, REPO
from tests.liveserver import run_live_server
from tests.pgcluster import PostgresCluster


@pytest.mark.postgres
def test_lost_database_gives_503_not_500(
    postgres_cluster: PostgresCluster,
) -> None:
    url = postgres_cluster.create_database()
    name = url.rsplit("/", 1)[1]
    settings = Settings(database_url=url, token_cache_seconds=0)
    with run_live_server(settings) as live:
        token = live.token()
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=live.base_url, headers=headers, timeout=30) as client:
            assert client.put(
                API, params={"repo": REPO}, json={"entries": {"a.md": "x"}}
            ).is_success
            postgres_cluster.drop_database(name)
            for response in (
                client.get("/readyz"),
                client.get(API, params={"repo": REPO}),
                client.put(API, params={"repo": REPO}, json={"entries": {"b.md": "y"}}),
            ):
                assert response.status_code == 503
                assert response.headers["Retry-After"] == "1"
                assert response.json()["error"]["type"] == "unavailable"
            assert client.get("/healthz").status_code == 200
