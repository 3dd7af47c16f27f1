"""gzip on the wire, through a real server on loopback and the real client.

Answers are gzipped for clients that accept it and decode to the same JSON and ETag;
gzip request bodies are expanded under the same body limit (a bomb gets the structured
413 and the server keeps answering); other encodings are a 415. The client sends gzip
only to a server that lists it in `supports`.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sync_client.api import Api
from sync_server.config import Settings
from tests.integration.users import REPO, make_user
from tests.liveserver import LiveServer, run_live_server

API = "/v1/team_memory"
MAX_BODY_BYTES = 256 * 1024
# Compressible, like real notes: about 4 KB each.
NOTES = {
    f"notes/n{index:03d}.md": f"# Note {index}\n\n"
    + "The deploy runbook says restart the worker. " * 90
    for index in range(80)
}


def _settings(database_url: str, *, compression: bool = True) -> Settings:
    return Settings(
        database_url=database_url,
        max_body_bytes=MAX_BODY_BYTES,
        rate_limit_burst=0,
        compression=compression,
    )


@pytest.fixture
def server(sqlite_database_url: str) -> Iterator[LiveServer]:
    """A live server with compression on (the default) and a small body limit."""
    with run_live_server(_settings(sqlite_database_url)) as live:
        yield live


@pytest.fixture
def plain_server(sqlite_database_url: str) -> Iterator[LiveServer]:
    """A live server with `MEMSYNC_COMPRESSION=false`."""
    with run_live_server(_settings(sqlite_database_url, compression=False)) as live:
        yield live


def _client(server: LiveServer, accept_encoding: str = "gzip") -> httpx.Client:
    client = server.client(server.token())
    client.headers["Accept-Encoding"] = accept_encoding
    return client


def _seed(client: httpx.Client, entries: dict[str, str]) -> str:
    """PUT `entries` in several plain bodies under the limit; the new ETag."""
    keys = sorted(entries)
    etag = ""
    for start in range(0, len(keys), 10):
        batch = {key: entries[key] for key in keys[start : start + 10]}
        response = client.put(API, params={"repo": REPO}, json={"entries": batch})
        assert response.status_code == 200, response.text
        etag = response.headers["ETag"]
    return etag


def _wire_bytes(response: httpx.Response) -> int:
    return response.num_bytes_downloaded


def _gzip_put(client: httpx.Client, compressed: bytes) -> httpx.Response:
    return client.put(
        API,
        params={"repo": REPO},
        content=compressed,
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )


def _error(response: httpx.Response, status: int, error_type: str) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body["error"]) == {"type", "message", "details"}
    assert body["error"]["type"] == error_type
    details: dict[str, object] = body["error"]["details"]
    return details


def _metric(server: LiveServer, name: str) -> float:
    with server.client(server.token()) as client:
        text = client.get("/metrics").text
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


GZIP_BODIES = 'memsync_compressed_requests_total{encoding="gzip"}'


def test_a_get_is_gzipped_and_decodes_to_the_same_json_and_etag(server: LiveServer) -> None:
    with _client(server, "identity") as plain, _client(server, "gzip") as zipped:
        etag = _seed(plain, NOTES)
        views: list[dict[str, str | int]] = [
            {"repo": REPO},
            {"repo": REPO, "view": "hashes"},
            {"repo": REPO, "since": 0},
        ]
        for params in views:
            identity = plain.get(API, params=params)
            compressed = zipped.get(API, params=params)
            assert identity.status_code == compressed.status_code == 200
            assert "content-encoding" not in identity.headers
            assert compressed.headers["content-encoding"] == "gzip"
            assert compressed.headers["vary"] == "Accept-Encoding"
            assert compressed.json() == identity.json()
            assert compressed.headers["etag"] == identity.headers["etag"] == etag
            assert _wire_bytes(compressed) < _wire_bytes(identity)
        # Served again from the cache: the same bytes.
        again = zipped.get(API, params={"repo": REPO})
        assert again.content == zipped.get(API, params={"repo": REPO}).content
        # The ETag of a gzipped answer still makes a 304, without a body.
        not_modified = zipped.get(API, params={"repo": REPO}, headers={"If-None-Match": etag})
        assert not_modified.status_code == 304
        assert not_modified.content == b""
        assert "content-encoding" not in not_modified.headers


@pytest.mark.parametrize(
    ("accept_encoding", "gzipped"),
    [
        ("gzip", True),
        ("br;q=1.0, GZIP;q=0.5", True),
        ("x-gzip", True),
        ("*", True),
        ("*;q=0, gzip", True),
        ("identity", False),
        ("gzip;q=0", False),
        ("gzip;q=0, *", False),
        ("br, zstd", False),
        ("", False),
    ],
)
def test_gzip_follows_accept_encoding(
    server: LiveServer, accept_encoding: str, gzipped: bool
) -> None:
    with _client(server, accept_encoding) as client:
        _seed(client, dict(list(NOTES.items())[:10]))
        response = client.get(API, params={"repo": REPO})
        assert response.status_code == 200
        assert (response.headers.get("content-encoding") == "gzip") is gzipped
        assert len(response.json()["content"]["entries"]) == 10


def test_the_events_stream_is_never_gzipped(server: LiveServer) -> None:
    with _client(server) as client:
        etag = _seed(client, NOTES)
        with client.stream("GET", f"{API}/events", params={"repo": REPO}) as stream:
            assert stream.status_code == 200
            assert "content-encoding" not in stream.headers
            # The head event arrives at once, not held back by a compressor's buffer.
            lines = stream.iter_lines()
            event = [next(lines) for _ in range(3)]
    assert event[1] == "event: commit"
    assert json.loads(event[2].removeprefix("data: "))["checksum"] == etag.strip('"')


def test_small_answers_and_refusals_go_plain(server: LiveServer) -> None:
    with _client(server) as client:
        _seed(client, {"a.md": "tiny\n"})
        small = client.get(API, params={"repo": REPO, "view": "hashes"})
        assert small.status_code == 200
        assert "content-encoding" not in small.headers
        missing = client.get(API, params={"repo": "acme/none"})
        assert "content-encoding" not in missing.headers
        _error(missing, 404, "not_found")


def test_a_gzip_put_commits(server: LiveServer) -> None:
    with _client(server) as client:
        entries = dict(list(NOTES.items())[:50])
        payload = json.dumps({"entries": entries}).encode()
        assert MAX_BODY_BYTES / 2 < len(payload) < MAX_BODY_BYTES
        response = _gzip_put(client, gzip.compress(payload))
        assert response.status_code == 200, response.text
        assert sorted(response.json()["updatedKeys"]) == sorted(entries)
        assert client.get(API, params={"repo": REPO}).json()["content"]["entries"] == entries
    assert _metric(server, GZIP_BODIES) == 1


def test_a_gzip_put_keeps_if_match_on_the_json_etag(server: LiveServer) -> None:
    with _client(server) as client:
        etag = _seed(client, dict(list(NOTES.items())[:10]))
        fetched = client.get(API, params={"repo": REPO})
        assert fetched.headers["content-encoding"] == "gzip"
        body = gzip.compress(json.dumps({"entries": {"b.md": "x" * 2000}}).encode())
        response = client.put(
            API,
            params={"repo": REPO},
            content=body,
            headers={
                "Content-Type": "application/json",
                "Content-Encoding": "gzip",
                "If-Match": fetched.headers["etag"],
            },
        )
        assert fetched.headers["etag"] == etag
        assert response.status_code == 200, response.text


def test_a_gzip_bomb_is_413_without_being_expanded(server: LiveServer) -> None:
    # 64 MB of one JSON string, about 64 KB compressed: a thousand times the limit.
    inflated = b'{"entries": {"a.md": "' + b"a" * (64 * 1024 * 1024) + b'"}}'
    bomb = gzip.compress(inflated, compresslevel=9)
    assert len(bomb) < MAX_BODY_BYTES
    with _client(server) as client:
        details = _error(_gzip_put(client, bomb), 413, "payload_too_large")
        assert details == {"error_code": "team_memory_body_too_large", "max_bytes": MAX_BODY_BYTES}
        # The server still answers, and nothing was written.
        assert client.get("/healthz").status_code == 200
        _error(client.get(API, params={"repo": REPO}), 404, "not_found")
    assert _metric(server, GZIP_BODIES) == 0


def test_a_body_just_over_the_limit_is_413_compressed_or_not(server: LiveServer) -> None:
    payload = json.dumps({"entries": {"a.md": "z" * MAX_BODY_BYTES}}).encode()
    with _client(server) as client:
        plain = client.put(
            API,
            params={"repo": REPO},
            content=payload,
            headers={"Content-Type": "application/json"},
        )
        compressed = _gzip_put(client, gzip.compress(payload))
        assert _error(plain, 413, "payload_too_large") == _error(
            compressed, 413, "payload_too_large"
        )


@pytest.mark.parametrize(
    "body",
    [
        b"not gzip at all",
        gzip.compress(b'{"entries": {}}')[:-6],  # truncated
        gzip.compress(b'{"entries": {}}') + b"trailing",
        zlib.compress(b'{"entries": {}}'),  # zlib framing is not gzip
        b"",
    ],
    ids=["garbage", "truncated", "trailing", "zlib", "empty"],
)
def test_a_corrupt_gzip_body_is_400(server: LiveServer, body: bytes) -> None:
    with _client(server) as client:
        details = _error(_gzip_put(client, body), 400, "invalid_request")
        assert details == {"error_code": "invalid_encoding"}
        _error(client.get(API, params={"repo": REPO}), 404, "not_found")


@pytest.mark.parametrize("encoding", ["br", "deflate", "gzip, gzip", "zstd"])
def test_an_unknown_content_encoding_is_415(server: LiveServer, encoding: str) -> None:
    with _client(server) as client:
        response = client.put(
            API,
            params={"repo": REPO},
            content=b'{"entries": {"a.md": "x"}}',
            headers={"Content-Type": "application/json", "Content-Encoding": encoding},
        )
        details = _error(response, 415, "unsupported_media_type")
        assert details == {"error_code": "unsupported_encoding"}


def test_a_server_with_compression_off_sends_and_takes_plain_bodies(
    plain_server: LiveServer,
) -> None:
    with _client(plain_server) as client:
        _seed(client, NOTES)
        full = client.get(API, params={"repo": REPO})
        assert "content-encoding" not in full.headers
        assert (
            "gzip"
            not in client.get(API, params={"repo": REPO, "view": "hashes"}).json()["supports"]
        )
        refused = _gzip_put(client, gzip.compress(b'{"entries": {"a.md": "x"}}'))
        _error(refused, 415, "unsupported_media_type")


def test_the_client_library_sends_gzip_only_once_the_server_lists_it(server: LiveServer) -> None:
    token = server.token()
    batch = json.dumps({"entries": dict(list(NOTES.items())[:5])}).encode()
    with Api(server.base_url, token, REPO) as api:
        assert not api.gzip_requests
        api.put(batch)  # nothing learned yet: plain
        assert _metric(server, GZIP_BODIES) == 0
        assert api.gzip_requests  # the write result listed "gzip"
        sent_before = api.bytes_sent
        api.put(batch.replace(b"Note", b"Memo"))
        assert api.bytes_sent - sent_before < len(batch) / 3
        assert _metric(server, GZIP_BODIES) == 1
        received_before = api.bytes_received
        remote = api.get()
        assert remote is not None
        assert len(remote.texts) == 5
        # Bytes as they came over the wire, gzipped, not the decoded JSON.
        assert api.bytes_received - received_before < len(batch) / 3


def test_the_client_library_sends_plain_bodies_to_a_server_without_gzip(
    plain_server: LiveServer,
) -> None:
    batch = json.dumps({"entries": dict(list(NOTES.items())[:5])}).encode()
    with Api(plain_server.base_url, plain_server.token(), REPO) as api:
        api.put(batch)
        assert not api.gzip_requests  # its write result did not list "gzip"
        sent_before = api.bytes_sent
        api.put(batch.replace(b"Note", b"Memo"))
        assert api.bytes_sent - sent_before > len(batch)


def test_a_client_that_believes_in_gzip_falls_back_to_plain_on_415(
    plain_server: LiveServer,
) -> None:
    batch = json.dumps({"entries": dict(list(NOTES.items())[:5])}).encode()
    with Api(plain_server.base_url, plain_server.token(), REPO) as api:
        api.gzip_requests = True  # as if the server had listed it before a downgrade
        written = api.put(batch)
        assert sorted(written.updated_keys) == sorted(NOTES)[:5]
        assert not api.gzip_requests


def test_memsync_push_gzips_to_a_server_that_lists_it(server: LiveServer, tmp_path: Path) -> None:
    alice = make_user("alice", tmp_path, server, server.token(name="alice"))
    alice.write("first.md", "hello\n")
    alice.json("push")  # learns `supports`
    for key, text in NOTES.items():
        alice.write(key, text)
    pushed = alice.json("push")
    assert len(pushed["uploaded"]) == len(NOTES)
    assert _metric(server, GZIP_BODIES) >= 1
    bob = make_user("bob", tmp_path, server, server.token(name="bob"))
    bob.json("pull")
    assert bob.read("notes/n007.md") == NOTES["notes/n007.md"]


def test_a_one_file_push_is_gzipped_from_what_the_last_run_learned(
    server: LiveServer, tmp_path: Path
) -> None:
    alice = make_user("alice", tmp_path, server, server.token(name="alice"))
    alice.write("first.md", "hello\n")
    alice.json("push")  # learns `supports`, kept in the state
    before = _metric(server, GZIP_BODIES)
    alice.write("notes/n007.md", NOTES["notes/n007.md"])
    pushed = alice.json("push")
    assert pushed["uploaded"] == ["notes/n007.md"]
    assert pushed["batches"] == 1
    # That run's only request was its PUT, and it went compressed.
    assert _metric(server, GZIP_BODIES) == before + 1


def test_memsync_push_sends_plain_bodies_to_a_server_without_it(
    plain_server: LiveServer, tmp_path: Path
) -> None:
    alice = make_user("alice", tmp_path, plain_server, plain_server.token(name="alice"))
    alice.write("first.md", "hello\n")
    alice.json("push")
    for key, text in NOTES.items():
        alice.write(key, text)
    # A gzip body would be a 415 here: the push succeeding means it went plain.
    pushed = alice.json("push")
    assert len(pushed["uploaded"]) == len(NOTES)
    with _client(plain_server) as client:
        entries = client.get(API, params={"repo": REPO}).json()["content"]["entries"]
    assert entries["notes/n079.md"] == NOTES["notes/n079.md"]
