"""Hostile input against a live server: every one is refused and changes nothing.

Each test sends something a broken or malicious client could send (malformed JSON,
wrong types, invalid UTF-8, lone surrogates, NUL, path traversal in every encoding of
docs/protocol.md section 3, oversized bodies, bad query values, bad `repo`, unknown paths,
wrong methods, bad tokens) and checks two things:

* the answer is the documented 4xx with a JSON body `{"error": {"type", "message",
  "details"}}`: never a 500, never a traceback or an HTML page;
* nothing changed: the seeded repo answers a GET with the same status, ETag and body
  as before, and the never-written repo still answers 404.

One server per backend (SQLite, then PostgreSQL) serves the whole module, with small
limits so the 413 cases stay cheap and rate limiting off so hundreds of refused
requests do not turn into 429s. Its fixtures are module-scoped for speed (a server per
test would cost ~1 s on PostgreSQL); the tests never rely on each other because each
one compares the repos before and after itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx
import pytest

from sync_server.auth import mint_token
from sync_server.config import Settings, sqlite_url
from tests.liveserver import LiveServer, run_live_server
from tests.pgcluster import PostgresCluster

API = "/v1/team_memory"
HISTORY = f"{API}/history"
RESTORE = f"{API}/restore"

SEEDED_REPO = "acme/app"
FRESH_REPO = "acme/untouched"
WATCHED_REPOS = (SEEDED_REPO, FRESH_REPO)
SEED_ENTRIES = {"notes/a.md": "alpha\n", "notes/b.md": "beta\n", "readme.md": "hello\n"}
EXISTING_KEY = "notes/a.md"
GOOD_KEY = "notes/good.md"

MAX_ENTRIES = 5
MAX_ENTRY_BYTES = 1024
MAX_BODY_BYTES = 16 * 1024
# PostgreSQL BIGINT and SQLite INTEGER stop here; anything above must be a 4xx, not a 500.
BEYOND_INT64 = 2**63

ERROR_TYPES = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    410: "gone",
    413: "payload_too_large",
}

# -- the server ----------------------------------------------------------------------


@dataclass(frozen=True)
class Tokens:
    """The tokens the tests use, all minted into the module's server."""

    writer: str
    read_only: str
    other_owner: str
    other_repo: str
    revoked: str


@pytest.fixture(
    scope="module",
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)],
)
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """A live server with small limits on each backend, its seeded repo written once."""
    cluster: PostgresCluster | None = None
    if request.param == "sqlite":
        folder: Path = tmp_path_factory.mktemp("hostile")
        database_url = sqlite_url(folder / "memsync.sqlite3")
    else:
        cluster = request.getfixturevalue("postgres_cluster")
        assert cluster is not None
        database_url = cluster.create_database()
    settings = Settings(
        database_url=database_url,
        max_entries=MAX_ENTRIES,
        max_entry_bytes=MAX_ENTRY_BYTES,
        max_body_bytes=MAX_BODY_BYTES,
        rate_limit_burst=0,
    )
    try:
        with run_live_server(settings) as server:
            writer = server.token("*", name="seeder")
            with server.client(writer) as seeder:
                seeded = seeder.put(
                    API, params={"repo": SEEDED_REPO}, json={"entries": SEED_ENTRIES}
                )
                assert seeded.status_code == 200, seeded.text
            yield server
    finally:
        if cluster is not None:
            cluster.drop_database(database_url.rsplit("/", 1)[1])


@pytest.fixture(scope="module")
def tokens(live: LiveServer) -> Tokens:
    """A writer for every repo, and tokens that must be refused in one way or another."""
    revoked = live.token("*", name="revoked")
    assert live.store.revoke_token("revoked") == 1
    return Tokens(
        writer=live.token("*", name="writer"),
        read_only=live.token(SEEDED_REPO, read_only=True, name="reader"),
        other_owner=live.token("other/*", name="other-owner"),
        other_repo=live.token("acme/other", name="other-repo"),
        revoked=revoked,
    )


def live_client(live: LiveServer, token: str | None = None) -> httpx.Client:
    """A client of the live server, with the bearer token when given.

    `Connection: close` on every request: a refused request (or a 500, should one
    happen) never leaves a half-read connection behind for the next test. And after a
    5xx, one more round trip: the server thread logs a traceback right after answering,
    and on Python < 3.11.8 that races with pytest formatting the failed test's traceback
    in this thread ("SystemError: AST constructor recursion depth mismatch", CPython
    gh-106905, an INTERNALERROR that ends the run). The server serves requests on one
    event loop, so the answer to GET /healthz only comes once that logging is done.
    """

    def wait_for_the_error_log(response: httpx.Response) -> None:
        if response.status_code >= 500:
            httpx.get(f"{live.base_url}/healthz", timeout=30)

    opened = live.client(token)
    opened.headers["Connection"] = "close"
    opened.event_hooks["response"].append(wait_for_the_error_log)
    return opened


@pytest.fixture(scope="module")
def client(live: LiveServer, tokens: Tokens) -> Iterator[httpx.Client]:
    """The writer's client."""
    with live_client(live, tokens.writer) as writer:
        yield writer


@pytest.fixture(scope="module")
def anonymous(live: LiveServer) -> Iterator[httpx.Client]:
    """A client that sends no Authorization header unless a test adds one."""
    with live_client(live) as nobody:
        yield nobody


# -- helpers -------------------------------------------------------------------------


@dataclass(frozen=True)
class RepoState:
    """What a full GET of a repo shows: status, ETag and the whole body."""

    status: int
    etag: str | None
    body: object


