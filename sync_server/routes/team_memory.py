"""The team-memory resource: GET (full, hashes, since, one key), PUT, DELETE, history
(of a key, with a comparison; the repo's log; its deleted keys), restore, events.

Mounted twice by the application, at `/v1/team_memory` and at
`/api/claude_code/team_memory`, with identical behaviour.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query, Request, Response

from memsync_protocol.checksums import (
    REPO_CHECKSUM_VERSION,
    is_checksum,
    parse_etag_list,
    quote_etag,
)
from memsync_protocol.keys import text_problem
from sync_server.auth import Principal
from sync_server.compression import GZIP, MIN_COMPRESS_BYTES, accepts_gzip, compress
from sync_server.deps import (
    AgentDep,
    EventsDep,
    Reader,
    RepoDep,
    ServiceDep,
    SettingsDep,
    Writer,
)
from sync_server.errors import ApiError, BadRequest, NoTeamMemory, NotFound
from sync_server.models import (
    MAX_VERSION,
    DeletedView,
    DeltaView,
    EntryView,
    ErrorBody,
    FullView,
    HashesView,
    HistoryComparison,
    HistoryEntry,
    HistoryVersion,
    LogView,
    ProposedResult,
    PutBody,
    RestoreBody,
    WriteResult,
    supports,
    wire_time,
)
from sync_server.personal import wire_name
from sync_server.provenance import ProvenanceDep, wire_provenance
from sync_server.service import TeamMemory, check_keys, check_text
from sync_server.storage.base import (
    MAX_LOG_LIMIT,
    CommitResult,
    CommitSummary,
    DeletedKey,
    HistoryItem,
    ProposalResult,
    RepoHead,
)

router = APIRouter()

_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody} for status in (400, 401, 403, 404, 429, 503)
}
# A write by a non-reviewer into a reviewed repo (docs/protocol.md section 3.12).
_PROPOSED: dict[str, Any] = {
    "model": ProposedResult,
    "description": "Kept as a proposal for a reviewer to accept",
}

_log = logging.getLogger("memsync.server")


def encode_json(payload: object) -> bytes:
    """Compact UTF-8 JSON; an error echoing a lone surrogate falls back to `\\u` escapes."""
    try:
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(payload, separators=(",", ":")).encode("ascii")


def json_response(payload: object, *, status_code: int = 200, etag: str | None = None) -> Response:
    """Serialize compactly as UTF-8 JSON (no ASCII escaping: notes are mostly prose)."""
    body = encode_json(payload)
    headers = {"ETag": quote_etag(etag)} if etag else None
    return Response(body, status_code=status_code, media_type="application/json", headers=headers)


def error_response(error: ApiError) -> Response:
    """The structured answer of an API error: its JSON body, status and headers."""
    response = json_response(error.body(), status_code=error.status)
    response.headers.update(error.headers)
    return response


def unexpected_error_response(error: Exception) -> Response:
    """The 500 of an exception nobody expected, logged by its type only (its text
    may quote data)."""
    _log.error("unexpected %s while serving a request", type(error).__name__)
    return error_response(ApiError("internal error"))


class ResponseCache:
    """Serialized GET bodies by (repo, version, view), bounded in bytes.

    The view is `full` or `hashes`, and `full+gzip` or `hashes+gzip` for the gzipped
    body, so a body is compressed once per version, not on every GET. A version number
    is never reused within a repo (nor, with its checksum in the view, within a personal
    space that `person delete` removed), so an entry can never go stale: the head read
    on every request decides which version is current.
    """

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._items: OrderedDict[tuple[str, int, str], bytes] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, int, str]) -> bytes | None:
        """A cached body, refreshed as most recently used."""
        with self._lock:
            body = self._items.get(key)
            if body is not None:
                self._items.move_to_end(key)
            return body

    def put(self, key: tuple[str, int, str], body: bytes) -> None:
        """Keep a body, evicting the least recently used beyond the byte budget."""
        if len(body) > self._max_bytes:
            return
        with self._lock:
            if key in self._items:
                return
            self._items[key] = body
            self._size += len(body)
            while self._size > self._max_bytes:
                _, evicted = self._items.popitem(last=False)
                self._size -= len(evicted)


def encoded_response(
    request: Request,
    settings: Any,
    body: bytes,
    *,
    etag: str | None,
    cache: ResponseCache | None = None,
    cache_key: tuple[str, int, str] | None = None,
) -> Response:
    """A 200 answer of the JSON `body`, gzipped when the client accepts gzip.

    The ETag names the JSON whatever the encoding, so `If-None-Match` and `If-Match`
    match the same way compressed or not (None: no ETag); `Vary: Accept-Encoding` tells
    caches the bytes differ. Bodies under `MIN_COMPRESS_BYTES` go as they are. With
    `cache`, the gzipped body is kept under `cache_key` with `+gzip` added to its view.
    """
    headers = {"ETag": quote_etag(etag)} if etag else {}
    if settings.compression:
        headers["Vary"] = "Accept-Encoding"
        wanted = accepts_gzip(request.headers.get("accept-encoding"))
        if wanted and len(body) >= MIN_COMPRESS_BYTES:
            gzip_key = None
            if cache is not None and cache_key is not None:
                gzip_key = (*cache_key[:2], f"{cache_key[2]}+{GZIP}")
            compressed = cache.get(gzip_key) if cache is not None and gzip_key else None
            if compressed is None:
                compressed = compress(body)
                if cache is not None and gzip_key is not None:
                    cache.put(gzip_key, compressed)
            body = compressed
            headers["Content-Encoding"] = GZIP
    return Response(body, media_type="application/json", headers=headers)


def _head_fields(settings: Any, head: RepoHead) -> dict[str, Any]:
    return {
        "organizationId": settings.organization_id,
        "repo": wire_name(head.repo),
        "version": head.version,
        "lastModified": wire_time(head.last_modified),
        "checksum": head.checksum,
        "checksumVersion": REPO_CHECKSUM_VERSION,
    }


def write_fields(result: CommitResult | ProposalResult, settings: Any) -> dict[str, Any]:
    """The head fields of a write's answer (the team's head, for a proposal)."""
    head = result.head
    return {
        "checksum": head.checksum,
        "checksumVersion": REPO_CHECKSUM_VERSION,
        "version": head.version,
        "lastModified": wire_time(head.last_modified),
        "entryCount": head.entry_count,
        "updatedKeys": result.changed_keys if isinstance(result, CommitResult) else [],
        "supports": supports(compression=settings.compression),
    }


def _write_result(result: CommitResult | ProposalResult, settings: Any) -> Response:
    """200 for a commit; 202 with `proposal` for a write kept for review (3.12)."""
    payload = write_fields(result, settings)
    if isinstance(result, ProposalResult):
        proposal = result.proposal
        payload["proposal"] = {
            "id": proposal.id,
            "status": proposal.status,
            "keys": proposal.keys,
            "baseVersion": proposal.base_version,
        }
        return json_response(payload, status_code=202, etag=result.head.checksum)
    return json_response(payload, etag=result.head.checksum)


def review_state(service: TeamMemory, principal: Principal, repo: str) -> dict[str, Any] | None:
    """The `review` field of a reviewed repo's GET answers; None when not reviewed."""
    if not service.review_policy(repo):
        return None
    return {
        "on": True,
        "reviewer": service.is_reviewer(principal),
        "pending": service.pending_count(principal, repo),
    }


