"""The floor under memsync's one-key PUT: a bare ASGI app doing the same SQLite work.

`create_app()` (run by uvicorn, the same server memsync runs on) answers
`PUT /v1/team_memory?repo=R` with `{"entries": {key: text}, "baseChecksums": {...}}` by
doing, in one `BEGIN IMMEDIATE` transaction with the standard `sqlite3` module and the
same pragmas as memsync (WAL, `synchronous=NORMAL`): read the repo row, check each base
checksum, upsert the entry, insert the history row, update the head (version, checksum,
count, time). No authentication, no validation beyond JSON, no log, no metrics, no
events: what a write cannot do without, so the distance to it is what memsync's layers
cost. The head checksum here is a hash of the old one and the change (memsync keeps a
bucketed checksum over the live keys; both are O(1) in the repo's size per commit).

`python -m bench.put_floor` seeds memsync (real `memsync-server serve`, SQLite) and the
floor with the same 20-note and 2,000-note repos and runs the one-key PUT against each,
interleaved (memsync, floor, memsync, floor, ...) in one run, then prints the medians
with the 1-minute load average. With `--baseline REV` a third server runs memsync as of
git revision REV, interleaved too: the before/after of a step. Both memsyncs then run
from `git archive` copies in a temp dir (this tree's with its uncommitted changes, by
`git stash create`), first on `PYTHONPATH`.

`--writers` adds rows for 8 and 32 clients writing at once, each its own key, in one
repo and in one repo each (against the floor too). `--streams N` opens N event streams
on memsync's small repo and times a `/healthz` probe (nothing but the event loop's turn)
while one client PUTs there, so every commit is announced to N streams: what a write
costs the loop beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import multiprocessing
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx

from bench.server import (
    API,
    BIG_ENTRIES,
    SMALL_ENTRIES,
    TIMEOUT,
    Budget,
    Limits,
    RequestFn,
    Tally,
    Writer,
    _run_phase,
    cpu_seconds,
    make_notes,
    mint_token,
    percentile,
    seed,
)
from memsync_protocol.checksums import entry_checksum
from tests.liveserver import ServerProcess, free_port, stop_process

DB_ENV = "MEMSYNC_FLOOR_DB"
# `--writers`: how many clients write at once.
MANY = (8, 32)
SCHEMA = """
CREATE TABLE IF NOT EXISTS repos (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, version INTEGER NOT NULL,
    checksum TEXT NOT NULL, entry_count INTEGER NOT NULL, last_modified TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
    repo_id INTEGER NOT NULL, key TEXT NOT NULL, text TEXT NOT NULL, checksum TEXT NOT NULL,
    version INTEGER NOT NULL, PRIMARY KEY (repo_id, key));
CREATE INDEX IF NOT EXISTS ix_entries_repo_version ON entries (repo_id, version);
CREATE INDEX IF NOT EXISTS ix_entries_repo_key_checksum ON entries (repo_id, key, checksum);
CREATE TABLE IF NOT EXISTS history (
    id INTEGER PRIMARY KEY, repo_id INTEGER NOT NULL, key TEXT NOT NULL,
    version INTEGER NOT NULL, op TEXT NOT NULL, checksum TEXT, text TEXT,
    author TEXT NOT NULL, at TEXT NOT NULL, accepted_by TEXT);
CREATE UNIQUE INDEX IF NOT EXISTS ix_history_repo_key_version ON history (repo_id, key, version);
CREATE INDEX IF NOT EXISTS ix_history_repo_version ON history (repo_id, version);
"""


def connect(path: str) -> sqlite3.Connection:
    """A connection with memsync's SQLite settings, transactions managed by hand."""
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    connection.execute("PRAGMA busy_timeout=30000")
    connection.executescript(SCHEMA)
    return connection