def observe(client: httpx.Client, repo: str) -> RepoState:
    response = client.get(API, params={"repo": repo})
    assert response.status_code in (200, 404), response.text
    return RepoState(response.status_code, response.headers.get("etag"), response.json())


@contextmanager
def nothing_changes(client: httpx.Client) -> Iterator[None]:
    """Assert that the watched repos look exactly the same after the block."""
    before = {repo: observe(client, repo) for repo in WATCHED_REPOS}
    assert before[SEEDED_REPO].status == 200
    assert before[FRESH_REPO].status == 404, "the never-written repo was written"
    fresh = before[FRESH_REPO].body
    assert isinstance(fresh, dict)
    assert fresh["error"]["details"]["error_code"] == "no_team_memory"
    yield
    after = {repo: observe(client, repo) for repo in WATCHED_REPOS}
    assert after == before


def assert_refused(
    response: httpx.Response, status: int, *, error_code: str | None = None
) -> dict[str, object]:
    """The documented status with a well-formed JSON error body; returns its details."""
    assert response.status_code == status, f"{response.status_code}: {response.text[:500]}"
    assert response.headers.get("content-type", "").split(";")[0] == "application/json"
    assert "Traceback" not in response.text
    assert "<html" not in response.text.lower()
    body = response.json()
    assert isinstance(body, dict)
    error = body.get("error")
    assert isinstance(error, dict), body
    assert set(error) == {"type", "message", "details"}, error
    assert error["type"] == ERROR_TYPES[status]
    assert isinstance(error["message"], str)
    assert error["message"]
    details = error["details"]
    assert isinstance(details, dict)
    if error_code is not None:
        assert details.get("error_code") == error_code, details
    return details


def json_bytes(payload: object) -> bytes:
    """JSON with every non-ASCII character escaped, so lone surrogates survive as
    `\\udXXX` escapes (httpx's own `json=` would fail to encode them)."""
    return json.dumps(payload).encode("ascii")


def put_raw(client: httpx.Client, repo: str, body: bytes) -> httpx.Response:
    return client.put(
        API, params={"repo": repo}, content=body, headers={"Content-Type": "application/json"}
    )


def put_json(client: httpx.Client, repo: str, payload: object) -> httpx.Response:
    return put_raw(client, repo, json_bytes(payload))


def assert_put_refused_everywhere(
    client: httpx.Client, body: bytes, status: int = 400, *, error_code: str | None = None
) -> list[dict[str, object]]:
    """PUT `body` to the seeded and to the never-written repo; both must refuse it."""
    with nothing_changes(client):
        return [
            assert_refused(put_raw(client, repo, body), status, error_code=error_code)
            for repo in WATCHED_REPOS
        ]


def reported_keys(details: Mapping[str, object]) -> dict[str, str]:
    """The `{key: reason}` an invalid-key 400 lists, checking its shape on the way."""
    assert details.get("error_code") == "invalid_key", details
    listed = details.get("keys")
    assert isinstance(listed, list)
    reasons: dict[str, str] = {}
    for item in listed:
        assert isinstance(item, dict)
        assert set(item) == {"key", "reason"}
        key, reason = item["key"], item["reason"]
        assert isinstance(key, str)
        assert isinstance(reason, str)
        assert reason.strip(), f"no reason given for {key!r}"
        reasons[key] = reason
    return reasons


def as_reported(key: str) -> str:
    """How the server can name a key in JSON: lone surrogates backslash-escaped."""
    return key.encode("utf-8", "backslashreplace").decode("utf-8")


# -- bodies that are not JSON, or not the right JSON ---------------------------------

MALFORMED_JSON = {
    "empty": b"",
    "just-brace": b"{",
    "truncated-object": b'{"entries": {',
    "truncated-string": b'{"entries": {"notes/new.md": "tex',
    "missing-close": b'{"entries": {"notes/new.md": "text"}',
    "single-quotes": b"{'entries': {'notes/new.md': 'text'}}",
    "trailing-comma": b'{"entries": {"notes/new.md": "text",}}',
    "trailing-garbage": b'{"entries": {"notes/new.md": "text"}} trailing',
    "bad-escape": b'{"entries": {"notes/new.md": "\\x41"}}',
    "short-unicode-escape": b'{"entries": {"notes/new.md": "\\u12"}}',
    "bare-word": b"entries",
    "nul-byte": b"\x00",
    "unquoted-key": b'{entries: {"notes/new.md": "text"}}',
}

NOT_AN_OBJECT = {
    "array": b"[]",
    "array-of-body": b'[{"entries": {"notes/new.md": "text"}}]',
    "string": b'"entries"',
    "number": b"42",
    "null": b"null",
    "true": b"true",
}


@pytest.mark.parametrize("body", MALFORMED_JSON.values(), ids=MALFORMED_JSON.keys())
def test_malformed_json_is_refused(client: httpx.Client, body: bytes) -> None:
    assert_put_refused_everywhere(client, body)


@pytest.mark.parametrize("body", NOT_AN_OBJECT.values(), ids=NOT_AN_OBJECT.keys())
def test_json_that_is_not_an_object_is_refused(client: httpx.Client, body: bytes) -> None:
    assert_put_refused_everywhere(client, body)


ENTRIES_NOT_AN_OBJECT: dict[str, object] = {
    "missing": {},
    "misspelled": {"Entries": {"notes/new.md": "text"}},
    "null": {"entries": None},
    "list": {"entries": []},
    "list-of-pairs": {"entries": [["notes/new.md", "text"]]},
    "string": {"entries": "notes/new.md"},
    "number": {"entries": 1},
    "true": {"entries": True},
}


