"""The token check's hot path (`Authenticator._known`) gives what the long way gives:
a revocation the cache has seen and an expiry are refused at once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sync_server.auth import Authenticator, issue_token
from sync_server.config import sqlite_url
from sync_server.errors import Unauthorized
from sync_server.storage.factory import open_store
from sync_server.storage.sql import SqlStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlStore]:
    opened = open_store(sqlite_url(tmp_path / "db.sqlite3"))
    opened.migrate()
    yield opened
    opened.close()


def test_a_revocation_the_cache_has_seen_is_refused_at_once(store: SqlStore) -> None:
    record, secret = issue_token(store, repo_pattern="*", name="alice")
    authenticator = Authenticator(store, cache_seconds=300)
    header = f"Bearer {secret}"
    assert authenticator.authenticate(header).name == "alice"
    assert authenticator.authenticate(f"bearer  {secret} ") == authenticator.authenticate(header)
    store.revoke_token("alice")
    assert authenticator.authenticate(header).name == "alice"  # cached for 300 s
    authenticator.refresh([record.lookup_id])  # as an event stream's check does
    with pytest.raises(Unauthorized, match="revoked"):
        authenticator.authenticate(header)


def test_a_revocation_reaches_a_cache_of_no_seconds_at_once(store: SqlStore) -> None:
    _, secret = issue_token(store, repo_pattern="*", name="alice")
    authenticator = Authenticator(store, cache_seconds=0)
    assert authenticator.authenticate(f"Bearer {secret}").name == "alice"
    store.revoke_token("alice")
    with pytest.raises(Unauthorized, match="revoked"):
        authenticator.authenticate(f"Bearer {secret}")


def test_an_accepted_token_is_refused_the_moment_it_expires(store: SqlStore) -> None:
    expires_at = datetime.now(UTC) + timedelta(seconds=0.3)
    _, secret = issue_token(store, repo_pattern="*", name="alice", expires_at=expires_at)
    authenticator = Authenticator(store, cache_seconds=300)
    assert authenticator.authenticate(f"Bearer {secret}").name == "alice"
    time.sleep(max(0.0, (expires_at - datetime.now(UTC)).total_seconds()) + 0.05)
    with pytest.raises(Unauthorized, match="expired"):
        authenticator.authenticate(f"Bearer {secret}")
