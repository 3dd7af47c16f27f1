"""How a watcher paces itself, and what it watches.

WatchSettings      the intervals and the retry schedule (`memsync watch --debounce
                   --poll-interval`); `scaled` stretches the schedule for tests
Target             one team dir: how to resolve its config, where its signals are
TIME_SCALE_ENV     tests only: run the retry schedule faster
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from sync_client.config import ClientConfig

__all__ = ["TIME_SCALE_ENV", "Target", "WatchSettings", "time_scale"]


@dataclass(frozen=True)
class WatchSettings:
    """How a watcher paces itself (`memsync watch --debounce --poll-interval`)."""

    debounce: float = 2.0
    poll_interval: float = 30.0
    # A pending push is flushed within this on SIGINT/SIGTERM.
    stop_timeout: float = 2.0
    # A server without the events stream is asked for it again after this long.
    events_retry: float = 900.0
    # How often the signal files (credentials, git config, enrolled repos) are stat'ed.
    signal_interval: float = 1.0
    backoff_base: float = 1.0
    # After the first minute of failures, at most one attempt per this many seconds.
    backoff_cap: float = 30.0
    # The first minute: how long an outage is before every kind is at the cap.
    backoff_ramp: float = 60.0
    # The first wait of a push or pull retried in place (only while nothing is failing).
    retry_base: float = 0.5
    # While nothing answers at the server's address: a TCP connect this often.
    probe_interval: float = 0.5
    # A watcher standing by tries the repo's watch lock this often.
    takeover_interval: float = 0.5
    # A team dir polled for want of inotify: a stat walk this often; and how often the
    # system's file events are tried again.
    fs_poll_interval: float = 2.0
    rewatch_interval: float = 10.0

    def scaled(self, factor: float) -> WatchSettings:
        """The same settings with the retry schedule `factor` times as long (the
        backoff, its cap and first minute, retries in place, the stream's retry)."""
        return replace(
            self,
            backoff_base=self.backoff_base * factor,
            backoff_cap=self.backoff_cap * factor,
            backoff_ramp=self.backoff_ramp * factor,
            retry_base=self.retry_base * factor,
            events_retry=self.events_retry * factor,
        )


# For tests only: runs the retry schedule faster (0.05: a 30 s cap is 1.5 s), so a test
# can watch many minutes of an outage in seconds. Not a setting for people.
TIME_SCALE_ENV = "MEMSYNC_WATCH_TIME_SCALE"


def time_scale(env: Mapping[str, str]) -> float | None:
    """The factor `TIME_SCALE_ENV` asks for, if it is a positive number."""
    try:
        factor = float(env.get(TIME_SCALE_ENV, ""))
    except ValueError:
        return None
    return factor if 0 < factor < float("inf") else None


@dataclass(frozen=True)
class Target:
    """One team dir to watch: how to resolve its configuration, and where its signals
    are. `state_dir` is known up front for an enrolled repo (its state file is written
    even when its configuration cannot be resolved)."""

    label: str
    resolve: Callable[[], ClientConfig]
    identity: tuple[str, ...]
    git_cwd: Path | None = None
    state_dir: Path | None = None
