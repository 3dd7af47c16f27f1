"""What the server's answers mean: the records they become, the flow signals, the checks.

Every failed answer is turned into a typed error in exactly one place (`_raise_for_status`).
304, 409 `stale_base`, 410 and 412 are flow signals for push and pull (`NotModified` as a
None result, `StaleBase`, `HistoryGone`, `PreconditionFailed`), not failures.

A successful answer is checked to be a memsync server's before it is read (`_remote_problem`,
`_version_problem`, `_log_problem`, `_deleted_row`): anything else is `NotAMemsyncServer`,
so a mistyped URL is never read as an empty repo. The checks are pure; `Api` calls them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    import httpx

from memsync_protocol.checksums import is_checksum
from sync_client.errors import (
    AuthError,
    EntryTooLarge,
    InvalidEntries,
    PathClash,
    RateLimited,
    RequestRejected,
    ServerError,
    TooManyEntries,
)

NO_TEAM_MEMORY = "no_team_memory"
# A redirect target is shown in the error, cut to this length.
_SHOWN_LOCATION = 200


class PreconditionFailed(Exception):
    """412: the repo changed since the ETag the request named."""

    def __init__(self, current_checksum: str | None) -> None:
        super().__init__("the repo changed on the server")
        self.current_checksum = current_checksum


class StaleBase(Exception):
    """409 stale_base: these keys changed on the server since the bases we sent."""

    def __init__(self, conflicts: dict[str, str | None]) -> None:
        super().__init__(f"{len(conflicts)} key(s) changed on the server")
        self.conflicts = conflicts


class HistoryGone(Exception):
    """410: `since` is outside the server's history; do a full GET."""


@dataclass(frozen=True)
class RemoteState:
    """What a GET answered: the head, checksums, texts (full or delta), deletions."""

    version: int
    checksum: str
    entry_checksums: dict[str, str]
    texts: dict[str, str] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    supports: frozenset[str] = frozenset()
    is_delta: bool = False
    # The head's `lastModified` (UTC, whole seconds), when the answer carried one.
    last_modified: str | None = None
    # The server said 404 `no_team_memory`: nothing was ever written for this repo.
    no_team_memory: bool = False


@dataclass(frozen=True)
class WriteResult:
    """A committed (or no-op) write."""

    checksum: str
    version: int
    updated_keys: list[str]
    supports: frozenset[str] | None = None


@dataclass(frozen=True)
class Health:
    """A memsync server's liveness answer: its clock, the values of its `Date` headers
    (none, one, or more when a proxy adds its own)."""

    dates: tuple[str, ...]


@dataclass(frozen=True)
class TokenInfo:
    """What the server says the calling token may do (`GET /v1/token`); never its secret."""

    name: str
    id: str
    repos: str
    read_only: bool
    expires_at: str | None

    def as_json(self) -> dict[str, Any]:
        """`{name, id, repos, access, expiresAt}`, as the server answers it."""
        return {
            "name": self.name,
            "id": self.id,
            "repos": self.repos,
            "access": "read-only" if self.read_only else "read-write",
            "expiresAt": self.expires_at,
        }


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return None if value is None else max(0.0, float(value))
    except ValueError:
        return None