def _sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def commit(connection: sqlite3.Connection, repo: str, body: dict[str, Any]) -> tuple[int, Any]:
    """The write, the history row and the head, in one transaction: (status, answer)."""
    entries: dict[str, str] = body["entries"]
    bases: dict[str, str | None] = body.get("baseChecksums") or {}
    now = time.strftime("%Y-%m-%d %H:%M:%S")
    connection.execute("BEGIN IMMEDIATE")
    try:
        row = connection.execute(
            "SELECT id, version, checksum, entry_count FROM repos WHERE name = ?", (repo,)
        ).fetchone()
        if row is None:
            cursor = connection.execute(
                "INSERT INTO repos (name, version, checksum, entry_count, last_modified)"
                " VALUES (?, 0, ?, 0, ?)",
                (repo, _sha(""), now),
            )
            row = (cursor.lastrowid, 0, _sha(""), 0)
        repo_id, version, checksum, count = row
        version += 1
        for key, text in sorted(entries.items()):
            old = connection.execute(
                "SELECT checksum FROM entries WHERE repo_id = ? AND key = ?", (repo_id, key)
            ).fetchone()
            if key in bases and bases[key] != (old[0] if old else None):
                connection.execute("ROLLBACK")
                return 409, {"error": {"type": "conflict", "message": key, "details": {}}}
            new = _sha(text)
            connection.execute(
                "INSERT INTO entries (repo_id, key, text, checksum, version) VALUES (?,?,?,?,?)"
                " ON CONFLICT (repo_id, key) DO UPDATE SET text = excluded.text,"
                " checksum = excluded.checksum, version = excluded.version",
                (repo_id, key, text, new, version),
            )
            connection.execute(
                "INSERT INTO history (repo_id, key, version, op, checksum, text, author, at)"
                " VALUES (?, ?, ?, 'put', ?, ?, 'floor', ?)",
                (repo_id, key, version, new, text, now),
            )
            count += old is None
            checksum = _sha(f"{checksum}\n{key}\n{new}")
        connection.execute(
            "UPDATE repos SET version = ?, checksum = ?, entry_count = ?, last_modified = ?"
            " WHERE id = ?",
            (version, checksum, count, now, repo_id),
        )
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    return 200, {"checksum": checksum, "version": version, "entryCount": count}


def create_app() -> Any:
    """The bare ASGI app over the database file named by `MEMSYNC_FLOOR_DB`."""
    connection = connect(os.environ[DB_ENV])

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    connection.close()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        if scope["method"] == "PUT":
            repo = parse_qs(scope["query_string"].decode())["repo"][0]
            status, answer = commit(connection, repo, json.loads(b"".join(chunks)))
        else:
            status, answer = 200, {"ok": True}
        payload = json.dumps(answer, separators=(",", ":")).encode()
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    return app


# --------------------------------------------------------------------------- the run


@contextmanager
def floor_server(workdir: Path, repos: dict[str, dict[str, str]]) -> Iterator[tuple[str, int]]:
    """The floor on uvicorn (seeded with `repos`) in its own process: (base URL, pid)."""
    path = workdir / "floor.db"
    connection = connect(str(path))
    for repo, notes in repos.items():
        commit(connection, repo, {"entries": notes})
    connection.close()
    with uvicorn_app(workdir, "bench.put_floor:create_app", {DB_ENV: str(path)}, "floor") as up:
        yield up


@contextmanager
def uvicorn_app(
    workdir: Path, factory: str, env: dict[str, str], name: str, *args: str
) -> Iterator[tuple[str, int]]:
    """The app `factory` makes, on uvicorn (with `args`) in its own process: (base URL,
    pid)."""
    port = free_port()
    log = (workdir / f"{name}.log").open("wb")
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "uvicorn", "--factory", factory),
            *("--port", str(port), "--no-access-log", "--log-level", "warning"),
            *args,
        ],
        env={**os.environ, **env},
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{base_url}/healthz", timeout=1.0)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"{name} did not start") from None
                time.sleep(0.05)
        yield base_url, process.pid
    finally:
        stop_process(process)
        log.close()


