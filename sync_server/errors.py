"""Domain errors and their JSON form.

Every error a client can see is one of these, rendered as
`{"error": {"type", "message", "details"}}` with its HTTP status. Storage raises them,
routes raise them, and the application turns each into a response in one handler.

    ApiError                      status  type
    ├── BadRequest                400     invalid_request
    │   └── InvalidKeys           400     invalid_request (details.keys)
    ├── Unauthorized              401     unauthorized
    ├── Forbidden                 403     forbidden
    ├── NotFound                  404     not_found (details.error_code = not_found)
    │   └── NoTeamMemory          404     not_found (details.error_code = no_team_memory)
    ├── MethodNotAllowed          405     method_not_allowed
    ├── StaleBase                 409     conflict (details.error_code = stale_base)
    ├── PathClash                 409     conflict (details.error_code = path_clash)
    ├── TooManyProposals          409     conflict (details.error_code = too_many_proposals)
    ├── ProposalDecided           409     conflict (details.error_code = proposal_decided)
    ├── ProposalConflict          409     conflict (details.error_code = proposal_conflict)
    ├── HistoryGone               410     gone
    ├── PreconditionFailed        412     precondition_failed (+ top-level checksum)
    ├── PayloadTooLarge           413     payload_too_large (details.error_code)
    ├── IndexLinesDropped         422     unprocessable (error_code = index_lines_dropped)
    ├── UnsupportedMediaType      415     unsupported_media_type
    ├── RateLimited               429     rate_limited (Retry-After)
    ├── TooManyStreams            429     rate_limited (Retry-After; error_code too_many_streams)
    └── StorageUnavailable        503     unavailable (Retry-After)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sync_server.personal import is_personal, spoken


class ApiError(Exception):
    """An error with an HTTP status and a JSON body; never carries entry text or tokens."""

    status = 500
    type = "internal_error"

    def __init__(
        self,
        message: str,
        *,
        details: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = dict(details or {})
        self.headers: dict[str, str] = dict(headers or {})

    def body(self) -> dict[str, Any]:
        """The JSON body of the response."""
        return {"error": {"type": self.type, "message": self.message, "details": self.details}}


class BadRequest(ApiError):
    """Malformed JSON, wrong types, a bad `repo` or query value."""

    status = 400
    type = "invalid_request"


class InvalidKeys(BadRequest):
    """One or more keys break the key rules; details list each with its reason."""

    def __init__(self, problems: Mapping[str, str]) -> None:
        listed = [{"key": key, "reason": reason} for key, reason in sorted(problems.items())]
        super().__init__(
            f"{len(listed)} invalid key(s)", details={"error_code": "invalid_key", "keys": listed}
        )


class Unauthorized(ApiError):
    """No token, or one the server does not know (or revoked)."""

    status = 401
    type = "unauthorized"

    def __init__(self, message: str = "a valid bearer token is required") -> None:
        super().__init__(message, headers={"WWW-Authenticate": 'Bearer realm="memsync"'})


class Forbidden(ApiError):
    """A valid token that may not touch this repo, or may not write."""

    status = 403
    type = "forbidden"


class NotFound(ApiError):
    """An unknown key or version, or an unknown path (`details.error_code` not_found)."""

    status = 404
    type = "not_found"

    def __init__(self, message: str, *, error_code: str = "not_found") -> None:
        super().__init__(message, details={"error_code": error_code})


class NoTeamMemory(NotFound):
    """A GET of a repo that never held data: clients read "no team memory yet" from
    exactly this `details.error_code`, never from another 404."""

    def __init__(self, repo: str) -> None:
        said = f"{spoken(repo)} holds nothing yet" if is_personal(repo) else None
        super().__init__(said or f"{repo} has no team memory yet", error_code="no_team_memory")


class MethodNotAllowed(ApiError):
    """The path exists but not with this method."""

    status = 405
    type = "method_not_allowed"


class StaleBase(ApiError):
    """A `baseChecksums` precondition failed; nothing was written."""

    status = 409
    type = "conflict"

    def __init__(self, conflicts: Sequence[tuple[str, str | None]]) -> None:
        listed = [{"key": key, "serverChecksum": checksum} for key, checksum in conflicts]
        super().__init__(
            f"{len(listed)} key(s) changed on the server since the base you sent",
            details={"error_code": "stale_base", "conflicts": listed},
        )


class PathClash(ApiError):
    """Keys of the write that would be both a file and a directory (`d` and `d/n.md`)
    next to a live key or another key of the same write; nothing was written.

    `clashes` pairs each refused key of the request with the key it clashes with;
    `keys` lists the refused keys once each, so a client can skip exactly those.
    """

    status = 409
    type = "conflict"

    def __init__(self, clashes: Sequence[tuple[str, str]]) -> None:
        refused = sorted({key for key, _ in clashes})
        first, other = clashes[0]
        more = f" (and {len(refused) - 1} more key(s))" if len(refused) > 1 else ""
        super().__init__(
            f"{first!r} clashes with {other!r}: a key cannot be both a file and a directory" + more,
            details={
                "error_code": "path_clash",
                "clashes": [{"key": key, "clashesWith": with_} for key, with_ in clashes],
                "keys": refused,
            },
        )


class TooManyProposals(ApiError):
    """The person already has as many pending proposals in the repo as one may; nothing
    was stored. A client waits for a review (or a further edit) before sending again."""

    status = 409
    type = "conflict"

    def __init__(self, max_pending: int) -> None:
        super().__init__(
            f"you already have {max_pending} proposals waiting for review in this repo; "
            "a reviewer must accept or reject some first",
            details={"error_code": "too_many_proposals", "max": max_pending},
        )


class ProposalDecided(ApiError):
    """An accept or reject of a proposal that is no longer pending."""

    status = 409
    type = "conflict"

    def __init__(self, proposal_id: int, status: str) -> None:
        super().__init__(
            f"proposal {proposal_id} is {status}, no longer pending",
            details={"error_code": "proposal_decided", "status": status},
        )


class ProposalConflict(ApiError):
    """An accept that cannot merge: the team changed the same lines since the proposal's
    base (or changed a note the proposal deletes). Nothing changed; it stays pending."""

    status = 409
    type = "conflict"

    def __init__(self, conflicts: Sequence[tuple[str, str | None, str | None]]) -> None:
        listed = [
            {"key": key, "teamChecksum": team, "baseChecksum": base}
            for key, team, base in conflicts
        ]
        super().__init__(
            f"{len(listed)} key(s) changed for the team since the proposal's base in a way "
            "that does not merge; the proposal stays pending",
            details={"error_code": "proposal_conflict", "conflicts": listed},
        )


class HistoryGone(ApiError):
    """`since` is outside the retained history: the client should do a full GET."""

    status = 410
    type = "gone"


class PreconditionFailed(ApiError):
    """`If-Match` differs from the current ETag; carries the current checksum."""

    status = 412
    type = "precondition_failed"

    def __init__(self, current_checksum: str) -> None:
        super().__init__(
            "If-Match does not match the current checksum",
            details={"checksum": current_checksum},
        )
        self.current_checksum = current_checksum

    def body(self) -> dict[str, Any]:
        body = super().body()
        body["checksum"] = self.current_checksum
        return body


class PayloadTooLarge(ApiError):
    """A structured 413: too many entries, an entry too large, or a body too large."""

    status = 413
    type = "payload_too_large"


class TooManyEntries(PayloadTooLarge):
    """The merge would leave more live entries than the repo may hold."""

    def __init__(self, max_entries: int, received_entries: int) -> None:
        super().__init__(
            f"the repo may hold at most {max_entries} entries; this write would leave "
            f"{received_entries}",
            details={
                "error_code": "team_memory_too_many_entries",
                "max_entries": max_entries,
                "received_entries": received_entries,
            },
        )


class EntryTooLarge(PayloadTooLarge):
    """One entry's UTF-8 text is over the per-entry limit."""

    def __init__(self, key: str, max_bytes: int) -> None:
        super().__init__(
            f"entry {key!r} is larger than {max_bytes} bytes",
            details={
                "error_code": "team_memory_entry_too_large",
                "key": key,
                "max_bytes": max_bytes,
            },
        )


