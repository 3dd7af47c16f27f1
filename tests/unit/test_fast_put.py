"""The fast PUT takes a body itself only when the route's `PutBody` would accept it,
and a query or headers only when the route's parameters would: anything else goes to
the route, whose full validation words the 400 (the integration tests send both)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sync_server.fast_put import _plain_headers, _plain_repo, _put_fields
from sync_server.models import PutBody

BODIES: list[Any] = [
    {"entries": {"a.md": "x"}},
    {"entries": {}},
    {"entries": {"a.md": "x"}, "baseChecksums": {"a.md": None}, "deletes": ["b.md"]},
    {"entries": {"a.md": "x"}, "baseChecksums": None, "deletes": None, "provenance": None},
    {"entries": {"a.md": "x"}, "provenance": {"via": "cli"}, "unknown": 1},
    {"entries": {"a.md": 1}},
    {"entries": {"a.md": None}},
    {"entries": ["a.md"]},
    {"entries": {"a.md": "x"}, "baseChecksums": {"a.md": 3}},
    {"entries": {"a.md": "x"}, "baseChecksums": []},
    {"entries": {"a.md": "x"}, "deletes": "b.md"},
    {"entries": {"a.md": "x"}, "deletes": [1]},
    {"entries": {"a.md": "x"}, "provenance": "cli"},
    {"baseChecksums": {}},
    [],
    "entries",
    None,
]


@pytest.mark.parametrize("body", BODIES)
def test_a_body_is_taken_exactly_when_the_route_would_accept_it(body: Any) -> None:
    try:
        model: PutBody | None = PutBody.model_validate(body)
    except ValidationError:
        model = None
    fields = _put_fields(body)
    if model is None:
        assert fields is None
    else:
        assert fields == (model.entries, model.baseChecksums, model.deletes, model.provenance)


def scope(query: bytes = b"repo=acme/app", **headers: bytes) -> dict[str, Any]:
    return {
        "query_string": query,
        "headers": [(name.replace("_", "-").encode(), v) for name, v in headers.items()],
    }


def test_only_a_lone_repo_within_its_bounds_is_taken() -> None:
    assert _plain_repo(scope()) == "acme/app"
    assert _plain_repo(scope(b"repo=" + b"a" * 201)) is not None
    for other in (
        b"",
        b"repo=",
        b"repo=" + b"a" * 202,
        b"repo=a/b&space=personal",
        b"repo=a/b&repo=c/d",
    ):
        assert _plain_repo(scope(other)) is None, other


def test_only_a_json_body_and_an_agent_within_its_length_are_taken() -> None:
    json_type = b"application/json"
    assert _plain_headers(scope(content_type=json_type))
    assert _plain_headers(scope(content_type=b"Application/JSON; charset=utf-8"))
    assert _plain_headers(scope(content_type=json_type, x_memsync_agent=b"a" * 100))
    assert not _plain_headers(scope(content_type=json_type, x_memsync_agent=b"a" * 101))
    assert not _plain_headers(scope())
    assert not _plain_headers(scope(content_type=b"text/plain"))
    assert not _plain_headers(scope(content_type=b"application/merge-patch+json"))
