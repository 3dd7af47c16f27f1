"""sync_server.service: the one after-commit step and the scope checks every route uses."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sync_server.auth import Principal
from sync_server.config import Settings, sqlite_url
from sync_server.errors import Forbidden
from sync_server.events import EventHub
from sync_server.metrics import Metrics
from sync_server.service import TeamMemory
from sync_server.storage.factory import open_store

REPO = "acme/app"


@pytest.fixture
def service(tmp_path: Path) -> Iterator[TeamMemory]:
    settings = Settings(database_url=sqlite_url(tmp_path / "memsync.sqlite3"))
    store = open_store(settings.database_url)
    store.migrate()
    metrics = Metrics()
    yield TeamMemory(store, settings, metrics, EventHub(store, settings, metrics))
    store.close()


def commits(service: TeamMemory) -> dict[str, float]:
    """`memsync_commits_total` by operation, as /metrics shows it."""
    return {
        sample.labels["op"]: sample.value
        for family in service.metrics.registry.collect()
        if family.name == "memsync_commits"
        for sample in family.samples
        if sample.name == "memsync_commits_total"
    }


def test_every_commit_is_counted_once_and_a_write_that_changes_nothing_not_at_all(
    service: TeamMemory,
) -> None:
    service.put(REPO, {"a.md": "one\n", "b.md": "two\n"}, author="alice")
    service.put(REPO, {"a.md": "one\n"}, author="alice")  # the same text: no new version
    assert commits(service) == {"put": 1}
    gone = service.delete(REPO, "b.md", author="alice")
    service.restore(REPO, "b.md", gone.head.version - 1, author="bob")
    service.restore(REPO, "b.md", gone.head.version - 1, author="bob")  # already that text
    # The web page's delete that edits an index alongside is one commit, counted as a delete.
    service.put(REPO, {"a.md": "edited\n"}, deletes=["b.md"], author="bob", operation="delete")
    assert commits(service) == {"put": 1, "delete": 2, "restore": 1}
    assert [commit.author for commit in service.log(REPO).commits] == [
        "bob",
        "bob",
        "alice",
        "alice",
    ]


def test_scope_and_access_decide_what_a_token_sees_and_changes(service: TeamMemory) -> None:
    service.put(REPO, {"a.md": "one\n"}, author="alice")
    service.put("acme/other", {"a.md": "one\n"}, author="alice")
    service.put("elsewhere/app", {"a.md": "one\n"}, author="alice")
    team = Principal(name="t", lookup_id="x", repo_pattern="acme/*", read_only=False)
    reader = Principal(name="r", lookup_id="y", repo_pattern=REPO, read_only=True)
    assert [r.repo for r in service.visible_repos(team)] == ["acme/app", "acme/other"]
    assert [r.repo for r in service.visible_repos(reader)] == [REPO]
    assert service.may_write(team, REPO)
    assert not service.may_write(team, "elsewhere/app")
    assert service.may_see(reader, REPO)
    assert not service.may_write(reader, REPO)
    assert not service.may_see(reader, "acme/other")
    # The API's answer to the same questions: a 403 that says which rule refused.
    with pytest.raises(Forbidden, match="may not access acme/other"):
        TeamMemory.require(reader, "acme/other", write=False)
    with pytest.raises(Forbidden, match="read-only"):
        TeamMemory.require(reader, REPO, write=True)
    TeamMemory.require(team, "acme/other", write=True)