def _with_field(body: bytes, name: str, value: object) -> bytes:
    """A serialized JSON object with one more field at its end (the cached body of a
    version is the same for every caller; the `review` field is the caller's own)."""
    return body[:-1] + b',"' + name.encode() + b'":' + encode_json(value) + b"}"


def _if_match(header: str | None) -> list[str] | None:
    return None if header is None else parse_etag_list(header)


def _history_entry(item: HistoryItem) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "version": item.version,
        "checksum": item.checksum,
        "op": item.op,
        "author": item.author,
        "at": wire_time(item.at),
    }
    if item.accepted_by is not None:
        entry["acceptedBy"] = item.accepted_by
    if item.provenance is not None:
        entry["provenance"] = item.provenance
    return entry


@router.get(
    "",
    summary="Read the team memory of a repo",
    response_model=FullView | HashesView | DeltaView | EntryView,
    responses={**_ERRORS, 304: {"description": "Not modified"}, 410: {"model": ErrorBody}},
)
def get_team_memory(
    request: Request,
    repo: RepoDep,
    principal: Reader,
    settings: SettingsDep,
    service: ServiceDep,
    view: Annotated[Literal["hashes"] | None, Query(description="hashes: no bodies")] = None,
    since: Annotated[int | None, Query(ge=0, description="only changes after version")] = None,
    key: Annotated[
        str | None, Query(min_length=1, max_length=4096, description="only this entry")
    ] = None,
    if_none_match: Annotated[str | None, Header()] = None,
) -> Response:
    """Full content, the hashes view, the changes since a version, or one entry."""
    if view is not None and since is not None:
        raise BadRequest("use either view or since, not both")
    if key is not None:
        return _one_entry(repo, key, view, since, settings, service)
    head = service.head(repo)
    if head is None:
        raise NoTeamMemory(repo)
    if if_none_match is not None:
        tags = parse_etag_list(if_none_match)
        if head.checksum in tags or "*" in tags:
            headers = {"ETag": quote_etag(head.checksum)}
            if settings.compression:
                headers["Vary"] = "Accept-Encoding"
            return Response(status_code=304, headers=headers)
    review = review_state(service, principal, repo)
    if since is not None:
        delta = service.changes_since(repo, since)
        if delta is None:
            raise NoTeamMemory(repo)
        delta_payload = {
            **_head_fields(settings, delta.head),
            "entries": delta.texts,
            "entryChecksums": delta.checksums,
            "deleted": delta.deleted,
        }
        if review is not None:
            delta_payload["review"] = review
        return encoded_response(
            request, settings, encode_json(delta_payload), etag=delta.head.checksum
        )
    cache: ResponseCache = request.app.state.response_cache
    view_name = view or "full"
    # The checksum too: `person delete` removes a space's row, so its versions restart.
    body = cache.get((repo, head.version, f"{view_name}@{head.checksum}"))
    if body is None:
        snapshot = service.snapshot(repo, with_texts=view is None)
        if snapshot is None:
            raise NoTeamMemory(repo)
        head = snapshot.head
        if view == "hashes":
            payload: dict[str, Any] = {
                **_head_fields(settings, head),
                "entryChecksums": snapshot.checksums,
                "supports": supports(compression=settings.compression),
            }
        else:
            payload = {
                **_head_fields(settings, head),
                "content": {"entries": snapshot.texts, "entryChecksums": snapshot.checksums},
            }
        body = encode_json(payload)
        cache.put((repo, head.version, f"{view_name}@{head.checksum}"), body)
    if review is not None:
        # The caller's own field: neither this body nor its gzip form is cached.
        body = _with_field(body, "review", review)
        return encoded_response(request, settings, body, etag=head.checksum)
    return encoded_response(
        request,
        settings,
        body,
        etag=head.checksum,
        cache=cache,
        cache_key=(repo, head.version, f"{view_name}@{head.checksum}"),
    )


