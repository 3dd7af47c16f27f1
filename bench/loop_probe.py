"""memsync's app with a timer on every step its event loop runs: how long the loop is held.

`create_app()` (run by uvicorn with `--factory`, settings from `MEMSYNC_*` as usual)
times each callback the asyncio loop runs (`Handle._run`: every task step, so a write
made on the loop is one of them) and answers `GET /__loop` with the steps timed since
the last ask: their count, p50, p99 and the longest, in milliseconds. Bench only: the
timer costs two clock reads a step, and it needs asyncio's own loop (`uvicorn --loop
asyncio`): uvloop, which `memsync-server serve` uses when installed, runs its steps in
C. `put_floor --streams` starts it on memsync's database for the streams' measurement.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from bench.server import percentile
from sync_server.app import create_app as memsync_app

_steps_ms: list[float] = []


def _install() -> None:
    """Time every `Handle._run` (once per process)."""
    handle: Any = asyncio.events.Handle
    if getattr(handle, "_memsync_timed", False):
        return
    run = handle._run

    def timed(self: Any) -> None:
        started = time.perf_counter()
        try:
            run(self)
        finally:
            _steps_ms.append((time.perf_counter() - started) * 1000)

    handle._run = timed
    handle._memsync_timed = True


def create_app() -> Any:
    """memsync's app behind `/__loop`."""
    _install()
    app = memsync_app()

    async def probe(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/__loop":
            steps = list(_steps_ms)
            _steps_ms.clear()
            answer = {
                "steps": len(steps),
                "p50": percentile(steps, 0.5) if steps else 0.0,
                "p99": percentile(steps, 0.99) if steps else 0.0,
                "max": max(steps, default=0.0),
            }
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": json.dumps(answer).encode()})
            return
        await app(scope, receive, send)

    return probe
