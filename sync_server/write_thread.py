"""One long-lived thread per process for the fast PUT's SQLite writes.

Writes to one SQLite file are serialized by SQLite (and by the store's writer lock)
whatever thread makes them, so a pool of threads buys a one-key PUT nothing; the pool's
hop does cost it: anyio's `to_thread.run_sync` looks up the backend and its capacity
limiter, opens a cancel scope and wakes a worker through a `queue.Queue`'s condition.
Here a write is a tuple put on a `SimpleQueue` (a C lock), run by one thread that never
ends, and its result handed back to the loop with `call_soon_threadsafe`.

The event loop writes itself only when the PUT is the only request its process is
serving, nothing would make the write wait and the write does no work that grows with
the repo (`FastPut._write`, `storage/write_now`):
a write on the loop while other requests are served makes them wait for it (304 polls
beside PUTs got slower: docs/benchmarks.md, issue 31 step 11). PostgreSQL writes to
different repos at once, so its PUTs keep the pool.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from contextlib import suppress
from queue import SimpleQueue
from typing import Any, TypeVar

T = TypeVar("T")

_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[], Any]]


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    """On the loop: hand the thread's result over, unless the request is gone."""
    if future.cancelled():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class WriteThread:
    """A daemon thread, started on first use, that runs jobs in the order given."""

    def __init__(self, name: str = "memsync-writer") -> None:
        self._name = name
        self._jobs: SimpleQueue[_Job] = SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def _started(self) -> None:
        with self._start_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                self._thread.start()

    def _work(self) -> None:
        get = self._jobs.get
        while True:
            loop, future, job = get()
            try:
                value, ok = job(), True
            except BaseException as error:  # raised again on the loop, in the request
                value, ok = error, False
            # A loop closed meanwhile (RuntimeError) has nobody waiting for the answer.
            with suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, future, ok, value)
            del loop, future, job, value

    async def run(self, job: Callable[[], T]) -> T:
        """`job()` on the thread, awaited. A request cancelled meanwhile gets its
        CancelledError at once; the write it started still finishes (as a write does
        when its client leaves) and its answer is dropped."""
        if self._thread is None:
            self._started()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((loop, future, job))
        return await future


# The process's one writer: every app in the process shares it, as they share the file.
WRITER = WriteThread()
