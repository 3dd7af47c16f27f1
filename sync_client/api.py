"""The HTTP client of the team-memory API: `Api`, one repo on one server.

httpx is imported on first use, not with this module: a no-op push makes no request
and must not pay the import (the CLI's start-up time is most of a no-op's cost). Only
`api` and the modules it stands on (`transport`, `events_stream`) import httpx.

Every answer is turned into a result or a typed error in exactly one place: a failed
answer in `answers._raise_for_status`, a failure below HTTP in
`transport._transport_errors` (in words: "connection refused", never an exception's
class name). `retries.with_retries` retries the transient ones. A server without the
events stream is `EventsUnsupported`, a flow signal like 304, 409 `stale_base`, 410 and
412 (see `answers`).

Every answer is also checked to come from a memsync server: a 404 is "no team memory
yet" only when its body is the server's JSON error `no_team_memory`, and a 200 must be
a team-memory object. Anything else (an HTML page, another JSON shape, a redirect) is
`NotAMemsyncServer`, so a mistyped URL is never read as an empty repo and never gets
"created" by a push.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    import httpx

from memsync_protocol.checksums import (
    EMPTY_REPO_CHECKSUM,
    REPO_CHECKSUM_VERSIONS,
    is_checksum,
    repo_checksum,
)
from sync_client.answers import (
    Health,
    RemoteState,
    TokenInfo,
    WriteResult,
    _deleted_row,
    _describe_answer,
    _error_body,
    _exact_int,
    _int,
    _is_no_team_memory,
    _log_problem,
    _raise_for_status,
    _remote_problem,
    _string_list,
    _version_problem,
)
from sync_client.errors import AuthError, NotAMemsyncServer, ServerError
from sync_client.events_stream import EventStream, EventsUnsupported
from sync_client.review.wire import Proposed, proposed, review_field
from sync_client.transport import DownloadProgress, _read_counted, _transport_errors

API_PATH = "/v1/team_memory"
HEALTH_PATH = "/healthz"
TOKEN_PATH = "/v1/token"  # noqa: S105 (a path, not a secret)
# In a server's `supports`: it takes `Content-Encoding: gzip` request bodies.
GZIP_REQUESTS = "gzip"
# Smaller bodies go plain: gzip's frame would eat most of the gain.
GZIP_MIN_BYTES = 1024
# `space=personal`: the calling person's own space (docs/protocol.md 3.14); with
# `repo=~` their global one.
PERSONAL_SPACE = "personal"
NO_PERSON = (
    "this token belongs to no person, so it has no personal space: ask the server's "
    "operator for a token of yours (`memsync-server token create --person NAME`)"
)
GLOBAL_REPO = "~"
# A repo's personal space mirrors Claude Code's private memory folder, whose `team/` is
# the team dir: keys below it are never read from (or sent to) a personal space.
TEAM_FOLDER_PREFIX = "team/"


class Api:
    """One repo on one server, over one keep-alive connection."""

    def __init__(
        self,
        server: str,
        token: str,
        repo: str,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = 30.0,
        space: str | None = None,
    ) -> None:
        self.server = server
        self.repo = repo
        # None: the team's memory of `repo`; PERSONAL_SPACE: the caller's own.
        self.space = space
        self.hidden_prefix = (
            TEAM_FOLDER_PREFIX if space == PERSONAL_SPACE and repo != GLOBAL_REPO else None
        )
        # Bytes on the wire (bodies as sent, compressed or not, and headers).
        self.bytes_sent = 0
        self.bytes_received = 0
        # Learned from a `supports` list this server sent in this run; until then, and
        # from a server without it, bodies go plain.
        self.gzip_requests = False
        self._token = token
        self._timeout = timeout
        self._transport = transport
        self._client_instance: httpx.Client | None = None

    @property
    def _client(self) -> httpx.Client:
        """The connection, opened on the first request."""
        if self._client_instance is None:
            import httpx

            self._client_instance = httpx.Client(
                base_url=self.server,
                headers={"Authorization": f"Bearer {self._token}", "User-Agent": "memsync"},
                timeout=self._timeout,
                transport=self._transport,
                # Plain http has no certificates to check; loading the CA bundle for it
                # costs 20-40 ms of every CLI run.
                verify=not self.server.startswith("http://"),
            )
        return self._client_instance

    def close(self) -> None:
        """Close the connection, if one was opened."""
        if self._client_instance is not None:
            self._client_instance.close()

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _request(
        self,
        method: str,
        path: str = API_PATH,
        *,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        content: bytes | None = None,
        progress: DownloadProgress | None = None,
    ) -> httpx.Response:
        response = self._send(method, path, params, headers, content, progress)
        if response.status_code == 415 and "Content-Encoding" in response.request.headers:
            # A server that stopped taking gzip (a downgrade, a changed setting): plain.
            self.gzip_requests = False
            response = self._send(method, path, params, headers, content, progress)
        return response

    def _send(
        self,
        method: str,
        path: str,
        params: dict[str, Any] | None,
        headers: dict[str, str] | None,
        content: bytes | None,
        progress: DownloadProgress | None,
    ) -> httpx.Response:
        all_params = {**self._where(), **(params or {})}
        request_headers = dict(headers or {})
        if content is not None:
            request_headers["Content-Type"] = "application/json"
            if self.gzip_requests and len(content) >= GZIP_MIN_BYTES:
                import gzip

                # Level 6: a 200 KB batch in ~2 ms, a third of its size for Markdown.
                content = gzip.compress(content, compresslevel=6, mtime=0)
                request_headers["Content-Encoding"] = "gzip"
        with _transport_errors(self.server, self._timeout):
            if progress is None:
                response = self._client.request(
                    method, path, params=all_params, headers=request_headers, content=content
                )
            else:
                request = self._client.build_request(
                    method, path, params=all_params, headers=request_headers, content=content
                )
                response = self._client.send(request, stream=True)
                try:
                    _read_counted(response, progress)
                finally:
                    response.close()
        request = response.request
        self.bytes_sent += len(request.content) + sum(
            len(name) + len(value) + 4 for name, value in request.headers.raw
        )
        self.bytes_received += response.num_bytes_downloaded + sum(
            len(name) + len(value) + 4 for name, value in response.headers.raw
        )
        return response

    def _where(self) -> dict[str, str]:
        """The query naming what this Api reads and writes: the repo, and its space."""
        return {"repo": self.repo, "space": self.space} if self.space else {"repo": self.repo}

    def _not_memsync(self, response: httpx.Response, path: str, problem: str = "") -> NoReturn:
        if self.space and response.request.method == "PUT" and _is_no_team_memory(response):
            # A PUT creates the person's space; only a token of no person has none.
            raise AuthError(NO_PERSON, response.status_code)
        raise NotAMemsyncServer(self.server, _describe_answer(response, path, problem))

    def _learn(self, supports: list[str] | None) -> None:
        """Remember whether the server takes gzip bodies, from a checked `supports`."""
        if supports is not None:
            self.gzip_requests = GZIP_REQUESTS in supports

    def _json_answer(self, response: httpx.Response, path: str) -> Any:
        """The decoded body of a successful answer; `NotAMemsyncServer` unless it is JSON.

        Call it after `_raise_for_status`: a redirect is not followed, and is not ours.
        """
        if response.is_redirect or response.status_code >= 300:
            self._not_memsync(response, path)
        try:
            return response.json()
        except ValueError:
            self._not_memsync(response, path, "not JSON")

    def _remote(self, response: httpx.Response, view: str) -> RemoteState:
        """The `RemoteState` of a 200, checked to be a team-memory object of `view`."""
        body = self._json_answer(response, API_PATH)
        problem = _remote_problem(body, view)
        if problem is not None:
            self._not_memsync(response, API_PATH, problem)
        content = body["content"] if view == "full" else body
        self._check_repo_checksum(body, content["entryChecksums"], view)
        self._learn(body.get("supports"))
        self.last_review = review_field(body)  # issue 28: the repo's review, if any
        hidden = self.hidden_prefix or "\0"
        return RemoteState(
            version=body["version"],
            checksum=body["checksum"],
            entry_checksums={
                key: value
                for key, value in content["entryChecksums"].items()
                if not key.startswith(hidden)
            },
            texts={
                key: value
                for key, value in (content.get("entries") or {}).items()
                if not key.startswith(hidden)
            },
            deleted=[key for key in body.get("deleted") or [] if not key.startswith(hidden)],
            supports=frozenset(body.get("supports") or []),
            is_delta=view == "delta",
            last_modified=body["lastModified"]
            if isinstance(body.get("lastModified"), str)
            else None,
        )

    def _check_repo_checksum(
        self, body: dict[str, Any], entry_checksums: dict[str, str], view: str
    ) -> None:
        """Raise `ServerError` when a full or hashes answer's checksum is not the repo
        checksum of the entries it lists, by the definition it names (`checksumVersion`).

        An answer that names no definition (a server from before it was versioned, or
        another implementation of the endpoint), or one this client does not know, is
        not checked: its checksum is then only ever compared with the server's own.
        """
        definition = body.get("checksumVersion")
        if view == "delta" or definition not in REPO_CHECKSUM_VERSIONS:
            return
        if repo_checksum(entry_checksums, definition) != body["checksum"]:
            raise ServerError(
                f"{self.server} answered a repo checksum that is not the checksum of the "
                f"entries it listed (definition {definition}); nothing was written"
            )

    def _read(
        self,
        params: dict[str, Any],
        view: str,
        *,
        if_none_match: str | None = None,
        progress: DownloadProgress | None = None,
    ) -> RemoteState | None:
        """GET one view; None for a 304 to `if_none_match`.

        A repo that never held data is an empty state at version 0, and a 404 is read
        that way only when the server itself says `no_team_memory`: any other 404 (a
        wrong path, another server) is `NotAMemsyncServer`, as is a 304 nobody asked for.
        """
        headers = {"If-None-Match": f'"{if_none_match}"'} if if_none_match else {}
        response = self._request("GET", params=params, headers=headers, progress=progress)
        if response.status_code == 304:
            if if_none_match is None:
                self._not_memsync(response, API_PATH)
            return None
        if response.status_code == 404:
            if not _is_no_team_memory(response):
                self._not_memsync(response, API_PATH)
            # Still never written (for a delta: a pull after one that found it empty).
            return RemoteState(
                version=0,
                checksum=EMPTY_REPO_CHECKSUM,
                entry_checksums={},
                is_delta=view == "delta",
                no_team_memory=True,
            )
        _raise_for_status(response)
        return self._remote(response, view)

    def get(
        self,
        *,
        if_none_match: str | None = None,
        since: int | None = None,
        progress: DownloadProgress | None = None,
    ) -> RemoteState | None:
        """Full content (or the delta since a version); None when not modified (304).

        A repo that never held data is an empty state at version 0. Raises
        `NotAMemsyncServer` for an answer that is not a memsync server's. `progress`
        hears of the body's bytes as they arrive.
        """
        if since is None:
            return self._read({}, "full", if_none_match=if_none_match, progress=progress)
        return self._read({"since": since}, "delta", if_none_match=if_none_match, progress=progress)

    def hashes(self) -> RemoteState:
        """The hashes view: every key's checksum, no texts."""
        remote = self._read({"view": "hashes"}, "hashes")
        assert remote is not None  # a 304 is only possible with If-None-Match
        return remote

    def entry(self, key: str) -> tuple[str, str] | None:
        """One live entry, `(checksum, text)`, or None when the key is not live
        (`GET ?key=K`: ask only a server whose `supports` lists `key`)."""
        response = self._request("GET", params={"key": key})
        if response.status_code == 404:
            error = _error_body(response).get("error")
            if not (isinstance(error, dict) and error.get("type") == "not_found"):
                self._not_memsync(response, API_PATH)
            return None
        _raise_for_status(response)
        body = self._json_answer(response, API_PATH)
        if not (
            isinstance(body, dict)
            and body.get("key") == key
            and isinstance(body.get("content"), str)
            and is_checksum(body.get("checksum"))
        ):
            self._not_memsync(response, API_PATH, "not one entry")
        return body["checksum"], body["content"]

    def put(self, body: bytes, *, if_match: str | None = None) -> WriteResult:
        """PUT an exact, already serialized body (see `batching`)."""
        headers = {"If-Match": f'"{if_match}"'} if if_match else {}
        response = self._request("PUT", headers=headers, content=body)
        if response.status_code == 404:
            # A memsync server creates the repo on a PUT; it has no 404 to give.
            self._not_memsync(response, API_PATH)
        _raise_for_status(response)
        return self._write_result(response, API_PATH)

    def _write_result(self, response: httpx.Response, path: str) -> WriteResult:
        body = self._json_answer(response, path)
        if not (
            isinstance(body, dict)
            and _exact_int(body.get("version"))
            and is_checksum(body.get("checksum"))
            and _string_list(body.get("updatedKeys", []))
            and _string_list(body.get("supports", []))
        ):
            self._not_memsync(response, path, "not a write result")
        self._learn(body.get("supports"))
        return WriteResult(
            checksum=body["checksum"],
            version=body["version"],
            updated_keys=list(body.get("updatedKeys") or []),
            supports=frozenset(body["supports"]) if "supports" in body else None,
        )

    def put_and_delete(
        self, entries: dict[str, str], base_checksums: dict[str, str | None], deletes: list[str]
    ) -> WriteResult:
        """One commit that writes `entries` and deletes `deletes` (`supports` lists
        `put-deletes`); a key of `deletes` the server does not hold is a 404."""
        body = self._put_and_delete_body(entries, base_checksums, deletes)
        response = self._request("PUT", content=body)
        _raise_for_status(response)
        return self._write_result(response, API_PATH)

    def put_and_delete_reviewed(
        self, entries: dict[str, str], base_checksums: dict[str, str | None], deletes: list[str]
    ) -> WriteResult | Proposed:
        """`put_and_delete`, for a repo that may be reviewed: a 202 is a `Proposed`
        change of them all (a delete and its index lines, reviewed as one)."""
        return self.put_reviewed(self._put_and_delete_body(entries, base_checksums, deletes))

    def _put_and_delete_body(
        self, entries: dict[str, str], base_checksums: dict[str, str | None], deletes: list[str]
    ) -> bytes:
        fields: dict[str, Any] = {
            "entries": entries,
            "baseChecksums": base_checksums,
            "deletes": deletes,
        }
        text = json.dumps({**fields, **self._provenance_field()}, ensure_ascii=False)
        return text.encode("utf-8")

    def delete(self, key: str) -> WriteResult:
        """Delete one key for the whole team (kept in the server's history)."""
        headers = self._provenance_header()
        response = self._request("DELETE", params={"key": key}, headers=headers)
        _raise_for_status(response)
        return self._write_result(response, API_PATH)

    def history(self, key: str) -> list[dict[str, Any]]:
        """The versions of one key, oldest first."""
        path = f"{API_PATH}/history"
        response = self._request("GET", path, params={"key": key})
        _raise_for_status(response)
        versions = self._json_answer(response, path)
        return versions if isinstance(versions, list) else []

    def version(self, key: str, version: int, *, compare: int | None = None) -> dict[str, Any]:
        """One version of one key, with its text; with `compare` (a server listing
        `history-compare`), that version too, under `compare`."""
        path = f"{API_PATH}/history"
        params: dict[str, Any] = {"key": key, "version": version}
        if compare is not None:
            params["compare"] = compare
        response = self._request("GET", path, params=params)
        _raise_for_status(response)
        body = self._json_answer(response, path)
        if compare is not None and not (
            isinstance(body, dict) and _version_problem(body.get("compare")) is None
        ):
            self._not_memsync(response, path, "no compare object")
        if not (isinstance(body, dict) and _version_problem(body) is None):
            self._not_memsync(response, path, "not a version of a key")
        return body

    def log(
        self,
        *,
        before: int | None = None,
        limit: int | None = None,
        author: str | None = None,
        since: str | None = None,
        key: str | None = None,
    ) -> dict[str, Any]:
        """One page of the repo's commits, newest first (a server listing `log`):
        `{repo, commits: [{version, at, author, ops, keys, key_count}], next_before}`.
        `since` is a wire time (`2026-12-01T10:00:00Z`)."""
        path = f"{API_PATH}/log"
        given = {"before": before, "limit": limit, "author": author, "since": since, "key": key}
        params = {name: value for name, value in given.items() if value is not None}
        response = self._request("GET", path, params=params)
        _raise_for_status(response)
        body = self._json_answer(response, path)
        problem = _log_problem(body)
        if problem is not None:
            self._not_memsync(response, path, problem)
        return dict(body)

    def deleted(self) -> list[dict[str, Any]]:
        """Keys deleted for the team and not live now, newest delete first (a server
        listing `deleted`): `[{key, version, author, at, last_version}]`."""
        path = f"{API_PATH}/deleted"
        response = self._request("GET", path)
        _raise_for_status(response)
        body = self._json_answer(response, path)
        rows = body.get("deleted") if isinstance(body, dict) else None
        if not (isinstance(rows, list) and all(_deleted_row(row) for row in rows)):
            self._not_memsync(response, path, "no deleted list")
        return list(rows)

    def restore(self, key: str, version: int) -> WriteResult:
        """Make an old version current again."""
        path = f"{API_PATH}/restore"
        content = json.dumps({"key": key, "version": version}).encode()
        response = self._request("POST", path, content=content)
        _raise_for_status(response)
        return self._write_result(response, path)

    def verify(
        self, key: str, provenance: Mapping[str, str] | None
    ) -> tuple[WriteResult, list[str]]:
        """Record that this token's person checked `key` against the code (3.13); an
        agent's check names it, as its writes do (`X-Memsync-Agent`). Also the
        provenance fields the server did not keep (`provenanceDropped`: a reviewed repo
        keeps no free text of a verification by someone who is not a reviewer)."""
        path = f"{API_PATH}/verify"
        body: dict[str, Any] = {"key": key}
        if provenance:
            body["provenance"] = dict(provenance)
        content = json.dumps(body).encode()
        response = self._request("POST", path, headers=self._agent_header(), content=content)
        _raise_for_status(response)
        result = self._write_result(response, path)
        dropped = response.json().get("provenanceDropped")
        return result, dropped if _string_list(dropped) else []

    def events(
        self, *, last_event_id: int | None = None, read_timeout: float = 45.0
    ) -> EventStream:
        """Open the repo's events stream (`GET /v1/team_memory/events`).

        With `last_event_id`, the server skips the head event when it equals the
        current version. `read_timeout` bounds the silence between two lines: the
        server sends a keep-alive every 15 s. Raises `EventsUnsupported` when the server
        has no stream, and the usual failures (401/403 `AuthError`, 429 `RateLimited`).
        """
        import httpx

        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        request = self._client.build_request(
            "GET",
            f"{API_PATH}/events",
            params=self._where(),
            headers=headers,
            timeout=httpx.Timeout(self._timeout, read=read_timeout),
        )
        with _transport_errors(self.server, self._timeout):
            response = self._client.send(request, stream=True)
        content_type = response.headers.get("Content-Type", "")
        if response.status_code == 200 and content_type.startswith("text/event-stream"):
            return EventStream(response, self.server)
        try:
            with _transport_errors(self.server, self._timeout):
                response.read()
        finally:
            response.close()
        if response.status_code in (404, 405) or response.status_code < 400:
            raise EventsUnsupported(f"{self.server} has no events stream")
        _raise_for_status(response)
        raise EventsUnsupported(f"{self.server} has no events stream")

    def health(self) -> Health:
        """GET /healthz (no token needed), for `memsync doctor`.

        Raises `NotAMemsyncServer` unless the answer is a memsync server's liveness
        object (`{"status": "ok"}`); a 5xx is a `ServerError`. Many HTTP servers answer
        `/healthz` too, so `doctor` also asks the API itself (`hashes`).
        """
        with _transport_errors(self.server, self._timeout):
            response = self._client.get(HEALTH_PATH)
        if response.status_code >= 500:
            _raise_for_status(response)
        if response.status_code != 200:
            self._not_memsync(response, HEALTH_PATH)
        body = self._json_answer(response, HEALTH_PATH)
        if not (isinstance(body, dict) and body.get("status") == "ok"):
            self._not_memsync(response, HEALTH_PATH, "not a memsync liveness answer")
        return Health(dates=tuple(response.headers.get_list("Date")))

    def token_info(self) -> TokenInfo:
        """GET /v1/token: the calling token's name, repo pattern, access and expiry.

        Raises `AuthError` when the server refuses the token (its message says why, an
        expiry included) and `NotAMemsyncServer` unless the answer is a token object.
        """
        with _transport_errors(self.server, self._timeout):
            response = self._client.get(TOKEN_PATH)
        if response.status_code == 404:
            self._not_memsync(response, TOKEN_PATH)
        _raise_for_status(response)
        body = self._json_answer(response, TOKEN_PATH)
        fields = ("name", "id", "repos")
        if not (
            isinstance(body, dict)
            and all(isinstance(body.get(name), str) for name in fields)
            and body.get("access") in ("read-only", "read-write")
            and (body.get("expiresAt") is None or isinstance(body.get("expiresAt"), str))
        ):
            self._not_memsync(response, TOKEN_PATH, "not a token answer")
        return TokenInfo(
            name=body["name"],
            id=body["id"],
            repos=body["repos"],
            read_only=body["access"] == "read-only",
            expires_at=body.get("expiresAt"),
        )

    # Review (docs/protocol.md 3.12) ---------------------------------------------------

    # The `review` field of the last full, hashes or delta answer: `{on, reviewer,
    # pending}` for a reviewed repo, None for one that is not (a 304 leaves it alone).
    last_review: dict[str, Any] | None = None
    # The agent that wrote what this API sends (an MCP client's name), when known: a
    # write names it (`X-Memsync-Agent`), so a reviewer sees which agent proposed.
    agent: str | None = None

    # How this run's deletes and restores were made (docs/protocol.md 3.13), set by the
    # command that makes them (`sync_client.provenance.for_write`); a push sends its
    # own with each PUT body.
    provenance: dict[str, str] | None = None

    def _provenance_header(self) -> dict[str, str]:
        """A DELETE has no body: its provenance goes in a header (ASCII JSON)."""
        if not self.provenance:
            return {}
        return {"X-Memsync-Provenance": json.dumps(self.provenance, separators=(",", ":"))}

    def _provenance_field(self) -> dict[str, Any]:
        return {"provenance": self.provenance} if self.provenance else {}

    def _agent_header(self) -> dict[str, str]:
        agent = " ".join((self.agent or "").split())[:100]
        return {"X-Memsync-Agent": agent} if agent.isprintable() and agent else {}

    def _review_refusal(self, response: httpx.Response, proposal_id: int | None) -> None:
        """Raise the review failures a 404 or 409 names (before `_raise_for_status`,
        which would take any 409 for a server error worth retrying)."""
        from sync_client.errors import (
            ProposalConflict,
            ProposalDecided,
            TooManyProposals,
            UnknownProposal,
        )

        if response.status_code not in (404, 409):
            return
        error = _error_body(response).get("error")
        error = error if isinstance(error, dict) else {}
        details = error.get("details") if isinstance(error.get("details"), dict) else {}
        assert isinstance(details, dict)
        code = details.get("error_code")
        if response.status_code == 409 and code == "too_many_proposals":
            raise TooManyProposals(_int(details.get("max")))
        if proposal_id is None:
            return
        if response.status_code == 404 and error.get("type") == "not_found":
            raise UnknownProposal(proposal_id)
        if code == "proposal_decided":
            raise ProposalDecided(proposal_id, str(details.get("status") or "decided"))
        if code == "proposal_conflict":
            rows = details.get("conflicts")
            keys = sorted(
                {str(row["key"]) for row in rows if isinstance(row, dict) and "key" in row}
                if isinstance(rows, list)
                else set()
            )
            raise ProposalConflict(proposal_id, keys)

    def _reviewed_answer(self, response: httpx.Response, path: str) -> WriteResult | Proposed:
        """The answer of a write into a repo that may be reviewed: a review refusal
        raised by name, a 202 as a `review.wire.Proposed` (kept for review, nothing
        committed), else the write result. One place, so the three writes agree."""
        self._review_refusal(response, None)
        _raise_for_status(response)
        if response.status_code != 202:
            return self._write_result(response, path)
        answer = proposed(self._json_answer(response, path))
        if answer is None:
            self._not_memsync(response, path, "not a proposal")
        return answer

    def put_reviewed(self, body: bytes, *, if_match: str | None = None) -> WriteResult | Proposed:
        """`put`, for a repo that may be reviewed: a 202 is a `Proposed`; 409
        `too_many_proposals` is `TooManyProposals`."""
        headers = {"If-Match": f'"{if_match}"'} if if_match else {}
        response = self._request("PUT", headers={**headers, **self._agent_header()}, content=body)
        if response.status_code == 404:
            self._not_memsync(response, API_PATH)
        return self._reviewed_answer(response, API_PATH)

    def delete_reviewed(self, key: str) -> WriteResult | Proposed:
        """`delete`, for a repo that may be reviewed: a 202 is a `Proposed` delete."""
        headers = self._provenance_header()
        response = self._request("DELETE", params={"key": key}, headers=headers)
        return self._reviewed_answer(response, API_PATH)

    def restore_reviewed(self, key: str, version: int) -> WriteResult | Proposed:
        """`restore`, for a repo that may be reviewed: a 202 is a `Proposed` restore."""
        path = f"{API_PATH}/restore"
        body = {"key": key, "version": version, **self._provenance_field()}
        response = self._request("POST", path, content=json.dumps(body).encode())
        return self._reviewed_answer(response, path)

    def proposals(self, *, status: str = "pending", texts: bool = False) -> dict[str, Any]:
        """`GET /proposals`: `{repo, review: {on, reviewer}, proposals: [P...]}`, newest
        first (a reviewer sees everyone's, anyone else only their own)."""
        from sync_client.errors import ServerTooOld
        from sync_client.review.wire import proposal_list

        path = f"{API_PATH}/proposals"
        params: dict[str, Any] = {"status": status}
        if texts:
            params["texts"] = 1
        response = self._request("GET", path, params=params)
        if response.status_code in (404, 405):
            raise ServerTooOld(self.server, "review", "memsync review")
        _raise_for_status(response)
        parsed = proposal_list(self._json_answer(response, path))
        if parsed is None:
            self._not_memsync(response, path, "not a proposal list")
        review, items = parsed
        return {"repo": self.repo, "review": review, "proposals": items}

    def proposal(self, proposal_id: int) -> dict[str, Any]:
        """`GET /proposals/{id}`: one proposal with its texts, the team's and `similar`."""
        from sync_client.review.wire import proposal_ok

        path = f"{API_PATH}/proposals/{proposal_id}"
        response = self._request("GET", path)
        self._review_refusal(response, proposal_id)
        _raise_for_status(response)
        body = self._json_answer(response, path)
        item = body.get("proposal", body) if isinstance(body, dict) else None
        if not proposal_ok(item):
            self._not_memsync(response, path, "not a proposal")
        assert isinstance(item, dict)
        return dict(item)

    def accept(self, proposal_id: int) -> dict[str, Any]:
        """`POST /proposals/{id}/accept` (a reviewer): one commit; `{version, checksum,
        proposal}`. Raises `ProposalConflict`, `ProposalDecided`, `UnknownProposal`."""
        path = f"{API_PATH}/proposals/{proposal_id}/accept"
        response = self._request("POST", path, content=b"{}")
        self._review_refusal(response, proposal_id)
        _raise_for_status(response)
        written = self._write_result(response, path)
        body = self._json_answer(response, path)
        return {
            "id": proposal_id,
            "version": written.version,
            "checksum": written.checksum,
            "updatedKeys": written.updated_keys,
            "proposal": body.get("proposal") if isinstance(body, dict) else None,
        }

    def reject(self, proposal_id: int, reason: str) -> dict[str, Any]:
        """`POST /proposals/{id}/reject` with the reason (a reviewer): the proposal."""
        from sync_client.review.wire import proposal_ok

        path = f"{API_PATH}/proposals/{proposal_id}/reject"
        content = json.dumps({"reason": reason}, ensure_ascii=False).encode("utf-8")
        response = self._request("POST", path, content=content)
        self._review_refusal(response, proposal_id)
        _raise_for_status(response)
        body = self._json_answer(response, path)
        item = body.get("proposal") if isinstance(body, dict) else None
        if not proposal_ok(item):
            self._not_memsync(response, path, "not a proposal")
        assert isinstance(item, dict)
        return dict(item)

    def sources(self) -> dict[str, dict[str, Any]]:
        """`GET /provenance` (a server listing `sources`): for each live key, its newest
        written or verified version `{version, at, author, commit}`; freshness compares a
        teammate's note from the commit its writer's checkout had. Malformed rows are
        left out: the answer is a hint, never trusted beyond its shape."""
        path = f"{API_PATH}/provenance"
        response = self._request("GET", path)
        _raise_for_status(response)
        body = self._json_answer(response, path)
        keys = body.get("keys") if isinstance(body, dict) else None
        if not isinstance(keys, dict):
            self._not_memsync(response, path, "no keys object")
        assert isinstance(keys, dict)
        return {
            key: dict(row)
            for key, row in keys.items()
            if isinstance(key, str)
            and isinstance(row, dict)
            and isinstance(row.get("at"), str)
            and (row.get("commit") is None or isinstance(row.get("commit"), str))
        }
