"""Following the server: the events stream, the poll, the probe, and the recovery signal.

    Follower       the part of `watch.RepoWatcher` that keeps a team dir current: on
                   the follower's thread it follows the server's events stream and pulls
                   on each event (not on the event of the watcher's own commit); without
                   the stream it pulls every poll interval and asks for it again with
                   backoff; while nothing answers at the server's address it probes with
                   a TCP connect

Only an answer that is the server's own (a pull, a 304, a stream that connects, a push)
is a recovery signal (`_answered`): the backoffs start over and a push waiting for its
retry is due after the debounce. The methods run on `RepoWatcher`'s state (its `_wake`
condition guards the shared fields); this module holds what they do, `watcher.py` what
they share with the pusher.
"""

from __future__ import annotations

import logging
import time
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from sync_client.errors import TransientError, is_permanent
from sync_client.events_stream import EventsUnsupported
from sync_client.retries import retry_in_place
from sync_client.review.proposals import learn_elsewhere, learn_review_event
from sync_client.review.wire import ProposalEvent, ReviewEvent
from sync_client.state import now_stamp
from sync_client.transport import reachable
from sync_client.watch.notices import restored_lines
from sync_client.watch.review import announce_line, proposal_action, review_line, reviewed_lines
from sync_client.watch.rules import Suppression

if TYPE_CHECKING:
    from threading import Condition, Event, RLock

    from sync_client.api import Api
    from sync_client.config import ClientConfig
    from sync_client.events_stream import EventStream
    from sync_client.watch.debounce import Backoff, Debouncer, RetryPace
    from sync_client.watch.settings import Target, WatchSettings
    from sync_client.watch.status import Counters
    from sync_client.workspace import Workspace

__all__ = ["Follower"]

log = logging.getLogger("memsync.watch")


class Follower:
    """Pull, follow the events stream, probe an address that does not answer."""

    if TYPE_CHECKING:
        # Set up by `watch.RepoWatcher.__init__` and shared with its pusher; the fields
        # a thread changes are guarded by `_wake`.
        target: Target
        settings: WatchSettings
        config: ClientConfig | None
        _api: Api | None
        _workspace: Workspace | None
        _lock: RLock
        _wake: Condition
        _ready: Event
        _debouncer: Debouncer
        _pace: RetryPace
        _pull_backoff: Backoff
        _stream_backoff: Backoff
        _counters: Counters
        _stream: EventStream | None
        _live: str | None
        _stopping: bool
        _resync: bool
        _reconfigure: bool
        _dirty: bool
        _unreachable: bool
        _unreachable_since: str | None
        _probe_failed: bool
        _probe_spent: bool
        _recover: bool
        _pull_due: bool
        _push_retry: bool
        _retry_floor: float
        _backoff_until: str | None
        _last_pull: str | None
        _seen_proposals: set[int]
        _suppression: Suppression | None

        # Defined by `watch.RepoWatcher`: its configuration, lock and failure rules.
        @property
        def standing_by(self) -> bool: ...
        def _configure(self) -> bool: ...
        def _blocked(self, *, pulls: bool) -> bool: ...
        def _suppress(self, error: BaseException) -> None: ...
        def _transient(self, error: BaseException, backoff: Backoff, what: str) -> float: ...

    def _room_freed(self, gone: set[str]) -> None:
        """Notes the team deleted (the pull dropped their bases) free room on the
        server as a deletion here does: a push paused for want of it resumes. (When
        the pull wins the race with the file's own delete event, that event no longer
        names a synced file, so it alone would never lift the pause.)"""
        if not gone:
            return
        with self._wake:
            suppression = self._suppression
            if suppression is None or suppression.reason != "too-many-entries":
                return
            log.info(
                "%s: a note was deleted for the team: resuming after %s",
                self.target.label,
                suppression.reason,
            )
            self._suppression = None
            self._dirty = True
        self._debouncer.trigger(sorted(gone)[0])

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

    # Pull and follow ------------------------------------------------------------

    def _pull_now(self, seen: int | None = None, *, outcomes: bool = False) -> float | None:
        """Pull once; None on success, else the delay before trying again. With `seen`
        (the version an event announced), no request when the state holds it already
        (the event of this watcher's own push). With `outcomes`, the pull first asks what
        became of this person's pending proposals (an event said one was decided)."""
        from sync_client.pull import pull

        with self._lock:
            workspace = self._workspace
            if workspace is None or self._blocked(pulls=True):
                return None
            known = workspace.state.version
            synced = set(workspace.state.bases)
            # (An empty repo's head event is version 0; a pull of it records none.)
            if seen is not None and (known == seen or (known is None and seen == 0)):
                return None
            try:
                with self._in_place():
                    result = pull(workspace, outcomes=outcomes)
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
        self._room_freed(synced - set(workspace.state.bases))
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
        for line in reviewed_lines(result.reviewed):
            log.warning("%s: %s", self.target.label, line)
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
                    self._wait(self._transient(error, self._pull_backoff, "opening its folder"))
                    continue
                changed = previous is None or previous != self.config
                if configured and (resync or changed):
                    # A full sync: pull, then push the edits made meanwhile.
                    first = self._pull_now(outcomes=True)  # and what became of proposals
                    next_pull = time.monotonic() + (first or self.settings.poll_interval)
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
                # No events: each poll also asks what became of pending proposals.
                delay = self._pull_now(outcomes=True)
                next_pull = time.monotonic() + (delay or self.settings.poll_interval)
                continue
            wake_at = min(next_pull, stream_retry_at)
            if self._unreachable:
                wake_at = min(wake_at, next_probe)
            self._wait(wake_at - now)

    def _proposal_event(self, event: ProposalEvent) -> None:
        """A proposal made or decided: a pull when one of ours was decided, a line for a
        reviewer once per new one, else nothing (no request)."""
        workspace = self._workspace
        if workspace is None:
            return
        with self._lock:
            action = proposal_action(
                workspace.state, event.id, event.status, self._seen_proposals, theirs=event.mine
            )
        if action == "pull":
            self._pull_now(outcomes=True)
        elif action == "announce":
            log.info("%s: %s", self.target.label, announce_line(event.id))
        elif action == "learn":
            self._learn_elsewhere(workspace, event.id)

    def _learn_elsewhere(self, workspace: Workspace, proposal_id: int) -> None:
        """One of this person's proposals made elsewhere was decided: ask for it once,
        and say what became of it (a rejected one stays on record for `status` and the
        session-start block). A failure costs only the words: events are hints."""
        api = self._api
        if api is None:
            return
        try:
            with self._lock, self._in_place():  # (the pusher shares the API: one at a time)
                rows = learn_elsewhere(workspace, api.proposal(proposal_id))
        except Exception as error:
            log.warning(
                "%s: could not learn what became of proposal %d (%s)",
                self.target.label,
                proposal_id,
                type(error).__name__,
            )
            return
        for line in reviewed_lines(rows):
            log.warning("%s: %s", self.target.label, line)

    def _review_event(self, event: ReviewEvent) -> None:
        """The server's review setting (when the stream opens, and each change): kept
        in the state, which the session-start block and MCP `write_note` read."""
        workspace = self._workspace
        if workspace is None:
            return
        with self._lock:
            changed = learn_review_event(workspace.state, event.on, event.reviewer)
            if changed:
                workspace.save()
        if changed:
            log.info("%s: %s", self.target.label, review_line(event.on, event.reviewer))

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
                if isinstance(event, ProposalEvent):
                    self._proposal_event(event)
                    continue
                if isinstance(event, ReviewEvent):
                    self._review_event(event)
                    continue
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
