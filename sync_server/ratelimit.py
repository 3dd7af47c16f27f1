"""A per-caller token bucket: a burst, then a steady rate (default 300, then 30/s).

Buckets live in this process only; with several server processes each enforces its own
share, which is enough to stop a runaway client without a shared store.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict


class RateLimiter:
    """`check(caller)` returns 0 when allowed, else seconds to wait before retrying."""

    def __init__(self, burst: int, per_second: float, *, max_callers: int = 50_000) -> None:
        self._burst = float(burst)
        self._per_second = per_second
        self._max_callers = max_callers
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """False when the burst is 0: no limit at all."""
        return self._burst > 0

    def check(self, caller: str, *, now: float | None = None) -> int:
        """Take one request from `caller`'s bucket; return 0 or a Retry-After in seconds."""
        if not self.enabled:
            return 0
        now = time.monotonic() if now is None else now
        with self._lock:
            tokens, last = self._buckets.pop(caller, (self._burst, now))
            tokens = min(self._burst, tokens + (now - last) * self._per_second)
            if tokens >= 1.0:
                self._buckets[caller] = (tokens - 1.0, now)
                retry_after = 0
            else:
                self._buckets[caller] = (tokens, now)
                retry_after = max(1, math.ceil((1.0 - tokens) / self._per_second))
            while len(self._buckets) > self._max_callers:
                self._buckets.popitem(last=False)
        return retry_after
