"""Writes that survive a crash, and the time stamp they record: the bottom of the state files.

`atomic_write` is how every file outside the team dir is written (the sync state, conflict
copies, the credentials, the watcher's state and standby files). It lives below both
`state` and `watch.lock`, which use it, so neither imports the other to write.
"""

from __future__ import annotations

import os
from pathlib import Path


def _fsync_directory(directory: Path) -> None:
    """Make a rename in `directory` durable, where the platform allows it."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def atomic_write(path: Path, data: bytes, *, mode: int = 0o600, sync: bool = True) -> None:
    """Write `data` to `path` atomically: a private temp file in the same folder,
    fsync, rename, fsync the folder. Used for the state, conflict copies and the
    credentials file alike. `sync=False` skips both fsyncs, for a hint whose loss in
    a crash costs nothing (the PostToolUse hook's record, which runs after every edit)."""
    import tempfile  # only when writing: a no-op run saves nothing

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(handle, mode)
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            if sync:
                os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    if sync:
        _fsync_directory(path.parent)


def now_stamp() -> str:
    """UTC now, as the state and the conflict folders write it."""
    from datetime import UTC, datetime

    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