def _one_entry(
    repo: str, key: str, view: str | None, since: int | None, settings: Any, service: TeamMemory
) -> Response:
    """GET ?key=K: one live entry's text and checksum (`memsync diff KEY`), 404
    `not_found` when the key is not live; `If-None-Match` does not apply."""
    if view is not None or since is not None:
        raise BadRequest("use key alone, without view or since")
    check_keys([key], settings)
    snapshot = service.snapshot(repo, with_texts=True, key=key)
    if snapshot is None:
        raise NoTeamMemory(repo)
    if key not in snapshot.texts:
        raise NotFound(f"no entry {key!r}")
    return json_response(
        {
            "repo": wire_name(repo),
            "key": key,
            "version": snapshot.head.version,
            "checksum": snapshot.checksums[key],
            "content": snapshot.texts[key],
        }
    )


@router.put(
    "",
    summary="Create or replace entries (upsert)",
    response_model=WriteResult,
    responses={
        **_ERRORS,
        202: _PROPOSED,
        409: {"model": ErrorBody},
        412: {"model": ErrorBody},
        413: {"model": ErrorBody},
        422: {"model": ErrorBody, "description": "Drops a live note's index line"},
    },
)
def put_team_memory(
    body: PutBody,
    repo: RepoDep,
    principal: Writer,
    settings: SettingsDep,
    service: ServiceDep,
    agent: AgentDep,
    if_match: Annotated[str | None, Header()] = None,
) -> Response:
    """Upsert entries (and delete `deletes`, in the same commit); conditional on
    `If-Match` or on per-key `baseChecksums`."""
    return put_entries(
        service,
        settings,
        repo,
        principal,
        body.entries,
        base_checksums=body.baseChecksums,
        deletes=body.deletes,
        provenance=body.provenance,
        if_match=if_match,
        agent=agent,
    )


