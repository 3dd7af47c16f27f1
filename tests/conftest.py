"""Fixtures shared by every test: databases, stores, and a real PostgreSQL.

PostgreSQL tests use a throwaway cluster that this setup starts on 127.0.0.1. When the
binaries are missing they are skipped on a developer machine, but in CI
(`CI=true` or `MEMSYNC_REQUIRE_POSTGRES=1`) they fail instead: they must never be
silently skipped there.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from sync_server.config import sqlite_url
from sync_server.storage.sql import SqlStore
from tests.pgcluster import PostgresCluster, PostgresUnavailable

# The property tests assert what a key check answers, never how fast: Hypothesis's
# 200 ms per-example deadline only made them fail on a busy machine (speed is measured
# in bench/).
settings.register_profile("memsync", deadline=None)
settings.load_profile("memsync")


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """Under `-p no:xdist`, accept and ignore the `-n`/`--dist` that addopts passes.

    pyproject's addopts runs the suite on two workers (pytest-xdist); `-n 0` runs it
    serially in this process. Without this, `-p no:xdist` would fail on addopts'
    `-n 2` as an unknown argument.
    """
    if pluginmanager.has_plugin("xdist"):
        return
    group = parser.getgroup("xdist", "pytest-xdist is disabled (-p no:xdist)")
    # Lowercase short options are reserved for plugins; xdist itself uses _addoption.
    group._addoption("-n", dest="numprocesses", help="ignored: pytest-xdist is disabled")
    group.addoption("--dist", dest="dist", help="ignored: pytest-xdist is disabled")


def _postgres_required() -> bool:
    return os.environ.get("CI", "").lower() == "true" or bool(
        os.environ.get("MEMSYNC_REQUIRE_POSTGRES")
    )


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """One PostgreSQL server for the whole run, stopped at the end.

    Under pytest-xdist each worker is its own session, so each starts its own server:
    a fresh temp dir and a port the kernel chose (retried if another process took it
    first), so two workers never share one. Databases are per test anyway.

    Its data lives in a fresh system temp dir: pytest's own temp root is private to
    root, and the server runs as the `postgres` user when the tests run as root.
    """
    try:
        cluster = PostgresCluster.start()
    except PostgresUnavailable as error:
        if _postgres_required():
            pytest.fail(f"PostgreSQL is required here but could not start: {error}")
        pytest.skip(f"PostgreSQL not available: {error}")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def postgres_url(postgres_cluster: PostgresCluster) -> Iterator[str]:
    """A fresh, empty database on the shared cluster; dropped afterwards."""
    url = postgres_cluster.create_database()
    yield url
    postgres_cluster.drop_database(url.rsplit("/", 1)[1])


@pytest.fixture
def sqlite_database_url(tmp_path: Path) -> str:
    """A fresh SQLite database file in the test's own folder."""
    return sqlite_url(tmp_path / "memsync.sqlite3")


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each test using this runs once on SQLite and once on PostgreSQL."""
    if request.param == "sqlite":
        return sqlite_url(tmp_path / "memsync.sqlite3")
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def store(database_url: str) -> Iterator[SqlStore]:
    """A migrated store on each backend."""
    sql_store = SqlStore(database_url)
    sql_store.migrate()
    yield sql_store
    sql_store.close()
