"""One process serves a repo: holding its watch lock, standing by, taking over.

    Takeover(label)        hold(state_dir): True while this process serves the repo,
                           False while another does (this one stands by and says so
                           in `watch.standby.json`); let_go() releases both

A watcher standing by calls `hold` again every `takeover_interval`; the first call that
gets the lock after its holder exited or died is the takeover. The lock itself is
`lock.RepoLock` (flock: nothing stale to clean up after a crash).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from sync_client.watch.lock import RepoLock, clear_standby, write_standby

__all__ = ["Takeover"]

log = logging.getLogger("memsync.watch")


class Takeover:
    """The watch lock of one repo's watcher, and its standing by while another holds it."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.lock: RepoLock | None = None
        # The holder's pid while another process serves the repo and this one waits.
        self.standby_for: int | None = None
        self.standby_since: float | None = None
        self.standby_dir: Path | None = None

    @property
    def standing_by(self) -> bool:
        """Whether another process serves this repo and this one waits."""
        return self.standby_for is not None

    def hold(self, state_dir: Path, on_takeover: Callable[[Path], None] | None = None) -> bool:
        """Hold `state_dir`'s watch lock; False (standing by) while another process
        holds it: two watchers of one repo would both push and both rewrite its state.
        `on_takeover` runs when this process takes over from one it stood by for."""
        if self.lock is not None and self.lock.state_dir == state_dir:
            return True
        if self.lock is not None:
            self.let_go(self.lock.state_dir)
        lock = RepoLock(state_dir)
        if lock.try_acquire():
            self.lock = lock
            if self.standby_for is not None:
                waited = time.monotonic() - (self.standby_since or time.monotonic())
                log.info(
                    "%s: process %s stopped: taking over (after %.1f s standing by)",
                    self.label,
                    self.standby_for,
                    waited,
                )
                clear_standby(state_dir)
                taking_over = True
            else:
                taking_over = False
            self.standby_for = None
            self.standby_since = None
            if taking_over and on_takeover is not None:
                on_takeover(state_dir)
            return True
        holder = lock.holder() or 0
        if self.standby_for is None:
            log.info(
                "%s: already watched by process %s; standing by to take over when it stops",
                self.label,
                holder,
            )
            self.standby_since = time.monotonic()
            self.standby_dir = state_dir
            write_standby(state_dir, holder)
        self.standby_for = holder
        return False

    def let_go(self, state_dir: Path | None = None) -> None:
        """Release the watch lock (a watcher standing by takes over) or, for a watcher
        that stood by, its standby file. `state_dir`: the repo's current one."""
        for directory in {state_dir, self.standby_dir}:
            if directory is not None:
                clear_standby(directory)
        if self.lock is not None:
            self.lock.release()
            self.lock = None
