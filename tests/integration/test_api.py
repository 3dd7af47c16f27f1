"""The wire protocol of docs/protocol.md section 3, against a real server on loopback.

Each test runs on SQLite and on PostgreSQL, at both API prefixes where it matters.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from typing import Any

import httpx
import pytest

from memsync_protocol.checksums import entry_checksum, repo_checksum
from tests.integration.conftest import API, REPO
from tests.liveserver import LiveServer

ALIAS = "/api/claude_code/team_memory"


def put(
    api: httpx.Client,
    entries: dict[str, str],
    *,
    prefix: str = API,
    repo: str = REPO,
    headers: dict[str, str] | None = None,
    base: dict[str, str | None] | None = None,
) -> httpx.Response:
    body: dict[str, Any] = {"entries": entries}
    if base is not None:
        body["baseChecksums"] = base
    return api.put(prefix, params={"repo": repo}, json=body, headers=headers or {})


def get(api: httpx.Client, *, prefix: str = API, repo: str = REPO, **params: Any) -> httpx.Response:
    return api.get(prefix, params={"repo": repo, **params})


def expected_etag(entries: dict[str, str]) -> str:
    return repo_checksum({key: entry_checksum(text) for key, text in entries.items()})


class TestFullGet:
    @pytest.mark.parametrize("prefix", [API, ALIAS])
    @pytest.mark.parametrize(
        "params", [{}, {"view": "hashes"}, {"since": 0}, {"since": 3}], ids=str
    )
    def test_never_written_repo_is_404_no_team_memory(
        self, api: httpx.Client, prefix: str, params: dict[str, Any]
    ) -> None:
        response = get(api, prefix=prefix, **params)
        assert response.status_code == 404
        error = response.json()["error"]
        assert error["type"] == "not_found"
        assert error["details"]["error_code"] == "no_team_memory"
        assert REPO in error["message"]

    def test_other_404s_are_not_no_team_memory(self, api: httpx.Client) -> None:
        unknown_path = api.get(f"{API}/nope", params={"repo": REPO})
        assert unknown_path.status_code == 404
        assert unknown_path.json()["error"]["details"]["error_code"] == "not_found"
        put(api, {"a.md": "1"})
        unknown_key = api.get(f"{API}/history", params={"repo": REPO, "key": "x.md"})
        assert unknown_key.status_code == 404
        assert unknown_key.json()["error"]["details"]["error_code"] == "not_found"

    def test_repo_emptied_by_deletes_is_200_not_404(self, api: httpx.Client) -> None:
        put(api, {"a.md": "1"})
        api.delete(API, params={"repo": REPO, "key": "a.md"})
        for params in ({}, {"view": "hashes"}, {"since": 0}):
            assert get(api, **params).status_code == 200
        assert get(api).json()["content"]["entries"] == {}

    @pytest.mark.parametrize("prefix", [API, ALIAS])
    def test_put_then_get_returns_entries_checksums_and_etag(
        self, api: httpx.Client, prefix: str
    ) -> None:
        entries = {"decisions/db.md": "Use PostgreSQL.\n", "a.md": "été 🌞\n"}
        written = put(api, entries, prefix=prefix)
        assert written.status_code == 200
        response = get(api, prefix=prefix)
        assert response.status_code == 200
        body = response.json()
        checksum = expected_etag(entries)
        assert response.headers["ETag"] == f'"{checksum}"'
        assert body["checksum"] == checksum
        # Every answer that carries the repo checksum names its definition.
        hashes, delta = get(api, prefix=prefix, view="hashes"), get(api, prefix=prefix, since=0)
        for answer in (written.json(), body, hashes.json(), delta.json()):
            assert answer["checksum"] == checksum
            assert answer["checksumVersion"] == 2
        assert body["repo"] == REPO
        assert body["version"] == 1
        assert body["organizationId"] == "memsync"
        assert body["lastModified"].endswith("Z")
        assert body["content"]["entries"] == entries
        assert body["content"]["entryChecksums"] == {
            key: "sha256:" + hashlib.sha256(text.encode()).hexdigest()
            for key, text in entries.items()
        }

    def test_both_prefixes_see_the_same_data(self, api: httpx.Client) -> None:
        put(api, {"k.md": "one"}, prefix=ALIAS)
        assert get(api, prefix=API).json()["content"]["entries"] == {"k.md": "one"}

    def test_if_none_match_gives_304_with_etag_and_no_body(self, api: httpx.Client) -> None:
        etag = put(api, {"a.md": "x"}).headers["ETag"]
        response = api.get(API, params={"repo": REPO}, headers={"If-None-Match": etag})
        assert response.status_code == 304
        assert response.headers["ETag"] == etag
        assert response.content == b""
        stale = api.get(
            API, params={"repo": REPO}, headers={"If-None-Match": '"sha256:' + "0" * 64 + '"'}
        )
        assert stale.status_code == 200

    def test_repo_name_is_case_insensitive(self, api: httpx.Client) -> None:
        put(api, {"a.md": "x"}, repo="Acme/App")
        assert get(api, repo="acme/app").json()["content"]["entries"] == {"a.md": "x"}

    def test_two_servers_with_same_entries_give_same_etag(
        self, api: httpx.Client, sqlite_database_url: str
    ) -> None:
        from sync_server.config import Settings
        from tests.liveserver import run_live_server

        entries = {f"n{index}.md": f"note {index}" for index in range(5)}
        put(api, {key: entries[key] for key in list(entries)[:2]})
        put(api, {key: entries[key] for key in list(entries)[2:]})
        settings = Settings(database_url=sqlite_database_url)
        with run_live_server(settings) as other, other.client(other.token()) as other_api:
            put(other_api, dict(reversed(entries.items())))
            assert get(other_api).headers["ETag"] == get(api).headers["ETag"]


class TestHashesAndSince:
    def test_hashes_view_has_no_bodies_and_lists_supports(self, api: httpx.Client) -> None:
        put(api, {"a.md": "x", "b.md": "y"})
        body = get(api, view="hashes").json()
        assert set(body["entryChecksums"]) == {"a.md", "b.md"}
        assert "content" not in body
        assert "entries" not in body
        assert {"since", "base-precondition", "history"} <= set(body["supports"])

    def test_since_returns_only_changes_and_deletions(self, api: httpx.Client) -> None:
        put(api, {"a.md": "1", "b.md": "1", "c.md": "1"})
        version = get(api).json()["version"]
        put(api, {"a.md": "2"})
        api.delete(API, params={"repo": REPO, "key": "b.md"})
        body = get(api, since=version).json()
        assert body["entries"] == {"a.md": "2"}
        assert body["entryChecksums"] == {"a.md": entry_checksum("2")}
        assert body["deleted"] == ["b.md"]
        assert body["version"] == version + 2

    def test_since_current_version_is_empty(self, api: httpx.Client) -> None:
        version = put(api, {"a.md": "1"}).json()["version"]
        body = get(api, since=version).json()
        assert body["entries"] == {}
        assert body["deleted"] == []

    def test_since_newer_than_current_is_410(self, api: httpx.Client) -> None:
        version = put(api, {"a.md": "1"}).json()["version"]
        response = get(api, since=version + 1)
        assert response.status_code == 410
        assert response.json()["error"]["type"] == "gone"


class TestPut:
    def test_upsert_keeps_keys_not_in_body(self, api: httpx.Client) -> None:
        put(api, {"a.md": "1", "b.md": "1"})
        result = put(api, {"b.md": "2", "c.md": "3"}).json()
        assert result["updatedKeys"] == ["b.md", "c.md"]
        assert result["entryCount"] == 3
        assert get(api).json()["content"]["entries"] == {"a.md": "1", "b.md": "2", "c.md": "3"}

    def test_noop_put_keeps_checksum_and_version(self, api: httpx.Client) -> None:
        first = put(api, {"a.md": "1"}).json()
        again = put(api, {"a.md": "1"})
        assert again.status_code == 200
        assert again.json()["version"] == first["version"]
        assert again.json()["checksum"] == first["checksum"]
        assert again.json()["updatedKeys"] == []

    def test_if_match_mismatch_is_412_with_current_checksum(self, api: httpx.Client) -> None:
        current = put(api, {"a.md": "1"}).json()["checksum"]
        response = put(api, {"a.md": "2"}, headers={"If-Match": '"sha256:' + "f" * 64 + '"'})
        assert response.status_code == 412
        assert response.json()["checksum"] == current
        assert response.json()["error"]["type"] == "precondition_failed"
        assert get(api).json()["content"]["entries"] == {"a.md": "1"}

    def test_if_match_current_etag_applies(self, api: httpx.Client) -> None:
        etag = put(api, {"a.md": "1"}).headers["ETag"]
        response = put(api, {"a.md": "2"}, headers={"If-Match": etag})
        assert response.status_code == 200
        assert response.headers["ETag"] == f'"{expected_etag({"a.md": "2"})}"'

    def test_stale_base_is_409_listing_conflicts_and_writes_nothing(
        self, api: httpx.Client
    ) -> None:
        put(api, {"a.md": "teammate", "b.md": "1"})
        response = put(
            api,
            {"a.md": "mine", "b.md": "2", "new.md": "n"},
            base={"a.md": entry_checksum("old"), "b.md": entry_checksum("1"), "new.md": None},
        )
        assert response.status_code == 409
        details = response.json()["error"]["details"]
        assert details["error_code"] == "stale_base"
        assert details["conflicts"] == [
            {"key": "a.md", "serverChecksum": entry_checksum("teammate")}
        ]
        assert get(api).json()["content"]["entries"] == {"a.md": "teammate", "b.md": "1"}

    def test_matching_bases_apply(self, api: httpx.Client) -> None:
        put(api, {"a.md": "1"})
        response = put(
            api, {"a.md": "2", "new.md": "n"}, base={"a.md": entry_checksum("1"), "new.md": None}
        )
        assert response.status_code == 200
        assert response.json()["updatedKeys"] == ["a.md", "new.md"]

    def test_null_base_refuses_existing_key(self, api: httpx.Client) -> None:
        put(api, {"a.md": "1"})
        response = put(api, {"a.md": "2"}, base={"a.md": None})
        assert response.status_code == 409
        assert response.json()["error"]["details"]["conflicts"][0]["key"] == "a.md"


class TestPathClash:
    @pytest.mark.parametrize("prefix", [API, ALIAS])
    def test_file_under_a_file_is_409_naming_both_keys(
        self, api: httpx.Client, prefix: str
    ) -> None:
        put(api, {"d": "a file", "notes/a.md": "a"}, prefix=prefix)
        before = get(api)
        response = put(api, {"d/n.md": "under it", "notes": "over a directory", "ok.md": "o"})
        assert response.status_code == 409
        error = response.json()["error"]
        assert error["type"] == "conflict"
        assert error["details"] == {
            "error_code": "path_clash",
            "clashes": [
                {"key": "d/n.md", "clashesWith": "d"},
                {"key": "notes", "clashesWith": "notes/a.md"},
            ],
            "keys": ["d/n.md", "notes"],
        }
        after = get(api)
        assert (after.headers["ETag"], after.json()) == (before.headers["ETag"], before.json())
        retried = put(api, {"ok.md": "o"}, prefix=prefix)
        assert retried.status_code == 200

    def test_clash_within_one_put_on_a_new_repo_writes_nothing(self, api: httpx.Client) -> None:
        response = put(api, {"a/b": "file", "a/b/c/d.md": "deeper"})
        assert response.status_code == 409
        assert response.json()["error"]["details"]["keys"] == ["a/b", "a/b/c/d.md"]
        assert get(api).json()["error"]["details"]["error_code"] == "no_team_memory"

    @pytest.mark.parametrize("prefix", [API, ALIAS])
    def test_restore_over_a_live_directory_is_409(self, api: httpx.Client, prefix: str) -> None:
        put(api, {"d": "a file"})
        api.delete(API, params={"repo": REPO, "key": "d"})
        put(api, {"d/n.md": "now a directory"})
        before = get(api).json()
        response = api.post(
            f"{prefix}/restore", params={"repo": REPO}, json={"key": "d", "version": 1}
        )
        assert response.status_code == 409
        assert response.json()["error"]["details"] == {
            "error_code": "path_clash",
            "clashes": [{"key": "d", "clashesWith": "d/n.md"}],
            "keys": ["d"],
        }
        assert get(api).json() == before

    def test_the_published_schema_documents_the_409s(self, api: httpx.Client) -> None:
        paths = api.get("/openapi.json").json()["paths"]
        assert "409" in paths[API]["put"]["responses"]
        assert paths[API]["put"]["responses"]["422"]["description"] == (
            "Drops a live note's index line"
        )
        assert "409" in paths[f"{API}/restore"]["post"]["responses"]


class TestDeleteHistoryRestore:
    def test_delete_then_history_then_restore(self, api: httpx.Client) -> None:
        put(api, {"a.md": "first"})
        put(api, {"a.md": "second"})
        deleted = api.delete(API, params={"repo": REPO, "key": "a.md"})
        assert deleted.status_code == 200
        assert get(api).json()["content"]["entries"] == {}
        history = api.get(f"{API}/history", params={"repo": REPO, "key": "a.md"}).json()
        assert [item["op"] for item in history] == ["put", "put", "delete"]
        assert history[0]["author"] == "alice"
        assert history[2]["checksum"] is None
        first = api.get(
            f"{API}/history", params={"repo": REPO, "key": "a.md", "version": history[0]["version"]}
        ).json()
        assert first["content"] == "first"
        restored = api.post(
            f"{API}/restore", params={"repo": REPO}, json={"key": "a.md", "version": 1}
        )
        assert restored.status_code == 200
        assert restored.json()["version"] == 4
        assert get(api).json()["content"]["entries"] == {"a.md": "first"}
        ops = [
            item["op"]
            for item in api.get(f"{API}/history", params={"repo": REPO, "key": "a.md"}).json()
        ]
        assert ops[-1] == "restore"

    def test_delete_unknown_key_is_404(self, api: httpx.Client) -> None:
        put(api, {"a.md": "1"})
        response = api.delete(API, params={"repo": REPO, "key": "nope.md"})
        assert response.status_code == 404

    def test_delete_with_stale_if_match_is_412(self, api: httpx.Client) -> None:
        put(api, {"a.md": "1"})
        response = api.delete(
            API,
            params={"repo": REPO, "key": "a.md"},
            headers={"If-Match": '"sha256:' + "0" * 64 + '"'},
        )
        assert response.status_code == 412
        assert get(api).json()["content"]["entries"] == {"a.md": "1"}

    def test_history_of_unknown_key_is_404(self, api: httpx.Client) -> None:
        put(api, {"a.md": "1"})
        assert api.get(f"{API}/history", params={"repo": REPO, "key": "x.md"}).status_code == 404
        assert (
            api.get(
                f"{API}/history", params={"repo": REPO, "key": "a.md", "version": 9}
            ).status_code
            == 404
        )


class TestAuth:
    def test_missing_and_unknown_tokens_are_401_with_challenge(self, server: LiveServer) -> None:
        for headers in (
            {},
            {"Authorization": "Bearer mst_" + "A" * 42},
            {"Authorization": "Basic x"},
        ):
            with server.client() as client:
                response = client.get(API, params={"repo": REPO}, headers=headers)
            assert response.status_code == 401
            assert response.headers["WWW-Authenticate"].startswith("Bearer")
            assert response.json()["error"]["type"] == "unauthorized"

    def test_token_scoped_to_other_repo_is_403(self, server: LiveServer) -> None:
        with server.client(server.token("other/*")) as client:
            response = client.get(API, params={"repo": REPO})
        assert response.status_code == 403

    def test_owner_wildcard_reaches_all_repos_of_owner(self, server: LiveServer) -> None:
        with server.client(server.token("acme/*")) as client:
            assert put(client, {"a.md": "x"}, repo="acme/one").status_code == 200
            assert put(client, {"a.md": "x"}, repo="umbrella/one").status_code == 403

    def test_read_only_token_reads_but_cannot_write(
        self, server: LiveServer, api: httpx.Client
    ) -> None:
        put(api, {"a.md": "x"})
        with server.client(server.token(REPO, read_only=True)) as reader:
            assert get(reader).status_code == 200
            assert put(reader, {"a.md": "y"}).status_code == 403
            assert reader.delete(API, params={"repo": REPO, "key": "a.md"}).status_code == 403
            restore = reader.post(
                f"{API}/restore", params={"repo": REPO}, json={"key": "a.md", "version": 1}
            )
            assert restore.status_code == 403
        assert get(api).json()["content"]["entries"] == {"a.md": "x"}

    def test_revoked_token_is_refused(self, sqlite_database_url: str) -> None:
        from sync_server.config import Settings
        from tests.liveserver import run_live_server

        settings = Settings(database_url=sqlite_database_url, token_cache_seconds=0)
        with run_live_server(settings) as live:
            secret = live.token(name="leaver")
            with live.client(secret) as client:
                assert put(client, {"a.md": "x"}).status_code == 200
                assert live.store.revoke_token("leaver") == 1
                assert get(client).status_code == 401

    def test_tokens_are_stored_only_as_hashes(self, server: LiveServer) -> None:
        secret = server.token(name="hashed")
        record = next(item for item in server.store.list_tokens() if item.name == "hashed")
        assert secret not in repr(record)
        assert record.secret_hash == hashlib.sha256(secret.encode()).hexdigest()


class TestOperations:
    def test_a_database_fault_nobody_expected_is_a_json_500_and_the_next_write_works(
        self, sqlite_database_url: str
    ) -> None:
        from sync_server.config import Settings
        from sync_server.storage.sql_base import sqlite_file
        from tests.liveserver import run_live_server

        with run_live_server(Settings(database_url=sqlite_database_url)) as live:
            with live.client(live.token(name="alice")) as client:
                assert put(client, {"a.md": "one\n"}).status_code == 200
                path = sqlite_file(sqlite_database_url)
                assert path is not None
                database = sqlite3.connect(path, isolation_level=None)
                database.execute(
                    "CREATE TRIGGER refuse BEFORE UPDATE ON entries"
                    " BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END"
                )
                answer = put(client, {"a.md": "two\n"})
                assert answer.status_code == 500
                assert answer.json()["error"]["message"] == "internal error"
                database.execute("DROP TRIGGER refuse")
                database.close()
            with live.client(live.token(name="bob")) as client:
                assert put(client, {"a.md": "two\n"}).status_code == 200
                assert get(client).json()["content"]["entries"] == {"a.md": "two\n"}

    def test_health_and_ready_need_no_token(self, server: LiveServer) -> None:
        with server.client() as client:
            assert client.get("/healthz").json() == {"status": "ok"}
            assert client.get("/readyz").json() == {"status": "ready"}

    def test_token_endpoint_says_what_the_token_may_do(self, server: LiveServer) -> None:
        secret = server.token("acme/*", read_only=True, name="ci-bot")
        with server.client(secret) as client:
            answer = client.get("/v1/token")
        assert answer.status_code == 200
        assert answer.json() == {
            "name": "ci-bot",
            "id": secret[4:10],
            "repos": "acme/*",
            "access": "read-only",
            "expiresAt": None,
            "reviewer": False,
            "person": None,  # no --person: the token is no person's (issue 37)
        }
        assert secret not in answer.text
        with server.client("mst_" + "x" * 42) as client:
            refused = client.get("/v1/token")
        assert refused.status_code == 401
        assert refused.json()["error"]["type"] == "unauthorized"

    def test_metrics_count_requests_by_route(self, api: httpx.Client) -> None:
        put(api, {"a.md": "x"})
        get(api)
        text = api.get("/metrics").text
        assert 'memsync_requests_total{method="PUT",route="/v1/team_memory",status="200"}' in text
        assert "memsync_request_seconds_bucket" in text
        assert "a.md" not in text

    def test_rate_limit_answers_429_with_retry_after(self, sqlite_database_url: str) -> None:
        from sync_server.config import Settings
        from tests.liveserver import run_live_server

        settings = Settings(
            database_url=sqlite_database_url, rate_limit_burst=5, rate_limit_per_second=0.5
        )
        with run_live_server(settings) as live, live.client(live.token()) as client:
            statuses = [get(client).status_code for _ in range(8)]
            assert statuses[:5] == [404] * 5
            limited = get(client)
            assert limited.status_code == 429
            assert int(limited.headers["Retry-After"]) >= 1
            assert limited.json()["error"]["type"] == "rate_limited"
            # Another token has its own bucket.
            with live.client(live.token(name="other")) as other:
                assert get(other).status_code == 404


def test_a_missing_repo_is_reported_once(api: httpx.Client) -> None:
    response = api.get(API)
    assert response.status_code == 400
    problems = response.json()["error"]["details"]["problems"]
    assert problems == [{"loc": ["query", "repo"], "message": "Field required", "type": "missing"}]


# Each step is (entries or a whole body, headers), sent to a repo through the fast PUT
# and to a twin repo with the same history through the route.
_NOTE_SHA = entry_checksum("one\n")
_EDGE_STEPS: list[tuple[dict[str, Any], dict[str, str]]] = [
    ({"entries": {}}, {}),
    ({"entries": {"a.md": "one\n"}}, {}),
    ({"entries": {"a.md": "one\n"}}, {}),  # unchanged
    ({"entries": {"a.md": "two\n"}}, {"If-Match": '"sha256:' + "0" * 64 + '"'}),
    ({"entries": {"a.md": "two\n"}}, {"If-Match": "*"}),
    ({"entries": {"a.md": "three\n"}, "baseChecksums": {"a.md": _NOTE_SHA}}, {}),
    ({"entries": {"a.md": "x\n"}, "baseChecksums": {"a.md": "not-a-checksum"}}, {}),
    ({"entries": {"b.md": "b\n"}, "deletes": ["gone.md"]}, {}),
    ({"entries": {"a.md": "x\n"}, "deletes": ["a.md"]}, {}),
    ({"entries": {"../up.md": "x\n"}}, {}),
    ({"entries": {"nul.md": "a\x00b"}}, {}),
    ({"entries": {"big.md": "x" * 300_000}}, {}),
    ({"entries": {"a.md/inner.md": "x\n"}}, {}),
    ({"entries": {"MEMORY.md": "- [A](a.md)\n- [B](b.md)\n", "b.md": "b\n"}}, {}),
    ({"entries": {"MEMORY.md": "- [A](a.md)\n"}}, {}),  # drops b.md's only line: 422
    ({"entries": {"c.md": "c\n"}, "provenance": {"via": "cli"}}, {"X-Memsync-Agent": "codex"}),
    ({"entries": {"d.md": "d\n"}, "deletes": ["c.md"]}, {"Authorization": "Bearer nope"}),
]


def test_the_fast_and_the_routed_put_give_the_same_answers(server: LiveServer) -> None:
    """The fast PUT is an optimisation, never a second behaviour: each step, through it
    and through the route (an extra query parameter), gives the same status, body and
    headers but Date (the repo's name and the write's time aside)."""
    fast_repo, routed_repo = "acme/fast-put", "acme/rout-put"
    with server.client(server.token(name="alice")) as client:
        statuses: list[tuple[int, str | None]] = []
        for body, headers in _EDGE_STEPS:
            fast = client.put(API, params={"repo": fast_repo}, json=body, headers=headers)
            routed = client.put(
                API, params={"repo": routed_repo, "via": "route"}, json=body, headers=headers
            )
            assert fast.status_code == routed.status_code, (body, fast.text, routed.text)
            assert _same_answer(fast, fast_repo) == _same_answer(routed, routed_repo), body
            error = fast.json().get("error", {})
            statuses.append((fast.status_code, error.get("details", {}).get("error_code")))
        assert statuses == [  # every outcome the steps are meant to reach
            (200, None),
            (200, None),
            (200, None),
            (412, None),
            (200, None),
            (409, "stale_base"),
            (400, "invalid_checksum"),
            (404, "not_found"),
            (400, "invalid_key"),
            (400, "invalid_key"),
            (400, "invalid_text"),
            (413, "team_memory_entry_too_large"),
            (409, "path_clash"),
            (200, None),
            (422, "index_lines_dropped"),
            (200, None),
            (401, None),
        ]
        reader = server.token(name="rita", read_only=True)
        body, headers = {"entries": {"e.md": "e\n"}}, {"Authorization": f"Bearer {reader}"}
        fast = client.put(API, params={"repo": fast_repo}, json=body, headers=headers)
        routed = client.put(
            API, params={"repo": routed_repo, "via": "route"}, json=body, headers=headers
        )
        assert fast.status_code == routed.status_code == 403
        assert _same_answer(fast, fast_repo) == _same_answer(routed, routed_repo)
        assert (
            get(client, repo=fast_repo).json()["content"]
            == (get(client, repo=routed_repo).json()["content"])
        )


def _same_answer(answer: httpx.Response, repo: str) -> tuple[Any, dict[str, str]]:
    """An answer's body and headers, without what differs between twin repos (their
    names have the same length, so the lengths agree)."""
    body = json.loads(answer.text.replace(repo, "(repo)"))
    if isinstance(body, dict) and "lastModified" in body:
        body["lastModified"] = "(time)"
    headers = {name: value for name, value in answer.headers.items() if name != "date"}
    headers["server-timing"] = re.sub(r"dur=[0-9.]+", "dur=(ms)", headers["server-timing"])
    return body, headers
