"""The client's failure tree (docs/protocol.md 4.5). Every failure is typed.

    MemsyncError                  exit  type
    ├── ConfigError                2   config                  bad flags or config, refused team dir
    │   ├── NoCredentials          2   no_credentials          no server URL or token
    │   └── NoRepoIdentity         2   no_repo_identity        no MEMSYNC_REPO, no usable git remote
    ├── LocalEditInTheWay          1   local_edit_in_the_way   would displace an unpushed local edit
    ├── UnknownKey                 2   unknown_key             a KEY or version that is nowhere
    ├── Interrupted              130   interrupted             Ctrl-C; says what was done
    ├── PermanentError             1   permanent               retrying cannot help; the watcher
    │   │                                                      suppresses
    │   ├── AuthError              1   auth                    401 / 403
    │   ├── TooManyEntries         1   too_many_entries        413 team_memory_too_many_entries
    │   ├── EntriesRefused         -   entries_refused         the server refused named entries: a
    │   │   │                                                  push skips them and sends the rest
    │   │   │                                                  (exit 3), else exit 1
    │   │   ├── EntryTooLarge          entry_too_large         413 team_memory_entry_too_large
    │   │   ├── InvalidEntries         invalid_entries         400 invalid_key / invalid_text
    │   │   └── PathClash              path_clash              409 path_clash
    │   ├── NotAMemsyncServer      1   not_a_memsync_server    answers, but not as a memsync server
    │   ├── ServerTooOld           1   server_too_old          `supports` lacks what is needed
    │   └── RequestRejected        1   request_rejected        any other 4xx
    └── TransientError             1   transient               retried with backoff and jitter
        ├── NetworkError               network                 refused, timed out, reset, TLS, DNS
        ├── ServerError                server_error            5xx (Retry-After honoured on 503)
        ├── RateLimited                rate_limited            429 (Retry-After honoured)
        └── ConflictRoundsExhausted    server_kept_changing    the server kept moving during a push

`type` is stable: `--json` prints a failure as `{"error": error.as_json()}`, and scripts
match on it. `NoCredentials` and `NoRepoIdentity` are permanent too (`is_permanent`),
but they are the user's configuration to fix, hence exit 2.
"""

from __future__ import annotations

from typing import Any, ClassVar
from urllib.parse import urlsplit, urlunsplit


class MemsyncError(Exception):
    """Base of every client failure; `str()` is one readable line."""

    exit_code = 1
    # Stable across releases: `--json` prints it, and scripts match on it.
    type: ClassVar[str] = "error"

    def details(self) -> dict[str, Any]:
        """Facts beyond the message, for `--json` (no secrets, no entry texts)."""
        return {}

    def as_json(self) -> dict[str, Any]:
        """`{"type", "message", ...details}`: the `error` object `--json` prints."""
        return {"type": self.type, "message": str(self), **self.details()}


class ConfigError(MemsyncError):
    """Usage or configuration to fix (exit 2)."""

    exit_code = 2
    type = "config"


class NoCredentials(ConfigError):
    """No server URL or no token from flags, environment or the user's config."""

    type = "no_credentials"


class NoRepoIdentity(ConfigError):
    """No `--repo`/`MEMSYNC_REPO` and no git remote `origin` to derive one from."""

    type = "no_repo_identity"


class LocalEditInTheWay(MemsyncError):
    """A command would replace a local edit the server has not seen; nothing changed."""

    type = "local_edit_in_the_way"