@pytest.mark.parametrize(
    "payload", ENTRIES_NOT_AN_OBJECT.values(), ids=ENTRIES_NOT_AN_OBJECT.keys()
)
def test_entries_that_are_not_an_object_are_refused(client: httpx.Client, payload: object) -> None:
    assert_put_refused_everywhere(client, json_bytes(payload))


NON_STRING_VALUES: dict[str, object] = {
    "int": 1,
    "float": 1.5,
    "null": None,
    "true": True,
    "empty-list": [],
    "list": ["text"],
    "object": {"text": "text"},
    "empty-object": {},
}


@pytest.mark.parametrize("value", NON_STRING_VALUES.values(), ids=NON_STRING_VALUES.keys())
def test_non_string_entry_values_are_refused_atomically(
    client: httpx.Client, value: object
) -> None:
    """A bad value next to a good entry: neither is written."""
    payload = {"entries": {GOOD_KEY: "fine", "notes/new.md": value}}
    assert_put_refused_everywhere(client, json_bytes(payload))


def test_nan_entry_value_is_refused(client: httpx.Client) -> None:
    assert_put_refused_everywhere(client, b'{"entries": {"notes/new.md": NaN}}')


# -- baseChecksums ---------------------------------------------------------------------

ZERO_HEX = "0" * 64

BAD_BASE_CHECKSUMS_TYPES: dict[str, object] = {
    "list": [],
    "string": "sha256:" + ZERO_HEX,
    "number": 1,
    "true": True,
    "value-int": {EXISTING_KEY: 1},
    "value-list": {EXISTING_KEY: ["sha256:" + ZERO_HEX]},
    "value-object": {EXISTING_KEY: {}},
    "value-true": {EXISTING_KEY: True},
}

MALFORMED_CHECKSUMS = {
    "empty": "",
    "word": "nope",
    "prefix-only": "sha256:",
    "hex-too-short": "sha256:" + "0" * 63,
    "hex-too-long": "sha256:" + "0" * 65,
    "uppercase-hex": "sha256:" + "A" * 64,
    "uppercase-prefix": "SHA256:" + ZERO_HEX,
    "sha1": "sha1:" + "0" * 40,
    "no-prefix": ZERO_HEX,
    "leading-space": " sha256:" + ZERO_HEX,
    "trailing-newline": "sha256:" + ZERO_HEX + "\n",
    "quoted-etag": '"sha256:' + ZERO_HEX + '"',
    "not-hex": "sha256:" + "g" * 64,
    "full-width-digits": "sha256:" + "\uff10" * 64,
    "nul": "sha256:" + "0" * 63 + "\x00",
}


@pytest.mark.parametrize(
    "base", BAD_BASE_CHECKSUMS_TYPES.values(), ids=BAD_BASE_CHECKSUMS_TYPES.keys()
)
def test_base_checksums_of_the_wrong_type_are_refused(client: httpx.Client, base: object) -> None:
    payload = {"entries": {EXISTING_KEY: "overwritten"}, "baseChecksums": base}
    assert_put_refused_everywhere(client, json_bytes(payload))


@pytest.mark.parametrize("checksum", MALFORMED_CHECKSUMS.values(), ids=MALFORMED_CHECKSUMS.keys())
def test_malformed_base_checksums_are_refused(client: httpx.Client, checksum: str) -> None:
    payload = {"entries": {EXISTING_KEY: "overwritten"}, "baseChecksums": {EXISTING_KEY: checksum}}
    assert_put_refused_everywhere(client, json_bytes(payload))


# -- encodings: invalid UTF-8, lone surrogates, NUL ------------------------------------

INVALID_UTF8 = {
    "ff-in-value": b'{"entries": {"notes/new.md": "\xff"}}',
    "fe-in-key": b'{"entries": {"notes/\xfe.md": "text"}}',
    "overlong-slash": b'{"entries": {"notes/new.md": "\xc0\xaf"}}',
    "overlong-dots-in-key": b'{"entries": {"\xc0\xae\xc0\xae/x": "text"}}',
    "encoded-surrogate": b'{"entries": {"notes/new.md": "\xed\xa0\x80"}}',
    "truncated-sequence": b'{"entries": {"notes/new.md": "\xe2\x82"}}',
    "latin1-body": '{"entries": {"notes/caf\u00e9.md": "caf\u00e9"}}'.encode("latin-1"),
}


@pytest.mark.parametrize("body", INVALID_UTF8.values(), ids=INVALID_UTF8.keys())
def test_invalid_utf8_is_refused(client: httpx.Client, body: bytes) -> None:
    assert_put_refused_everywhere(client, body)


LONE_SURROGATE_KEYS = {
    "high": "\ud800",
    "low-in-segment": "notes/\udfff.md",
    "pair-reversed": "\udc00\ud800",
}


@pytest.mark.parametrize("key", LONE_SURROGATE_KEYS.values(), ids=LONE_SURROGATE_KEYS.keys())
def test_lone_surrogate_in_a_key_is_refused(client: httpx.Client, key: str) -> None:
    payload = {"entries": {GOOD_KEY: "fine", key: "text"}}
    for details in assert_put_refused_everywhere(client, json_bytes(payload)):
        assert set(reported_keys(details)) == {as_reported(key)}


