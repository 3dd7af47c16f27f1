"""The watcher's parts on their own, no server and no thread: what suppresses a repo and
what lifts it (`watch_rules`), what the state file says for a given state
(`watch_status`), standing by and taking over a repo's watch lock (`watch_takeover`),
and the test-only time scale (`watch_settings`)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from sync_client.errors import (
    AuthError,
    ConfigError,
    EntryTooLarge,
    NoCredentials,
    NoRepoIdentity,
    RequestRejected,
    TooManyEntries,
)
from sync_client.ignore_rules import IgnoreFileError
from sync_client.state import WATCH_STATE_FILE
from sync_client.watch.lock import RepoLock, standby
from sync_client.watch.rules import blocks, lifts, reason_of, suppression_of
from sync_client.watch.settings import TIME_SCALE_ENV, WatchSettings, time_scale
from sync_client.watch.status import Counters, status_document, write_status
from sync_client.watch.takeover import Takeover

# (the failure, its reason, the signal that lifts it, whether pulls stop too)
CASES = [
    (NoCredentials("no token"), "no-credentials", "credentials", True),
    (AuthError("token refused", 401), "auth", "credentials", True),
    (NoRepoIdentity("no origin"), "no-repo-identity", "git-config", True),
    (TooManyEntries(10), "too-many-entries", "deletion", False),
    (EntryTooLarge("big.md", 1024), "entry-too-large", "deletion", False),
    (ConfigError("bad config"), "config", "config", True),
    (IgnoreFileError("bad pattern"), "ignore-file", "ignore-file", True),
    (RequestRejected("no", 400), "rejected", "restart", True),
]
SIGNALS = ("credentials", "config", "git-config", "deletion", "ignore-file")


@pytest.mark.parametrize(("error", "reason", "signal", "stops_pulls"), CASES)
def test_each_permanent_failure_has_its_reason_and_the_one_signal_that_lifts_it(
    error: Exception, reason: str, signal: str, stops_pulls: bool
) -> None:
    assert reason_of(error) == reason
    suppression = suppression_of(error, "2026-01-01T00:00:00Z")
    assert (suppression.reason, suppression.signal) == (reason, signal)
    lifted_by = {kind for kind in SIGNALS if lifts(suppression, kind)}
    expected = {signal} & set(SIGNALS)
    if signal == "config":
        expected.add("credentials")  # either file can hold what was wrong
    assert lifted_by == expected  # no other signal (and for `rejected`, none: a restart)
    assert blocks(suppression, pulls=False)  # every suppression stops pushes
    assert blocks(suppression, pulls=True) is stops_pulls


def test_no_suppression_blocks_nothing_and_nothing_lifts_it() -> None:
    assert not blocks(None, pulls=False)
    assert not blocks(None, pulls=True)
    assert not any(lifts(None, kind) for kind in SIGNALS)


def _document(*, running: bool) -> dict[str, Any]:
    """The state file of a repo suppressed for a refused token, 60 files skipped."""
    suppression = suppression_of(AuthError("token refused", 401), "2026-01-01T00:00:00Z")
    return status_document(
        running=running,
        started_at="2026-01-01T00:00:00Z",
        updated_at="2026-01-01T00:01:00Z",
        repo="team/notes",
        server="http://127.0.0.1:1",
        team_dir="/tmp/team",
        live="events",
        unreachable_since=None,
        last_pull=None,
        last_push="2026-01-01T00:00:30Z",
        suppression=suppression,
        last_error="token refused",
        backoff_until=None,
        file_events="system",
        skipped=[{"key": f"n{index}.md", "reason": "secret"} for index in range(60)],
        counters=Counters(events=3, pushes=1, failures=2),
    )


def test_the_state_file_says_what_is_suppressed_and_what_it_waits_for(tmp_path: Path) -> None:
    document = _document(running=True)
    assert document["pid"] == os.getpid()
    assert document["suppressed"] == {
        "reason": "auth",
        "message": "token refused",
        "since": "2026-01-01T00:00:00Z",
        "waiting_for": "the credentials file to change (`memsync login`)",
    }
    assert document["live"] == "events"
    assert len(document["skipped"]) == 50
    assert document["counters"] == {
        "events": 3,
        "pushes": 1,
        "pulls": 0,
        "suppressed_events": 0,
        "failures": 2,
    }
    assert _document(running=False)["live"] is None  # a stopped watcher follows nothing
    write_status(tmp_path, document, "team/notes")
    assert json.loads((tmp_path / WATCH_STATE_FILE).read_text()) == document


def test_a_state_file_that_cannot_be_written_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    with caplog.at_level(logging.WARNING, logger="memsync.watch"):
        write_status(not_a_dir, {"running": True}, "team/notes")
    assert "team/notes: cannot write the watcher's state" in caplog.text


def test_a_second_watcher_stands_by_and_takes_over_when_the_first_lets_go(
    tmp_path: Path,
) -> None:
    first, second = Takeover("team/notes"), Takeover("team/notes")
    assert first.hold(tmp_path)
    assert first.hold(tmp_path)  # holding it again is a no-op
    took_over: list[Path] = []
    assert not second.hold(tmp_path, took_over.append)
    assert second.standing_by
    assert second.standby_for == os.getpid()  # the pid the holder wrote
    assert standby(tmp_path) is not None  # `status` can say someone waits
    assert not second.hold(tmp_path, took_over.append)
    assert took_over == []
    first.let_go(tmp_path)
    assert second.hold(tmp_path, took_over.append)
    assert not second.standing_by
    assert took_over == [tmp_path]  # named the serving process at once
    assert standby(tmp_path) is None
    assert not RepoLock(tmp_path).try_acquire()  # still one holder
    second.let_go(tmp_path)
    free = RepoLock(tmp_path)
    assert free.try_acquire()
    free.release()


def test_the_first_watcher_of_a_repo_takes_no_takeover_step(tmp_path: Path) -> None:
    took_over: list[Path] = []
    only = Takeover("team/notes")
    assert only.hold(tmp_path, took_over.append)
    assert took_over == []
    only.let_go(tmp_path)


def test_the_time_scale_is_a_positive_number_or_nothing() -> None:
    assert time_scale({TIME_SCALE_ENV: "0.05"}) == 0.05
    for bad in ("", "0", "-1", "inf", "fast"):
        assert time_scale({TIME_SCALE_ENV: bad}) is None
    scaled = WatchSettings().scaled(0.05)
    assert (scaled.backoff_cap, scaled.debounce) == (1.5, WatchSettings().debounce)
