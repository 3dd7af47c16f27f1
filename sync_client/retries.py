"""Retrying transient failures: exponential backoff with jitter, the server's `Retry-After`
as a floor, a listener told before each wait, and a bound the watcher sets for its own pace.

The listener and the bound are context variables, so they hold for one thread or task
only: the CLI listens on a terminal, the watcher bounds its attempts, and neither leaks
into the other.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

from sync_client.errors import TransientError

T = TypeVar("T")
# `notice(error, seconds to wait, the attempt about to be made, attempts in all)`.
RetryNotice = Callable[[TransientError, float, int, int], None]
_retry_notice: ContextVar[RetryNotice | None] = ContextVar("memsync_retry_notice", default=None)
# (attempts, first wait) of `with_retries` within a `retry_in_place` block.
_in_place: ContextVar[tuple[int, float] | None] = ContextVar("memsync_in_place", default=None)


@contextmanager
def retry_notices(notice: RetryNotice) -> Iterator[None]:
    """Within this block (this thread or task only), `with_retries` calls
    `notice(error, delay, attempt, attempts)` before it waits to retry."""
    token = _retry_notice.set(notice)
    try:
        yield
    finally:
        _retry_notice.reset(token)


@contextmanager
def retry_in_place(attempts: int, base_delay: float) -> Iterator[None]:
    """Within this block (this thread or task only), `with_retries` makes at most
    `attempts` attempts, the first wait `base_delay`.

    The watcher paces its own retries (`RetryPace`): once an outage started, each of its
    attempts is one request, or a push or pull retried in place would be four
    connections each time the backoff lets one through."""
    token = _in_place.set((max(1, attempts), base_delay))
    try:
        yield
    finally:
        _in_place.reset(token)


def with_retries(
    action: Callable[[], T],
    *,
    attempts: int = 4,
    base_delay: float = 0.5,
    max_delay: float = 30.0,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run `action`, retrying transient failures with exponential backoff and jitter.

    The server's `Retry-After` is a floor for the wait. Permanent failures and flow
    signals are raised at once. A `retry_notices` listener hears of each wait first;
    a `retry_in_place` block bounds the attempts.
    """
    bound = _in_place.get()
    if bound is not None:
        attempts, base_delay = min(attempts, bound[0]), bound[1]
    for attempt in range(attempts):
        try:
            return action()
        except TransientError as error:
            if attempt == attempts - 1:
                raise
            backoff = base_delay * (2**attempt) * random.uniform(0.5, 1.5)
            delay = min(max_delay, max(backoff, error.retry_after or 0.0))
            notice = _retry_notice.get()
            if notice is not None:
                notice(error, delay, attempt + 2, attempts)
            sleep(delay)
    raise AssertionError("unreachable")
