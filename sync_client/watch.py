"""`memsync watch`: keep team dirs in sync while they are being written (docs/protocol.md 4.6).

    Watcher(targets, settings)     one per person: every target, its own state each
    RepoWatcher                    one team dir: a debounced pusher and a remote follower
    read_watch_state(state_dir)    what `memsync status` shows about a repo's watcher

Per repo, three things run:

- watchdog reports changes under the team dir (recursively). Events are hints: a push
  re-reads the team dir through the stat cache, so an editor that saves by swap and a
  burst of writes are all the same to it. An event for a file whose stat is what the
  stat cache holds (the watcher's own pull wrote it) is not even a hint.
- a `Debouncer` runs one push after the writes pause (2 s), never two at once; a write
  during a push schedules one more. A push with nothing to send makes no request.
- the follower keeps the team dir current: it follows the server's events stream and
  pulls (`If-None-Match`, `?since=`) on each event, except for the event of the
  watcher's own commit; when the stream is unavailable it pulls every poll interval
  and asks for the stream again with backoff.

Pull and push of one repo hold the repo's lock, so they never overlap. One process
serves a repo: it holds the repo's watch lock (`watch_lock.py`); a second watcher
stands by and takes over within a second of the first exiting or dying. When no
inotify instance or watch is left, the team dir is polled (`watch_observe.py`).

Failures are the classes of docs/protocol.md 4.5. A transient one (network, 5xx, 429, a server that
kept moving) is retried with exponential backoff and jitter, `Retry-After` a floor;
push, pull and stream share one outage clock (`RetryPace`), so after the first minute
each is tried at most once per `backoff_cap` (30 s), one request per attempt. Only an
answer that is the server's own (a pull, a 304, a stream that connects, a push) is a
recovery signal: the backoffs start over and a push that waits for a retry is due
after the debounce. A connection that a proxy in front of a dead server accepts and
resets, or a 502/503/504, is one more failure. While nothing answers at the server's
address at all, a TCP connect (no request) every half second notices that something
listens again, and one pull then asks whether it is the server.

A permanent failure suppresses the repo: no request is made for local changes (and,
for an auth or identity failure, none for the server's either) until its recovery
signal, and no timer ever lifts it:

    reason               lifted by
    no-credentials, auth the credentials file changes (`memsync login`)
    no-repo-identity     the repository's git config changes
    too-many-entries,    a file under the team dir is deleted
    entry-too-large
    config               the user's config or credentials file changes
    ignore-file          the team dir's .memsyncignore changes (or goes)
    rejected             a restart (any suppression ends with a restart)

Logs go to the `memsync.watch` logger (the CLI sends it to stderr): keys, counts and
reasons, never an entry's text or a token.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sync_client.api import Api, EventStream, EventsUnsupported, reachable, retry_in_place
from sync_client.config import ClientConfig, config_home, git_config_path
from sync_client.debounce import Backoff, Debouncer, RetryPace
from sync_client.errors import (
    AuthError,
    ConfigError,
    EntryTooLarge,
    NetworkError,
    NoCredentials,
    NoRepoIdentity,
    TooManyEntries,
    TransientError,
    is_permanent,
)
from sync_client.local import IGNORE_FILE, IgnoreFileError, is_editor_leftover
from sync_client.state import WATCH_STATE_FILE, atomic_write, now_stamp, read_watch_state
from sync_client.team_index import kept_lines
from sync_client.watch_lock import RepoLock, clear_standby, write_standby
from sync_client.watch_notices import IndexNotices, SkipNotices, restored_lines
from sync_client.watch_observe import Handle, Observers
from sync_client.workspace import Workspace

__all__ = [
    "WATCH_STATE_FILE",
    "RepoWatcher",
    "Target",
    "WatchSettings",
    "Watcher",
    "read_watch_state",
]

log = logging.getLogger("memsync.watch")

# What lifts each suppression (docs/protocol.md 4.5); a restart lifts them all.
_SIGNAL_OF_REASON = {
    "no-credentials": "credentials",
    "auth": "credentials",
    "no-repo-identity": "git-config",
    "too-many-entries": "deletion",
    "entry-too-large": "deletion",
    "config": "config",
    "ignore-file": "ignore-file",
    "rejected": "restart",
}
_WAITING_FOR = {
    "credentials": "the credentials file to change (`memsync login`)",
    "git-config": "the repository's git config to change",
    "deletion": "a file under the team dir to be deleted",
    "config": "the user's config or credentials file to change",
    "ignore-file": f"the team dir's {IGNORE_FILE} to change",
    "restart": "a restart of the watcher",
}
# Reasons that stop pulls too: the server would refuse them just the same.
_BLOCKS_PULLS = frozenset(
    {"no-credentials", "auth", "no-repo-identity", "config", "ignore-file", "rejected"}
)
# watchdog's event types that say a file's content or presence may have changed; opening
# and reading (our own scan does that) say nothing.
_CHANGE_EVENTS = frozenset({"created", "modified", "moved", "deleted", "closed"})


@dataclass(frozen=True)
class WatchSettings:
    """How a watcher paces itself (`memsync watch --debounce --poll-interval`)."""

    debounce: float = 2.0
    poll_interval: float = 30.0
    # A pending push is flushed within this on SIGINT/SIGTERM.
    stop_timeout: float = 2.0
    # A server without the events stream is asked for it again after this long.
    events_retry: float = 900.0
    # How often the signal files (credentials, git config, enrolled repos) are stat'ed.
    signal_interval: float = 1.0
    backoff_base: float = 1.0
    # After the first minute of failures, at most one attempt per this many seconds.
    backoff_cap: float = 30.0
    # The first minute: how long an outage is before every kind is at the cap.
    backoff_ramp: float = 60.0
    # The first wait of a push or pull retried in place (only while nothing is failing).
    retry_base: float = 0.5
    # While nothing answers at the server's address: a TCP connect this often.
    probe_interval: float = 0.5
    # A watcher standing by tries the repo's watch lock this often.
    takeover_interval: float = 0.5
    # A team dir polled for want of inotify: a stat walk this often; and how often the
    # system's file events are tried again.
    fs_poll_interval: float = 2.0
    rewatch_interval: float = 10.0

    def scaled(self, factor: float) -> WatchSettings:
        """The same settings with the retry schedule `factor` times as long (the
        backoff, its cap and first minute, retries in place, the stream's retry)."""
        return replace(
            self,
            backoff_base=self.backoff_base * factor,
            backoff_cap=self.backoff_cap * factor,
            backoff_ramp=self.backoff_ramp * factor,
            retry_base=self.retry_base * factor,
            events_retry=self.events_retry * factor,
        )


# For tests only: runs the retry schedule faster (0.05: a 30 s cap is 1.5 s), so a test
# can watch many minutes of an outage in seconds. Not a setting for people.
TIME_SCALE_ENV = "MEMSYNC_WATCH_TIME_SCALE"


def _time_scale(env: Mapping[str, str]) -> float | None:
    """The factor `TIME_SCALE_ENV` asks for, if it is a positive number."""
    try:
        factor = float(env.get(TIME_SCALE_ENV, ""))
    except ValueError:
        return None
    return factor if 0 < factor < float("inf") else None


@dataclass(frozen=True)
class Target:
    """One team dir to watch: how to resolve its configuration, and where its signals
    are. `state_dir` is known up front for an enrolled repo (its state file is written
    even when its configuration cannot be resolved)."""

    label: str
    resolve: Callable[[], ClientConfig]
    identity: tuple[str, ...]
    git_cwd: Path | None = None
    state_dir: Path | None = None


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
            "waiting_for": _WAITING_FOR[self.signal],
        }


