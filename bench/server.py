"""Server benchmark: the real `memsync-server` under concurrent load on loopback.

For each backend (SQLite in a temp dir; PostgreSQL in a throwaway cluster) this starts
`memsync-server serve` as its own process (rate limiting off), mints a token with the
real CLI, seeds a 2,000-entry repo of ~4 KB Markdown notes and a small repo, then drives
each scenario with N concurrent httpx clients (one thread and one keep-alive connection
each) for a bounded time or request count, after a warm-up:

- ``get-304``    conditional GET of the 2,000-entry repo, If-None-Match = current ETag
- ``get-hashes`` ``?view=hashes`` of the 2,000-entry repo
- ``get-full``   full GET of the 2,000-entry repo
- ``put-small``  single-key PUT into the small repo: each client rewrites its own key with
  ``baseChecksums`` = the checksum it last wrote, so every request is a real commit
- ``put-2k``     the same into the 2,000-entry repo (each client owns one existing key)

It prints one row per backend and scenario: requests, errors (non-2xx/304, listed), req/s,
client latency p50/p99, server time p50/p99 (the `Server-Timing: app;dur=` header, measured
inside the app up to the start of the response), and bytes per response.

    .venv/bin/python -m bench.server                    # full run, both backends
    .venv/bin/python -m bench.server --quick            # a short smoke run
    .venv/bin/python -m bench.server --backends sqlite  # one backend

Only 127.0.0.1 is used. Every process started here is stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import httpx

from sync_server.checksums import entry_checksum, quote_etag, repo_checksum
from tests.liveserver import ServerProcess, server_command
from tests.pgcluster import PostgresCluster

API = "/v1/team_memory"
BIG_REPO = "bench/big"
SMALL_REPO = "bench/small"
BIG_ENTRIES = 2000
SMALL_ENTRIES = 20
TOPICS = 40
MAX_BODY_BYTES = 2_000_000
BATCH_BUDGET = 1_900_000  # stay clearly under the server's body limit
SCENARIOS = ("get-304", "get-hashes", "get-full", "put-small", "put-2k")
BACKENDS = ("sqlite", "postgresql")
TIMEOUT = 60.0

# --------------------------------------------------------------------------- notes

_WORDS_TEXT = (
    "cache deploy migration retry token schema index latency queue worker config "
    "release branch review fixture endpoint payload timeout rollback service client "
    "server database replica backup monitor alert budget owner incident runbook flag "
    "the a of to and in for on with when after before because so that this we it is "
    "must should never always usually only first then check run keep avoid prefer "
    "build test lint format commit merge pin bump upgrade revert document measure"
)
_WORDS = _WORDS_TEXT.split(" ")
_LANGS = ("python", "bash", "sql", "yaml", "json")


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(8, 18))]
    if rng.random() < 0.3:
        words.insert(rng.randrange(len(words)), f"`{rng.choice(_WORDS)}_{rng.randint(1, 99)}`")
    if rng.random() < 0.1:
        words.append("(voir la procédure — déjà validée)")
    return " ".join(words).capitalize() + "."


def make_note(rng: random.Random, topic: int, number: int, target_bytes: int = 4096) -> str:
    """A deterministic Markdown note of roughly `target_bytes` UTF-8 bytes."""
    parts = [
        f"# Topic {topic}: note {number}\n",
        f"_Owner: team-{rng.randint(1, 9)} · last reviewed 2026-{rng.randint(1, 12):02d}_\n",
    ]
    size = sum(len(part.encode()) for part in parts)
    section = 0
    while size < target_bytes - 300:
        section += 1
        kind = rng.random()
        if kind < 0.45:
            block = " ".join(_sentence(rng) for _ in range(rng.randint(3, 6)))
        elif kind < 0.75:
            items = (f"- {_sentence(rng)}" for _ in range(rng.randint(3, 6)))
            block = "\n".join(items)
        elif kind < 0.9:
            lang = rng.choice(_LANGS)
            lines = (f"{rng.choice(_WORDS)} = {rng.randint(0, 9999)}" for _ in range(4))
            block = f"```{lang}\n" + "\n".join(lines) + "\n```"
        else:
            block = (
                f"See [{rng.choice(_WORDS)}](../topic-{rng.randrange(TOPICS):02d}/"
                f"note-{rng.randrange(BIG_ENTRIES):04d}.md) and "
                f"<https://example.invalid/{rng.choice(_WORDS)}/{rng.randint(1, 500)}>."
            )
        chunk = f"\n## Section {section}\n\n{block}\n"
        parts.append(chunk)
        size += len(chunk.encode())
    return "".join(parts)


def note_key(index: int) -> str:
    """`topic-17/note-0042.md`: notes spread over `TOPICS` folders."""
    return f"topic-{index % TOPICS:02d}/note-{index:04d}.md"


def make_notes(count: int, seed: int) -> dict[str, str]:
    """`count` notes keyed like `topic-17/note-0042.md`."""
    rng = random.Random(seed)
    return {note_key(i): make_note(rng, i % TOPICS, i) for i in range(count)}


def _encode(payload: object) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def put_batches(entries: dict[str, str]) -> Iterator[bytes]:
    """PUT bodies `{"entries": {...}}` covering `entries`, each under `BATCH_BUDGET` bytes."""
    batch: dict[str, str] = {}
    size = len(_encode({"entries": {}}))
    for key, text in entries.items():
        item = len(_encode({key: text})) - 1  # minus one brace pair, plus a comma: about even
        if batch and size + item > BATCH_BUDGET:
            yield _encode({"entries": batch})
            batch, size = {}, len(_encode({"entries": {}}))
        batch[key] = text
        size += item
    if batch:
        body = _encode({"entries": batch})
        assert len(body) < MAX_BODY_BYTES
        yield body


# --------------------------------------------------------------------------- measuring


@dataclass
class Tally:
    """What one scenario measured (merged over its client threads)."""

    latencies_ms: list[float] = field(default_factory=list)
    server_ms: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    error_samples: dict[str, str] = field(default_factory=dict)
    elapsed_s: float = 0.0

    def merge(self, other: Tally) -> None:
        """Add another thread's numbers to these."""
        self.latencies_ms += other.latencies_ms
        self.server_ms += other.server_ms
        self.sizes += other.sizes
        self.errors.update(other.errors)
        for status, sample in other.error_samples.items():
            self.error_samples.setdefault(status, sample)


