"""Watching folders: the system's file events, or polling when none can be had.

    Observers(poll_interval)     schedule(path, callback) -> Handle; unschedule(handle);
                                 upgrade(handle) tries the system's events again

On Linux every watched team dir costs one inotify instance, and a user has 128 by
default (`fs.inotify.max_user_instances`), shared with every editor, IDE and test
runner. When none is left (or no inotify watch, `fs.inotify.max_user_watches`), a
watcher that gave up would leave edits unsynced with nobody told. So the folder is
polled instead (a stat walk every `poll_interval` seconds; team dirs are small), the
reason and the fix are logged once, and the watcher keeps trying the system's events
again now and then (`upgrade`): when the limit frees up it switches back.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler

__all__ = ["Handle", "Observers", "polling_reason"]

log = logging.getLogger("memsync.watch")

# What each exhausted limit is, and the sysctl that raises it.
_LIMITS = {
    errno.EMFILE: ("no inotify instance is left", "fs.inotify.max_user_instances", 512),
    errno.ENOSPC: ("no inotify watch is left", "fs.inotify.max_user_watches", 524288),
    errno.ENOMEM: ("the kernel refused an inotify watch", "fs.inotify.max_user_watches", 524288),
}


def polling_reason(error: OSError) -> str | None:
    """The words for an inotify limit `error` hit, with the fix; None for other errors."""
    limit = _LIMITS.get(error.errno or 0)
    if limit is None:
        return None
    words, setting, value = limit
    return (
        f"{words} ({setting}); to raise it: `sudo sysctl {setting}={value}` "
        f"(and a line `{setting} = {value}` in /etc/sysctl.d/ to keep it)"
    )


class _Handler(FileSystemEventHandler):
    """A watchdog handler that hands every event to one callback."""

    def __init__(self, callback: Callable[[Any], None]) -> None:
        super().__init__()
        self._callback = callback

    def dispatch(self, event: FileSystemEvent) -> None:
        """watchdog's entry point."""
        try:
            self._callback(event)
        except Exception:
            log.exception("a file event could not be handled")


@dataclass
class Handle:
    """One scheduled folder: which observer watches it, and how."""

    path: Path
    label: str
    callback: Callable[[Any], None]
    watch: Any
    polled: bool


class Observers:
    """The system's observer (inotify, FSEvents), and a polling one when it fails."""

    def __init__(self, poll_interval: float = 2.0) -> None:
        self.poll_interval = poll_interval
        # The system's observer; made when first needed (on Linux making it takes an
        # inotify instance, which may be the one that is not left).
        self._native: Any = None
        self._polling: Any = None
        self._lock = threading.Lock()
        self._said = False
        self._started = False

    def start(self) -> None:
        """Be ready to schedule (each observer starts when first needed)."""
        self._started = True

    def schedule(self, path: Path, callback: Callable[[Any], None], label: str) -> Handle:
        """Watch `path` recursively; poll it when the system's events cannot be had.
        `label` (the repo) starts the log lines about it."""
        try:
            return self._schedule_native(path, callback, label)
        except OSError as error:
            reason = polling_reason(error)
            if reason is None:
                raise
            self._say_polling(label, reason)
        watch = self._schedule_polling(path, callback)
        return Handle(path, label, callback, watch, polled=True)

    def upgrade(self, handle: Handle) -> Handle | None:
        """For a polled folder, try the system's events again: the new handle when that
        worked (the polling watch is then dropped), else None."""
        if not handle.polled:
            return None
        try:
            native = self._schedule_native(handle.path, handle.callback, handle.label)
        except OSError as error:
            if polling_reason(error) is None:
                raise
            return None
        self.unschedule(handle)
        log.info("%s: file events are available again: no longer polling", handle.label)
        return native

    def unschedule(self, handle: Handle) -> None:
        """Stop watching one folder (an observer that ended already is fine)."""
        observer = self._polling if handle.polled else self._native
        if observer is not None:
            with contextlib.suppress(Exception):  # its emitter may have ended itself
                observer.unschedule(handle.watch)

    def stop(self, timeout: float) -> bool:
        """Stop both observers; True when their threads ended within `timeout`."""
        if not self._started:
            return True
        self._started = False
        observers = [o for o in (self._native, self._polling) if o is not None]
        for observer in observers:
            observer.stop()
        for observer in observers:
            observer.join(max(0.5, timeout))
        return not any(observer.is_alive() for observer in observers)

    def _schedule_native(self, path: Path, callback: Callable[[Any], None], label: str) -> Handle:
        with self._lock:
            if self._native is None:
                from watchdog.observers import Observer

                native = Observer()  # OSError when no inotify instance is left
                native.name = "memsync-observer"
                native.start()
                self._native = native
            native = self._native
        watch = native.schedule(_Handler(callback), str(path), recursive=True)
        return Handle(path, label, callback, watch, polled=False)

    def _schedule_polling(self, path: Path, callback: Callable[[Any], None]) -> Any:
        with self._lock:
            if self._polling is None:
                from watchdog.observers.polling import PollingObserverVFS

                # lstat: a symlink in the team dir is never followed (memsync never
                # syncs through links), so a link to / cannot make the walk endless.
                self._polling = PollingObserverVFS(
                    os.lstat, os.scandir, polling_interval=self.poll_interval
                )
                self._polling.name = "memsync-poller"
                self._polling.start()
            polling = self._polling
        return polling.schedule(_Handler(callback), str(path), recursive=True)

    def _say_polling(self, label: str, reason: str) -> None:
        """Log why a folder is polled: a WARNING the first time, then one INFO line."""
        with self._lock:
            first, self._said = not self._said, True
        if first:
            log.warning(
                "%s: cannot watch for file changes: %s; polling every %g s instead",
                label,
                reason,
                self.poll_interval,
            )
        else:
            log.info("%s: polling every %g s (no inotify left)", label, self.poll_interval)