@dataclass
class _Counters:
    events: int = 0
    pushes: int = 0
    pulls: int = 0
    suppressed_events: int = 0
    failures: int = 0


def _reason_of(error: BaseException) -> str:
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


def _fingerprint(path: Path) -> tuple[int, int, int] | None:
    """What a change of `path` changes: (inode, size, mtime_ns); None when missing."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


class RepoWatcher:
    """The watcher of one team dir: its pusher, its follower, its state and signals."""

    def __init__(
        self,
        target: Target,
        settings: WatchSettings,
        observers: Observers,
    ) -> None:
        self.target = target
        self.settings = settings
        self._observers = observers
        self._watch: Handle | None = None
        self._watch_lock = threading.Lock()
        self._next_rewatch = 0.0
        # The repo's watch lock; `_standby_for` is the holder's pid while another
        # process serves the repo and this one waits to take over.
        self._repo_lock: RepoLock | None = None
        self._standby_for: int | None = None
        self._standby_since: float | None = None
        self._standby_dir: Path | None = None
        self._watched_inode: int | None = None
        self._lock = threading.RLock()  # pull and push of this repo, one at a time
        self._wake = threading.Condition()  # the follower's sleep; guards the fields below
        self._stopping = False
        self._resync = True
        self._reconfigure = False
        self._suppression: Suppression | None = None
        self._stream: EventStream | None = None
        self._live: str | None = None
        self._last_error: str | None = None
        self._backoff_until: str | None = None
        self._counters = _Counters()
        self._index_notices = IndexNotices(target.label)
        self._skip_notices = SkipNotices(target.label)
        self._dirty = True
        self._ready = threading.Event()
        self.config: ClientConfig | None = None
        self._api: Api | None = None
        self._workspace: Workspace | None = None
        self.git_config: Path | None = None
        # Push, pull and stream back off on one outage clock (guarded by `_wake`). A
        # stream that keeps failing is asked for less and less often, down to the rate
        # of a server that has none: the poll covers for it meanwhile.
        self._pace = RetryPace(
            settings.backoff_base,
            settings.backoff_cap,
            settings.backoff_ramp,
            caps={"stream": settings.events_retry},
        )
        self._push_backoff = self._pace.backoffs["push"]
        self._pull_backoff = self._pace.backoffs["pull"]
        self._stream_backoff = self._pace.backoffs["stream"]
        # Nothing answered at the server's address (`NetworkError.unreachable`): the
        # follower probes with a TCP connect until something does. A connect is
        # checked with one pull, once per outage (`_probe_spent`).
        self._unreachable = False
        # When `_unreachable` last became true (for the state file: the session-start
        # block says how long the server has not answered).
        self._unreachable_since: str | None = None
        self._probe_failed = False
        self._probe_spent = False
        # Set by a recovery: ask for the stream now (and, after a probe, pull now).
        self._recover = False
        self._pull_due = False
        # A push waiting for its retry, and the earliest the server allows it.
        self._push_retry = False
        self._retry_floor = 0.0
        self._last_pull: str | None = None
        self._last_push: str | None = None
        self._started_at = now_stamp()
        self._debouncer = Debouncer(
            settings.debounce, self._push_job, name=f"memsync-push[{target.label}]"
        )
        self._follower = threading.Thread(
            target=self._follow_forever, name=f"memsync-follow[{target.label}]", daemon=True
        )

    # Life cycle -------------------------------------------------------------------

    def start(self) -> None:
        """Resolve the config, pull, push, then follow (on the follower's thread)."""
        if self.target.git_cwd is not None:
            self.git_config = git_config_path(self.target.git_cwd)
        self._follower.start()

    def begin_stop(self) -> None:
        """Stop following and flush: one last push of whatever is pending (a push of
        nothing makes no request). Returns at once; `finish_stop` waits."""
        with self._wake:
            self._stopping = True
            stream = self._stream
            self._wake.notify_all()
        if stream is not None:
            stream.close()
        if self._ready.is_set() and self._suppression is None:
            # Also catches an edit whose event has not arrived yet.
            self._debouncer.trigger("stop", delay=0)
        self._debouncer.hold_until(0)
        self._debouncer.flush()

    def finish_stop(self, deadline: float) -> bool:
        """Wait (until `deadline`, monotonic) for the threads; True when all ended."""
        pusher_ended = self._debouncer.stop(
            flush=True, timeout=max(0.0, deadline - time.monotonic())
        )
        self._follower.join(max(0.0, deadline - time.monotonic()))
        ended = pusher_ended and not self._follower.is_alive()
        if self._watch is not None:
            self._observers.unschedule(self._watch)
            self._watch = None
        self._write_status(running=False)
        if ended:
            self._close()
        self._let_go()
        return ended

    def _let_go(self) -> None:
        """Release the repo's watch lock (a watcher standing by takes over) or, for a
        watcher that stood by, its standby file."""
        for state_dir in {self.state_dir(), self._standby_dir}:
            if state_dir is not None:
                clear_standby(state_dir)
        if self._repo_lock is not None:
            self._repo_lock.release()
            self._repo_lock = None

    def _close(self) -> None:
        if self._workspace is not None:
            self._workspace.close()
            self._workspace = None
        if self._api is not None:
            self._api.close()
            self._api = None

    # Signals ----------------------------------------------------------------------

    def signal(self, kind: str) -> None:
        """A signal file changed: `credentials`, `config` or `git-config`.

        The config is resolved again either way (a new token is picked up); when it is
        what the suppression waits for, pushing and pulling resume.
        """
        with self._wake:
            self._reconfigure = True
            suppression = self._suppression
            lifts = suppression is not None and (
                suppression.signal == kind
                or (suppression.signal == "config" and kind == "credentials")
            )
            if lifts and suppression is not None:
                log.info(
                    "%s: %s changed: resuming after %s",
                    self.target.label,
                    kind,
                    suppression.reason,
                )
                self._suppression = None
                self._resync = True
                self._dirty = True
            stream = self._stream
            self._wake.notify_all()
        if stream is not None:
            stream.close()  # the follower resolves the config again, then reconnects

    def on_fs_event(self, event: Any) -> None:
        """A watchdog event under the team dir (on the observer's thread)."""
        if event.event_type not in _CHANGE_EVENTS:
            return
        if event.is_directory and event.event_type in ("modified", "closed"):
            return  # a child's own event says what changed
        config = self.config
        if config is None:
            return
        paths = [os.fsdecode(event.src_path)]
        if event.event_type == "moved":
            paths.append(os.fsdecode(event.dest_path))
        if any(Path(path) == config.team_dir / IGNORE_FILE for path in paths):
            self._ignore_file_changed()
            return
        keys = [key for key in (self._key_of(config.team_dir, path) for path in paths) if key]
        if not keys:
            return
        source_key = self._key_of(config.team_dir, paths[0])
        deleted = (
            event.event_type in ("deleted", "moved")
            and source_key is not None
            and not os.path.lexists(paths[0])
            and self._was_synced(source_key)
        )
        if not deleted and all(self._known(config.team_dir, key) for key in keys):
            return  # what the stat cache holds: our own pull wrote it, or nothing changed
        with self._wake:
            self._counters.events += 1
            self._dirty = True
            suppression = self._suppression
            if suppression is not None:
                if not (deleted and suppression.signal == "deletion"):
                    self._counters.suppressed_events += 1
                    return
                log.info(
                    "%s: a file was deleted: resuming after %s",
                    self.target.label,
                    suppression.reason,
                )
                self._suppression = None
        self._debouncer.trigger(keys[-1])

    def _ignore_file_changed(self) -> None:
        """The team dir's .memsyncignore changed: files it let in (or a fix to a bad
        one) are picked up by a fresh scan, as a change to any file would be."""
        with self._wake:
            self._counters.events += 1
            self._dirty = True
            suppression = self._suppression
            if suppression is not None and suppression.signal == "ignore-file":
                log.info(
                    "%s: %s changed: resuming after %s",
                    self.target.label,
                    IGNORE_FILE,
                    suppression.reason,
                )
                self._suppression = None
                self._resync = True
            elif suppression is not None:
                self._counters.suppressed_events += 1
                return
        self._debouncer.trigger(IGNORE_FILE)

    @staticmethod
    def _key_of(team_dir: Path, path: str) -> str | None:
        """The key a path names, or None outside the team dir or for a name never synced
        (hidden, like the temp files a pull writes through, or an editor leftover)."""
        try:
            relative = Path(path).relative_to(team_dir)
        except ValueError:
            return None
        parts = relative.parts
        if not parts or any(part.startswith(".") for part in parts):
            return None
        if is_editor_leftover(parts[-1]):
            return None
        return "/".join(parts)

    def _was_synced(self, key: str) -> bool:
        """Whether `key` (a file, or a folder of files) was one memsync knew: a file an
        editor creates and deletes in a blink is not a deletion that frees room."""
        workspace = self._workspace
        if workspace is None:
            return False
        state = workspace.state
        prefix = key + "/"
        return any(
            known == key or known.startswith(prefix) for known in (*state.bases, *state.stat_cache)
        )

    def _known(self, team_dir: Path, key: str) -> bool:
        """Whether `key`'s file has the stat its stat-cache row holds."""
        workspace = self._workspace
        if workspace is None:
            return False
        row = workspace.state.stat_cache.get(key)
        try:
            info = os.lstat(team_dir / key)
        except OSError:
            return row is None
        if not isinstance(row, list) or len(row) != 5:
            return False
        size, mtime_ns, inode = row[0], row[1], row[2]
        return mtime_ns == info.st_mtime_ns and inode == info.st_ino and size in (-1, info.st_size)

    # Configuration ----------------------------------------------------------------

    def _configure(self) -> bool:
        """Resolve the config; open the workspace and watch the team dir. False when
        the config cannot be resolved (the repo is then suppressed)."""
        try:
            config = self.target.resolve()
        except ConfigError as error:
            self._suppress(error)
            return False
        if config == self.config and self._workspace is not None:
            return True
        if not self._hold_repo_lock(config.state_dir):
            return False
        with self._lock:
            self._close()
            config.team_dir.mkdir(parents=True, exist_ok=True)
            self._api = Api(config.server, config.token, config.repo)
            self._workspace = Workspace.open(config.team_dir, config.state_dir, self._api)
            moved = self.config is None or self.config.team_dir != config.team_dir
            self.config = config
        if moved:
            self._watch_team_dir(config.team_dir)
        self._dirty = True
        return True

    def _hold_repo_lock(self, state_dir: Path) -> bool:
        """Hold `state_dir`'s watch lock; False (standing by) while another process
        holds it: two watchers of one repo would both push and both rewrite its state."""
        if self._repo_lock is not None and self._repo_lock.state_dir == state_dir:
            return True
        if self._repo_lock is not None:
            self._let_go()
        lock = RepoLock(state_dir)
        if lock.try_acquire():
            self._repo_lock = lock
            if self._standby_for is not None:
                waited = time.monotonic() - (self._standby_since or time.monotonic())
                log.info(
                    "%s: process %s stopped: taking over (after %.1f s standing by)",
                    self.target.label,
                    self._standby_for,
                    waited,
                )
                clear_standby(state_dir)
                taking_over = True
            else:
                taking_over = False
            self._standby_for = None
            self._standby_since = None
            if taking_over:
                # Name this process as the serving one at once, not at the next tick.
                self._write_status(running=True, directory=state_dir)
            return True
        holder = lock.holder() or 0
        if self._standby_for is None:
            log.info(
                "%s: already watched by process %s; standing by to take over when it stops",
                self.target.label,
                holder,
            )
            self._standby_since = time.monotonic()
            self._standby_dir = state_dir
            write_standby(state_dir, holder)
        self._standby_for = holder
        return False

    @property
    def standing_by(self) -> bool:
        """Whether another process serves this repo and this one waits."""
        return self._standby_for is not None

    def _watch_team_dir(self, team_dir: Path) -> None:
        """Watch `team_dir` afresh (a watch on a folder that was deleted is dead)."""
        with self._watch_lock:
            if self._watch is not None:
                self._observers.unschedule(self._watch)
                self._watch = None
            try:
                self._watched_inode = os.stat(team_dir).st_ino
            except OSError:
                self._watched_inode = None
            self._watch = self._observers.schedule(team_dir, self.on_fs_event, self.target.label)
            self._next_rewatch = time.monotonic() + self.settings.rewatch_interval

    def try_file_events(self) -> None:
        """A team dir polled for want of inotify: try the system's events again, now
        and then (on the supervisor's tick)."""
        handle = self._watch
        if handle is None or not handle.polled or time.monotonic() < self._next_rewatch:
            return
        with self._watch_lock:
            self._next_rewatch = time.monotonic() + self.settings.rewatch_interval
            if self._watch is not handle or self._stopping:
                return
            upgraded = self._observers.upgrade(handle)
            if upgraded is None:
                return
            self._watch = upgraded
        self._debouncer.trigger("file-events")  # anything written while switching

    def check_team_dir(self) -> None:
        """Watch the team dir again when it was deleted or replaced (a stat; on the
        supervisor's tick). A missing one is created again, as a pull would."""
        config = self.config
        if config is None or self._watch is None or self._stopping:
            return
        try:
            inode: int | None = os.stat(config.team_dir).st_ino
        except FileNotFoundError:
            inode = None
        except OSError:
            return
        if inode is not None and inode == self._watched_inode:
            return
        try:
            config.team_dir.mkdir(parents=True, exist_ok=True)
            self._watch_team_dir(config.team_dir)
        except OSError as error:
            log.warning("%s: cannot watch the team dir: %s", self.target.label, error)
            return
        log.info("%s: the team dir was replaced: watching it again", self.target.label)
        self._debouncer.trigger("team-dir")

    # Failures ---------------------------------------------------------------------

    def _suppress(self, error: BaseException) -> None:
        reason = _reason_of(error)
        with self._wake:
            self._counters.failures += 1
            self._last_error = str(error)
            self._suppression = Suppression(
                reason=reason,
                message=str(error),
                since=now_stamp(),
                signal=_SIGNAL_OF_REASON[reason],
            )
            self._dirty = True
            stream = self._stream if reason in _BLOCKS_PULLS else None
        if stream is not None:
            stream.close()
        log.error(
            "%s: %s; paused, waiting for %s",
            self.target.label,
            error,
            _WAITING_FOR[_SIGNAL_OF_REASON[reason]],
        )

    def _transient(self, error: BaseException, backoff: Backoff, what: str) -> float:
        """Log a transient failure; return the delay before the next attempt."""
        retry_after = error.retry_after if isinstance(error, TransientError) else None
        with self._wake:
            delay = self._pace.failed(backoff, retry_after)
            self._counters.failures += 1
            self._last_error = str(error)
            self._backoff_until = _stamp_in(delay)
            self._dirty = True
            if self._unreachable_since is None:
                # The outage's start, for `status` and the session-start block: any
                # failure counts (a proxy's reset or 502 as much as a refused port),
                # and only the server's own answer ends it (`_answered`).
                self._unreachable_since = now_stamp()
            unreachable = isinstance(error, NetworkError) and error.unreachable
            if unreachable and not (self._unreachable or self._probe_spent):
                # Nothing answers at the address: probe it (the follower's job).
                self._unreachable = True
                self._probe_failed = False
                self._wake.notify_all()
        log.warning(
            "%s: %s failed (%s); trying again in %.1f s", self.target.label, what, error, delay
        )
        return delay

    def _answered(self) -> None:
        """The server answered (a pull or its 304, a stream that connected, a push):
        the only recovery signal, and only for answers `api.py` judged the server's own.
        When requests were failing, every backoff starts over, the stream is asked for
        again now, and a push waiting for its retry is due after the debounce (never
        before the server's `Retry-After`).

        A stream that fails while pulls and pushes succeed (a proxy that refuses it) is
        not an outage: its own backoff stands, or every poll would ask for it again."""
        with self._wake:
            retry_stream = self._stream_backoff.failures > 0
            # The address refused connections (probed): an outage, even if only the
            # stream had been asked for meanwhile.
            outage = self._unreachable or self._probe_spent or self._push_retry
            news = self._pace.failing or self._unreachable or self._probe_spent
            if not self._pace.answered(outage=outage):
                return
            self._unreachable = False
            self._unreachable_since = None
            self._probe_failed = False
            self._probe_spent = False
            self._backoff_until = None
            self._dirty = True
            if retry_stream:
                self._recover = True  # the follower asks for the stream again now
                self._wake.notify_all()
            push_retry = self._push_retry
        if news:
            log.info("%s: the server answers again: syncing now", self.target.label)
        if push_retry:
            self._debouncer.hold_until(self._retry_floor)
            self._debouncer.trigger("recovered")

    def _probe(self) -> None:
        """While nothing answers at the server's address: one TCP connect (nothing is
        sent). A connect that succeeds after one that failed says only that something
        listens there again: the server, or a published port or load balancer in front
        of it that resets or answers 502 while the server is down. So it is no recovery
        signal: it makes the pull due now, and that pull's answer (a 304, the repo) is
        one, or is one more failure. Once per outage: after a pull that a proxy failed,
        the backoff alone paces the attempts until the server answers."""
        config = self.config
        if config is None:
            return
        if not reachable(config.server, timeout=1.0):
            self._probe_failed = True
            return
        with self._wake:
            self._unreachable = False
            if not self._probe_failed:
                # It answered at once: the failure was a blip, not an outage; the
                # backoff (short at this point) brings the next attempt.
                return
            self._probe_spent = True
            self._pull_due = True
        log.info("%s: the server's address accepts connections again: pulling", self.target.label)

    def _in_place(self) -> AbstractContextManager[None]:
        """How a push or pull retries in place: while nothing fails, a blip is retried
        within the call; in an outage each attempt is one request, paced by `_pace`."""
        return retry_in_place(1 if self._pace.failing else 4, self.settings.retry_base)

    def _blocked(self, *, pulls: bool) -> bool:
        suppression = self._suppression
        if suppression is None:
            return False
        return not pulls or suppression.reason in _BLOCKS_PULLS

    # Push -------------------------------------------------------------------------

    def _push_job(self, hints: set[str]) -> None:
        """The debouncer's callback: one push, unless the repo is suppressed."""
        del hints  # hints only woke us: the push re-reads the whole team dir
        while not self._ready.wait(0.05):
            if self._stopping:
                return
        from sync_client.push import push

        with self._lock:
            workspace = self._workspace
            if workspace is None or self._blocked(pulls=False):
                return
            try:
                self._restore_missing(workspace)
                with self._in_place():
                    result = push(workspace)
            except Exception as error:
                self._push_failed(error)
                return
            try:
                self._skip_notices.after_push(workspace.team_dir, result.skipped)
                self._index_notices.after_push(workspace, result.skipped)
            except Exception:
                log.exception("%s: checking the team index failed", self.target.label)
        with self._wake:
            self._push_retry = False
        if result.batches:
            self._answered()
        self._push_backoff.reset()
        self._debouncer.hold_until(0)
        with self._wake:
            self._backoff_until = None
            if result.batches:
                self._counters.pushes += 1
                self._last_push = now_stamp()
            self._dirty = True
        if result.uploaded:
            log.info("%s: pushed %d file(s)", self.target.label, len(result.uploaded))
        for line in kept_lines(result.index_kept):
            log.warning("%s: %s", self.target.label, line)
        for key in result.conflicts:
            log.warning("%s: conflict on %s: the next pull settles it", self.target.label, key)
        if any(row["reason"] == "too-many-entries" for row in result.skipped):
            # Nothing more fits: every further push would ask again and be refused.
            self._suppress(TooManyEntries(workspace.state.max_entries or 0))
        if result.conflicts:
            self._pull_now()  # the pull settles them (merge, or the server wins, saved)

    def _restore_missing(self, workspace: Workspace) -> None:
        """Write back the synced files deleted here (the team still has them), before
        the push: a local delete is not a team delete, and an index or note missing
        here must not wait for a teammate's commit to come back. Said once per restore,
        with how to delete for the team; a text the base store lacks is pulled now."""
        from sync_client.pull import restore_missing

        restored, unknown = restore_missing(workspace)
        for line in restored_lines(restored):
            log.warning("%s: %s", self.target.label, line)
        if unknown:
            self._pull_now()

    def _push_failed(self, error: Exception) -> None:
        if is_permanent(error):
            self._suppress(error)
            return
        if not isinstance(error, TransientError | OSError):
            log.exception("%s: push failed unexpectedly", self.target.label)
        delay = self._transient(error, self._push_backoff, "push")
        retry_after = error.retry_after if isinstance(error, TransientError) else None
        with self._wake:
            self._push_retry = True
            self._retry_floor = time.monotonic() + (retry_after or 0.0)
        self._debouncer.hold_until(time.monotonic() + delay)
        self._debouncer.trigger("retry", delay=0)

    # Pull and follow ------------------------------------------------------------

    def _pull_now(self, seen: int | None = None) -> float | None:
        """Pull once; None on success, else the delay before trying again. With `seen`
        (the version an event announced), no request when the state holds it already
        (the event of this watcher's own push)."""
        from sync_client.pull import pull

        with self._lock:
            workspace = self._workspace
            if workspace is None or self._blocked(pulls=True):
                return None
            known = workspace.state.version
            # (An empty repo's head event is version 0; a pull of it records none.)
            if seen is not None and (known == seen or (known is None and seen == 0)):
                return None
            try:
                with self._in_place():
                    result = pull(workspace)
            except Exception as error:
                if is_permanent(error):
                    self._suppress(error)
                    return None
                if not isinstance(error, TransientError | OSError):
                    log.exception("%s: pull failed unexpectedly", self.target.label)
                return self._transient(error, self._pull_backoff, "pull")
        self._answered()
        self._pull_backoff.reset()
        with self._wake:
            self._counters.pulls += 1
            self._last_pull = now_stamp()
            self._backoff_until = None
            self._dirty = True
        changed = len(result.written) + len(result.merged) + len(result.deleted)
        if changed:
            log.info(
                "%s: pulled %d written, %d merged, %d deleted",
                self.target.label,
                len(result.written),
                len(result.merged),
                len(result.deleted),
            )
        for line in restored_lines(result.restored):
            log.warning("%s: %s", self.target.label, line)
        for key in result.merged_additions:
            log.info(
                "%s: merged %s: both sides added lines at the same place; both kept",
                self.target.label,
                key,
            )
        for conflict in result.conflicts:
            log.warning(
                "%s: conflict on %s (%s)", self.target.label, conflict["key"], conflict["kind"]
            )
        if result.merged:
            self._debouncer.trigger("merged")
        return None

    def _wait(self, seconds: float) -> None:
        """Sleep up to `seconds`, woken early by a signal, a pull request or stop."""
        with self._wake:
            if not (self._stopping or self._resync or self._reconfigure or self._recover):
                self._wake.wait(max(0.0, seconds))

    def _follow_forever(self) -> None:
        try:
            self._follow_loop()
        except Exception:
            log.exception("%s: the follower stopped unexpectedly", self.target.label)
        finally:
            self._ready.set()

    def _follow_loop(self) -> None:
        next_pull = 0.0
        stream_retry_at = 0.0
        next_probe = 0.0
        while not self._stopping:
            with self._wake:
                resync, self._resync = self._resync, False
                reconfigure, self._reconfigure = self._reconfigure, False
            if resync or reconfigure:
                previous = self.config
                try:
                    configured = self._configure()
                except OSError as error:  # the team dir cannot be created or opened
                    with self._wake:
                        self._resync = self._resync or resync
                        self._reconfigure = True
                    self._wait(self._transient(error, self._pull_backoff, "opening the team dir"))
                    continue
                changed = previous is None or previous != self.config
                if configured and (resync or changed):
                    # A full sync: pull, then push the edits made meanwhile.
                    next_pull = time.monotonic() + (self._pull_now() or self.settings.poll_interval)
                    stream_retry_at = 0.0
                    self._ready.set()
                    self._debouncer.trigger("sync", delay=0)
                self._ready.set()
            if self._stopping:
                return
            if self.standing_by:
                self._set_live(None)
                self._wait(self.settings.takeover_interval)
                with self._wake:
                    self._resync = True  # on taking over: a full sync
                continue
            if self._blocked(pulls=True) or self.config is None:
                self._wait(3600.0)
                continue
            now = time.monotonic()
            with self._wake:
                recover, self._recover = self._recover, False
                pull_due, self._pull_due = self._pull_due, False
            if recover:
                stream_retry_at = now
            if pull_due:
                next_pull = now
            if self._unreachable and now >= next_probe:
                next_probe = now + self.settings.probe_interval
                self._probe()
                continue
            if now >= stream_retry_at:
                stream_retry_at, followed = self._follow_stream()
                if followed:
                    # The stream's head event on reconnecting says whether anything was
                    # missed: no pull needed before the next poll time.
                    next_pull = time.monotonic() + self.settings.poll_interval
                continue
            self._set_live("poll")
            if now >= next_pull:
                delay = self._pull_now()
                next_pull = time.monotonic() + (delay or self.settings.poll_interval)
                continue
            wake_at = min(next_pull, stream_retry_at)
            if self._unreachable:
                wake_at = min(wake_at, next_probe)
            self._wait(wake_at - now)

    def _set_live(self, mode: str | None) -> None:
        if self._live != mode:
            with self._wake:
                self._live = mode
                self._dirty = True

    def _follow_stream(self) -> tuple[float, bool]:
        """Follow the events stream until it ends; return when to ask for it again, and
        whether it was followed at all."""
        api, workspace = self._api, self._workspace
        if api is None or workspace is None:
            return time.monotonic() + self.settings.poll_interval, False
        try:
            stream = api.events(last_event_id=workspace.state.version)
        except EventsUnsupported:
            if self._live != "poll":
                log.info(
                    "%s: the server has no events stream; pulling every %g s",
                    self.target.label,
                    self.settings.poll_interval,
                )
            self._set_live("poll")
            return time.monotonic() + self.settings.events_retry, False
        except Exception as error:
            if is_permanent(error):
                self._suppress(error)
                return time.monotonic(), False
            self._set_live("poll")
            delay = self._transient(error, self._stream_backoff, "events stream")
            return time.monotonic() + delay, False
        with self._wake:
            if self._stopping:
                stream.close()
            self._stream = stream
        self._answered()
        self._set_live("events")
        retry_at = time.monotonic()
        try:
            for event in stream:
                self._stream_backoff.reset()
                if self._stopping or self._resync or self._reconfigure or self._blocked(pulls=True):
                    break
                if event.version != workspace.state.version:
                    failed = self._pull_now(seen=event.version)
                    if failed is not None:
                        retry_at = time.monotonic() + failed
                        break
        except Exception as error:
            if not self._stopping:
                retry_at = time.monotonic() + self._transient(
                    error, self._stream_backoff, "events stream"
                )
        else:
            if not self._stopping and retry_at <= time.monotonic():
                # The server ended the stream (a restart, a proxy's timeout): soon again.
                retry_at = time.monotonic() + self._stream_backoff.next_delay()
        finally:
            with self._wake:
                self._stream = None
            stream.release()
        self._set_live("poll")
        return retry_at, True

    # State file -------------------------------------------------------------------

    def state_dir(self) -> Path | None:
        """Where this repo's state (and the watcher's state file) lives, if known."""
        return self.config.state_dir if self.config is not None else self.target.state_dir

    def flush_status(self) -> None:
        """Write the state file when something changed since the last write."""
        if self._dirty:
            self._write_status(running=True)

    def status(self, *, running: bool = True) -> dict[str, Any]:
        """The state file's content (see `read_watch_state`)."""
        with self._wake:
            suppression = self._suppression
            return {
                "running": running,
                "pid": os.getpid(),
                "started_at": self._started_at,
                "updated_at": now_stamp(),
                "repo": self.config.repo if self.config else self.target.label,
                # Where: so that a session without credentials finds this state dir.
                "server": self.config.server if self.config else None,
                "team_dir": str(self.config.team_dir) if self.config else None,
                "live": self._live if running else None,
                # Since when nothing answers at the server's address (None: it answers).
                "unreachable_since": self._unreachable_since,
                "last_pull": self._last_pull,
                "last_push": self._last_push,
                "suppressed": suppression.as_json() if suppression is not None else None,
                "last_error": self._last_error,
                "backoff_until": self._backoff_until,
                "file_events": (
                    None if self._watch is None else ("polling" if self._watch.polled else "system")
                ),
                # The files the last push left out that need the person (at most 50).
                "skipped": self._skip_notices.current[:50],
                "counters": {
                    "events": self._counters.events,
                    "pushes": self._counters.pushes,
                    "pulls": self._counters.pulls,
                    "suppressed_events": self._counters.suppressed_events,
                    "failures": self._counters.failures,
                },
            }

    def _write_status(self, *, running: bool, directory: Path | None = None) -> None:
        directory = directory or self.state_dir()
        if directory is None or self.standing_by:
            return  # (while standing by, the state file is the serving watcher's)
        self._dirty = False
        data = json.dumps(self.status(running=running), sort_keys=True).encode()
        try:
            atomic_write(directory / WATCH_STATE_FILE, data)
        except OSError as error:
            log.warning("%s: cannot write the watcher's state: %s", self.target.label, error)


def _pushes_so_far(repo: RepoWatcher) -> int:
    """The pushes of `repo` so far that sent something."""
    with repo._wake:
        return repo._counters.pushes


def _stamp_in(seconds: float) -> str:
    from datetime import UTC, datetime, timedelta

    return (datetime.now(UTC) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _SignalFile:
    path: Path
    kind: str
    fingerprint: tuple[int, int, int] | None = None


@dataclass
class Watcher:
    """Every target's `RepoWatcher`, one watchdog observer, and the signal files.

    `targets()` is asked again whenever `watch_file` (the enrolled repos) changes, so
    repos enabled or disabled while the watcher runs are picked up. One repo's failure
    never stops another: each has its own threads, state, suppression and backoff.
    """

    targets: Callable[[], list[Target]]
    settings: WatchSettings = field(default_factory=WatchSettings)
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    watch_file: Path | None = None
    repos: dict[tuple[str, ...], RepoWatcher] = field(default_factory=dict)
    # What asked it to stop (`SIGTERM`), for the shutdown line; set by `memsync watch`.
    stop_reason: str | None = None

    def __post_init__(self) -> None:
        factor = _time_scale(self.env)
        if factor is not None:
            self.settings = self.settings.scaled(factor)
        self._observers = Observers(self.settings.fs_poll_interval)
        self._signals: list[_SignalFile] = []
        self._watch_fingerprint: tuple[int, int, int] | None = None
        self._started = False

    def start(self) -> None:
        """Start the observer and every target's watcher."""
        self._observers.start()
        self._started = True
        home = config_home(self.env)
        self._signals = [
            _SignalFile(home / "credentials.toml", "credentials"),
            _SignalFile(home / "config.toml", "config"),
        ]
        for signal_file in self._signals:
            signal_file.fingerprint = _fingerprint(signal_file.path)
        if self.watch_file is not None:
            self._watch_fingerprint = _fingerprint(self.watch_file)
        self._reload()

    def _reload(self) -> None:
        try:
            wanted = {target.identity: target for target in self.targets()}
        except ConfigError as error:
            log.error("cannot read the enrolled repos: %s; keeping the current ones", error)
            return
        if not wanted and not self.repos:
            log.info("no enrolled repos yet: `memsync enable` in a repository adds one")
        for identity in [identity for identity in self.repos if identity not in wanted]:
            repo = self.repos.pop(identity)
            log.info("%s: disabled: stopping its watcher", repo.target.label)
            repo.begin_stop()
            repo.finish_stop(time.monotonic() + self.settings.stop_timeout)
            log.info("%s: stopped", repo.target.label)
        for identity, target in wanted.items():
            if identity in self.repos:
                continue
            repo = RepoWatcher(target, self.settings, self._observers)
            self.repos[identity] = repo
            log.info("%s: watching", target.label)
            repo.start()
            if repo.git_config is not None:
                kind = f"git-config:{'/'.join(identity)}"
                self._signals.append(
                    _SignalFile(repo.git_config, kind, _fingerprint(repo.git_config))
                )

    def tick(self) -> None:
        """Look at the signal files (a stat each, never a request); write state files."""
        for signal_file in self._signals:
            fingerprint = _fingerprint(signal_file.path)
            if fingerprint == signal_file.fingerprint:
                continue
            signal_file.fingerprint = fingerprint
            if signal_file.kind.startswith("git-config:"):
                for identity, repo in self.repos.items():
                    if signal_file.kind == f"git-config:{'/'.join(identity)}":
                        repo.signal("git-config")
            else:
                for repo in self.repos.values():
                    repo.signal(signal_file.kind)
        if self.watch_file is not None:
            fingerprint = _fingerprint(self.watch_file)
            if fingerprint != self._watch_fingerprint:
                self._watch_fingerprint = fingerprint
                self._reload()
        for repo in self.repos.values():
            repo.check_team_dir()
            repo.try_file_events()
            repo.flush_status()

    def run(self, stop: threading.Event) -> None:
        """Start, then tick until `stop` is set; then stop everything."""
        self.start()
        try:
            while not stop.wait(self.settings.signal_interval):
                self.tick()
        finally:
            self.stop()

    def stop(self) -> bool:
        """Flush pending pushes (within `stop_timeout`) and end every thread.

        True when every thread ended in time.
        """
        deadline = time.monotonic() + self.settings.stop_timeout
        repos = list(self.repos.values())
        # (pushes so far, standing by), taken before the stop lets go of the repo.
        before = {id(repo): (_pushes_so_far(repo), repo.standing_by) for repo in repos}
        for repo in repos:
            repo.begin_stop()
        finished = [repo.finish_stop(deadline) for repo in repos]
        ended = all(finished)
        self.repos.clear()
        if self._started:
            stopped = self._observers.stop(deadline - time.monotonic())
            ended = ended and stopped
            self._started = False
        # One line saying it stopped and what its last push did, per repo (a SIGTERM
        # from systemd or `kill` otherwise ends the log without a word).
        outcomes = [
            f"{repo.target.label}: {self._stop_outcome(repo, before[id(repo)], done)}"
            for repo, done in zip(repos, finished, strict=True)
        ]
        on = f" on {self.stop_reason}" if self.stop_reason else ""
        log.info("stopped%s%s", on, ": " + "; ".join(outcomes) if outcomes else "")
        return ended

    def _stop_outcome(self, repo: RepoWatcher, before: tuple[int, bool], ended: bool) -> str:
        """What the flush at stop did for `repo`, in words (a failure first: it is what
        the person has to know)."""
        pushes_before, standing_by = before
        if standing_by:
            return "it was standing by for another watcher"
        pushes = _pushes_so_far(repo)
        with repo._wake:
            suppression = repo._suppression
            retry = repo._push_retry
            error = repo._last_error
        if suppression is not None:
            return f"paused ({suppression.message}); edits made here are pushed once that is fixed"
        if retry:  # set by a failed push, cleared by the next one that works
            why = f" ({error})" if error else ""
            return (
                f"its last push failed{why}; edits made here stay, and the next start pushes them"
            )
        if not ended:
            return (
                f"its last push did not finish within {self.settings.stop_timeout:g} s;"
                " the next start pushes what is left"
            )
        if pushes > pushes_before:
            return "pushed what was pending"
        return "nothing was waiting to be pushed"