def _error_body(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _named_keys(details: dict[str, Any], reason: str) -> dict[str, dict[str, Any]]:
    """The keys a 400 names, `details.keys: [{key, reason}]` or `details.key`, with why."""
    named: dict[str, dict[str, Any]] = {}
    listed = details.get("keys")
    for item in listed if isinstance(listed, list) else []:
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            problem = item.get("reason")
            named[item["key"]] = {"reason": reason, "problem": str(problem) if problem else None}
    if isinstance(details.get("key"), str):
        named.setdefault(details["key"], {"reason": reason, "problem": None})
    return named


def _clashes(details: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The keys a 409 `path_clash` names, each with the key it clashes with."""
    named: dict[str, dict[str, Any]] = {}
    listed = details.get("clashes")
    for item in listed if isinstance(listed, list) else []:
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            other = item.get("clashesWith")
            named[item["key"]] = {
                "reason": "path-clash",
                "clashes_with": other if isinstance(other, str) else None,
            }
    listed_keys = details.get("keys")
    for key in listed_keys if isinstance(listed_keys, list) else []:
        if isinstance(key, str):
            named.setdefault(key, {"reason": "path-clash", "clashes_with": None})
    return named


def _raise_for_status(response: httpx.Response) -> None:
    """Map a failed answer to the failure tree (the one place that does)."""
    status = response.status_code
    if status < 400:
        return
    body = _error_body(response)
    error = body.get("error") if isinstance(body.get("error"), dict) else {}
    assert isinstance(error, dict)
    message = str(error.get("message") or response.reason_phrase or f"HTTP {status}")
    details = error.get("details") if isinstance(error.get("details"), dict) else {}
    assert isinstance(details, dict)
    code = details.get("error_code")
    key = details.get("key")
    if status == 412:
        checksum = body.get("checksum")
        raise PreconditionFailed(checksum if isinstance(checksum, str) else None)
    if status == 409 and code == "stale_base":
        conflicts = {
            str(item.get("key")): item.get("serverChecksum")
            for item in details.get("conflicts", [])
            if isinstance(item, dict)
        }
        raise StaleBase(conflicts)
    if status == 410:
        raise HistoryGone(message)
    if status in (401, 403):
        raise AuthError(f"the server refused the token: {message}", status)
    if status == 413 and code == "team_memory_too_many_entries":
        received = details.get("received_entries")
        raise TooManyEntries(_int(details.get("max_entries")), _int(received) or None)
    if status == 413 and code == "team_memory_entry_too_large" and isinstance(key, str):
        raise EntryTooLarge(key, _int(details.get("max_bytes")))
    if status == 400 and code in ("invalid_key", "invalid_text"):
        reason = "invalid-key" if code == "invalid_key" else "invalid-text"
        named = _named_keys(details, reason)
        if named:
            raise InvalidEntries(f"the server refused {len(named)} entry(ies): {message}", named)
    if status == 409 and code == "path_clash":
        named = _clashes(details)
        if named:
            raise PathClash(f"the server refused {len(named)} entry(ies): {message}", named)
        # A clash that names no key: retrying the same write cannot help.
        raise RequestRejected(f"the server refused the request ({status}): {message}", status)
    if status == 422 and code == "index_lines_dropped":
        raise RequestRejected(_index_lines_words(details) or message, status)
    if status == 429:
        raise RateLimited(f"rate limited by the server: {message}", _retry_after(response))
    if status == 409 or status >= 500:
        raise ServerError(
            f"server error {status}: {message}", _retry_after(response), status=status
        )
    raise RequestRejected(f"the server refused the request ({status}): {message}", status)


def _index_lines_words(details: dict[str, Any]) -> str | None:
    """A 422 `index_lines_dropped` in the client's words: the index edit dropped the
    line of notes the team has and this machine does not know yet (the push keeps the
    lines of every note it knows)."""
    dropped = details.get("dropped")
    rows = [row for row in dropped if isinstance(row, dict)] if isinstance(dropped, list) else []
    indexes = sorted({str(row.get("index")) for row in rows})
    notes = sorted(
        {str(n) for row in rows if isinstance(row.get("notes"), list) for n in row["notes"]}
    )
    if not indexes or not notes:
        return None
    return (
        f"the server refused {' and '.join(indexes)}: the edit drops the only line of "
        f"{', '.join(notes)}, which the team has and this machine has not pulled yet "
        f"(`memsync pull` fetches it, then the next push keeps its line; `memsync rm "
        f"{notes[0]}` deletes a note and its line for the team)"
    )


def _is_no_team_memory(response: httpx.Response) -> bool:
    """Whether a 404 is the server's own "this repo has no team memory yet"."""
    error = _error_body(response).get("error")
    details = error.get("details") if isinstance(error, dict) else None
    return isinstance(details, dict) and details.get("error_code") == NO_TEAM_MEMORY


def _describe_answer(response: httpx.Response, path: str, problem: str = "") -> str:
    """`GET /v1/team_memory answered 404 text/html`, for a `NotAMemsyncServer`."""
    content_type = response.headers.get("Content-Type", "").split(";")[0].strip()
    answer = f"{response.request.method} {path} answered {response.status_code}"
    if response.is_redirect:
        location = response.headers.get("Location", "")[:_SHOWN_LOCATION]
        return f"{answer}, a redirect to {location or 'nowhere'}"
    answer += f" {content_type or 'without a content type'}"
    return f"{answer}, {problem}" if problem else answer


def _exact_int(value: object) -> TypeGuard[int]:
    """An int that is not a bool (JSON `true` is not a version)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _string_map(value: object) -> bool:
    return isinstance(value, dict) and all(isinstance(item, str) for item in value.values())


def _string_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _remote_problem(body: object, view: str) -> str | None:
    """What makes `body` not a team-memory object of `view` (full, hashes, delta), or None.

    Only the containers are checked here: a single entry whose text is missing or not
    storable is refused by the pull, key by key, and fails nothing else.
    """
    if not isinstance(body, dict):
        return "not a JSON object"
    version = body.get("version")
    if not _exact_int(version) or version < 0:
        return "no integer version"
    if not is_checksum(body.get("checksum")):
        return "no repo checksum"
    definition = body.get("checksumVersion")
    if definition is not None and not (_exact_int(definition) and definition >= 1):
        return "no integer checksumVersion"
    content = body.get("content") if view == "full" else body
    if not isinstance(content, dict):
        return "no content object"
    if not _string_map(content.get("entryChecksums")):
        return "no entryChecksums object"
    if view != "hashes" and not isinstance(content.get("entries"), dict):
        return "no entries object"
    if view == "delta" and not _string_list(body.get("deleted")):
        return "no deleted list"
    if "supports" in body and not _string_list(body["supports"]):
        return "a supports value that is not a list of names"
    return None


def _version_problem(body: object) -> str | None:
    """What makes `body` not one version of a key (`/history?version=N`), or None."""
    if not isinstance(body, dict):
        return "not a JSON object"
    if not _exact_int(body.get("version")):
        return "no integer version"
    if not all(isinstance(body.get(name), str) for name in ("op", "author", "at")):
        return "no op, author or time"
    if not (body.get("content") is None or isinstance(body.get("content"), str)):
        return "a content that is not text"
    return None


def _log_problem(body: object) -> str | None:
    """What makes `body` not a page of the repo's log, or None."""
    if not isinstance(body, dict) or not isinstance(body.get("commits"), list):
        return "no commits list"
    next_before = body.get("next_before")
    if not (next_before is None or _exact_int(next_before)):
        return "a next_before that is not a version"
    for commit in body["commits"]:
        if not (
            isinstance(commit, dict)
            and _exact_int(commit.get("version"))
            and isinstance(commit.get("at"), str)
            and isinstance(commit.get("author"), str)
            and isinstance(commit.get("ops"), dict)
            and all(_exact_int(count) for count in commit["ops"].values())
            and _string_list(commit.get("keys"))
            and _exact_int(commit.get("key_count"))
        ):
            return "a commit without version, at, author, ops, keys or key_count"
    return None


def _deleted_row(row: object) -> bool:
    """Whether `row` is one deleted key: `{key, version, author, at, last_version}`."""
    return (
        isinstance(row, dict)
        and isinstance(row.get("key"), str)
        and _exact_int(row.get("version"))
        and isinstance(row.get("author"), str)
        and isinstance(row.get("at"), str)
        and (row.get("last_version") is None or _exact_int(row.get("last_version")))
    )
