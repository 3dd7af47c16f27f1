"""When the watcher stops asking the server, and what lets it ask again (docs/protocol.md 4.5).

    reason_of(error)          the suppression reason of a permanent failure
    suppression_of(error)     the `Suppression` a permanent failure puts in force
    lifts(suppression, kind)  whether a signal (a file changed, a file deleted) ends it
    blocks(suppression)       whether it stops pushes only, or pulls too

Pure rules with no thread, clock or request of their own: `watch.RepoWatcher` applies
them under its lock, and the unit tests read them as the table they are. No timer ever
lifts a suppression; a restart lifts them all.
"""

from __future__ import annotations

from dataclasses import dataclass

from sync_client.errors import (
    AuthError,
    ConfigError,
    EntryTooLarge,
    NoCredentials,
    NoRepoIdentity,
    TooManyEntries,
)
from sync_client.ignore_rules import IGNORE_FILE, IgnoreFileError

__all__ = [
    "BLOCKS_PULLS",
    "SIGNAL_OF_REASON",
    "WAITING_FOR",
    "Suppression",
    "blocks",
    "lifts",
    "reason_of",
    "suppression_of",
]

# What lifts each suppression; a restart lifts them all.
SIGNAL_OF_REASON = {
    "no-credentials": "credentials",
    "auth": "credentials",
    "no-repo-identity": "git-config",
    "too-many-entries": "deletion",
    "entry-too-large": "deletion",
    "config": "config",
    "ignore-file": "ignore-file",
    "rejected": "restart",
}
WAITING_FOR = {
    "credentials": "the credentials file to change (`memsync login`)",
    "git-config": "the repository's git config to change",
    "deletion": "a file under the team dir to be deleted",
    "config": "the user's config or credentials file to change",
    "ignore-file": f"the team dir's {IGNORE_FILE} to change",
    "restart": "a restart of the watcher",
}
# Reasons that stop pulls too: the server would refuse them just the same.
BLOCKS_PULLS = frozenset(
    {"no-credentials", "auth", "no-repo-identity", "config", "ignore-file", "rejected"}
)


@dataclass
class Suppression:
    """A permanent failure in force: why, since when, and what lifts it."""

    reason: str
    message: str
    since: str
    signal: str

    def as_json(self) -> dict[str, str]:
        """The `suppressed` object of the state file."""
        return {
            "reason": self.reason,
            "message": self.message,
            "since": self.since,
            "waiting_for": WAITING_FOR[self.signal],
        }


def reason_of(error: BaseException) -> str:
    """The suppression reason of a permanent failure."""
    if isinstance(error, NoCredentials):
        return "no-credentials"
    if isinstance(error, NoRepoIdentity):
        return "no-repo-identity"
    if isinstance(error, IgnoreFileError):
        return "ignore-file"
    if isinstance(error, ConfigError):
        return "config"
    if isinstance(error, AuthError):
        return "auth"
    if isinstance(error, TooManyEntries):
        return "too-many-entries"
    if isinstance(error, EntryTooLarge):
        return "entry-too-large"
    return "rejected"


def suppression_of(error: BaseException, since: str) -> Suppression:
    """The suppression a permanent failure puts in force from `since` on."""
    reason = reason_of(error)
    return Suppression(
        reason=reason, message=str(error), since=since, signal=SIGNAL_OF_REASON[reason]
    )


def lifts(suppression: Suppression | None, kind: str) -> bool:
    """Whether the signal `kind` (`credentials`, `config`, `git-config`, `deletion` of a
    synced file, `ignore-file`) ends `suppression`. A config suppression also ends when
    the credentials file changes: either file can hold what was wrong."""
    if suppression is None:
        return False
    return suppression.signal == kind or (suppression.signal == "config" and kind == "credentials")


def blocks(suppression: Suppression | None, *, pulls: bool) -> bool:
    """Whether `suppression` stops a push (`pulls=False`) or a pull (`pulls=True`): every
    suppression stops pushes; pulls only for the reasons the server would refuse too."""
    if suppression is None:
        return False
    return not pulls or suppression.reason in BLOCKS_PULLS
