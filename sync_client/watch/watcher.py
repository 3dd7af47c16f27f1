"""`memsync watch`: keep team dirs in sync while they are being written (docs/protocol.md 4.6).

    Watcher(targets, settings)     one per person: every target, its own state each
    RepoWatcher                    one team dir: a debounced pusher and a remote follower
    read_watch_state(state_dir)    what `memsync status` shows about a repo's watcher

A `RepoWatcher` is composed of parts with one job each, in this package: `takeover.py`
(the repo's watch lock, standing by, taking over), `rules.py` (what suppresses a repo
and what lifts it), `follow.py` (following the server: stream, poll, probe, recovery),
`status.py` (the state file) and `settings.py` (the pace). This module keeps the
pusher, the file events and the signals, and ties the parts together.

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
serves a repo: it holds the repo's watch lock (`lock.py`); a second watcher
stands by and takes over within a second of the first exiting or dying. When no
inotify instance or watch is left, the team dir is polled (`observe.py`).

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

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sync_client.api import Api
from sync_client.config import ClientConfig, config_home, git_config_path
from sync_client.errors import (
    ConfigError,
    NetworkError,
    TooManyEntries,
    TransientError,
    is_permanent,
)
from sync_client.events_stream import EventStream
from sync_client.ignore_rules import IGNORE_FILE
from sync_client.index.team import kept_lines
from sync_client.local import is_editor_leftover
from sync_client.personal import PERSONAL_FILE
from sync_client.state import WATCH_STATE_FILE, now_stamp, read_watch_state
from sync_client.watch.debounce import Backoff, Debouncer, RetryPace
from sync_client.watch.follow import Follower
from sync_client.watch.notices import IndexNotices, SkipNotices, restored_lines
from sync_client.watch.observe import Handle, Observers
from sync_client.watch.review import proposed_lines
from sync_client.watch.rules import WAITING_FOR, Suppression, blocks, lifts, suppression_of
from sync_client.watch.settings import TIME_SCALE_ENV, Target, WatchSettings, time_scale
from sync_client.watch.status import Counters, stamp_in, status_document, write_status
from sync_client.watch.takeover import Takeover
from sync_client.workspace import Workspace

__all__ = [
    "TIME_SCALE_ENV",
    "WATCH_STATE_FILE",
    "RepoWatcher",
    "Target",
    "WatchSettings",
    "Watcher",
    "read_watch_state",
]

log = logging.getLogger("memsync.watch")

# watchdog's event types that say a file's content or presence may have changed; opening
# and reading (our own scan does that) say nothing.
_CHANGE_EVENTS = frozenset({"created", "modified", "moved", "deleted", "closed"})


def _fingerprint(path: Path) -> tuple[int, int, int] | None:
    """What a change of `path` changes: (inode, size, mtime_ns); None when missing."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


class RepoWatcher(Follower):
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
        # The repo's watch lock, or standing by while another process serves the repo.
        self._takeover = Takeover(target.label)
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
        self._counters = Counters()
        self._seen_proposals: set[int] = set()  # proposals a reviewer was told of
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
        self._takeover.let_go(self.state_dir())
        return ended

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
            if lifts(suppression, kind) and suppression is not None:
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
                if not (deleted and lifts(suppression, "deletion")):
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
            if suppression is not None and lifts(suppression, "ignore-file"):
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
            self._api = Api(config.server, config.token, config.repo, space=config.space)
            self._workspace = Workspace.open(config.team_dir, config.state_dir, self._api)
            moved = self.config is None or self.config.team_dir != config.team_dir
            self.config = config
        if moved:
            self._watch_team_dir(config.team_dir)
        self._dirty = True
        return True

    def _hold_repo_lock(self, state_dir: Path) -> bool:
        """Hold `state_dir`'s watch lock; False while another process serves the repo.
        On taking over, name this process as the serving one at once, not at the next
        tick."""
        return self._takeover.hold(
            state_dir, lambda directory: self._write_status(running=True, directory=directory)
        )

    @property
    def standing_by(self) -> bool:
        """Whether another process serves this repo and this one waits."""
        return self._takeover.standing_by

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
            log.warning("%s: cannot watch its folder: %s", self.target.label, error)
            return
        log.info("%s: its folder was replaced: watching it again", self.target.label)
        self._debouncer.trigger("team-dir")

    # Failures ---------------------------------------------------------------------

    def _suppress(self, error: BaseException) -> None:
        suppression = suppression_of(error, now_stamp())
        with self._wake:
            self._counters.failures += 1
            self._last_error = str(error)
            self._suppression = suppression
            self._dirty = True
            stream = self._stream if blocks(suppression, pulls=True) else None
        if stream is not None:
            stream.close()
        log.error(
            "%s: %s; paused, waiting for %s",
            self.target.label,
            error,
            WAITING_FOR[suppression.signal],
        )

    def _transient(self, error: BaseException, backoff: Backoff, what: str) -> float:
        """Log a transient failure; return the delay before the next attempt."""
        retry_after = error.retry_after if isinstance(error, TransientError) else None
        with self._wake:
            delay = self._pace.failed(backoff, retry_after)
            self._counters.failures += 1
            self._last_error = str(error)
            self._backoff_until = stamp_in(delay)
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

    def _blocked(self, *, pulls: bool) -> bool:
        return blocks(self._suppression, pulls=pulls)

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
                    result = push(workspace, via="watcher")
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
        for line in proposed_lines(result.proposed):
            log.info("%s: %s", self.target.label, line)
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
        handle = self._watch
        with self._wake:
            return status_document(
                running=running,
                started_at=self._started_at,
                updated_at=now_stamp(),
                repo=self.config.repo if self.config else self.target.label,
                server=self.config.server if self.config else None,
                team_dir=str(self.config.team_dir) if self.config else None,
                live=self._live,
                unreachable_since=self._unreachable_since,
                last_pull=self._last_pull,
                last_push=self._last_push,
                suppression=self._suppression,
                last_error=self._last_error,
                backoff_until=self._backoff_until,
                file_events=None if handle is None else ("polling" if handle.polled else "system"),
                skipped=self._skip_notices.current,
                counters=self._counters,
            )

    def _write_status(self, *, running: bool, directory: Path | None = None) -> None:
        directory = directory or self.state_dir()
        if directory is None or self.standing_by:
            return  # (while standing by, the state file is the serving watcher's)
        self._dirty = False
        write_status(directory, self.status(running=running), self.target.label)


def _pushes_so_far(repo: RepoWatcher) -> int:
    """The pushes of `repo` so far that sent something."""
    with repo._wake:
        return repo._counters.pushes


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
        factor = time_scale(self.env)
        if factor is not None:
            self.settings = self.settings.scaled(factor)
        self._observers = Observers(self.settings.fs_poll_interval)
        self._signals: list[_SignalFile] = []
        self._watch_fingerprint: object = None
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
            self._watch_fingerprint = self._enrolled_fingerprint(self.watch_file)
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

    @staticmethod
    def _enrolled_fingerprint(watch_file: Path) -> object:
        """The enrolled repos' file and, beside it, `personal.toml` (`memsync enable
        --personal` adds or drops targets without touching the first)."""
        return (_fingerprint(watch_file), _fingerprint(watch_file.with_name(PERSONAL_FILE)))

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
            enrolled = self._enrolled_fingerprint(self.watch_file)
            if enrolled != self._watch_fingerprint:
                self._watch_fingerprint = enrolled
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