class BodyTooLarge(PayloadTooLarge):
    """The request body is over the per-request limit."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(
            f"the request body is larger than {max_bytes} bytes",
            details={"error_code": "team_memory_body_too_large", "max_bytes": max_bytes},
        )


# Notes named in the message of an `IndexLinesDropped` (all are in its details).
_NAMED_NOTES = 5


class IndexLinesDropped(ApiError):
    """A write of an index whose new text no longer links notes that its current text
    links and that stay live (`memsync_protocol.memory_index.unlisted`, DESIGN 9: a live
    note's index line is removed only with the note); nothing was written.

    `dropped`: index key -> the notes. `keys` lists the refused index keys of the
    request; `dropped` each with its notes. A 422, not a 409: sending it again without a
    change gives the same answer, so a client must not retry it.
    """

    status = 422
    type = "unprocessable"

    def __init__(self, dropped: Mapping[str, Sequence[str]]) -> None:
        notes = sorted({note for listed in dropped.values() for note in listed})
        named = ", ".join(notes[:_NAMED_NOTES])
        if len(notes) > _NAMED_NOTES:
            named += f" and {len(notes) - _NAMED_NOTES} more"
        indexes = " and ".join(sorted(dropped))
        super().__init__(
            f"this write of {indexes} drops the only index line of {len(notes)} note(s) "
            f"that stay live ({named}): a live note's index line goes only with the note. "
            "Keep a line linking each, or delete the note in the same PUT (`deletes`)",
            details={
                "error_code": "index_lines_dropped",
                "keys": sorted(dropped),
                "dropped": [
                    {"index": index, "notes": sorted(listed)}
                    for index, listed in sorted(dropped.items())
                ],
            },
        )


class UnsupportedMediaType(ApiError):
    """A body that is not JSON."""

    status = 415
    type = "unsupported_media_type"


class RateLimited(ApiError):
    """Too many requests for this token; retry after the given seconds."""

    status = 429
    type = "rate_limited"

    def __init__(self, retry_after: int) -> None:
        super().__init__(
            f"rate limit exceeded; retry after {retry_after} s",
            details={"retry_after": retry_after},
            headers={"Retry-After": str(retry_after)},
        )


class TooManyStreams(ApiError):
    """This token already holds as many open event streams as one process allows."""

    status = 429
    type = "rate_limited"

    def __init__(self, max_streams: int, retry_after: int) -> None:
        super().__init__(
            f"this token already has {max_streams} open event stream(s); "
            f"close one or retry after {retry_after} s",
            details={
                "error_code": "too_many_streams",
                "max_streams": max_streams,
                "retry_after": retry_after,
            },
            headers={"Retry-After": str(retry_after)},
        )


class StorageUnavailable(ApiError):
    """The database cannot be reached or is busy; retry after the given seconds."""

    status = 503
    type = "unavailable"

    def __init__(
        self,
        message: str = "storage is unavailable",
        retry_after: int = 1,
        *,
        cause: str | None = None,
    ) -> None:
        super().__init__(message, headers={"Retry-After": str(retry_after)})
        # Why, in a few fixed words ("connection refused"), for the operator's CLI and
        # log; clients get only the message.
        self.cause = cause