def memsync_server(workdir: Path, name: str, pythonpath: Path | None) -> ServerProcess:
    """`memsync-server serve` on its own SQLite file (rate limits off); with
    `pythonpath`, the code found there instead of this tree's."""
    env = {
        "MEMSYNC_DATABASE_URL": f"sqlite:///{workdir / (name + '.db')}",
        "MEMSYNC_RATE_LIMIT_BURST": "0",
    }
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return ServerProcess(env, log_path=workdir / f"{name}.log")


@dataclass
class Target:
    """One server under test and the per-round numbers measured against it."""

    name: str
    base_url: str
    token: str
    pid: int
    rates: dict[str, list[float]] = field(default_factory=dict)
    p50s: dict[str, list[float]] = field(default_factory=dict)
    p99s: dict[str, list[float]] = field(default_factory=dict)
    # `--mixed`: the p50 and p99 of 304 polls made while another client PUTs.
    poll_p50s: list[float] = field(default_factory=list)
    poll_p99s: list[float] = field(default_factory=list)
    mixed_put_rates: list[float] = field(default_factory=list)
    cpu_ms: dict[str, list[float]] = field(default_factory=dict)
    # `--streams`: a /healthz probe's idle p50, then its p50, p99 and max while PUTs are
    # announced to the streams, and the p99 and longest of the loop's steps meanwhile.
    probes: list[tuple[float, ...]] = field(default_factory=list)


def _measure(target: Target, scenario: str, writers: Sequence[RequestFn], limits: Limits) -> None:
    """`writers` at once, one client each (one: one request at a time)."""
    headers = {"Authorization": f"Bearer {target.token}"} if target.token else {}
    with ExitStack() as stack:
        clients = [
            stack.enter_context(
                httpx.Client(base_url=target.base_url, headers=headers, timeout=TIMEOUT)
            )
            for _ in writers
        ]
        _run_phase(
            clients,
            list(writers),
            Budget(limits.warmup_requests * len(writers), limits.warmup_seconds),
            ok_statuses=frozenset({200}),
        )
        cpu_before = cpu_seconds(target.pid) or 0.0
        tally: Tally = _run_phase(
            clients,
            list(writers),
            Budget(limits.max_requests, limits.seconds),
            ok_statuses=frozenset({200}),
        )
    cpu_used = (cpu_seconds(target.pid) or 0.0) - cpu_before
    if tally.errors:
        raise RuntimeError(f"{target.name} {scenario}: {dict(tally.errors)} {tally.error_samples}")
    target.rates.setdefault(scenario, []).append(len(tally.latencies_ms) / tally.elapsed_s)
    target.p50s.setdefault(scenario, []).append(percentile(tally.latencies_ms, 0.5))
    target.p99s.setdefault(scenario, []).append(percentile(tally.latencies_ms, 0.99))
    target.cpu_ms.setdefault(scenario, []).append(cpu_used * 1000 / len(tally.latencies_ms))


def _measure_mixed(target: Target, writer: RequestFn, limits: Limits) -> None:
    """One client PUTs (`writer`) while another polls the big repo for a 304: what a
    write costs the reads beside it (a write made on the event loop holds it)."""
    headers = {"Authorization": f"Bearer {target.token}"}
    with httpx.Client(base_url=target.base_url, headers=headers, timeout=TIMEOUT) as client:
        etag = client.get(API, params={"repo": "bench/big"}).headers["etag"]
    polls: list[float] = []

    def poll(client: httpx.Client) -> httpx.Response:
        started = time.perf_counter()
        response = client.get(API, params={"repo": "bench/big"}, headers={"If-None-Match": etag})
        polls.append((time.perf_counter() - started) * 1000)
        return response

    with (
        httpx.Client(base_url=target.base_url, headers=headers, timeout=TIMEOUT) as one,
        httpx.Client(base_url=target.base_url, headers=headers, timeout=TIMEOUT) as two,
    ):
        budget = Budget(limits.max_requests, limits.seconds)
        tally = _run_phase([one, two], [writer, poll], budget, ok_statuses=frozenset({200, 304}))
    if tally.errors:
        raise RuntimeError(f"{target.name} mixed: {dict(tally.errors)} {tally.error_samples}")
    target.poll_p50s.append(percentile(polls, 0.5))
    target.poll_p99s.append(percentile(polls, 0.99))
    target.mixed_put_rates.append((len(tally.latencies_ms) - len(polls)) / tally.elapsed_s)