@pytest.mark.parametrize("key", LONE_SURROGATE_KEYS.values(), ids=LONE_SURROGATE_KEYS.keys())
def test_lone_surrogate_in_a_base_checksums_key_is_refused(client: httpx.Client, key: str) -> None:
    payload = {"entries": {GOOD_KEY: "fine"}, "baseChecksums": {key: None}}
    for details in assert_put_refused_everywhere(client, json_bytes(payload)):
        assert set(reported_keys(details)) == {as_reported(key)}


LONE_SURROGATE_TEXTS = {
    "high": "\ud800",
    "low-in-prose": "before \udc00 after",
    "last-high": "\udbff",
}


@pytest.mark.parametrize("text", LONE_SURROGATE_TEXTS.values(), ids=LONE_SURROGATE_TEXTS.keys())
def test_lone_surrogate_in_a_value_is_refused(client: httpx.Client, text: str) -> None:
    payload = {"entries": {GOOD_KEY: "fine", "notes/new.md": text}}
    assert_put_refused_everywhere(client, json_bytes(payload))


@pytest.mark.parametrize(
    "key", ["a\x00b", "notes/a.md\x00", "\x00", "\x00/x"], ids=["middle", "end", "alone", "segment"]
)
def test_nul_in_a_key_is_refused(client: httpx.Client, key: str) -> None:
    payload = {"entries": {GOOD_KEY: "fine", key: "text"}}
    for details in assert_put_refused_everywhere(client, json_bytes(payload)):
        assert set(reported_keys(details)) == {key}


@pytest.mark.parametrize("text", ["a\x00b", "\x00", "text\x00"], ids=["middle", "alone", "end"])
def test_nul_in_a_value_is_refused(client: httpx.Client, text: str) -> None:
    payload = {"entries": {GOOD_KEY: "fine", "notes/new.md": text}}
    assert_put_refused_everywhere(client, json_bytes(payload))


# -- keys that escape the team dir or alias another key ---------------------------------

INVALID_KEYS = {
    "empty": "",
    "dotdot": "..",
    "dot": ".",
    "parent": "../x",
    "parent-in-middle": "a/../b",
    "parent-at-end": "a/..",
    "dot-first": "./a",
    "dot-in-middle": "a/./b",
    "absolute": "/abs",
    "root": "/",
    "drive": "C:x",
    "drive-slash": "c:/x",
    "drive-backslash": "C:\\x",
    "backslash": "a\\b",
    "unc": "\\\\server\\share",
    "double-slash": "a//b",
    "trailing-slash": "a/",
    "pct-dotdot": "%2e%2e/x",
    "pct-dotdot-upper": "%2E%2E/x",
    "pct-dotdot-in-middle": "a/%2e%2e/b",
    "pct-dot": "%2e/x",
    "pct-slash": "a%2fb",
    "pct-slash-upper": "a%2Fb",
    "pct-pct-dotdot": "%252e%252e/x",
    "pct-pct-pct-dotdot": "%25252e%25252e/x",
    "pct-backslash": "%5c",
    "pct-backslash-in-key": "a%5cb",
    "pct-drive": "%43:x",
    "fullwidth-dotdot-slash": "\uff0e\uff0e\uff0fx",
    "fullwidth-dotdot": "\uff0e\uff0e/x",
    "fullwidth-slash": "a\uff0fb",
    "fullwidth-backslash": "a\uff3cb",
    "two-dot-leader": "\u2025/x",
    "fullwidth-drive": "\uff23\uff1ax",
    "not-nfc": "caf" + "e\u0301" + ".md",
    "control-soh": "a\x01b",
    "control-tab": "a\tb",
    "control-newline": "notes/a.md\n",
    "control-cr": "a\rb",
    "control-esc": "\x1b[31mred",
    "control-del": "a\x7fb",
    "control-nel": "a\x85b",
    "bidi-override": "notes/exe.\u202etxt.md",
    "bidi-isolate": "a\u2066b",
    "zero-width-space": "a\u200bb",
    "over-512-bytes": "a" * 513,
    "over-512-bytes-multibyte": "\u00e9" * 257,
    "33-segments": "/".join(["s"] * 33),
}

# Traversals that only appear after a lenient decoder and NFKC, in either order.
INVALID_KEYS |= {
    "bad-escape-then-pct-dotdot": "%ff/%2e%2e/x",
    "fullwidth-percent-dotdot": "\uff05\uff12\uff45\uff05\uff12\uff45/x",
    "pct-encoded-fullwidth-dotdot": "%ef%bc%8e%ef%bc%8e/x",
    "pct-encoded-fullwidth-slash": "a%ef%bc%8fb",
}


@pytest.mark.parametrize("key", INVALID_KEYS.values(), ids=INVALID_KEYS.keys())
def test_invalid_key_is_refused_with_its_reason(client: httpx.Client, key: str) -> None:
    payload = {"entries": {GOOD_KEY: "fine", key: "text"}}
    for details in assert_put_refused_everywhere(client, json_bytes(payload)):
        assert set(reported_keys(details)) == {key}


@pytest.mark.parametrize("key", INVALID_KEYS.values(), ids=INVALID_KEYS.keys())
def test_invalid_key_in_base_checksums_is_refused(client: httpx.Client, key: str) -> None:
    payload = {"entries": {GOOD_KEY: "fine"}, "baseChecksums": {key: None}}
    for details in assert_put_refused_everywhere(client, json_bytes(payload)):
        assert set(reported_keys(details)) == {key}


