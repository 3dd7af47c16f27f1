"""Which answers the client takes for a memsync server's, and which it refuses.

The server here is an httpx `MockTransport` standing for some other HTTP server (or a
broken one), not for any part of memsync; the real server's answers are covered by the
integration tests. Every refusal is `NotAMemsyncServer`, one line naming the URL.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from memsync_protocol.checksums import EMPTY_REPO_CHECKSUM, entry_checksum
from sync_client.api import Api
from sync_client.errors import NotAMemsyncServer, PermanentError, TooManyProposals
from sync_client.review.wire import Proposed

URL = "http://memsync.test/base"
CHECKSUM = entry_checksum("x\n")


def api_answering(status: int, body: Any = None, **headers: str) -> Api:
    """An `Api` whose every request gets this answer (JSON unless `body` is bytes)."""

    def handler(request: httpx.Request) -> httpx.Response:
        if isinstance(body, bytes):
            return httpx.Response(status, content=body, headers=headers)
        if body is None:
            return httpx.Response(status, headers=headers)
        return httpx.Response(status, content=json.dumps(body).encode(), headers=headers)

    return Api(URL, "token", "acme/app", transport=httpx.MockTransport(handler))


def head(**fields: Any) -> dict[str, Any]:
    return {"version": 3, "checksum": CHECKSUM, **fields}


FULL_OK = head(content={"entries": {"a.md": "x\n"}, "entryChecksums": {"a.md": CHECKSUM}})
HASHES_OK = head(entryChecksums={"a.md": CHECKSUM}, supports=["since"])
DELTA_OK = head(entries={}, entryChecksums={}, deleted=["b.md"])


def test_well_formed_answers_are_read() -> None:
    full = api_answering(200, FULL_OK).get()
    assert full is not None
    assert (full.version, full.texts) == (3, {"a.md": "x\n"})
    assert api_answering(200, HASHES_OK).hashes().supports == frozenset({"since"})
    delta = api_answering(200, DELTA_OK).get(since=2)
    assert delta is not None
    assert delta.deleted == ["b.md"]
    assert delta.is_delta


def test_only_the_servers_no_team_memory_404_is_an_empty_repo() -> None:
    body = {
        "error": {"type": "not_found", "message": "m", "details": {"error_code": "no_team_memory"}}
    }
    for remote in (api_answering(404, body).get(), api_answering(404, body).hashes()):
        assert remote is not None
        assert (remote.version, remote.checksum, remote.entry_checksums) == (
            0,
            EMPTY_REPO_CHECKSUM,
            {},
        )


FULL_BAD = {
    "not-an-object": [FULL_OK],
    "version-missing": {"checksum": CHECKSUM, "content": FULL_OK["content"]},
    "version-string": {**FULL_OK, "version": "3"},
    "version-bool": {**FULL_OK, "version": True},
    "version-negative": {**FULL_OK, "version": -1},
    "checksum-missing": {"version": 3, "content": FULL_OK["content"]},
    "checksum-not-sha256": {**FULL_OK, "checksum": "abc"},
    "content-missing": head(),
    "content-a-list": head(content=[]),
    "entry-checksums-missing": head(content={"entries": {}}),
    "entry-checksums-a-list": head(content={"entries": {}, "entryChecksums": []}),
    "entry-checksum-not-a-string": head(content={"entries": {}, "entryChecksums": {"a": 1}}),
    "entries-missing": head(content={"entryChecksums": {}}),
    "supports-a-string": {**FULL_OK, "supports": "since"},
}


@pytest.mark.parametrize("body", FULL_BAD.values(), ids=FULL_BAD.keys())
def test_a_200_that_is_not_team_memory_is_refused(body: Any) -> None:
    with pytest.raises(NotAMemsyncServer) as refused:
        api_answering(200, body, **{"Content-Type": "application/json"}).get()
    message = str(refused.value)
    assert message.startswith(f"{URL} is not a memsync server (GET /v1/team_memory answered 200 ")
    assert "\n" not in message
    assert isinstance(refused.value, PermanentError)


@pytest.mark.parametrize(
    ("body", "view"),
    [
        (FULL_OK, "hashes"),  # the full shape where the hashes view was asked for
        (head(entryChecksums={}, entries={}), "delta"),  # no deleted list
        (HASHES_OK, "delta"),
    ],
)
def test_each_view_must_have_its_own_shape(body: Any, view: str) -> None:
    api = api_answering(200, body)
    with pytest.raises(NotAMemsyncServer):
        api.hashes() if view == "hashes" else api.get(since=1)


@pytest.mark.parametrize(
    ("status", "body", "headers", "answer"),
    [
        (404, b"<h1>Not Found</h1>", {"Content-Type": "text/html"}, "404 text/html"),
        (404, {"error": {"type": "not_found", "message": "no such path"}}, {}, "404"),
        (
            404,
            {"detail": "Not Found"},
            {"Content-Type": "application/json"},
            "404 application/json",
        ),
        (200, b"<h1>Welcome</h1>", {"Content-Type": "text/html"}, "200 text/html, not JSON"),
        (
            302,
            None,
            {"Location": "https://sso.example/login"},
            "302, a redirect to https://sso.example/login",
        ),
        (304, None, {}, "304"),
    ],
)
def test_other_answers_are_refused_naming_what_answered(
    status: int, body: Any, headers: dict[str, str], answer: str
) -> None:
    with pytest.raises(NotAMemsyncServer, match="is not a memsync server") as refused:
        api_answering(status, body, **headers).hashes()
    assert f"(GET /v1/team_memory answered {answer}" in str(refused.value)


def test_a_404_to_a_since_request_is_not_an_empty_delta() -> None:
    with pytest.raises(NotAMemsyncServer):
        api_answering(404, b"nope", **{"Content-Type": "text/plain"}).get(since=4)


def test_writes_to_another_server_are_refused() -> None:
    with pytest.raises(NotAMemsyncServer, match="PUT /v1/team_memory answered 404"):
        api_answering(404, {"error": {"type": "not_found", "message": "no such path"}}).put(b"{}")
    with pytest.raises(NotAMemsyncServer, match="PUT /v1/team_memory answered 200"):
        api_answering(200, {"ok": True}).put(b"{}")


# The three writes that may become a proposal in a reviewed repo (docs/protocol.md 3.12).
REVIEWED_WRITES: dict[str, Any] = {
    "put": lambda api: api.put_reviewed(b"{}"),
    "delete": lambda api: api.delete_reviewed("a.md"),
    "restore": lambda api: api.restore_reviewed("a.md", 2),
}


@pytest.mark.parametrize("write", sorted(REVIEWED_WRITES))
def test_each_reviewed_write_reads_a_proposal_a_commit_and_the_bound_alike(write: str) -> None:
    call = REVIEWED_WRITES[write]
    pending = {"id": 9, "status": "pending", "keys": ["a.md"], "baseVersion": 3}
    kept = call(api_answering(202, head(updatedKeys=[], proposal=pending)))
    assert kept == Proposed(9, ["a.md"], 3, CHECKSUM, 3)
    committed = call(api_answering(200, head(updatedKeys=["a.md"])))
    assert not isinstance(committed, Proposed)
    assert committed.version == 3
    with pytest.raises(NotAMemsyncServer, match=r"answered 202.*not a proposal"):
        call(api_answering(202, head(updatedKeys=[])))
    bound = {"error_code": "too_many_proposals", "max": 200}
    refusal = {"error": {"type": "conflict", "message": "m", "details": bound}}
    with pytest.raises(TooManyProposals) as error:
        call(api_answering(409, refusal))
    assert error.value.maximum == 200


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (404, b"<h1>Not Found</h1>"),
        (200, b"OK"),
        (200, {"status": "healthy"}),
        (301, None),
    ],
)
def test_health_must_be_the_memsync_liveness_answer(status: int, body: Any) -> None:
    with pytest.raises(NotAMemsyncServer, match=r"\(GET /healthz answered"):
        api_answering(status, body).health()


def test_health_returns_the_servers_clock() -> None:
    date = "Tue, 01 Dec 2026 08:00:00 GMT"
    assert api_answering(200, {"status": "ok"}, Date=date).health().dates == (date,)


def test_doctor_judges_the_clock_by_the_first_date_header_that_is_a_date() -> None:
    from email.utils import formatdate

    from sync_client.answers import Health
    from sync_client.doctor import _clock_row

    now = formatdate(usegmt=True)
    row = _clock_row(Health(dates=("yesterday", "Mon, 01 Jan 2001 00:00:00 -0000", now)))
    assert row["ok"] is True
    assert row["detail"].endswith("s from the server's clock")
    row = _clock_row(Health(dates=("yesterday",)))
    assert (row["ok"], row["detail"]) == (
        True,
        "the server's Date header is not a date: not compared",
    )


@pytest.mark.parametrize(
    ("server", "hint"),
    [
        ("http://host/ui", "give the server's base URL, http://host, without /ui"),
        ("http://host/ui/repos/acme/app", "http://host, without /ui/repos/acme/app"),
        ("https://corp.example/memsync/v1/team_memory", "https://corp.example/memsync, without"),
        ("http://host/api/claude_code/team_memory", "without /api/claude_code/team_memory"),
        ("http://host:8787/docs", "give the server's base URL, http://host:8787, without /docs"),
        ("http://host/typo", None),
        ("http://host/memsync", None),  # a proxy prefix may be the base itself
        ("http://host", None),
    ],
)
def test_a_server_path_pasted_after_the_base_url_is_named(server: str, hint: str | None) -> None:
    message = str(NotAMemsyncServer(server, "GET /healthz answered 404 text/html"))
    assert message.startswith(f"{server} is not a memsync server (GET /healthz answered 404")
    if hint is None:
        assert "base URL" not in message
    else:
        assert hint in message