def _measure_streams(target: Target, writer: RequestFn, streams: int, limits: Limits) -> None:
    """`streams` event streams open on the writer's repo, one client PUTs there and
    another probes `/healthz`: the probe waits for the event loop's turn, so its
    latency over an idle one is what the writes and their announcements hold the loop.
    `target` runs `bench.loop_probe`, which also times each step of its event loop.
    Records (idle p50, probe p50, p99, max, loop step p99, longest step) in ms."""
    headers = {"Authorization": f"Bearer {target.token}"}
    # In a process of their own, on one event loop: 100 listening threads here would
    # take the probe's turns at the GIL and be measured as the server's delay.
    spawn = multiprocessing.get_context("spawn")
    ready, stop = spawn.Event(), spawn.Event()
    listener = spawn.Process(
        target=listen_streams, args=(target.base_url, target.token, streams, ready, stop)
    )
    listener.start()
    if not ready.wait(timeout=120):
        listener.kill()
        raise RuntimeError(f"{target.name}: the event streams did not open")
    probes: list[float] = []

    def probe(client: httpx.Client) -> httpx.Response:
        started = time.perf_counter()
        response = client.get("/healthz")
        probes.append((time.perf_counter() - started) * 1000)
        time.sleep(0.002)  # a probe, not a load
        return response

    try:
        with httpx.Client(base_url=target.base_url, timeout=TIMEOUT) as client:
            _run_phase([client], [probe], Budget(500, 1.0), ok_statuses=frozenset({200}))
            idle = percentile(probes, 0.5)
            probes.clear()
            client.get("/__loop")  # the steps timed so far, dropped
        with (
            httpx.Client(base_url=target.base_url, headers=headers, timeout=TIMEOUT) as one,
            httpx.Client(base_url=target.base_url, timeout=TIMEOUT) as two,
        ):
            budget = Budget(limits.max_requests, limits.seconds)
            tally = _run_phase([one, two], [writer, probe], budget, ok_statuses=frozenset({200}))
        if tally.errors:
            raise RuntimeError(f"{target.name} streams: {dict(tally.errors)}")
        with httpx.Client(base_url=target.base_url, timeout=TIMEOUT) as client:
            steps = client.get("/__loop").json()
        polled = (percentile(probes, 0.5), percentile(probes, 0.99), max(probes))
        target.probes.append((idle, *polled, steps["p99"], steps["max"]))
    finally:
        stop.set()
        listener.join(timeout=30)
        if listener.is_alive():
            listener.kill()


def listen_streams(base_url: str, token: str, streams: int, ready: Any, stop: Any) -> None:
    """`streams` event streams on the small repo, read on one event loop until `stop`
    (the `--streams` listener process); `ready` once each has its first event."""

    async def listen(client: httpx.AsyncClient, opened: asyncio.Queue[None]) -> None:
        params = {"repo": "bench/small"}
        async with client.stream("GET", f"{API}/events", params=params) as answer:
            first = True
            async for _ in answer.aiter_lines():
                if first:
                    first = False
                    opened.put_nowait(None)

    async def main() -> None:
        headers = {"Authorization": f"Bearer {token}"}
        limits = httpx.Limits(max_connections=streams + 1)
        async with httpx.AsyncClient(
            base_url=base_url, headers=headers, timeout=TIMEOUT, limits=limits
        ) as client:
            opened: asyncio.Queue[None] = asyncio.Queue()
            tasks = [asyncio.create_task(listen(client, opened)) for _ in range(streams)]
            for _ in range(streams):
                await opened.get()
            ready.set()
            while not stop.is_set():
                await asyncio.sleep(0.05)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], capture_output=True, text=True, check=True, timeout=60)
    return done.stdout