def test_every_bad_key_is_listed_and_nothing_is_written(client: httpx.Client) -> None:
    """All the bad keys in one PUT, plus one good key: one 400 names each bad key."""
    bad_keys = set(INVALID_KEYS.values())
    entries = dict.fromkeys(sorted(bad_keys), "text")
    entries[GOOD_KEY] = "fine"
    body = json_bytes({"entries": entries})
    assert len(body) < MAX_BODY_BYTES
    for details in assert_put_refused_everywhere(client, body):
        reasons = reported_keys(details)
        assert set(reasons) == bad_keys
        assert GOOD_KEY not in reasons
    assert GOOD_KEY not in json.dumps(observe(client, SEEDED_REPO).body)


def test_bad_keys_in_entries_and_base_checksums_are_all_listed(client: httpx.Client) -> None:
    payload = {
        "entries": {GOOD_KEY: "fine", "../in-entries": "text"},
        "baseChecksums": {"a//in-base": None, GOOD_KEY: None},
    }
    for details in assert_put_refused_everywhere(client, json_bytes(payload)):
        assert set(reported_keys(details)) == {"../in-entries", "a//in-base"}


# Keys a query string can carry (httpx cannot percent-encode a lone surrogate).
QUERY_KEYS = {name: key for name, key in INVALID_KEYS.items() if key != ""}


@pytest.mark.parametrize("key", QUERY_KEYS.values(), ids=QUERY_KEYS.keys())
@pytest.mark.parametrize(
    ("method", "path", "extra"),
    [("DELETE", API, {}), ("GET", HISTORY, {}), ("GET", HISTORY, {"version": "1"})],
    ids=["delete", "history", "history-version"],
)
def test_invalid_key_in_a_query_is_refused(
    client: httpx.Client, method: str, path: str, extra: dict[str, str], key: str
) -> None:
    with nothing_changes(client):
        for repo in WATCHED_REPOS:
            params = {"repo": repo, "key": key, **extra}
            details = assert_refused(client.request(method, path, params=params), 400)
            assert set(reported_keys(details)) == {key}


# -- limits: 413 -------------------------------------------------------------------------


def oversized_body() -> bytes:
    body = json_bytes({"entries": {"notes/big.md": "x" * MAX_BODY_BYTES}})
    assert len(body) > MAX_BODY_BYTES
    return body


def test_body_over_the_limit_with_content_length_is_413(client: httpx.Client) -> None:
    body = oversized_body()
    with nothing_changes(client):
        for repo in WATCHED_REPOS:
            response = put_raw(client, repo, body)
            assert response.request.headers["content-length"] == str(len(body))
            details = assert_refused(response, 413, error_code="team_memory_body_too_large")
            assert details["max_bytes"] == MAX_BODY_BYTES


def test_body_over_the_limit_without_content_length_is_413(client: httpx.Client) -> None:
    """Chunked transfer: the server counts what arrives instead of trusting a header."""
    body = oversized_body()

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 1000):
            yield body[start : start + 1000]

    with nothing_changes(client):
        for repo in WATCHED_REPOS:
            response = client.put(
                API,
                params={"repo": repo},
                content=chunks(),
                headers={"Content-Type": "application/json"},
            )
            assert "content-length" not in response.request.headers
            assert response.request.headers["transfer-encoding"] == "chunked"
            details = assert_refused(response, 413, error_code="team_memory_body_too_large")
            assert details["max_bytes"] == MAX_BODY_BYTES


@pytest.mark.parametrize(
    ("method", "path", "params"),
    [
        ("POST", RESTORE, {"repo": SEEDED_REPO}),
        ("DELETE", API, {"repo": SEEDED_REPO, "key": EXISTING_KEY}),
    ],
    ids=["restore", "delete"],
)
def test_oversized_body_on_other_writes_is_413(
    client: httpx.Client, method: str, path: str, params: dict[str, str]
) -> None:
    with nothing_changes(client):
        response = client.request(
            method,
            path,
            params=params,
            content=oversized_body(),
            headers={"Content-Type": "application/json"},
        )
        assert_refused(response, 413, error_code="team_memory_body_too_large")


