"""Prometheus metrics: one registry per application, so tests can build many apps."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


class Metrics:
    """Request counts and latencies by route template (never by repo or key)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "memsync_requests",
            "HTTP requests served, by method, route and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "memsync_request_seconds",
            "Time spent serving a request inside the application.",
            ["method", "route"],
            registry=self.registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0),
        )
        self.commits = Counter(
            "memsync_commits",
            "Committed changes (new versions), by operation.",
            ["op"],
            registry=self.registry,
        )
        self.event_streams = Gauge(
            "memsync_event_streams",
            "Event streams open in this process.",
            registry=self.registry,
        )
        self.compressed_requests = Counter(
            "memsync_compressed_requests",
            "Request bodies received compressed, by Content-Encoding.",
            ["encoding"],
            registry=self.registry,
        )
        self.events_sent = Counter(
            "memsync_events_sent",
            "Commit events written to event streams.",
            registry=self.registry,
        )
        self._children: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one finished request. The labelled children are kept by their labels
        (as many as the metrics themselves hold): `labels()` costs a lock and a tuple
        of strings each time, more than the counting."""
        children = self._children.get((method, route, status))
        if children is None:
            children = (
                self.requests.labels(method, route, str(status)),
                self.latency.labels(method, route),
            )
            self._children[(method, route, status)] = children
        children[0].inc()
        children[1].observe(seconds)

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)
