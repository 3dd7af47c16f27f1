"""The common PUT served in front of FastAPI's router, by the same functions.

A one-key PUT is the write every watcher makes, and most of its time went to the layers
around the store: the router's matching, FastAPI's dependency solving and body
validation, its exit stack. `FastPut` answers `PUT /v1/team_memory?repo=R` (both
prefixes) itself when the request is the plain case: only `repo` in the query, a JSON
body whose fields have the types `PutBody` declares, headers within their limits. It
then runs the route's own dependency functions in the route's order (`get_repo`,
`get_principal`, `writer`, `get_agent`) and its body (`put_entries`), so the answers,
errors, access-log fields, events and metrics are the route's. Anything else (a
personal space, a malformed body or query, an unusual content type) goes on to the
route unchanged, body included, and gets the route's full validation and its errors.
The route stays in the OpenAPI schema.

It sits in front of FastAPI's own layers (`app.MemsyncApp`), behind `RequestGuard`
only, so it answers its own errors: an `ApiError` as the route would, anything
unexpected as the structured 500 that FastAPI's error layer gives the routes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any
from urllib.parse import parse_qsl

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sync_server.deps import MAX_AGENT_CHARS, get_agent, get_principal, get_repo, writer
from sync_server.errors import ApiError
from sync_server.routes.team_memory import error_response, put_entries, unexpected_error_response
from sync_server.storage import write_now
from sync_server.write_thread import WRITER

PUT_PATHS = frozenset(["/v1/team_memory", "/api/claude_code/team_memory"])
# The `repo` query parameter's bounds in `deps.get_repo`.
MAX_REPO_CHARS = 201
_JSON = b"application/json"
# The largest body whose write may be made on the event loop (a few notes' worth).
WRITE_ON_LOOP_BYTES = 16 * 1024


class InFlight:
    """How many HTTP requests this process is serving now. `RequestGuard` counts each
    from its start to its end, except an event stream, which stops counting once open
    (it then waits for events and holds the loop no more than an idle connection)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


def replaying(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives `body` once as the whole request, then defers to
    `receive` (for the disconnect): how a layer that read the body passes it on."""
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _put_fields(
    data: Any,
) -> (
    tuple[dict[str, str], dict[str, str | None] | None, list[str] | None, dict[str, Any] | None]
    | None
):
    """`data`'s (entries, baseChecksums, deletes, provenance) when it has exactly the
    types `PutBody` (strict) accepts, else None: the route then decides, with its
    own words for what is wrong."""
    if not isinstance(data, dict):
        return None
    entries = data.get("entries")
    if not isinstance(entries, dict) or not all(type(v) is str for v in entries.values()):
        return None
    bases = data.get("baseChecksums")
    if bases is not None and (
        not isinstance(bases, dict) or not all(v is None or type(v) is str for v in bases.values())
    ):
        return None
    deletes = data.get("deletes")
    if deletes is not None and (
        not isinstance(deletes, list) or not all(type(k) is str for k in deletes)
    ):
        return None
    provenance = data.get("provenance")
    if provenance is not None and not isinstance(provenance, dict):
        return None
    return entries, bases, deletes, provenance


def _plain_repo(scope: Scope) -> str | None:
    """The single `repo` query parameter, when it is the only one and within bounds."""
    pairs = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
    if len(pairs) != 1 or pairs[0][0] != "repo":
        return None
    repo = pairs[0][1]
    return repo if 1 <= len(repo) <= MAX_REPO_CHARS else None


def _plain_headers(scope: Scope) -> bool:
    """A JSON body, and an agent header within its length (else the route's 400)."""
    json_body: bool | None = None
    for name, value in scope["headers"]:
        if name == b"content-type" and json_body is None:  # the first, as Starlette reads
            json_body = value.split(b";", 1)[0].strip().lower() == _JSON
        elif name == b"x-memsync-agent" and len(value) > MAX_AGENT_CHARS:
            return False
    return bool(json_body)


class FastPut:
    """Pure ASGI middleware in front of the router: the plain PUT, answered directly."""

    def __init__(self, app: ASGIApp, *, in_flight: InFlight) -> None:
        """`in_flight`: the count `RequestGuard` keeps, which decides where a write runs."""
        self.app = app
        self.in_flight = in_flight

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] != "PUT"
            or scope["path"] not in PUT_PATHS
            or not _plain_headers(scope)
        ):
            await self.app(scope, receive, send)
            return
        repo = _plain_repo(scope)
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left: the route's way
                await self.app(scope, replaying(b"".join(chunks), receive), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        try:
            fields = _put_fields(json.loads(body)) if repo is not None else None
        except (ValueError, RecursionError):
            fields = None
        if fields is None:
            await self.app(scope, replaying(body, receive), send)
            return
        try:
            response = await self._put(Request(scope), len(body), repo or "", *fields)
        except ApiError as error:
            response = error_response(error)
        except Exception as error:  # outside FastAPI's error layer: answered here
            await unexpected_error_response(error)(scope, receive, send)
            raise  # for the server's log, as that layer does
        await response(scope, receive, send)

    async def _put(
        self,
        request: Request,
        size: int,
        repo_param: str,
        entries: dict[str, str],
        bases: dict[str, str | None] | None,
        deletes: list[str] | None,
        provenance: dict[str, Any] | None,
    ) -> Any:
        """The route's dependencies in its order, then its body (`_write`)."""
        repo = await get_repo(request, repo_param, None)
        principal = await writer(repo, await get_principal(request, None))
        agent = await get_agent(request.headers.get("x-memsync-agent"))
        state = request.app.state
        service = state.team_memory
        job = partial(
            put_entries,
            service,
            state.settings,
            repo,
            principal,
            entries,
            base_checksums=bases,
            deletes=deletes,
            provenance=provenance,
            if_match=request.headers.get("if-match"),
            agent=agent,
        )
        return await self._write(job, size, getattr(service.store, "writes_now", False))

    async def _write(self, job: Callable[[], Any], size: int, sqlite: bool) -> Any:
        """Where the write runs. PostgreSQL: on the pool (its writes to different repos
        run at once). SQLite: on the event loop itself when this PUT is the only request
        the process is serving, its body is small, SQLite can write at once and the
        write does no work that grows with the repo (`write_now`: nothing to wait for,
        the live keys cached, no index rewritten, no proposal), which spares the hop to
        a thread and back;
        otherwise on the process's one writer thread (`write_thread`), so that requests
        served meanwhile (a 304 poll beside a stream of PUTs) never wait for a write."""
        if not sqlite:
            return await run_in_threadpool(job)
        if self.in_flight.count <= 1 and size <= WRITE_ON_LOOP_BYTES:
            try:
                with write_now.now_or_never():
                    return job()
            except write_now.WriterBusy:
                pass  # nothing was written: the same write, on the thread, may wait
        return await WRITER.run(job)
