"""A SQLite write made at once or not at all: the fast PUT's way to skip the thread hop.

A write on SQLite is short (a one-key PUT is a fraction of a millisecond) but may have
to wait: for this process's other writers (`SqlBase`'s writer lock), for a free pooled
connection, or for another process holding SQLite's write lock (the busy timeout, up
to 30 s). Waiting is what must never happen on the event loop. Inside `now_or_never()`
a SQLite write (`SqlBase._write`) takes the writer lock only if it is free, a pooled
connection only if one is idle, and begins `IMMEDIATE` with a busy timeout of zero; if
any of them is taken it raises `WriterBusy` before writing anything, and the caller
makes the same write on a worker thread, which waits as before. PostgreSQL never
writes this way (`SqlBase.writes_now` is false).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_NOW_OR_NEVER: ContextVar[bool] = ContextVar("memsync_write_now_or_never", default=False)


class WriterBusy(Exception):
    """A write asked for at once would have had to wait: nothing was written."""


def asked() -> bool:
    """Whether the write being made must be made at once or not at all."""
    return _NOW_OR_NEVER.get()


@contextmanager
def now_or_never() -> Iterator[None]:
    """SQLite writes made inside are made at once or raise `WriterBusy`. The flag is
    reset on leaving, so a worker thread the caller hands the write to afterwards
    (which copies the context) waits as usual."""
    token = _NOW_OR_NEVER.set(True)
    try:
        yield
    finally:
        _NOW_OR_NEVER.reset(token)