def put_entries(
    service: TeamMemory,
    settings: Any,
    repo: str,
    principal: Principal,
    entries: dict[str, str],
    *,
    base_checksums: dict[str, str | None] | None,
    deletes: list[str] | None,
    provenance: dict[str, Any] | None,
    if_match: str | None,
    agent: str | None,
) -> Response:
    """A PUT's checks, its write and its answer, for the route and for the fast path
    in front of the router (`sync_server.fast_put`), which hands over a body of the
    same shape as `PutBody`: one place decides what a PUT does."""
    deleted = sorted(set(deletes or []))
    check_keys([*entries, *(base_checksums or {}), *deleted], settings)
    both = sorted(set(deleted) & set(entries))
    if both:
        raise BadRequest(
            "a key cannot be both written and deleted in one PUT",
            details={
                "error_code": "invalid_key",
                "keys": [{"key": key, "reason": "in both entries and deletes"} for key in both],
            },
        )
    for key, text in sorted(entries.items()):
        check_text(key, text, settings.max_entry_bytes)
    for key, checksum in sorted((base_checksums or {}).items()):
        if checksum is not None and not is_checksum(checksum):
            raise BadRequest(
                f"baseChecksums[{key!r}] must be sha256:<hex> or null",
                details={"error_code": "invalid_checksum", "key": key},
            )
    result = service.put(
        repo,
        entries,
        if_match=_if_match(if_match),
        base_checksums=base_checksums,
        author=principal,
        deletes=deleted,
        agent=agent,
        provenance=wire_provenance(provenance),
    )
    return _write_result(result, settings)


@router.delete(
    "",
    summary="Delete one entry for the whole team (kept in history)",
    response_model=WriteResult,
    responses={**_ERRORS, 202: _PROPOSED, 409: {"model": ErrorBody}, 412: {"model": ErrorBody}},
)
def delete_entry(
    repo: RepoDep,
    principal: Writer,
    settings: SettingsDep,
    service: ServiceDep,
    agent: AgentDep,
    provenance: ProvenanceDep,
    key: Annotated[str, Query(min_length=1, max_length=4096)],
    if_match: Annotated[str | None, Header()] = None,
) -> Response:
    """Soft-delete `key`; its texts stay in history and can be restored."""
    check_keys([key], settings)
    result = service.delete(
        repo,
        key,
        if_match=_if_match(if_match),
        author=principal,
        agent=agent,
        provenance=provenance,
    )
    return _write_result(result, settings)


@router.get(
    "/history",
    summary="List the versions of one key, or read one version (and compare another)",
    response_model=list[HistoryEntry] | HistoryVersion | HistoryComparison,
    responses=_ERRORS,
)
def key_history(
    repo: RepoDep,
    _reader: Reader,
    settings: SettingsDep,
    service: ServiceDep,
    key: Annotated[str, Query(min_length=1, max_length=4096)],
    version: Annotated[int | None, Query(ge=1, le=MAX_VERSION)] = None,
    compare: Annotated[
        int | None,
        Query(ge=1, le=MAX_VERSION, description="with version: also this version's text"),
    ] = None,
) -> Response:
    """Versions of `key` oldest first; with `version`, that version's text; with
    `compare` too, also the text of version `compare` (`memsync diff KEY@N..M`)."""
    check_keys([key], settings)
    if version is None:
        if compare is not None:
            raise _bad_query("compare", "compare needs version", "missing")
        return json_response([_history_entry(item) for item in service.key_history(repo, key)])
    item = service.key_version(repo, key, version)
    payload = {**_history_entry(item), "repo": wire_name(repo), "key": key, "content": item.text}
    if compare is not None:
        other = service.key_version(repo, key, compare)
        payload["compare"] = {**_history_entry(other), "content": other.text}
    return json_response(payload)


def _bad_query(name: str, message: str, kind: str) -> BadRequest:
    """A 400 shaped like FastAPI's validation errors (`details.problems`)."""
    return BadRequest(
        message, details={"problems": [{"loc": ["query", name], "message": message, "type": kind}]}
    )


def _parse_since(value: str | None) -> datetime | None:
    """An ISO 8601 time with `Z` or an offset, as UTC; anything else is a 400."""
    if value is None:
        return None
    message = "since must be an ISO 8601 time with Z or an offset (2026-12-01T10:00:00Z)"
    try:
        moment = datetime.fromisoformat(value)
        if moment.tzinfo is None or moment.utcoffset() is None:
            raise _bad_query("since", message, "datetime")
        return moment.astimezone(UTC)
    except (ValueError, OverflowError):
        raise _bad_query("since", message, "datetime") from None


