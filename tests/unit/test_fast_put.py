"""The fast PUT takes a body itself only when the route's `PutBody` would accept it,
and a query or headers only when the route's parameters would: anything else goes to
the route, whose full validation words the 400 (the integration tests send both).
Its SQLite write runs on the event loop only when nothing else would wait for it."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from starlette.types import Message, Receive, Scope, Send

from sync_server.app import RequestGuard
from sync_server.config import sqlite_url
from sync_server.fast_put import (
    WRITE_ON_LOOP_BYTES,
    FastPut,
    InFlight,
    _plain_headers,
    _plain_repo,
    _put_fields,
)
from sync_server.metrics import Metrics
from sync_server.models import PutBody
from sync_server.storage import sql_base
from sync_server.storage.factory import open_store
from sync_server.storage.sql import SqlStore

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


async def _no_app(scope: Scope, receive: Receive, send: Send) -> None:
    raise AssertionError("not reached")


def _writing(store: SqlStore, text: str, key: str = "a.md") -> Callable[[], str]:
    """A one-key write that says which thread made it."""

    def write() -> str:
        notes = {key: text}
        store.put("acme/app", notes, if_match=None, base_checksums=None, max_entries=99, author="")
        return threading.current_thread().name

    return write


def test_a_sqlite_write_runs_on_the_loop_only_alone_small_and_unhindered(tmp_path: Path) -> None:
    store = open_store(sqlite_url(tmp_path / "db.sqlite3"))
    store.migrate()
    in_flight = InFlight()
    fast = FastPut(_no_app, in_flight=in_flight)
    loop_thread = threading.current_thread().name

    _writing(store, "0")()  # the repo's live keys, cached (else: the thread, below)

    async def main() -> None:
        in_flight.count = 1  # this PUT alone
        assert await fast._write(_writing(store, "1"), 100, True) == loop_thread
        in_flight.count = 2  # and another request being served
        assert await fast._write(_writing(store, "2"), 100, True) == "memsync-writer"
        in_flight.count = 1
        big = WRITE_ON_LOOP_BYTES + 1
        assert await fast._write(_writing(store, "3"), big, True) == "memsync-writer"
        assert await fast._write(_writing(store, "4"), 100, False) != loop_thread
        # Another process holds SQLite's write lock: the loop does not wait for it (it
        # releases the lock itself a moment later); the writer thread does.
        other = sqlite3.connect(tmp_path / "db.sqlite3", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        asyncio.get_running_loop().call_later(0.2, other.execute, "ROLLBACK")
        assert await fast._write(_writing(store, "5"), 100, True) == "memsync-writer"
        other.close()

    asyncio.run(main())
    head = store.head("acme/app")
    assert head is not None
    assert head.version == 6  # each write made once
    store.close()


def test_a_write_whose_work_grows_with_the_repo_is_never_made_on_the_loop(
    tmp_path: Path,
) -> None:
    url = sqlite_url(tmp_path / "db.sqlite3")
    first = open_store(url)
    first.migrate()
    notes = {f"n{i}.md": "x\n" for i in range(50)}
    notes["MEMORY.md"] = "".join(f"- [n{i}](n{i}.md)\n" for i in range(50))
    first.put("acme/app", notes, if_match=None, base_checksums=None, max_entries=99, author="")
    first.close()
    store = open_store(url)  # a server just started: its cache of live keys is cold
    fast = FastPut(_no_app, in_flight=InFlight())
    fast.in_flight.count = 1  # this PUT alone
    loop_thread = threading.current_thread().name
    index = notes["MEMORY.md"] + "- [new](a.md)\n"

    async def main() -> None:
        # The cold cache would read every live key: the writer thread does that.
        assert await fast._write(_writing(store, "1"), 100, True) == "memsync-writer"
        assert await fast._write(_writing(store, "2"), 100, True) == loop_thread  # now warm
        # Rewriting an index reads its old text for the index rule: the thread again.
        assert await fast._write(_writing(store, index, "MEMORY.md"), 100, True) == (
            "memsync-writer"
        )
        assert await fast._write(_writing(store, "3"), 100, True) == loop_thread

    asyncio.run(main())
    head = store.head("acme/app")
    assert head is not None
    assert head.version == 5  # each write made once
    store.close()


def test_a_write_on_the_loop_never_checkpoints_the_wal_and_leaves_that_to_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sql_base, "LOOP_WRITES_IN_A_ROW", 2)
    monkeypatch.setattr(sql_base, "WAL_AUTOCHECKPOINT_PAGES", 1)  # each commit may
    path = tmp_path / "db.sqlite3"
    store = open_store(sqlite_url(path))
    store.migrate()
    _writing(store, "0")()  # the live keys cached; committed and checkpointed here
    fast = FastPut(_no_app, in_flight=InFlight())
    fast.in_flight.count = 1  # this PUT alone
    loop_thread = threading.current_thread().name

    async def main() -> None:
        before = path.read_bytes()
        assert await fast._write(_writing(store, "1"), 100, True) == loop_thread
        assert await fast._write(_writing(store, "2"), 100, True) == loop_thread
        assert path.read_bytes() == before  # both commits only in the WAL
        assert await fast._write(_writing(store, "3"), 100, True) == "memsync-writer"
        assert path.read_bytes() != before  # the thread's commit checkpointed
        assert await fast._write(_writing(store, "4"), 100, True) == loop_thread

    asyncio.run(main())
    head = store.head("acme/app")
    assert head is not None
    assert head.version == 5
    store.close()


def test_requests_in_flight_are_counted_and_an_open_stream_is_not() -> None:
    in_flight = InFlight()
    seen: list[int] = []
    stream_open = asyncio.Event()
    stream_end = asyncio.Event()

    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(in_flight.count)
        stream = scope["path"] == "/events"
        kind = b"text/event-stream" if stream else b"application/json"
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", kind)]}
        )
        if stream:
            stream_open.set()
            await stream_end.wait()
        await send({"type": "http.response.body", "body": b""})

    guard = RequestGuard(
        inner, max_body_bytes=1000, metrics=Metrics(), accept_gzip=False, in_flight=in_flight
    )

    async def get(path: str) -> None:
        async def receive() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(_message: Message) -> None:
            return None

        scope = {"type": "http", "method": "GET", "path": path, "query_string": b""}
        await guard({**scope, "headers": [], "client": ("127.0.0.1", 1)}, receive, send)

    async def main() -> None:
        await get("/plain")
        stream = asyncio.create_task(get("/events"))
        await stream_open.wait()
        assert in_flight.count == 0  # the open stream only waits
        await get("/plain")
        stream_end.set()
        await stream
        assert in_flight.count == 0

    asyncio.run(main())
    assert seen == [1, 1, 1]
