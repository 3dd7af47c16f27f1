"""Storage backends behind the `Store` protocol (`base.py`)."""

from sync_server.storage.base import (
    CommitResult,
    Delta,
    HistoryItem,
    RepoHead,
    Snapshot,
    Store,
    TokenRecord,
)

__all__ = [
    "CommitResult",
    "Delta",
    "HistoryItem",
    "RepoHead",
    "Snapshot",
    "Store",
    "TokenRecord",
]
