"""Who changed what (docs/protocol.md 3.5): the log, the deleted keys, comparing two
versions, and the access log, against a real server on each backend.

Two tokens with different names write, so every commit has one of two authors.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.integration.conftest import API, REPO
from tests.liveserver import LiveServer


@pytest.fixture
def bob(server: LiveServer) -> Iterator[httpx.Client]:
    """A second writer, whose token is named bob."""
    with server.client(server.token("*", name="bob")) as client:
        yield client


@pytest.fixture
def written(api: httpx.Client, bob: httpx.Client) -> httpx.Client:
    """v1 alice puts a, b; v2 bob deletes b; v3 alice restores b from v1; v4 bob puts c;
    v5 bob deletes a."""
    params = {"repo": REPO}
    steps = [
        api.put(API, params=params, json={"entries": {"a.md": "a1", "b.md": "b1"}}),
        bob.delete(API, params={**params, "key": "b.md"}),
        api.post(f"{API}/restore", params=params, json={"key": "b.md", "version": 1}),
        bob.put(API, params=params, json={"entries": {"c.md": "c1"}}),
        bob.delete(API, params={**params, "key": "a.md"}),
    ]
    assert [step.status_code for step in steps] == [200] * 5, [step.text for step in steps]
    assert {"log", "deleted", "history-compare"} <= set(steps[-1].json()["supports"])
    return api


def log(api: httpx.Client, **params: Any) -> httpx.Response:
    return api.get(f"{API}/log", params={"repo": REPO, **params})


def test_log_names_each_commit_with_its_author_and_ops(written: httpx.Client) -> None:
    answer = log(written)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["repo"], body["next_before"]) == (REPO, None)
    commits = body["commits"]
    assert [(c["version"], c["author"], c["keys"], c["key_count"]) for c in commits] == [
        (5, "bob", ["a.md"], 1),
        (4, "bob", ["c.md"], 1),
        (3, "alice", ["b.md"], 1),
        (2, "bob", ["b.md"], 1),
        (1, "alice", ["a.md", "b.md"], 2),
    ]
    assert [c["ops"] for c in commits[2:]] == [
        {"put": 0, "delete": 0, "restore": 1},
        {"put": 0, "delete": 1, "restore": 0},
        {"put": 2, "delete": 0, "restore": 0},
    ]
    assert all(c["at"].endswith("Z") and len(c["at"]) == 20 for c in commits)


def test_log_pages_and_filters(written: httpx.Client) -> None:
    pages: list[list[int]] = []
    params: dict[str, Any] = {"limit": 2}
    while True:
        body = log(written, **params).json()
        pages.append([c["version"] for c in body["commits"]])
        if body["next_before"] is None:
            break
        params["before"] = body["next_before"]
    assert pages == [[5, 4], [3, 2], [1]]

    def versions(**filters: Any) -> list[int]:
        return [c["version"] for c in log(written, **filters).json()["commits"]]

    assert versions(author="alice") == [3, 1]
    assert versions(key="b.md") == [3, 2, 1]
    first = log(written).json()["commits"][-1]["at"]
    assert versions(since=first) == [5, 4, 3, 2, 1]
    assert versions(since=first.replace("Z", "+00:00"), author="bob", key="c.md") == [4]
    assert versions(since="2999-01-01T00:00:00-05:00") == []


def test_deleted_keys_name_what_undo_restores(written: httpx.Client) -> None:
    answer = written.get(f"{API}/deleted", params={"repo": REPO})
    assert answer.status_code == 200, answer.text
    (gone,) = answer.json()["deleted"]  # b was deleted, but restored since
    assert {k: gone[k] for k in ("key", "version", "author", "last_version")} == {
        "key": "a.md",
        "version": 5,
        "author": "bob",
        "last_version": 1,
    }
    undo = written.post(f"{API}/restore", params={"repo": REPO}, json={"key": "a.md", "version": 1})
    assert undo.status_code == 200, undo.text
    assert written.get(f"{API}/deleted", params={"repo": REPO}).json()["deleted"] == []


def test_history_compares_two_versions(written: httpx.Client) -> None:
    params = {"repo": REPO, "key": "b.md"}
    answer = written.get(f"{API}/history", params={**params, "version": 3, "compare": 2})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["version"], body["op"], body["content"], body["author"]) == (
        3,
        "restore",
        "b1",
        "alice",
    )
    compared = body["compare"]
    assert (compared["version"], compared["op"], compared["content"]) == (2, "delete", None)
    assert set(compared) == {"version", "checksum", "op", "author", "at", "content"}
    unknown = written.get(f"{API}/history", params={**params, "version": 3, "compare": 4})
    assert unknown.status_code == 404
    assert unknown.json()["error"]["details"]["error_code"] == "not_found"
    alone = written.get(f"{API}/history", params={**params, "compare": 2})
    assert alone.status_code == 400


BAD_LOG_QUERIES: list[dict[str, Any]] = [
    {"limit": 0},
    {"limit": 201},
    {"limit": "ten"},
    {"before": 0},
    {"before": 2**63},
    {"since": "yesterday"},
    {"since": "2026-12-01T10:00:00"},  # no time zone
    {"since": "0001-01-01T00:00:00+01:00"},  # before year 1 in UTC
    {"since": "1700000000"},
    {"author": "a\x00b"},
    {"key": "../x.md"},
]


def test_bad_log_queries_are_400(written: httpx.Client) -> None:
    for query in BAD_LOG_QUERIES:
        answer = log(written, **query)
        assert answer.status_code == 400, (query, answer.text)
        assert answer.json()["error"]["type"] == "invalid_request", query


def test_unknown_repo_is_404_and_scope_is_checked(server: LiveServer, api: httpx.Client) -> None:
    for path in ("/log", "/deleted"):
        answer = api.get(f"{API}{path}", params={"repo": "acme/never"})
        assert answer.status_code == 404, answer.text
        assert answer.json()["error"]["details"]["error_code"] == "no_team_memory"
    with server.client(server.token("other/*", name="outsider")) as outsider:
        for path in ("/log", "/deleted"):
            assert outsider.get(f"{API}{path}", params={"repo": REPO}).status_code == 403
    assert httpx.get(f"{server.base_url}{API}/log", params={"repo": REPO}).status_code == 401


def test_access_log_names_repo_and_client_not_token(
    server: LiveServer, token: str, api: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="memsync.access"):
        log(api, repo="Acme/Widgets", author="alice")
        # The record is written after the answer is sent: one more round trip orders it.
        api.get("/healthz")
    record = next(r for r in caplog.records if r.name == "memsync.access")
    fields = record.__dict__
    assert (fields["path"], fields["repo"], fields["client"]) == (
        f"{API}/log",
        "acme/widgets",
        "127.0.0.1",
    )
    message = record.getMessage()
    assert "repo=acme/widgets client=127.0.0.1 by=alice" in message
    assert token not in message
    assert "author" not in message
