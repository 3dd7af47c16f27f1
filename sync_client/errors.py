"""The client's failure tree (docs/protocol.md 4.5). Every failure is typed.

    MemsyncError                      exit code
    ├── ConfigError                   2   bad flags or config, a refused team dir
    │   ├── NoCredentials             2   no server URL or token
    │   └── NoRepoIdentity            2   no MEMSYNC_REPO and no usable git remote
    ├── LocalEditInTheWay             1   a command would displace an unpushed local edit
    ├── PermanentError                1   retrying cannot help; the watcher suppresses
    │   ├── AuthError                 1   401 / 403
    │   ├── TooManyEntries            1   413 team_memory_too_many_entries
    │   ├── EntriesRefused            -   the server refused named entries: a push skips
    │   │   │                             them and sends the rest (exit 3), else exit 1
    │   │   ├── EntryTooLarge             413 team_memory_entry_too_large (one key)
    │   │   ├── InvalidEntries            400 invalid_key (each key, why) / invalid_text
    │   │   └── PathClash                 409 path_clash: a key both a file and a folder
    │   ├── NotAMemsyncServer         1   the URL answers, but not as a memsync server
    │   └── RequestRejected           1   any other 4xx
    └── TransientError                1   retried with backoff and jitter
        ├── NetworkError                  connection refused, timeout, reset
        ├── ServerError                   5xx (Retry-After honoured on 503)
        ├── RateLimited                   429 (Retry-After honoured)
        └── ConflictRoundsExhausted       the server kept moving during a push

`NoCredentials` and `NoRepoIdentity` are permanent too (`is_permanent`), but they are
the user's configuration to fix, hence exit 2.
"""

from __future__ import annotations

from typing import Any


class MemsyncError(Exception):
    """Base of every client failure; `str()` is one readable line."""

    exit_code = 1


class ConfigError(MemsyncError):
    """Usage or configuration to fix (exit 2)."""

    exit_code = 2


class NoCredentials(ConfigError):
    """No server URL or no token from flags, environment or the user's config."""


class NoRepoIdentity(ConfigError):
    """No `--repo`/`MEMSYNC_REPO` and no git remote `origin` to derive one from."""


class LocalEditInTheWay(MemsyncError):
    """A command would replace a local edit the server has not seen; nothing changed."""


class PermanentError(MemsyncError):
    """A failure that retrying will not fix."""


class AuthError(PermanentError):
    """The server refused the token (401) or its scope (403)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class TooManyEntries(PermanentError):
    """The server holds at most `max_entries` live entries for the repo."""

    def __init__(self, max_entries: int, received_entries: int | None = None) -> None:
        super().__init__(
            f"the server allows at most {max_entries} entries in this repo"
            + (f" (the push would make {received_entries})" if received_entries else "")
        )
        self.max_entries = max_entries
        self.received_entries = received_entries


class EntriesRefused(PermanentError):
    """The server refused these entries of a write, and said which (docs/protocol.md 4.5, "per
    entry"): a push leaves them out and sends the rest.

    `refusals` maps each named key to what the server said: `reason` (a skip reason:
    `too-large`, `invalid-key`, `invalid-text`, `path-clash`) plus `max_bytes`,
    `problem` or `clashes_with` where the answer gave them.
    """

    def __init__(self, message: str, refusals: dict[str, dict[str, Any]]) -> None:
        super().__init__(message)
        self.refusals = refusals


class EntryTooLarge(EntriesRefused):
    """One entry is over the server's per-entry limit (the server names one per answer)."""

    def __init__(self, key: str, max_bytes: int) -> None:
        super().__init__(
            f"{key} is larger than the server allows ({max_bytes} bytes)",
            {key: {"reason": "too-large", "max_bytes": max_bytes}},
        )
        self.key = key
        self.max_bytes = max_bytes


class InvalidEntries(EntriesRefused):
    """400 `invalid_key` or `invalid_text`: keys or texts the server will not store."""


class PathClash(EntriesRefused):
    """409 `path_clash`: a key would be both a file and a folder on the server."""


class NotAMemsyncServer(PermanentError):
    """The server URL answers, but not as a memsync server: a typo, an extra path, or
    another HTTP server. Never read as an empty repo, so nothing is created there."""

    def __init__(self, server: str, answer: str) -> None:
        super().__init__(f"{server} is not a memsync server ({answer})")
        self.server = server
        self.answer = answer


class RequestRejected(PermanentError):
    """Any other 4xx: the server says the request itself is wrong."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class TransientError(MemsyncError):
    """A failure worth retrying later; `retry_after` is the server's hint, if any."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class NetworkError(TransientError):
    """The server could not be reached or did not answer in time."""


class ServerError(TransientError):
    """The server failed (5xx)."""


class RateLimited(TransientError):
    """429: slow down for `retry_after` seconds."""


class ConflictRoundsExhausted(TransientError):
    """A push met a moving server more times than it retries in one go."""


def is_permanent(error: BaseException) -> bool:
    """Whether the watcher should stop pushing until a real recovery signal."""
    # A configuration error (credentials, identity, a bad .memsyncignore) is the same on
    # every retry: only the user's fix, which the watcher sees as a signal, can help.
    return isinstance(error, PermanentError | ConfigError)
