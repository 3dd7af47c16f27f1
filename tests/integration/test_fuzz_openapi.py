from __future__ import annotations

from collections.abc import Iterator
import schemathesis
import pytest
from hypothesis import settings, Phase, HealthCheck
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance
from sync_server.config import Settings
from tests.liveserver import run_live_server, LiveServer


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    from sync_server.config import sqlite_url
    url = sqlite_url(tmp_path_factory.mktemp("fuzz") / "m.sqlite3")
    with run_live_server(Settings(database_url=url, rate_limit_burst=0)) as server:
        yield server


@pytest.fixture
def api_schema(live: LiveServer):
    token = live.token("*")
    schema = schemathesis.openapi.from_url(live.base_url + "/openapi.json")
    schema.config.update(headers={"Authorization": f"Bearer {token}"}, base_url=live.base_url)
    return schema


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=25, deadline=None, database=None, phases=[Phase.explicit, Phase.generate])
def test_api(case) -> None:
    case.call_and_validate(checks=[not_a_server_error, response_schema_conformance])