class UnknownKey(MemsyncError):
    """A KEY, or a version of it, that is nowhere to be found: not in the team dir, not
    in the last sync, not on the server (or not in its history). Exit 2, as `ls` says
    of a missing file: the argument names nothing."""

    exit_code = 2
    type = "unknown_key"

    def __init__(self, message: str, key: str, version: int | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.version = version

    def details(self) -> dict[str, Any]:
        """The key, and the version asked for (or null)."""
        return {"key": self.key, "version": self.version}


class Interrupted(MemsyncError):
    """Ctrl-C during a transfer: `done` of `total` files were sent or written (and
    recorded in the state), so running `command` again finishes the rest."""

    exit_code = 130  # 128 + SIGINT, as a shell reports Ctrl-C
    type = "interrupted"

    def __init__(
        self, verb: str, done: int, total: int | None, command: str, *, in_flight: int = 0
    ) -> None:
        of_total = f" of {total:,}" if total is not None else ""
        # A request cut short: the server may have committed it after the client left.
        unsure = f" (and maybe the {in_flight:,} in flight)" if in_flight else ""
        super().__init__(
            f"interrupted: {verb} {done:,}{of_total} files{unsure}; run `{command}` again to finish"
        )
        self.done = done
        self.total = total
        self.command = command
        self.in_flight = in_flight

    def details(self) -> dict[str, Any]:
        """How far the transfer got (`in_flight`: files whose request was cut short)."""
        return {
            "done": self.done,
            "total": self.total,
            "command": self.command,
            "in_flight": self.in_flight,
        }


class PermanentError(MemsyncError):
    """A failure that retrying will not fix."""

    type = "permanent"


class AuthError(PermanentError):
    """The server refused the token (401) or its scope (403)."""

    type = "auth"

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status

    def details(self) -> dict[str, Any]:
        """The HTTP status (401 or 403)."""
        return {"status": self.status}


class TooManyEntries(PermanentError):
    """The server holds at most `max_entries` live entries for the repo."""

    type = "too_many_entries"

    def __init__(self, max_entries: int, received_entries: int | None = None) -> None:
        super().__init__(
            f"the server allows at most {max_entries} entries in this repo"
            + (f" (the push would make {received_entries})" if received_entries else "")
        )
        self.max_entries = max_entries
        self.received_entries = received_entries

    def details(self) -> dict[str, Any]:
        """The server's limit, and the count the push would have made."""
        return {"max_entries": self.max_entries, "received_entries": self.received_entries}


class EntriesRefused(PermanentError):
    """The server refused these entries of a write, and said which (docs/protocol.md 4.5, "per
    entry"): a push leaves them out and sends the rest.

    `refusals` maps each named key to what the server said: `reason` (a skip reason:
    `too-large`, `invalid-key`, `invalid-text`, `path-clash`) plus `max_bytes`,
    `problem` or `clashes_with` where the answer gave them.
    """

    type = "entries_refused"

    def __init__(self, message: str, refusals: dict[str, dict[str, Any]]) -> None:
        super().__init__(message)
        self.refusals = refusals

    def details(self) -> dict[str, Any]:
        """Each refused key with the server's reason."""
        return {"refusals": self.refusals}


class EntryTooLarge(EntriesRefused):
    """One entry is over the server's per-entry limit (the server names one per answer)."""

    type = "entry_too_large"

    def __init__(self, key: str, max_bytes: int) -> None:
        super().__init__(
            f"{key} is larger than the server allows ({max_bytes} bytes)",
            {key: {"reason": "too-large", "max_bytes": max_bytes}},
        )
        self.key = key
        self.max_bytes = max_bytes


class InvalidEntries(EntriesRefused):
    """400 `invalid_key` or `invalid_text`: keys or texts the server will not store."""

    type = "invalid_entries"


class PathClash(EntriesRefused):
    """409 `path_clash`: a key would be both a file and a folder on the server."""

    type = "path_clash"


# The first path segments a memsync server answers under (its APIs, docs/protocol.md 3.1,
# its web page, its API docs and probes): a URL holding one of them is a page or an API
# path pasted after the server's base URL.
_SERVER_SEGMENTS = frozenset(
    {"api", "v1", "ui", "docs", "redoc", "openapi.json", "healthz", "readyz", "metrics"}
)


def base_url_hint(server: str) -> str | None:
    """`give the server's base URL, http://host, without /ui` when `server`'s path holds
    one of the server's own paths (a URL copied from the web page, the docs or curl);
    None otherwise. A base URL may itself have a path (a server behind a proxy prefix)."""
    parts = urlsplit(server)
    segments = parts.path.split("/")
    for index, segment in enumerate(segments):
        if segment in _SERVER_SEGMENTS:
            base = urlunsplit((parts.scheme, parts.netloc, "/".join(segments[:index]), "", ""))
            return f"give the server's base URL, {base}, without /{'/'.join(segments[index:])}"
    return None


class NotAMemsyncServer(PermanentError):
    """The server URL answers, but not as a memsync server: a typo, an extra path, or
    another HTTP server. Never read as an empty repo, so nothing is created there."""

    type = "not_a_memsync_server"

    def __init__(self, server: str, answer: str) -> None:
        message = f"{server} is not a memsync server ({answer})"
        hint = base_url_hint(server)
        if hint is not None:
            message += f": {hint}"
        super().__init__(message)
        self.server = server
        self.answer = answer

    def details(self) -> dict[str, Any]:
        """The URL and what it answered."""
        return {"server": self.server, "answer": self.answer}


class ServerTooOld(PermanentError):
    """The server does not list a feature a command needs in its `supports`: it runs an
    older memsync-server. Nothing was changed."""

    type = "server_too_old"

    def __init__(self, server: str, feature: str, command: str) -> None:
        super().__init__(
            f"the server at {server} is too old for `{command}` (it does not support "
            f'"{feature}"): upgrade memsync-server'
        )
        self.server = server
        self.feature = feature

    def details(self) -> dict[str, Any]:
        """The server and the missing `supports` name."""
        return {"server": self.server, "feature": self.feature}


class RequestRejected(PermanentError):
    """Any other 4xx: the server says the request itself is wrong."""

    type = "request_rejected"

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status

    def details(self) -> dict[str, Any]:
        """The HTTP status."""
        return {"status": self.status}


class TransientError(MemsyncError):
    """A failure worth retrying later; `retry_after` is the server's hint, if any."""

    type = "transient"

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def details(self) -> dict[str, Any]:
        """The server's `Retry-After`, in seconds, when it sent one."""
        return {"retry_after": self.retry_after}

    def retry_words(self) -> str:
        """What is wrong, in the few words of a retry notice (`server unreachable`)."""
        return "the server failed"


class NetworkError(TransientError):
    """The server could not be reached or did not answer in time.

    `unreachable` is true when no connection could be made at all (refused, no route,
    name not resolved, connect timeout): nothing answers at the address, so a watcher
    can tell that something listens again by a connect alone, without a request. A
    connection that was accepted and then reset or closed (a published port or a load
    balancer in front of a dead server) is not unreachable: a connect there always
    succeeds, and only a request's answer says whether the server is back.
    """

    type = "network"

    def __init__(
        self, message: str, retry_after: float | None = None, *, unreachable: bool = False
    ) -> None:
        super().__init__(message, retry_after)
        self.unreachable = unreachable

    def retry_words(self) -> str:
        """`server unreachable`."""
        return "server unreachable"


class ServerError(TransientError):
    """The server failed (5xx)."""

    type = "server_error"

    def __init__(
        self, message: str, retry_after: float | None = None, *, status: int | None = None
    ) -> None:
        super().__init__(message, retry_after)
        self.status = status

    def details(self) -> dict[str, Any]:
        """The HTTP status and the server's `Retry-After`."""
        return {"status": self.status, **super().details()}

    def retry_words(self) -> str:
        """`server busy (503)`."""
        return f"server busy ({self.status})" if self.status else "server busy"


class RateLimited(TransientError):
    """429: slow down for `retry_after` seconds."""

    type = "rate_limited"

    def retry_words(self) -> str:
        """`rate limited`."""
        return "rate limited"


class ConflictRoundsExhausted(TransientError):
    """A push met a moving server more times than it retries in one go."""

    type = "server_kept_changing"

    def retry_words(self) -> str:
        """`the server kept changing`."""
        return "the server kept changing"


def is_permanent(error: BaseException) -> bool:
    """Whether the watcher should stop pushing until a real recovery signal."""
    # A configuration error (credentials, identity, a bad .memsyncignore) is the same on
    # every retry: only the user's fix, which the watcher sees as a signal, can help.
    return isinstance(error, PermanentError | ConfigError)


# Review (docs/protocol.md 3.12): failures of `memsync review` and of a proposal.


class TooManyProposals(PermanentError):
    """409 `too_many_proposals`: this author has the server's bound of pending proposals
    in the repo. A push leaves the entries out (as a refusal: not offered again until the
    file changes); nothing was stored."""

    type = "too_many_proposals"

    def __init__(self, maximum: int) -> None:
        limit = f"{maximum:,}" if maximum > 0 else "the server's limit of"
        super().__init__(
            f"{limit} proposals of yours already wait for review in this repo; "
            "nothing was proposed until a reviewer decides some"
        )
        self.maximum = maximum

    def details(self) -> dict[str, Any]:
        """The server's bound."""
        return {"max": self.maximum}


class UnknownProposal(MemsyncError):
    """404 for a proposal id: none such, or someone else's (a non-reviewer sees only their
    own). A usage error: exit 2."""

    exit_code = 2
    type = "unknown_proposal"

    def __init__(self, proposal_id: int) -> None:
        super().__init__(
            f"no proposal {proposal_id} you may see in this repo (`memsync review` lists them)"
        )
        self.proposal_id = proposal_id

    def details(self) -> dict[str, Any]:
        """The id asked for."""
        return {"id": self.proposal_id}


class ProposalDecided(MemsyncError):
    """409 `proposal_decided`: accepted, rejected or replaced already. Exit 2."""

    exit_code = 2
    type = "proposal_decided"

    def __init__(self, proposal_id: int, status: str) -> None:
        super().__init__(f"proposal {proposal_id} is not pending: it was {status}")
        self.proposal_id = proposal_id
        self.status = status

    def details(self) -> dict[str, Any]:
        """The id and its status."""
        return {"id": self.proposal_id, "status": self.status}


class ProposalConflict(MemsyncError):
    """409 `proposal_conflict`: the team's text moved since the proposal's base and the two
    overlap (or a delete meets an edit). Nothing changed; the proposal stays pending.
    Exit 3, the CLI's exit for a conflict that needs the person."""

    exit_code = 3
    type = "proposal_conflict"

    def __init__(self, proposal_id: int, keys: list[str]) -> None:
        shown = ", ".join(keys) if keys else "its notes"
        super().__init__(
            f"proposal {proposal_id} was not accepted: the team changed {shown} since it "
            "was written and the edits overlap; nothing changed, it stays pending"
        )
        self.proposal_id = proposal_id
        self.keys = keys

    def details(self) -> dict[str, Any]:
        """The id and the keys in conflict."""
        return {"id": self.proposal_id, "keys": self.keys}
