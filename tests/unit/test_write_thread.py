"""The writer thread runs jobs one after another, in the order given, off the event
loop, and hands each job's answer or its exception back to the request that waits."""

from __future__ import annotations

import asyncio
import threading
import time
from functools import partial

import pytest

from sync_server.write_thread import WriteThread


def test_jobs_run_off_the_loop_in_order_and_answer_their_caller() -> None:
    writer = WriteThread(name="test-writer")
    ran: list[tuple[int, str]] = []

    def job(number: int) -> int:
        ran.append((number, threading.current_thread().name))
        return number * 10

    async def main() -> list[int]:
        return list(await asyncio.gather(*(writer.run(partial(job, n)) for n in range(20))))

    assert asyncio.run(main()) == [n * 10 for n in range(20)]
    assert ran == [(n, "test-writer") for n in range(20)]


def test_an_exception_reaches_the_caller_and_the_thread_goes_on() -> None:
    writer = WriteThread(name="test-writer")

    def fails() -> int:
        raise ValueError("no such repo")

    async def main() -> int:
        with pytest.raises(ValueError, match="no such repo"):
            await writer.run(fails)
        return await writer.run(lambda: 7)

    assert asyncio.run(main()) == 7


def test_a_cancelled_caller_does_not_stop_the_write_nor_the_next_one() -> None:
    writer = WriteThread(name="test-writer")
    done = threading.Event()

    def slow() -> str:
        time.sleep(0.05)
        done.set()
        return "written"

    async def main() -> str:
        waiting = asyncio.ensure_future(writer.run(slow))
        await asyncio.sleep(0.01)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        return await writer.run(lambda: "next")

    assert asyncio.run(main()) == "next"
    assert done.is_set()