def _commit_entry(commit: CommitSummary) -> dict[str, Any]:
    entry = {
        "version": commit.version,
        "at": wire_time(commit.at),
        "author": commit.author,
        "ops": commit.ops,
        "keys": commit.keys,
        "key_count": commit.key_count,
    }
    if commit.accepted_by is not None:
        entry["acceptedBy"] = commit.accepted_by
    if commit.provenance is not None:
        entry["provenance"] = commit.provenance
    return entry


def _deleted_entry(deleted: DeletedKey) -> dict[str, Any]:
    return {
        "key": deleted.key,
        "version": deleted.version,
        "author": deleted.author,
        "at": wire_time(deleted.at),
        "last_version": deleted.last_version,
    }


@router.get(
    "/log",
    summary="The repo's commits, newest first: who changed what",
    response_model=LogView,
    responses=_ERRORS,
)
def repo_log(
    request: Request,
    repo: RepoDep,
    _reader: Reader,
    settings: SettingsDep,
    service: ServiceDep,
    before: Annotated[
        int | None,
        Query(ge=1, le=MAX_VERSION, description="only versions below (the next_before of a page)"),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LOG_LIMIT, description="commits per page")] = 50,
    author: Annotated[
        str | None, Query(min_length=1, max_length=255, description="only this token name's")
    ] = None,
    since: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=64,
            description="only commits at or after this ISO 8601 time (Z or an offset)",
            examples=["2026-12-01T10:00:00Z"],
        ),
    ] = None,
    key: Annotated[
        str | None, Query(min_length=1, max_length=4096, description="only commits touching it")
    ] = None,
) -> Response:
    """One page of commits; pass `next_before` as `before` for the next (null: the last)."""
    if author is not None and text_problem(author) is not None:
        raise _bad_query("author", f"author {text_problem(author)}", "string")
    if key is not None:
        check_keys([key], settings)
    page = service.log(
        repo, before=before, limit=limit, author=author, since=_parse_since(since), key=key
    )
    payload = {
        "repo": wire_name(repo),
        "commits": [_commit_entry(commit) for commit in page.commits],
        "next_before": page.next_before,
    }
    return encoded_response(request, settings, encode_json(payload), etag=None)


@router.get(
    "/deleted",
    summary="Keys deleted for the team and not live now, newest delete first",
    response_model=DeletedView,
    responses=_ERRORS,
)
def deleted_keys(
    request: Request, repo: RepoDep, _reader: Reader, settings: SettingsDep, service: ServiceDep
) -> Response:
    """Each with the version an undo restores (`last_version`: restore it with POST /restore)."""
    payload = {
        "repo": wire_name(repo),
        "deleted": [_deleted_entry(deleted) for deleted in service.deleted_keys(repo)],
    }
    return encoded_response(request, settings, encode_json(payload), etag=None)


@router.post(
    "/restore",
    summary="Make an old version of a key current again",
    response_model=WriteResult,
    responses={**_ERRORS, 202: _PROPOSED, 409: {"model": ErrorBody}, 413: {"model": ErrorBody}},
)
def restore_entry(
    body: RestoreBody,
    repo: RepoDep,
    principal: Writer,
    settings: SettingsDep,
    service: ServiceDep,
    agent: AgentDep,
) -> Response:
    """Restore `key` to the text it had at `version`, as a new version."""
    check_keys([body.key], settings)
    result = service.restore(
        repo,
        body.key,
        body.version,
        author=principal,
        agent=agent,
        provenance=wire_provenance(body.provenance),
    )
    return _write_result(result, settings)


# Not in the OpenAPI schema: the answer never ends, which generic clients cannot handle.
@router.get("/events", include_in_schema=False)
async def team_memory_events(
    repo: RepoDep,
    principal: Reader,
    events: EventsDep,
    last_event_id: Annotated[str | None, Header()] = None,
) -> Response:
    """Server-sent events: the repo's head and review setting now, then again after
    every commit and change (and each proposal's news)."""
    return await events.open_stream(
        repo,
        principal.lookup_id,
        last_event_id=last_event_id,
        person=TeamMemory.owner(principal),
        reviewer=TeamMemory.is_reviewer(principal),
    )
