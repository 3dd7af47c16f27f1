"""One watcher per repo: an advisory lock in the repo's state dir, and who stands by.

    RepoLock(state_dir)        try_acquire() and release(); the kernel frees the lock the
                               moment its holder exits or is killed (kill -9 included)
    lock_held(state_dir)       whether a live process holds it (None: no lock file yet)
    serving_pid(state_dir)     the pid of that process (what `status` names after a takeover)
    write_standby / standby    `watch.standby.json`: a second watcher waiting to take over

A second watcher of a repo (a second `memsync watch --all`, or `memsync watch` in a
repo the service already serves) does not push or pull it: it tries the lock every
half second and takes over when it is free. The lock is `flock(2)`, so there is no
stale lock to clean up after a crash, and the holder's pid is written into the file
for the messages only (never trusted for the decision).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path
from typing import Any

__all__ = [
    "LOCK_FILE",
    "STANDBY_FILE",
    "WATCH_STATE_FILE",
    "RepoLock",
    "clear_standby",
    "lock_held",
    "pid_alive",
    "read_watch_state",
    "serving_pid",
    "standby",
    "write_standby",
]

LOCK_FILE = "watch.lock"
STANDBY_FILE = "watch.standby.json"
# The watcher's state file in a state dir (written by `watcher.py`, shown by status and the
# session-start block). This module imports nothing of memsync's at load time: every
# session start reads it.
WATCH_STATE_FILE = "watch.json"


def pid_alive(pid: object) -> bool:
    """Whether a process with this pid exists (one of another user's counts)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RepoLock:
    """The watch lock of one state dir, held through an open file descriptor."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.path = state_dir / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this process holds it."""
        return self._fd is not None

    def try_acquire(self) -> bool:
        """Take the lock unless another process holds it; True when held now."""
        if self._fd is not None:
            return True
        self.state_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return True

    def holder(self) -> int | None:
        """The pid the holder wrote into the lock file (for messages), if any."""
        try:
            text = self.path.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            return None
        return int(text) if text.isdigit() else None

    def release(self) -> None:
        """Let go (closing the descriptor frees the lock)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def lock_held(state_dir: Path) -> bool | None:
    """Whether some process holds `state_dir`'s watch lock; None without a lock file
    (a watcher older than the lock, or none ever ran)."""
    try:
        fd = os.open(state_dir / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        os.close(fd)  # (closing also drops the shared lock, if it was taken)
    return False


def serving_pid(state_dir: Path) -> int | None:
    """The pid of the live process holding `state_dir`'s watch lock, or None.

    The pid is the one the holder wrote into the lock file; it is trusted only while
    the lock is held and that process lives, which is what `status` needs to name the
    watcher that serves a repo right after a takeover (before it rewrote its state).
    """
    if lock_held(state_dir) is not True:
        return None
    holder = RepoLock(state_dir).holder()
    return holder if holder is not None and pid_alive(holder) else None


def write_standby(state_dir: Path, holder: int | None) -> None:
    """Say that this process stands by to take `state_dir`'s repo over."""
    # Here, not at the top: `memsync context` reads the watcher's state through this
    # module and loads nothing else of memsync's.
    from sync_client.durable import atomic_write, now_stamp

    data = {"pid": os.getpid(), "since": now_stamp(), "holder": holder}
    with contextlib.suppress(OSError):
        state_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(state_dir / STANDBY_FILE, json.dumps(data, sort_keys=True).encode())


def clear_standby(state_dir: Path) -> None:
    """Remove this process's standby file (another's is left alone)."""
    data = standby(state_dir)
    if data is not None and data.get("pid") == os.getpid():
        with contextlib.suppress(OSError):
            (state_dir / STANDBY_FILE).unlink()


def standby(state_dir: Path) -> dict[str, Any] | None:
    """The standby file of a live process, or None."""
    try:
        data = json.loads((state_dir / STANDBY_FILE).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not pid_alive(data.get("pid")):
        return None
    return data


def read_watch_state(state_dir: Path) -> dict[str, Any] | None:
    """The watcher's state for one repo, or None when no watcher ever ran for it.

    `running` is true only while the process that wrote it is alive and holds the
    repo's watch lock: a watcher that was killed leaves `running: false, "stale": true`.
    `standby` is the pid of a second watcher waiting to take over, or None. Right after
    a takeover (before the new watcher rewrote the file) the lock's holder is named,
    `running: true, "taking_over": true`, never the watcher that stopped.
    """
    try:
        data = json.loads((state_dir / WATCH_STATE_FILE).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    if data.get("running") and (not pid_alive(data.get("pid")) or lock_held(state_dir) is False):
        data["running"] = False
        data["stale"] = True
    serving = serving_pid(state_dir)
    if serving is not None and serving != data.get("pid"):
        # Another watcher took over and has not written its state yet: it serves.
        data.update(running=True, pid=serving, stale=False, live=None, suppressed=None)
        data["taking_over"] = True
    waiting = standby(state_dir)
    data["standby"] = waiting.get("pid") if waiting else None
    return data