def server_time_ms(response: httpx.Response) -> float | None:
    """The `app;dur=` of a `Server-Timing` header, in milliseconds."""
    header = response.headers.get("server-timing", "")
    for metric in header.split(","):
        for param in metric.split(";")[1:]:
            name, _, value = param.strip().partition("=")
            if name == "dur":
                return float(value)
    return None


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = min(len(ordered), max(1, math.ceil(fraction * len(ordered))))
    return ordered[rank - 1]


class Budget:
    """A shared stop rule: at most `max_requests`, and nothing started after `deadline`."""

    def __init__(self, max_requests: int, seconds: float) -> None:
        self._left = max_requests
        self._seconds = seconds
        self._deadline = 0.0
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start the clock."""
        self._deadline = time.perf_counter() + self._seconds

    def take(self) -> bool:
        """Whether one more request may start."""
        with self._lock:
            if self._left <= 0 or time.perf_counter() >= self._deadline:
                return False
            self._left -= 1
            return True


RequestFn = Callable[[httpx.Client], httpx.Response]


def _run_phase(
    clients: list[httpx.Client],
    requesters: list[RequestFn],
    budget: Budget,
    *,
    ok_statuses: frozenset[int],
) -> Tally:
    """All clients at once until the budget runs out; one thread per client."""
    tallies = [Tally() for _ in clients]
    barrier = threading.Barrier(len(clients) + 1)

    def work(index: int) -> None:
        client, request, tally = clients[index], requesters[index], tallies[index]
        barrier.wait()
        while budget.take():
            started = time.perf_counter()
            try:
                response = request(client)
            except httpx.HTTPError as error:
                name = type(error).__name__
                tally.errors[name] += 1
                tally.error_samples.setdefault(name, str(error)[:200])
                continue
            tally.latencies_ms.append((time.perf_counter() - started) * 1000)
            timing = server_time_ms(response)
            if timing is not None:
                tally.server_ms.append(timing)
            tally.sizes.append(len(response.content))
            if response.status_code not in ok_statuses:
                status = str(response.status_code)
                tally.errors[status] += 1
                tally.error_samples.setdefault(status, response.text[:300])

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(len(clients))]
    for thread in threads:
        thread.start()
    budget.start()
    started = time.perf_counter()
    barrier.wait()
    for thread in threads:
        thread.join()
    total = Tally(elapsed_s=time.perf_counter() - started)
    for tally in tallies:
        total.merge(tally)
    return total


@dataclass(frozen=True)
class Limits:
    """How long each scenario runs."""

    clients: int
    seconds: float
    max_requests: int
    warmup_seconds: float
    warmup_requests: int


@dataclass
class Row:
    """One line of the result table."""

    backend: str
    scenario: str
    tally: Tally

    @property
    def requests(self) -> int:
        return len(self.tally.latencies_ms) + sum(
            count for name, count in self.tally.errors.items() if not name.isdigit()
        )

    @property
    def error_count(self) -> int:
        return sum(self.tally.errors.values())


# --------------------------------------------------------------------------- scenarios


class Writer:
    """One client's own key, rewritten with `baseChecksums` = what it last wrote."""

    def __init__(self, repo: str, key: str, base: str | None, seed_text: str) -> None:
        self.repo = repo
        self.key = key
        self.base = base
        self.seed_text = seed_text
        self.revision = 0

    def __call__(self, client: httpx.Client) -> httpx.Response:
        self.revision += 1
        text = f"{self.seed_text}\n<!-- revision {self.revision} -->\n"
        body = _encode({"entries": {self.key: text}, "baseChecksums": {self.key: self.base}})
        response = client.put(
            API,
            params={"repo": self.repo},
            content=body,
            headers={"Content-Type": "application/json"},
        )
        if response.status_code == 200:
            self.base = entry_checksum(text)
        elif response.status_code == 409:
            # Should not happen (each client owns its key); recover to keep committing.
            conflicts = response.json()["error"]["details"].get("conflicts", [])
            for conflict in conflicts:
                if conflict.get("key") == self.key:
                    self.base = conflict.get("serverChecksum")
        return response


