"""Timing for the watcher: a debouncer that calls back outside its lock, and a backoff.

    Debouncer(delay, callback)      trigger(hint) restarts the delay; callback(hints) runs
                                    on the debouncer's own thread, one call at a time
    Backoff(base, cap)              exponential delays with jitter, `Retry-After` a floor
    RetryPace(base, cap, ramp)      the backoffs of a watcher's push, pull and stream on
                                    one outage clock; only a real answer ends an outage

watchdog's own `EventDebouncer` calls back while holding its lock, so a slow callback
blocks every producer. Here the pending hints are swapped out under the lock and the
callback runs after it is released: a trigger that arrives during a callback is never
lost, it schedules one more call. After `stop` returns no callback runs again and the
thread is gone.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping

__all__ = ["Backoff", "Debouncer", "RetryPace"]


class Debouncer:
    """Coalesce triggers into one `callback(hints)` call, `delay` seconds after the last.

    `hold_until(moment)` keeps any call from happening before a `time.monotonic()`
    moment (a backoff), whatever the triggers say. `flush()` runs a pending call now.
    `stop(flush=True)` runs a pending call (bounded by `timeout`) and ends the thread.
    """

    def __init__(
        self,
        delay: float,
        callback: Callable[[set[str]], None],
        *,
        name: str = "memsync-debouncer",
    ) -> None:
        self.delay = delay
        self._callback = callback
        self._condition = threading.Condition()
        self._hints: set[str] = set()
        self._pending = False
        self._deadline = 0.0
        self._not_before = 0.0
        self._flush_requested = False
        self._stopping = False
        self._flush_on_stop = False
        self._running_callback = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def trigger(self, hint: str | None = None, *, delay: float | None = None) -> None:
        """Schedule a call `delay` (default: the debounce delay) from now, restarting
        the wait of a pending one; `hint` joins the set the call receives."""
        with self._condition:
            if self._stopping:
                return
            if hint is not None:
                self._hints.add(hint)
            self._pending = True
            self._deadline = time.monotonic() + (self.delay if delay is None else delay)
            self._condition.notify_all()

    def hold_until(self, moment: float) -> None:
        """No call before `moment` (`time.monotonic()`), not even a flush; 0 lifts it."""
        with self._condition:
            self._not_before = moment
            self._condition.notify_all()

    def flush(self) -> None:
        """Run a pending call now instead of at its deadline."""
        with self._condition:
            self._flush_requested = True
            self._condition.notify_all()

    @property
    def pending(self) -> bool:
        """Whether a call is scheduled or running."""
        with self._condition:
            return self._pending or self._running_callback

    def stop(self, *, flush: bool = True, timeout: float = 2.0) -> bool:
        """End the thread; with `flush`, a pending call runs first (a hold is ignored).

        Waits at most `timeout` seconds; returns whether the thread ended in time. No
        call starts after this returns.
        """
        with self._condition:
            self._stopping = True
            self._flush_on_stop = flush
            self._condition.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def _next_call(self) -> set[str] | None:
        """Wait for the next call's hints; None when the thread should end."""
        with self._condition:
            while True:
                if self._stopping:
                    if not (self._flush_on_stop and self._pending):
                        return None
                    self._flush_on_stop = False  # one last call, then end
                    break
                now = time.monotonic()
                if self._pending and now >= self._not_before:
                    if self._flush_requested or now >= self._deadline:
                        break
                    wait = self._deadline - now
                elif self._pending:
                    wait = self._not_before - now
                else:
                    wait = None
                self._condition.wait(wait)
            hints, self._hints = self._hints, set()
            self._pending = False
            self._flush_requested = False
            self._running_callback = True
            return hints

    def _run(self) -> None:
        while True:
            hints = self._next_call()
            if hints is None:
                return
            try:
                # Outside the lock: triggers during the call schedule one more.
                self._callback(hints)
            finally:
                with self._condition:
                    self._running_callback = False
                    self._condition.notify_all()


class Backoff:
    """Exponential backoff with jitter: `base * 2**failures`, times 0.5 to 1.5; once
    that reaches `cap`, `cap` to 1.1 times `cap` (never less: at most one attempt per
    `cap` seconds, and watchers that failed together drift apart). The server's
    `Retry-After` is a floor. `reset()` after a success."""

    def __init__(self, base: float = 1.0, cap: float = 300.0) -> None:
        self.base = base
        self.cap = cap
        self.failures = 0

    def next_delay(self, retry_after: float | None = None) -> float:
        """The wait before the next attempt; counts one more failure."""
        delay = self.base * (2 ** min(self.failures, 30)) * random.uniform(0.5, 1.5)
        self.failures += 1
        if delay >= self.cap:
            delay = self.cap * random.uniform(1.0, 1.1)
        return float(max(delay, retry_after or 0.0))

    def reset(self) -> None:
        """Forget the failures: the next delay starts from `base` again."""
        self.failures = 0


class RetryPace:
    """When each kind of a watcher's requests (`push`, `pull`, `stream`) may be tried
    again, and what ends an outage (docs/protocol.md 4.6).

    Each kind backs off on its own `Backoff` (`backoffs[kind]`), but the kinds share one
    clock: an outage starts at the first failure of any kind, and once it is `ramp`
    seconds old every kind's next attempt is `cap` to 1.1 x `cap` away, whatever its own
    count says. A kind that first failed late in the outage (a pull due at the poll
    interval) does not start a ramp of its own: behind a proxy that accepts every
    connection for a dead server, that is at most one attempt per kind per `cap`.

    `answered()` is the only way out of an outage. Call it for an answer the client
    judged to be the server's own (`api.py`: a 304, a team-memory object, a stream that
    is an event stream, a write result), never for a connection that was accepted, then
    reset or closed, nor for a 502/503/504: those are `failed()`.
    """

    def __init__(
        self,
        base: float,
        cap: float,
        ramp: float,
        *,
        caps: Mapping[str, float] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`caps` gives a kind a cap of its own (the stream's is the rate of a server
        that has none); every other kind's is `cap`."""
        self.cap = cap
        self.ramp = ramp
        self._clock = clock
        self.backoffs = {
            kind: Backoff(base, (caps or {}).get(kind, cap)) for kind in ("push", "pull", "stream")
        }
        # When the outage started (`clock()`); None while the server answers.
        self.since: float | None = None

    @property
    def failing(self) -> bool:
        """Whether an attempt failed since the server last answered."""
        return self.since is not None

    def failed(self, backoff: Backoff, retry_after: float | None = None) -> float:
        """One more failure of the kind `backoff` paces: the wait before its next
        attempt (`Retry-After` a floor)."""
        assert any(backoff is own for own in self.backoffs.values()), "not this pace's"
        now = self._clock()
        if self.since is None:
            self.since = now
        delay = backoff.next_delay(retry_after)
        if now - self.since >= self.ramp:
            delay = max(delay, self.cap * random.uniform(1.0, 1.1))
        return delay

    def answered(self, *, outage: bool = False) -> bool:
        """The server answered: the outage clock stops. True when that ends an outage
        (`outage`, or pushes or pulls were failing): every backoff starts over, the
        stream's too. A stream that fails while pulls answer (a proxy that refuses only
        it) is no outage: its own backoff stands, or every poll would ask for it again.
        """
        self.since = None
        ended = outage or any(self.backoffs[kind].failures for kind in ("push", "pull"))
        if ended:
            for backoff in self.backoffs.values():
                backoff.reset()
        return bool(ended)
