"""History benchmark: who changed what, on a repo with a long history (SQLite).

Builds, in a temp dir, a SQLite repo of `--notes` notes (default 2,000, ~4 KB Markdown
each, like `bench/server.py`'s) in one commit, then adds commits through the store
(`SqlStore.put`, `delete`, `restore`: the server's own write path, without HTTP) until
the repo has `--versions` versions (default 20,000). Five authors write; 70% of commits
rewrite one note, 15% two or three, 10% delete one, 5% restore a deleted one; one note
in ten commits is the same hot note, so one note has a long history.

Then a live server (uvicorn on 127.0.0.1, in this process's thread, rate limit off)
answers each scenario `--runs` times after a warm-up, and three times are taken:

- `store`: the store call alone (`SqlStore.log`, `key_history`, ...), in this thread;
- `server`: the answer's `Server-Timing: app;dur=` header: inside the app from the
  request's arrival to the start of the response (token check, the store call, JSON
  encoding; not the socket, not sending the body);
- `client`: the round trip as an httpx client on a keep-alive connection sees it.

Scenarios: the newest log page of 50 commits; a page of 50 far back (`before` at a
tenth of the versions); 50 commits of one author; 50 commits touching the hot note;
a `since` that only the newest 20 commits pass (the query has to look past them for a
51st, down the whole history: the worst case of the filters); the hot note's history
(every version, no texts); an ordinary note's history; two versions compared; the
deleted list; and two pages of the web page, signed in with the same token: the
activity feed and the hot note's page.

    .venv/bin/python -m bench.history
    .venv/bin/python -m bench.history --notes 500 --versions 5000 --runs 50
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx

from bench._table import markdown_table
from bench.server import make_note, make_notes
from sync_server.config import Settings, sqlite_url
from sync_server.storage.sql import SqlStore
from tests.liveserver import run_live_server

API = "/v1/team_memory"
UI = "/ui"
REPO = "bench/history"
AUTHORS = ("alice", "bob", "carol", "dave", "erin")
MAX_ENTRIES = 100_000
AIMS = {"log": 20.0, "history": 100.0}


@dataclass(frozen=True)
class Built:
    """What the seeded repo holds, for the scenarios to aim at."""

    versions: int
    history_rows: int
    hot_key: str
    hot_versions: int
    plain_key: str
    plain_versions: int
    deleted: int
    seconds: float


def build(store: SqlStore, notes: int, versions: int, seed: int) -> Built:
    """The repo: `notes` notes in one commit, then commits up to `versions`."""
    started = time.perf_counter()
    rng = random.Random(seed)
    texts = make_notes(notes, seed)
    keys = list(texts)
    store.put(
        REPO,
        texts,
        if_match=None,
        base_checksums=None,
        max_entries=MAX_ENTRIES,
        author=AUTHORS[0],
    )
    live = set(keys)
    deleted: dict[str, int] = {}  # key -> a version with its text
    last_text = dict.fromkeys(keys, 1)
    hot = keys[notes // 2]
    # Rewrites use a few prepared texts per note number: generating 4 KB notes is slow.
    variants = [make_note(rng, index % 40, index) for index in range(64)]
    version = 1
    rows = notes

    def pick_live() -> str:
        while True:
            key = rng.choice(keys)
            if key in live:
                return key

    while version < versions:
        author = rng.choice(AUTHORS)
        kind = rng.random()
        if kind < 0.05 and deleted:
            key = rng.choice(sorted(deleted))
            store.restore(REPO, key, deleted.pop(key), max_entries=MAX_ENTRIES, author=author)
            live.add(key)
            changed = [key]
        elif kind < 0.15 and len(live) > 2:
            key = pick_live()
            while key == hot:
                key = pick_live()
            store.delete(REPO, key, if_match=None, author=author)
            live.discard(key)
            deleted[key] = last_text[key]
            changed = []
        else:
            count = 1 if kind < 0.85 else rng.randint(2, 3)
            chosen = {hot if rng.random() < 0.1 else pick_live() for _ in range(count)}
            entries = {key: rng.choice(variants) + f"\nrevision {version + 1}\n" for key in chosen}
            store.put(
                REPO,
                entries,
                if_match=None,
                base_checksums=None,
                max_entries=MAX_ENTRIES,
                author=author,
            )
            changed = list(entries)
        version += 1
        rows += max(1, len(changed))
        for key in changed:
            last_text[key] = version
    plain = next(key for key in keys if key in live and key != hot)
    return Built(
        versions=version,
        history_rows=rows,
        hot_key=hot,
        hot_versions=len(store.key_history(REPO, hot)),
        plain_key=plain,
        plain_versions=len(store.key_history(REPO, plain)),
        deleted=len(store.deleted_keys(REPO)),
        seconds=time.perf_counter() - started,
    )


@dataclass(frozen=True)
class Scenario:
    name: str
    aim: str
    path: str
    params: dict[str, Any]
    call: Callable[[], object]


def scenarios(store: SqlStore, built: Built) -> list[Scenario]:
    newest = store.log(REPO, limit=21).commits
    since = newest[19].at
    far = built.versions // 10
    hot_history = store.key_history(REPO, built.hot_key)
    first, last = hot_history[0].version, hot_history[-1].version
    log_aim = f"< {AIMS['log']:.0f} ms"
    history_aim = f"< {AIMS['history']:.0f} ms"
    return [
        Scenario("log: newest 50", log_aim, "/log", {}, lambda: store.log(REPO)),
        Scenario(
            f"log: 50 before v{far}",
            log_aim,
            "/log",
            {"before": far},
            lambda: store.log(REPO, before=far),
        ),
        Scenario(
            "log: 50 by one author",
            "",
            "/log",
            {"author": AUTHORS[2]},
            lambda: store.log(REPO, author=AUTHORS[2]),
        ),
        Scenario(
            "log: 50 touching the hot note",
            "",
            "/log",
            {"key": built.hot_key},
            lambda: store.log(REPO, key=built.hot_key),
        ),
        Scenario(
            "log: since (20 pass, scans all)",
            "",
            "/log",
            {"since": since.isoformat()},
            lambda: store.log(REPO, since=since),
        ),
        Scenario(
            f"history: hot note ({built.hot_versions} versions)",
            history_aim,
            "/history",
            {"key": built.hot_key},
            lambda: store.key_history(REPO, built.hot_key),
        ),
        Scenario(
            f"history: a note ({built.plain_versions} versions)",
            history_aim,
            "/history",
            {"key": built.plain_key},
            lambda: store.key_history(REPO, built.plain_key),
        ),
        Scenario(
            "history: compare two versions",
            "",
            "/history",
            {"key": built.hot_key, "version": last, "compare": first},
            lambda: (
                store.key_version(REPO, built.hot_key, last),
                store.key_version(REPO, built.hot_key, first),
            ),
        ),
        Scenario(
            f"deleted ({built.deleted} keys)",
            "",
            "/deleted",
            {},
            lambda: store.deleted_keys(REPO),
        ),
        # The web page (signed in with the same token): the activity feed, and the hot
        # note's page (rendered text, every version, who changed it last).
        Scenario(
            "page: activity",
            history_aim,
            f"{UI}/repo/{REPO}/activity",
            {},
            lambda: store.log(REPO),
        ),
        Scenario(
            f"page: the hot note ({built.hot_versions} versions)",
            history_aim,
            f"{UI}/repo/{REPO}/note",
            {"key": built.hot_key},
            lambda: store.key_history(REPO, built.hot_key),
        ),
    ]


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def measure(
    scenario: Scenario, client: httpx.Client, runs: int, warmup: int
) -> tuple[list[float], list[float], list[float], int]:
    """Store, server and client times in ms, and the answer's size in bytes."""
    store_ms: list[float] = []
    server_ms: list[float] = []
    client_ms: list[float] = []
    size = 0
    page = scenario.path.startswith(UI)
    params = scenario.params if page else {"repo": REPO, **scenario.params}
    url = scenario.path if page else API + scenario.path
    for run in range(warmup + runs):
        started = time.perf_counter()
        scenario.call()
        stored = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        answer = client.get(url, params=params)
        round_trip = (time.perf_counter() - started) * 1000
        if answer.status_code != 200:
            raise SystemExit(f"{scenario.name}: {answer.status_code} {answer.text[:300]}")
        timing = answer.headers["server-timing"]
        app = float(timing.split("dur=", 1)[1])
        size = len(answer.content)
        if run >= warmup:
            store_ms.append(stored)
            server_ms.append(app)
            client_ms.append(round_trip)
    return store_ms, server_ms, client_ms, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=2000)
    parser.add_argument("--versions", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--seed", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memsync-bench-history-") as folder:
        url = sqlite_url(Path(folder) / "memsync.sqlite3")
        settings = Settings(database_url=url, rate_limit_burst=0, max_entries=MAX_ENTRIES)
        with run_live_server(settings) as server:
            store = server.store
            assert isinstance(store, SqlStore)
            built = build(store, args.notes, args.versions, args.seed)
            size_mb = (Path(folder) / "memsync.sqlite3").stat().st_size / 1e6
            print(
                f"repo: {args.notes} notes, {built.versions} versions, {built.history_rows} "
                f"history rows, {size_mb:.0f} MB of SQLite, built in {built.seconds:.1f} s"
            )
            print(
                f"python {platform.python_version()}, sqlalchemy {metadata.version('sqlalchemy')}, "
                f"sqlite {__import__('sqlite3').sqlite_version}; {args.runs} runs each after "
                f"{args.warmup} warm-up\n"
            )
            lines = [
                [
                    "scenario",
                    "store p50",
                    "store p99",
                    "server p50",
                    "server p99",
                    "client p50",
                    "client p99",
                    "bytes",
                    "aim (server)",
                ]
            ]
            token = server.token("*", name="bench")
            with server.client(token) as client:
                signed_in = client.post(
                    f"{UI}/signin", data={"token": token}, headers={"Origin": server.base_url}
                )
                if signed_in.status_code != 303:
                    raise SystemExit(f"sign-in: {signed_in.status_code} {signed_in.text[:300]}")
                for scenario in scenarios(store, built):
                    stored, app, round_trip, size = measure(
                        scenario, client, args.runs, args.warmup
                    )
                    lines.append(
                        [
                            scenario.name,
                            *(
                                f"{value:.2f}"
                                for samples in (stored, app, round_trip)
                                for value in (
                                    statistics.median(samples),
                                    percentile(samples, 0.99),
                                )
                            ),
                            f"{size:,}",
                            scenario.aim,
                        ]
                    )
            print(markdown_table(lines, numeric={1, 2, 3, 4, 5, 6, 7}))
            print("\ntimes in ms")


if __name__ == "__main__":
    main()
