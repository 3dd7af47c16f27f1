"""A SQLite write made at once or not at all: how the fast PUT writes on the event loop.

A write on SQLite is short (a one-key PUT is a fraction of a millisecond) but may have
to wait: for this process's other writer (`SqlBase`'s writer lock) or for another
process holding SQLite's write lock (the busy timeout, up to 30 s). Waiting is what
must never happen on the event loop. Inside `now_or_never()` a SQLite write
(`SqlBase._write`) takes the writer lock only if it is free and begins `IMMEDIATE` with
a busy timeout of zero; if either is taken it raises `WriterBusy` before writing
anything, and the caller makes the same write on a thread, which waits as usual.

Nor may a commit on the loop checkpoint SQLite's WAL (copy it into the database file,
milliseconds of work): `SqlBase._write` makes such a write with automatic checkpoints
off, and after `LOOP_WRITES_IN_A_ROW` of them in a row refuses the next with
`WriterBusy`, so the writer thread's commit checkpoints as SQLite does by default.

Nor may the loop do work that grows with the repo. A write that would (`decline()`:
reading the live keys because this process's cache of them is cold or behind, reading
an index's old text for the index rule, a proposal) raises `WriterBusy` too, inside its
transaction and before writing anything; the transaction is rolled back and the caller
makes the write on the thread.

Only the first write inside may be refused: once a write made there has committed,
any later one waits as usual (it is short, and refusing it would make the caller
repeat a job whose first write is already done). PostgreSQL never writes this way
(`SqlBase.writes_now` is false).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class _Ask:
    __slots__ = ("wrote",)

    def __init__(self) -> None:
        self.wrote = False


_ASKED: ContextVar[_Ask | None] = ContextVar("memsync_write_now_or_never", default=None)


class WriterBusy(Exception):
    """A write asked for at once would have had to wait, or do work that grows with
    the repo: nothing was written."""


def asked() -> bool:
    """Whether the write about to be made must be made at once or not at all."""
    ask = _ASKED.get()
    return ask is not None and not ask.wrote


def decline() -> None:
    """`WriterBusy` when the write being made was asked for at once: it is about to do
    work that grows with the repo, which is the writer thread's to do."""
    if asked():
        raise WriterBusy()


def wrote() -> None:
    """A write made inside `now_or_never` committed: later ones may wait."""
    ask = _ASKED.get()
    if ask is not None:
        ask.wrote = True


@contextmanager
def now_or_never() -> Iterator[None]:
    """The first SQLite write made inside is made at once or raises `WriterBusy`. The
    flag is reset on leaving, so a thread the caller hands the write to afterwards
    (which copies the context) waits as usual."""
    token = _ASKED.set(_Ask())
    try:
        yield
    finally:
        _ASKED.reset(token)