def _export(revision: str, target: Path) -> Path:
    """The tree of `revision` in `target` (for PYTHONPATH)."""
    target.mkdir()
    archive = subprocess.run(
        ["git", "archive", revision], capture_output=True, check=True, timeout=60
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True, timeout=60)
    return target


def main(argv: list[str] | None = None) -> int:
    """Seed, run the interleaved rounds, print medians."""
    parser = argparse.ArgumentParser(prog="python -m bench.put_floor", description=__doc__)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--seconds", type=float, default=3.0, help="per run (default 3)")
    parser.add_argument("--baseline", help="also run memsync as of this git revision")
    parser.add_argument(
        "--mixed",
        action="store_true",
        help="also time 304 polls made while another client PUTs (memsync only)",
    )
    parser.add_argument(
        "--writers",
        action="store_true",
        help=f"also {' and '.join(map(str, MANY))} clients writing at once, in one repo "
        "and in one repo each",
    )
    parser.add_argument(
        "--streams",
        type=int,
        default=0,
        metavar="N",
        help="also time a /healthz probe during PUTs with N event streams open (memsync)",
    )
    args = parser.parse_args(argv)
    limits = Limits(args.seconds, 100_000, 0.5, 100)
    small = make_notes(SMALL_ENTRIES, seed=2)
    big = make_notes(BIG_ENTRIES, seed=1)
    repos = {"bench/small": small, "bench/big": big}
    scenarios = ["put-small", "put-2k"]
    if args.writers:
        repos.update({f"bench/w{index}": small for index in range(max(MANY))})
        for count in MANY:
            scenarios += [f"put-{count}w-one-repo", f"put-{count}w-{count}-repos"]
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="memsync-floor-") as tmp:
        workdir = Path(tmp)
        servers: list[tuple[str, Path | None]] = [("memsync", None)]
        if args.baseline:
            # Both from `git archive` copies: run from the working tree, the same code
            # measured 6-8% slower than from a copy (docs/benchmarks.md).
            state = _git("stash", "create").strip() or "HEAD"
            servers = [
                ("memsync", _export(state, workdir / "current")),
                ("baseline", _export(args.baseline, workdir / "baseline")),
            ]
        targets: list[Target] = []
        with (
            floor_server(workdir, repos) as (floor_url, floor_pid),
            _servers(workdir, servers) as started,
        ):
            for name, server in started:
                token = mint_token(
                    {"MEMSYNC_DATABASE_URL": f"sqlite:///{workdir / (name + '.db')}"}
                )
                with httpx.Client(
                    base_url=server.base_url,
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=TIMEOUT,
                ) as client:
                    for repo, notes in repos.items():
                        seed(client, repo, notes)
                targets.append(Target(name, server.base_url, token, server.process.pid))
            targets.append(Target("floor", floor_url, "", floor_pid))
            writers = {
                (target.name, scenario): [
                    Writer(repo, key, notes[key], {key: entry_checksum(notes[key])})
                ]
                for target in targets
                for scenario, repo, notes, key in (
                    ("put-small", "bench/small", small, sorted(small)[SMALL_ENTRIES // 2]),
                    ("put-2k", "bench/big", big, sorted(big)[BIG_ENTRIES // 2]),
                )
            }
            if args.writers:
                writers.update(_many_writers([target.name for target in targets], small))
            for _ in range(args.rounds):
                for scenario in scenarios:
                    for target in targets:
                        _measure(target, scenario, writers[(target.name, scenario)], limits)
                if args.mixed:
                    for target in targets[:-1]:
                        _measure_mixed(target, writers[(target.name, "put-small")][0], limits)
                loads.append(os.getloadavg()[0])
            if args.streams:
                _streams_rounds(workdir, targets[:-1], writers, args.streams, args.rounds, limits)
    floor = targets[-1]
    print(f"load average (1 min) over the run: {' '.join(f'{v:.2f}' for v in loads)}")
    print(
        "| server | scenario | req/s (median of rounds) | p50 ms | p99 ms "
        "| server CPU ms/req | x floor time |"
    )
    print("|---|---|--:|--:|--:|--:|--:|")
    for scenario in scenarios:
        for target in targets:
            rate = statistics.median(target.rates[scenario])
            ratio = statistics.median(floor.rates[scenario]) / rate
            print(
                f"| {target.name} | {scenario} | {rate:.0f} "
                f"| {statistics.median(target.p50s[scenario]):.2f} "
                f"| {statistics.median(target.p99s[scenario]):.2f} "
                f"| {statistics.median(target.cpu_ms[scenario]):.2f} | {ratio:.2f} |"
            )
    if args.mixed:
        print(
            "\n| server | 304 polls during PUTs: p50 ms | p99 ms | PUTs meanwhile req/s |"
            "\n|---|--:|--:|--:|"
        )
        for target in targets[:-1]:
            print(
                f"| {target.name} | {statistics.median(target.poll_p50s):.2f} "
                f"| {statistics.median(target.poll_p99s):.2f} "
                f"| {statistics.median(target.mixed_put_rates):.0f} |"
            )
    if args.streams:
        print(
            f"\n| server | /healthz idle p50 ms | during PUTs, {args.streams} streams open: "
            "p50 ms | p99 ms | max ms | loop step p99 ms | longest step ms |"
            "\n|---|--:|--:|--:|--:|--:|--:|"
        )
        for target in targets[:-1]:
            columns = zip(*target.probes, strict=True)
            print(
                "| "
                + target.name
                + " | "
                + " | ".join(f"{statistics.median(column):.2f}" for column in columns)
                + " |"
            )
    return 0


def _streams_rounds(
    workdir: Path,
    targets: Sequence[Target],
    writers: dict[tuple[str, str], list[Writer]],
    streams: int,
    rounds: int,
    limits: Limits,
) -> None:
    """`--streams`: each memsync again on its database, as `bench.loop_probe` (the same
    app, its loop's steps timed), for `_measure_streams`; the numbers go to `target`."""
    for target in targets:
        env = {
            "MEMSYNC_DATABASE_URL": f"sqlite:///{workdir / (target.name + '.db')}",
            "MEMSYNC_RATE_LIMIT_BURST": "0",
            "MEMSYNC_MAX_STREAMS_PER_TOKEN": str(streams),
        }
        factory = "bench.loop_probe:create_app"
        # asyncio's own loop: uvloop's steps cannot be timed from Python.
        with uvicorn_app(workdir, factory, env, f"{target.name}-loop", "--loop", "asyncio") as (
            url,
            pid,
        ):
            timed = Target(target.name, url, target.token, pid)
            writer = writers[(target.name, "put-small")][0]
            for _ in range(rounds):
                _measure_streams(timed, writer, streams, limits)
            target.probes = timed.probes


def _many_writers(
    names: Sequence[str], notes: dict[str, str]
) -> dict[tuple[str, str], list[Writer]]:
    """Per server and scenario, the clients that write at once: in one repo (each its
    own new key) or in one repo each (each its own copy of the small repo). The fewer
    clients of a scenario are the first of the more (each knows what it last wrote)."""
    key = sorted(notes)[SMALL_ENTRIES // 2]
    many: dict[tuple[str, str], list[Writer]] = {}
    for name in names:
        shared: dict[str, str | None] = {}
        one_repo = [
            Writer("bench/small", f"writer-{index}.md", notes[key], shared)
            for index in range(max(MANY))
        ]
        own_repos = [
            Writer(f"bench/w{index}", key, notes[key], {key: entry_checksum(notes[key])})
            for index in range(max(MANY))
        ]
        for count in MANY:
            many[(name, f"put-{count}w-one-repo")] = one_repo[:count]
            many[(name, f"put-{count}w-{count}-repos")] = own_repos[:count]
    return many


@contextmanager
def _servers(
    workdir: Path, wanted: Sequence[tuple[str, Path | None]]
) -> Iterator[list[tuple[str, ServerProcess]]]:
    started: list[tuple[str, ServerProcess]] = []
    try:
        for name, pythonpath in wanted:
            started.append((name, memsync_server(workdir, name, pythonpath)))
        yield started
    finally:
        for _, server in started:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
