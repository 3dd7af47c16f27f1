"""The token bucket: a burst, then a steady rate, per caller."""

from __future__ import annotations

from sync_server.ratelimit import RateLimiter


def test_burst_then_refill_per_caller() -> None:
    limiter = RateLimiter(burst=3, per_second=2.0)
    assert [limiter.check("a", now=0.0) for _ in range(3)] == [0, 0, 0]
    assert limiter.check("a", now=0.0) == 1
    assert limiter.check("b", now=0.0) == 0
    assert limiter.check("a", now=0.5) == 0
    assert limiter.check("a", now=0.5) >= 1


def test_retry_after_reflects_the_rate() -> None:
    limiter = RateLimiter(burst=1, per_second=0.1)
    assert limiter.check("slow", now=0.0) == 0
    assert limiter.check("slow", now=0.0) == 10


def test_zero_burst_disables() -> None:
    limiter = RateLimiter(burst=0, per_second=1.0)
    assert not limiter.enabled
    assert all(limiter.check("x", now=0.0) == 0 for _ in range(1000))


def test_default_budget_never_bothers_a_busy_client() -> None:
    limiter = RateLimiter(burst=300, per_second=30.0)
    # 300 at once, then 30 a second for a minute.
    assert all(limiter.check("team", now=0.0) == 0 for _ in range(300))
    for second in range(1, 61):
        assert all(limiter.check("team", now=float(second)) == 0 for _ in range(30))