def _getter(repo: str, params: dict[str, str], headers: dict[str, str]) -> RequestFn:
    query = {"repo": repo, **params}

    def request(client: httpx.Client) -> httpx.Response:
        return client.get(API, params=query, headers=headers)

    return request


def run_scenario(
    base_url: str,
    token: str,
    requesters: list[RequestFn],
    limits: Limits,
    *,
    ok_statuses: frozenset[int],
) -> Tally:
    """Warm up, then measure, with one keep-alive client per requester."""
    headers = {"Authorization": f"Bearer {token}"}
    clients = [
        httpx.Client(base_url=base_url, headers=headers, timeout=TIMEOUT) for _ in requesters
    ]
    try:
        _run_phase(
            clients,
            requesters,
            Budget(limits.warmup_requests, limits.warmup_seconds),
            ok_statuses=ok_statuses,
        )
        return _run_phase(
            clients,
            requesters,
            Budget(limits.max_requests, limits.seconds),
            ok_statuses=ok_statuses,
        )
    finally:
        for client in clients:
            client.close()


# --------------------------------------------------------------------------- one backend


def mint_token(env: dict[str, str]) -> str:
    """`memsync-server token create --repo '*' --name bench`; the token is the last line."""
    done = subprocess.run(
        [*server_command(), "token", "create", "--repo", "*", "--name", "bench"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"token create failed: {done.stderr.strip()}")
    return done.stdout.strip().splitlines()[-1]


def seed(client: httpx.Client, repo: str, entries: dict[str, str]) -> str:
    """Upload `entries` in batches; check and return the repo's ETag checksum."""
    for body in put_batches(entries):
        response = client.put(
            API, params={"repo": repo}, content=body, headers={"Content-Type": "application/json"}
        )
        response.raise_for_status()
    hashes = client.get(API, params={"repo": repo, "view": "hashes"})
    hashes.raise_for_status()
    view = hashes.json()
    expected = repo_checksum({key: entry_checksum(text) for key, text in entries.items()})
    if len(view["entryChecksums"]) != len(entries) or view["checksum"] != expected:
        raise RuntimeError(f"seeding {repo} did not produce the expected content")
    checksum: str = view["checksum"]
    return checksum


@contextmanager
def backend_url(name: str, workdir: Path) -> Iterator[tuple[str, str]]:
    """(database URL, version string) of a fresh database; cleaned up on exit."""
    if name == "sqlite":
        yield f"sqlite:///{workdir / 'bench.sqlite3'}", f"SQLite {sqlite3.sqlite_version}"
        return
    cluster = PostgresCluster.start()
    try:
        version = subprocess.run(
            [str(cluster.bindir / "postgres"), "--version"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        ).stdout.strip()
        yield cluster.create_database("memsync_bench"), version or "PostgreSQL"
    finally:
        data_dir = str(cluster.data_dir)
        cluster.stop()
        _check_gone(data_dir)


def _check_gone(pattern: str) -> None:
    """Complain when a process whose command line holds `pattern` is still running."""
    if shutil.which("pgrep") is None:
        return
    deadline = time.monotonic() + 10
    while True:
        found = subprocess.run(
            ["pgrep", "-f", pattern], capture_output=True, text=True, timeout=10, check=False
        ).stdout.split()
        found = [pid for pid in found if int(pid) != os.getpid()]
        if not found or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    if found:
        print(f"WARNING: processes still running for {pattern}: {found}", file=sys.stderr)


def run_backend(
    name: str, limits: Limits, scenarios: list[str], notes: dict[str, str]
) -> tuple[list[Row], dict[str, float], str]:
    """Every scenario on one backend: rows, bytes per GET response, database version."""
    rows: list[Row] = []
    sizes: dict[str, float] = {}
    with (
        tempfile.TemporaryDirectory(prefix=f"memsync-bench-{name}-") as tmp,
        backend_url(name, Path(tmp)) as (url, version),
    ):
        env = {"MEMSYNC_DATABASE_URL": url, "MEMSYNC_RATE_LIMIT_BURST": "0"}
        server = ServerProcess(env, log_path=Path(tmp) / "server.log")
        try:
            token = mint_token(env)
            auth = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=server.base_url, headers=auth, timeout=TIMEOUT) as client:
                started = time.perf_counter()
                big_etag = seed(client, BIG_REPO, notes)
                small_notes = make_notes(SMALL_ENTRIES, seed=2)
                seed(client, SMALL_REPO, small_notes)
                print(
                    f"[{name}] seeded {len(notes)} + {len(small_notes)} entries "
                    f"in {time.perf_counter() - started:.1f} s",
                    file=sys.stderr,
                )
            big_keys = list(notes)
            for scenario in scenarios:
                requesters: list[RequestFn]
                ok = frozenset({200})
                if scenario == "get-304":
                    headers = {"If-None-Match": quote_etag(big_etag)}
                    requesters = [_getter(BIG_REPO, {}, headers)] * limits.clients
                    ok = frozenset({304})
                elif scenario == "get-hashes":
                    requesters = [_getter(BIG_REPO, {"view": "hashes"}, {})] * limits.clients
                elif scenario == "get-full":
                    requesters = [_getter(BIG_REPO, {}, {})] * limits.clients
                elif scenario == "put-small":
                    requesters = [
                        Writer(SMALL_REPO, f"writers/client-{i:02d}.md", None, notes[big_keys[i]])
                        for i in range(limits.clients)
                    ]
                elif scenario == "put-2k":
                    # Runs last: it changes the big repo that the GET scenarios read.
                    step = len(big_keys) // limits.clients
                    owned = [big_keys[i * step] for i in range(limits.clients)]
                    requesters = [
                        Writer(BIG_REPO, key, entry_checksum(notes[key]), notes[key])
                        for key in owned
                    ]
                else:
                    raise ValueError(f"unknown scenario {scenario!r}")
                print(f"[{name}] {scenario} ...", file=sys.stderr)
                tally = run_scenario(server.base_url, token, requesters, limits, ok_statuses=ok)
                rows.append(Row(name, scenario, tally))
                if scenario.startswith("get-") and tally.sizes:
                    sizes[scenario] = sum(tally.sizes) / len(tally.sizes)
        finally:
            server.stop()
            _check_gone(f"serve --port {server.port} ")
    return rows, sizes, version


# --------------------------------------------------------------------------- report


def _fmt(value: float, digits: int = 2) -> str:
    return "n/a" if value != value else f"{value:.{digits}f}"  # NaN check


def table(rows: list[Row], sizes: dict[tuple[str, str], float]) -> str:
    """The result table as aligned Markdown."""
    header = [
        "backend",
        "scenario",
        "requests",
        "errors",
        "req/s",
        "client p50 ms",
        "client p99 ms",
        "server p50 ms",
        "server p99 ms",
        "bytes/response",
    ]
    lines = [header]
    for row in rows:
        tally = row.tally
        size = sizes.get((row.backend, row.scenario))
        lines.append(
            [
                row.backend,
                row.scenario,
                str(row.requests),
                str(row.error_count),
                _fmt(row.requests / tally.elapsed_s if tally.elapsed_s else float("nan"), 0),
                _fmt(percentile(tally.latencies_ms, 0.50)),
                _fmt(percentile(tally.latencies_ms, 0.99)),
                _fmt(percentile(tally.server_ms, 0.50), 3),
                _fmt(percentile(tally.server_ms, 0.99), 3),
                "" if size is None else f"{size:,.0f}",
            ]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    numeric = set(range(2, len(header)))

    def render(cells: list[str]) -> str:
        padded = (
            cell.rjust(widths[i]) if i in numeric else cell.ljust(widths[i])
            for i, cell in enumerate(cells)
        )
        return "| " + " | ".join(padded) + " |"

    rule = (
        "|"
        + "|".join(
            "-" * (w + 1) + ":" if i in numeric else "-" * (w + 2) for i, w in enumerate(widths)
        )
        + "|"
    )
    return "\n".join([render(lines[0]), rule, *(render(line) for line in lines[1:])])


def machine() -> str:
    """CPU, cores, OS and the versions that matter."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = ", ".join(
        f"{package} {metadata.version(package)}"
        for package in ("fastapi", "starlette", "uvicorn", "sqlalchemy", "psycopg", "httpx")
    )
    return (
        f"{model}, {os.cpu_count()} cores; {platform.platform()}; "
        f"Python {platform.python_version()}; {versions}"
    )


def main(argv: list[str] | None = None) -> int:
    """Parse options, run every backend, print the table."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.server", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--backends", default=",".join(BACKENDS), help="sqlite,postgresql")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help=",".join(SCENARIOS))
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients")
    parser.add_argument("--seconds", type=float, help="per scenario (default 5, quick 0.5)")
    parser.add_argument("--max-requests", type=int, help="per scenario (default 5000, quick 200)")
    args = parser.parse_args(argv)

    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    for backend in backends:
        if backend not in BACKENDS:
            parser.error(f"unknown backend {backend!r} (use {', '.join(BACKENDS)})")
    for scenario in scenarios:
        if scenario not in SCENARIOS:
            parser.error(f"unknown scenario {scenario!r} (use {', '.join(SCENARIOS)})")
    scenarios = [s for s in SCENARIOS if s in scenarios]  # put-2k must stay last
    if args.clients < 1:
        parser.error("--clients must be at least 1")
    limits = Limits(
        clients=args.clients,
        seconds=args.seconds if args.seconds is not None else (0.5 if args.quick else 5.0),
        max_requests=args.max_requests or (200 if args.quick else 5000),
        warmup_seconds=0.2 if args.quick else 1.0,
        warmup_requests=20 if args.quick else 200,
    )

    notes = make_notes(BIG_ENTRIES, seed=1)
    note_bytes = [len(text.encode()) for text in notes.values()]
    print(
        f"machine: {machine()}\n"
        f"load: {limits.clients} concurrent clients (threads, httpx keep-alive) in this "
        f"process, sharing the CPU with the server; per scenario {limits.seconds:g} s or "
        f"{limits.max_requests} requests, after {limits.warmup_seconds:g} s / "
        f"{limits.warmup_requests} requests of warm-up\n"
        f"data: {BIG_REPO} = {len(notes)} notes, {min(note_bytes)}-{max(note_bytes)} bytes "
        f"(mean {sum(note_bytes) / len(note_bytes):.0f}); {SMALL_REPO} = {SMALL_ENTRIES} notes",
        flush=True,
    )

    rows: list[Row] = []
    sizes: dict[tuple[str, str], float] = {}
    for backend in backends:
        backend_rows, backend_sizes, version = run_backend(backend, limits, scenarios, notes)
        print(f"[{backend}] {version}", flush=True)
        rows += backend_rows
        sizes.update({(backend, scenario): size for scenario, size in backend_sizes.items()})

    print()
    print(table(rows, sizes))
    failed = False
    for row in rows:
        for status, count in sorted(row.tally.errors.items()):
            failed = True
            sample = row.tally.error_samples.get(status, "")
            print(f"errors {row.backend}/{row.scenario}: {count} x {status}: {sample}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