@pytest.mark.parametrize(
    "text",
    ["x" * (MAX_ENTRY_BYTES + 1), "\u00e9" * (MAX_ENTRY_BYTES // 2 + 1)],
    ids=["ascii", "multibyte-counted-in-bytes"],
)
def test_entry_over_the_limit_is_413(client: httpx.Client, text: str) -> None:
    assert len(text) <= MAX_ENTRY_BYTES + 1
    payload = {"entries": {GOOD_KEY: "fine", "notes/big.md": text}}
    for details in assert_put_refused_everywhere(
        client, json_bytes(payload), 413, error_code="team_memory_entry_too_large"
    ):
        assert details["key"] == "notes/big.md"
        assert details["max_bytes"] == MAX_ENTRY_BYTES


def entry_count(client: httpx.Client, repo: str) -> int:
    state = observe(client, repo)
    if state.status == 404:
        return 0
    assert isinstance(state.body, dict)
    return len(state.body["content"]["entries"])


@pytest.mark.parametrize("replace_existing", [False, True], ids=["new-keys", "with-upserts"])
def test_too_many_entries_is_413_and_writes_nothing(
    client: httpx.Client, replace_existing: bool
) -> None:
    """Live entries after the merge are counted: replacing a key does not add one."""
    with nothing_changes(client):
        for repo in WATCHED_REPOS:
            current = entry_count(client, repo)
            new_keys = [f"notes/new-{index}.md" for index in range(MAX_ENTRIES + 1 - current)]
            entries = dict.fromkeys(new_keys, "text")
            if replace_existing and repo == SEEDED_REPO:
                entries |= dict.fromkeys(SEED_ENTRIES, "overwritten")
            response = put_json(client, repo, {"entries": entries})
            details = assert_refused(response, 413, error_code="team_memory_too_many_entries")
            assert details["max_entries"] == MAX_ENTRIES
            assert details["received_entries"] == current + len(new_keys)


CLASHING_PUTS: dict[str, tuple[str, dict[str, str], list[dict[str, str]]]] = {
    "file-over-a-directory": (
        SEEDED_REPO,
        {"notes": "over notes/a.md", "fine.md": "fine"},
        [{"key": "notes", "clashesWith": "notes/a.md"}],
    ),
    "file-under-a-file": (
        SEEDED_REPO,
        {"readme.md/x.md": "under readme.md", GOOD_KEY: "fine"},
        [{"key": "readme.md/x.md", "clashesWith": "readme.md"}],
    ),
    "deeper-under-a-file": (
        SEEDED_REPO,
        {f"{EXISTING_KEY}/1/2.md": "deep"},
        [{"key": f"{EXISTING_KEY}/1/2.md", "clashesWith": EXISTING_KEY}],
    ),
    "within-one-put": (
        FRESH_REPO,
        {"x": "file", "x/y.md": "under it"},
        [{"key": "x", "clashesWith": "x/y.md"}, {"key": "x/y.md", "clashesWith": "x"}],
    ),
}


@pytest.mark.parametrize(
    ("repo", "entries", "clashes"), CLASHING_PUTS.values(), ids=CLASHING_PUTS.keys()
)
def test_a_key_both_file_and_directory_is_409_and_writes_nothing(
    client: httpx.Client, repo: str, entries: dict[str, str], clashes: list[dict[str, str]]
) -> None:
    with nothing_changes(client):
        response = put_json(client, repo, {"entries": entries})
        details = assert_refused(response, 409, error_code="path_clash")
        assert details["clashes"] == clashes
        assert details["keys"] == sorted({clash["key"] for clash in clashes})


# -- query values --------------------------------------------------------------------------

BAD_GET_QUERIES: dict[str, dict[str, str]] = {
    "view-bogus": {"view": "bogus"},
    "view-empty": {"view": ""},
    "view-uppercase": {"view": "HASHES"},
    "view-full": {"view": "full"},
    "since-negative": {"since": "-1"},
    "since-word": {"since": "abc"},
    "since-float": {"since": "1.5"},
    "since-exponent": {"since": "1e3"},
    "since-hex": {"since": "0x10"},
    "since-empty": {"since": ""},
    "since-arabic-digit": {"since": "\u0663"},
    "since-with-view": {"since": "0", "view": "hashes"},
}


@pytest.mark.parametrize("query", BAD_GET_QUERIES.values(), ids=BAD_GET_QUERIES.keys())
def test_bad_get_query_values_are_refused(client: httpx.Client, query: dict[str, str]) -> None:
    with nothing_changes(client):
        for repo in WATCHED_REPOS:
            assert_refused(client.get(API, params={"repo": repo, **query}), 400)


@pytest.mark.parametrize("since", [str(BEYOND_INT64), "9" * 30], ids=["2**63", "30-digits"])
def test_since_beyond_any_version_is_410(client: httpx.Client, since: str) -> None:
    with nothing_changes(client):
        assert_refused(client.get(API, params={"repo": SEEDED_REPO, "since": since}), 410)


@pytest.mark.parametrize(
    "version", ["0", "-1", "abc", "1.5", ""], ids=["zero", "negative", "word", "float", "empty"]
)
def test_bad_history_version_is_refused(client: httpx.Client, version: str) -> None:
    with nothing_changes(client):
        params = {"repo": SEEDED_REPO, "key": EXISTING_KEY, "version": version}
        assert_refused(client.get(HISTORY, params=params), 400)


@pytest.mark.parametrize("version", [str(BEYOND_INT64), "9" * 30], ids=["2**63", "30-digits"])
def test_history_version_beyond_int64_is_a_4xx(client: httpx.Client, version: str) -> None:
    with nothing_changes(client):
        params = {"repo": SEEDED_REPO, "key": EXISTING_KEY, "version": version}
        response = client.get(HISTORY, params=params)
        assert 400 <= response.status_code < 500, response.text
        assert_refused(response, response.status_code)


# -- repo --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One request to an endpoint, well-formed except for what a test replaces."""

    method: str
    path: str
    params: dict[str, str] = field(default_factory=dict)
    body: object = None

    def send(self, client: httpx.Client, *, repo: str | None = SEEDED_REPO) -> httpx.Response:
        params = dict(self.params)
        if repo is not None:
            params["repo"] = repo
        content = None if self.body is None else json_bytes(self.body)
        headers = {"Content-Type": "application/json"} if content is not None else {}
        return client.request(
            self.method, self.path, params=params, content=content, headers=headers
        )


ENDPOINTS = {
    "get": Call("GET", API),
    "get-hashes": Call("GET", API, {"view": "hashes"}),
    "get-since": Call("GET", API, {"since": "0"}),
    "put": Call("PUT", API, body={"entries": {EXISTING_KEY: "overwritten", GOOD_KEY: "new"}}),
    "delete": Call("DELETE", API, {"key": EXISTING_KEY}),
    "history": Call("GET", HISTORY, {"key": EXISTING_KEY}),
    "history-version": Call("GET", HISTORY, {"key": EXISTING_KEY, "version": "1"}),
    "restore": Call("POST", RESTORE, body={"key": EXISTING_KEY, "version": 1}),
}
WRITE_ENDPOINTS = {name: ENDPOINTS[name] for name in ("put", "delete", "restore")}

BAD_REPOS = {
    "empty": "",
    "no-slash": "noslash",
    "three-segments": "a/b/c",
    "parent": "../x",
    "dot-owner": "./x",
    "parent-name": "a/..",
    "dots-only": ".../x",
    "space": "a b/c",
    "space-in-name": "acme/my app",
    "leading-slash": "/acme/app",
    "trailing-slash": "acme/app/",
    "empty-owner": "/app",
    "empty-name": "acme/",
    "double-slash": "acme//app",
    "backslash": "acme\\app",
    "pct-slash": "acme%2fapp",
    "nul": "acme/app\x00",
    "newline": "acme/app\n",
    "fullwidth": "\uff41cme/app",
    "segment-over-100": "a" * 101 + "/b",
    "very-long": "a" * 300 + "/" + "b" * 300,
}


@pytest.mark.parametrize("repo", BAD_REPOS.values(), ids=BAD_REPOS.keys())
@pytest.mark.parametrize("call", ENDPOINTS.values(), ids=ENDPOINTS.keys())
def test_bad_repo_is_refused(client: httpx.Client, call: Call, repo: str) -> None:
    with nothing_changes(client):
        assert_refused(call.send(client, repo=repo), 400)


@pytest.mark.parametrize("call", ENDPOINTS.values(), ids=ENDPOINTS.keys())
def test_missing_repo_is_refused(client: httpx.Client, call: Call) -> None:
    with nothing_changes(client):
        assert_refused(call.send(client, repo=None), 400)


# -- paths and methods -----------------------------------------------------------------

UNKNOWN_PATHS = [
    "/v1/team_memory/nope",
    "/v1/team_memory/history/extra",
    "/v1/team_memory/restore/1",
    "/v1/team_memory/..%2f..%2fetc%2fpasswd",
    "/v1/team_memory%00",
    "/v1/TEAM_MEMORY",
    "/v1",
    "/v2/team_memory",
    "/api/claude_code/team_memory/nope",
    "/.env",
    "/admin",
]


@pytest.mark.parametrize("path", UNKNOWN_PATHS)
@pytest.mark.parametrize("method", ["GET", "PUT", "POST", "DELETE"])
def test_unknown_path_is_a_json_404(client: httpx.Client, method: str, path: str) -> None:
    with nothing_changes(client):
        response = client.request(
            method, path, params={"repo": SEEDED_REPO}, content=json_bytes({"entries": {}})
        )
        assert_refused(response, 404, error_code="not_found")


WRONG_METHODS = [
    ("POST", API),
    ("PATCH", API),
    ("PUT", HISTORY),
    ("POST", HISTORY),
    ("DELETE", HISTORY),
    ("GET", RESTORE),
    ("PUT", RESTORE),
    ("DELETE", RESTORE),
    ("PATCH", RESTORE),
    ("POST", "/healthz"),
    ("DELETE", "/readyz"),
    ("PUT", "/metrics"),
    ("PUT", "/api/claude_code/team_memory/history"),
]


@pytest.mark.parametrize(("method", "path"), WRONG_METHODS)
def test_wrong_method_is_a_json_405(client: httpx.Client, method: str, path: str) -> None:
    with nothing_changes(client):
        body = json_bytes(
            {"entries": {EXISTING_KEY: "overwritten"}, "key": EXISTING_KEY, "version": 1}
        )
        response = client.request(
            method, path, params={"repo": SEEDED_REPO, "key": EXISTING_KEY}, content=body
        )
        assert_refused(response, 405)
        assert response.headers.get("allow")


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"],
)
def test_body_that_is_not_declared_json_is_refused(client: httpx.Client, content_type: str) -> None:
    body = json_bytes({"entries": {GOOD_KEY: "fine"}})
    with nothing_changes(client):
        for repo in WATCHED_REPOS:
            response = client.put(
                API, params={"repo": repo}, content=body, headers={"Content-Type": content_type}
            )
            assert response.status_code in (400, 415), response.text
            assert_refused(response, response.status_code)


# -- restore bodies ----------------------------------------------------------------------

BAD_RESTORE_BODIES: dict[str, bytes] = {
    "not-json": b"{key: 1}",
    "empty": b"",
    "array": json_bytes([EXISTING_KEY, 1]),
    "string": json_bytes(EXISTING_KEY),
    "null": b"null",
    "empty-object": json_bytes({}),
    "missing-version": json_bytes({"key": EXISTING_KEY}),
    "missing-key": json_bytes({"version": 1}),
    "key-int": json_bytes({"key": 1, "version": 1}),
    "key-null": json_bytes({"key": None, "version": 1}),
    "key-list": json_bytes({"key": [EXISTING_KEY], "version": 1}),
    "key-object": json_bytes({"key": {"name": EXISTING_KEY}, "version": 1}),
    "version-string": json_bytes({"key": EXISTING_KEY, "version": "1"}),
    "version-float": json_bytes({"key": EXISTING_KEY, "version": 1.0}),
    "version-true": json_bytes({"key": EXISTING_KEY, "version": True}),
    "version-null": json_bytes({"key": EXISTING_KEY, "version": None}),
    "version-zero": json_bytes({"key": EXISTING_KEY, "version": 0}),
    "version-negative": json_bytes({"key": EXISTING_KEY, "version": -1}),
    "version-list": json_bytes({"key": EXISTING_KEY, "version": [1]}),
    "key-traversal": json_bytes({"key": "../x", "version": 1}),
    "key-pct-traversal": json_bytes({"key": "%2e%2e/x", "version": 1}),
    "key-surrogate": json_bytes({"key": "\ud800", "version": 1}),
    "key-nul": json_bytes({"key": "a\x00b", "version": 1}),
    "key-empty": json_bytes({"key": "", "version": 1}),
    "invalid-utf8": b'{"key": "\xff", "version": 1}',
}


@pytest.mark.parametrize("body", BAD_RESTORE_BODIES.values(), ids=BAD_RESTORE_BODIES.keys())
def test_bad_restore_body_is_refused(client: httpx.Client, body: bytes) -> None:
    with nothing_changes(client):
        for repo in WATCHED_REPOS:
            response = client.post(
                RESTORE,
                params={"repo": repo},
                content=body,
                headers={"Content-Type": "application/json"},
            )
            assert_refused(response, 400)


@pytest.mark.parametrize("version", [BEYOND_INT64, 10**30], ids=["2**63", "10**30"])
def test_restore_version_beyond_int64_is_a_4xx(client: httpx.Client, version: int) -> None:
    with nothing_changes(client):
        response = client.post(
            RESTORE, params={"repo": SEEDED_REPO}, json={"key": EXISTING_KEY, "version": version}
        )
        assert 400 <= response.status_code < 500, response.text
        assert_refused(response, response.status_code)


# -- tokens ------------------------------------------------------------------------------


def bad_authorizations(tokens: Tokens) -> dict[str, bytes | None]:
    """Authorization header values (raw bytes on the wire) that must all get a 401."""
    valid = tokens.writer
    flipped = valid[:-1] + ("A" if valid[-1] != "A" else "B")
    headers: dict[str, str | bytes | None] = {
        "none": None,
        "empty": "",
        "scheme-only": "Bearer",
        "basic": "Basic dXNlcjpwYXNz",
        "other-scheme-valid-token": f"Token {valid}",
        "no-scheme": valid,
        "garbage": "Bearer garbage",
        "prefix-only": "Bearer mst_",
        "bad-checksum": f"Bearer {flipped}",
        "trailing-junk": f"Bearer {valid}x",
        "two-tokens": f"Bearer {valid} {valid}",
        "tab-separated": f"Bearer\t{valid}",
        "well-formed-unknown": f"Bearer {mint_token().secret}",
        "revoked": f"Bearer {tokens.revoked}",
        "very-long": "Bearer " + "A" * 8000,
        "non-ascii-bytes": b"Bearer \xff\xfe",
    }
    return {
        name: value.encode("ascii") if isinstance(value, str) else value
        for name, value in headers.items()
    }


BAD_AUTH_NAMES = [
    "none", "empty", "scheme-only", "basic", "other-scheme-valid-token",
    "no-scheme", "garbage", "prefix-only", "bad-checksum", "trailing-junk", "two-tokens",
    "tab-separated", "well-formed-unknown", "revoked", "very-long", "non-ascii-bytes",
]  # fmt: skip
AUTH_ENDPOINTS = {**ENDPOINTS, "metrics": Call("GET", "/metrics")}


@pytest.mark.parametrize("auth_name", BAD_AUTH_NAMES)
@pytest.mark.parametrize("call", AUTH_ENDPOINTS.values(), ids=AUTH_ENDPOINTS.keys())
def test_bad_authorization_is_401(
    client: httpx.Client, anonymous: httpx.Client, tokens: Tokens, call: Call, auth_name: str
) -> None:
    authorization = bad_authorizations(tokens)[auth_name]
    headers = {} if authorization is None else {b"Authorization": authorization}
    with nothing_changes(client):
        request = anonymous.build_request(
            call.method,
            call.path,
            params={**call.params, "repo": SEEDED_REPO},
            content=None if call.body is None else json_bytes(call.body),
            headers=headers,
        )
        response = anonymous.send(request)
        assert_refused(response, 401)
        assert response.headers.get("www-authenticate", "").startswith("Bearer")


def test_bad_authorization_names_are_all_tested(tokens: Tokens) -> None:
    assert sorted(BAD_AUTH_NAMES) == sorted(bad_authorizations(tokens))


@pytest.mark.parametrize("token_name", ["other_owner", "other_repo"])
@pytest.mark.parametrize("call", ENDPOINTS.values(), ids=ENDPOINTS.keys())
def test_token_for_another_repo_is_403(
    live: LiveServer, client: httpx.Client, tokens: Tokens, call: Call, token_name: str
) -> None:
    with live_client(live, getattr(tokens, token_name)) as outsider, nothing_changes(client):
        assert_refused(call.send(outsider), 403)


@pytest.mark.parametrize("call", WRITE_ENDPOINTS.values(), ids=WRITE_ENDPOINTS.keys())
def test_read_only_token_cannot_write(
    live: LiveServer, client: httpx.Client, tokens: Tokens, call: Call
) -> None:
    with live_client(live, tokens.read_only) as reader, nothing_changes(client):
        assert reader.get(API, params={"repo": SEEDED_REPO}).status_code == 200
        assert_refused(call.send(reader), 403)


def test_read_only_token_cannot_write_through_the_compat_prefix(
    live: LiveServer, client: httpx.Client, tokens: Tokens
) -> None:
    compat = replace(ENDPOINTS["put"], path="/api/claude_code/team_memory")
    with live_client(live, tokens.read_only) as reader, nothing_changes(client):
        assert_refused(compat.send(reader), 403)
