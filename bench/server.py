"""Server benchmark: the real `memsync-server` under concurrent load on loopback.

For each backend (SQLite in a temp dir; PostgreSQL in a throwaway `PostgresCluster`) this
starts `memsync-server serve` as its own process (rate limiting off), mints a token with
the real CLI, seeds a 2,000-entry repo of ~4 KB Markdown notes (`topic-17/note-0042.md`,
PUT batches under the 2,000,000-byte body limit) and a 20-entry repo, then runs each
scenario with 1 and with 8 concurrent clients (threads in this process, one httpx
keep-alive connection each), for a bounded time or request count after a warm-up:

- `get-304`     GET of the 2,000-entry repo with If-None-Match = its current ETag
- `get-hashes`  `?view=hashes` of the 2,000-entry repo
- `get-full`    full GET of the 2,000-entry repo (~8.4 MB of JSON)
- `put-small`   single-key PUT into the small repo: each client rewrites its own key with
  `baseChecksums` = the checksum it last wrote, so every request is a real commit
- `put-2k`      the same into the 2,000-entry repo (each client owns one existing key)

Then the commit-cost curve (`--curve-sizes`, default 200,2000,20000; `--curve-sizes ""`
skips it): for each size a repo of that many short notes (~200 bytes: what a commit
costs depends on the entry count, not on the texts it does not touch), then one client
rewrites one existing key in the middle of the key order, one commit per request, and
the table shows the server time's median and p99. The server runs with
`MEMSYNC_MAX_ENTRIES` raised so the 20,000-entry repo can be seeded.

One row per backend, scenario and client count: requests, errors (anything but the
expected 200/304, listed below the table), req/s, client latency p50/p99, server time
p50/p99 (the `Server-Timing: app;dur=` header: inside the app, from the request's arrival
to the start of the response, so queueing inside the server counts and sending the body
does not), the server process's CPU per request (from /proc; PostgreSQL's own processes
not included), and bytes per GET response.

    .venv/bin/python -m bench.server                    # full run, both backends
    .venv/bin/python -m bench.server --quick            # a short smoke run
    .venv/bin/python -m bench.server --backends sqlite --clients 8

Only 127.0.0.1 is used. Every process started here is stopped at the end (checked with
pgrep). Exit status 1 when any request failed.
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

from bench._table import markdown_table
from memsync_protocol.checksums import entry_checksum, quote_etag, repo_checksum
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
CURVE_SIZES = (200, 2000, 20000)
CURVE_NOTE_BYTES = 200
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


def make_short_notes(count: int, seed: int) -> dict[str, str]:
    """`count` notes of about `CURVE_NOTE_BYTES` bytes, keyed like `note_key`."""
    rng = random.Random(seed)
    return {
        note_key(i): " ".join(_sentence(rng) for _ in range(2))[:CURVE_NOTE_BYTES]
        for i in range(count)
    }


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

    seconds: float
    max_requests: int
    warmup_seconds: float
    warmup_requests: int


@dataclass
class Row:
    """One line of the result table."""

    backend: str
    scenario: str
    clients: int
    tally: Tally
    server_cpu_s: float | None

    @property
    def requests(self) -> int:
        """Requests that finished, with or without an HTTP error."""
        transport_errors = sum(n for name, n in self.tally.errors.items() if not name.isdigit())
        return len(self.tally.latencies_ms) + transport_errors

    @property
    def error_count(self) -> int:
        """Non-2xx/304 answers and transport failures."""
        return sum(self.tally.errors.values())


# --------------------------------------------------------------------------- scenarios


class Writer:
    """One client's own key, rewritten with `baseChecksums` = the checksum it last wrote.

    `current` maps each key to its checksum on the server (None: absent) and is shared
    by every run of a scenario, so a later run starts from what an earlier one wrote.
    Each request writes new text, so each successful one is a real commit.
    """

    def __init__(self, repo: str, key: str, seed_text: str, current: dict[str, str | None]) -> None:
        self.repo = repo
        self.key = key
        self.seed_text = seed_text
        self.current = current
        self.revision = 0

    def __call__(self, client: httpx.Client) -> httpx.Response:
        self.revision += 1
        text = f"{self.seed_text}\n<!-- revision {time.time_ns()}-{self.revision} -->\n"
        base = self.current.get(self.key)
        body = _encode({"entries": {self.key: text}, "baseChecksums": {self.key: base}})
        response = client.put(
            API,
            params={"repo": self.repo},
            content=body,
            headers={"Content-Type": "application/json"},
        )
        if response.status_code == 200:
            self.current[self.key] = entry_checksum(text)
        elif response.status_code == 409:
            # Should not happen (each client owns its key); resynchronize to go on committing.
            for conflict in response.json()["error"]["details"].get("conflicts", []):
                if conflict.get("key") == self.key:
                    self.current[self.key] = conflict.get("serverChecksum")
        return response


def _getter(repo: str, params: dict[str, str], headers: dict[str, str]) -> RequestFn:
    query = {"repo": repo, **params}

    def request(client: httpx.Client) -> httpx.Response:
        return client.get(API, params=query, headers=headers)

    return request


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process so far (Linux `/proc`), or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # Fields after the command name start at field 3 (state): utime is 14, stime 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_scenario(
    base_url: str,
    token: str,
    requesters: list[RequestFn],
    limits: Limits,
    *,
    ok_statuses: frozenset[int],
    server_pid: int,
) -> tuple[Tally, float | None]:
    """Warm up, then measure, with one keep-alive client per requester.

    Returns the tally and the server process's CPU seconds during the measured part.
    """
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
        cpu_before = cpu_seconds(server_pid)
        tally = _run_phase(
            clients,
            requesters,
            Budget(limits.max_requests, limits.seconds),
            ok_statuses=ok_statuses,
        )
        cpu_after = cpu_seconds(server_pid)
    finally:
        for client in clients:
            client.close()
    used = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return tally, used


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


def _requesters(
    scenario: str,
    clients: int,
    notes: dict[str, str],
    big_etag: str,
    current: dict[str, str | None],
) -> tuple[list[RequestFn], frozenset[int]]:
    """One request function per client for `scenario`, and the statuses that count as ok."""
    keys = list(notes)
    if scenario == "get-304":
        headers = {"If-None-Match": quote_etag(big_etag)}
        return [_getter(BIG_REPO, {}, headers)] * clients, frozenset({304})
    if scenario == "get-hashes":
        return [_getter(BIG_REPO, {"view": "hashes"}, {})] * clients, frozenset({200})
    if scenario == "get-full":
        return [_getter(BIG_REPO, {}, {})] * clients, frozenset({200})
    if scenario == "put-small":
        writers: list[RequestFn] = [
            Writer(SMALL_REPO, f"writers/client-{i:02d}.md", notes[keys[i]], current)
            for i in range(clients)
        ]
        return writers, frozenset({200})
    if scenario == "put-2k":
        # Existing keys, spread over the repo; runs last since it changes the GETs' repo.
        step = len(keys) // clients
        owned = [keys[i * step] for i in range(clients)]
        return [Writer(BIG_REPO, key, notes[key], current) for key in owned], frozenset({200})
    raise ValueError(f"unknown scenario {scenario!r}")


@dataclass
class CurvePoint:
    """One size of the commit-cost curve."""

    backend: str
    entries: int
    tally: Tally


def run_curve(
    name: str, base_url: str, token: str, sizes: list[int], limits: Limits, server_pid: int
) -> list[CurvePoint]:
    """A one-key PUT's cost in repos of each size (one client, one commit per request)."""
    points: list[CurvePoint] = []
    auth = {"Authorization": f"Bearer {token}"}
    for size in sizes:
        repo = f"bench/curve-{size}"
        notes = make_short_notes(size, seed=3)
        with httpx.Client(base_url=base_url, headers=auth, timeout=TIMEOUT) as client:
            started = time.perf_counter()
            seed(client, repo, notes)
        print(
            f"[{name}] curve: seeded {size} entries in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        key = sorted(notes)[size // 2]
        current: dict[str, str | None] = {key: entry_checksum(notes[key])}
        tally, _cpu = run_scenario(
            base_url,
            token,
            [Writer(repo, key, notes[key], current)],
            limits,
            ok_statuses=frozenset({200}),
            server_pid=server_pid,
        )
        points.append(CurvePoint(name, size, tally))
    return points


def curve_table(points: list[CurvePoint]) -> str:
    """The commit-cost curve as aligned Markdown."""
    lines = [["backend", "entries", "commits", "errors", "server p50 ms", "server p99 ms"]]
    for point in points:
        tally = point.tally
        lines.append(
            [
                point.backend,
                f"{point.entries:,}",
                str(len(tally.latencies_ms)),
                str(sum(tally.errors.values())),
                _fmt(percentile(tally.server_ms, 0.50), 3),
                _fmt(percentile(tally.server_ms, 0.99), 3),
            ]
        )
    return markdown_table(lines, set(range(1, 6)))


def run_backend(
    name: str,
    limits: Limits,
    scenarios: list[str],
    client_counts: list[int],
    notes: dict[str, str],
    curve_sizes: list[int],
) -> tuple[list[Row], list[CurvePoint], str]:
    """Every scenario at every client count on one backend, then the commit-cost curve:
    rows, curve points and database version."""
    rows: list[Row] = []
    points: list[CurvePoint] = []
    with (
        tempfile.TemporaryDirectory(prefix=f"memsync-bench-{name}-") as tmp,
        backend_url(name, Path(tmp)) as (url, version),
    ):
        env = {
            "MEMSYNC_DATABASE_URL": url,
            "MEMSYNC_RATE_LIMIT_BURST": "0",
            "MEMSYNC_MAX_ENTRIES": str(max([BIG_ENTRIES, *curve_sizes])),
        }
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
            current: dict[str, str | None] = {key: entry_checksum(t) for key, t in notes.items()}
            for scenario in scenarios:
                for clients in client_counts:
                    requesters, ok = _requesters(scenario, clients, notes, big_etag, current)
                    print(f"[{name}] {scenario} x {clients} ...", file=sys.stderr, flush=True)
                    tally, cpu = run_scenario(
                        server.base_url,
                        token,
                        requesters,
                        limits,
                        ok_statuses=ok,
                        server_pid=server.process.pid,
                    )
                    rows.append(Row(name, scenario, clients, tally, cpu))
            if curve_sizes:
                points = run_curve(
                    name, server.base_url, token, curve_sizes, limits, server.process.pid
                )
        finally:
            server.stop()
            _check_gone(f"serve --port {server.port} ")
    return rows, points, version


# --------------------------------------------------------------------------- report


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    return f"{value:,.{digits}f}"


def table(rows: list[Row]) -> str:
    """The result table as aligned Markdown."""
    header = [
        "backend",
        "scenario",
        "clients",
        "requests",
        "errors",
        "req/s",
        "client p50 ms",
        "client p99 ms",
        "server p50 ms",
        "server p99 ms",
        "server CPU ms/req",
        "bytes/response",
    ]
    lines = [header]
    for row in rows:
        tally = row.tally
        rate = row.requests / tally.elapsed_s if tally.elapsed_s else float("nan")
        cpu = None if row.server_cpu_s is None or not row.requests else row.server_cpu_s
        size = sum(tally.sizes) / len(tally.sizes) if tally.sizes else None
        lines.append(
            [
                row.backend,
                row.scenario,
                str(row.clients),
                str(row.requests),
                str(row.error_count),
                _fmt(rate, 0),
                _fmt(percentile(tally.latencies_ms, 0.50)),
                _fmt(percentile(tally.latencies_ms, 0.99)),
                _fmt(percentile(tally.server_ms, 0.50), 3),
                _fmt(percentile(tally.server_ms, 0.99), 3),
                _fmt(None if cpu is None else cpu * 1000 / row.requests, 3),
                "" if size is None or row.scenario.startswith("put") else _fmt(size, 0),
            ]
        )
    return markdown_table(lines, set(range(2, len(header))))


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
    http = "httptools" if _importable("httptools") else "h11"
    return (
        f"{model}, {os.cpu_count()} cores; {platform.platform()}; "
        f"Python {platform.python_version()}; {versions}; uvicorn HTTP parser: {http}"
    )


def _load_average() -> str:
    """The 1-minute load average: other work on the machine skews every number."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "n/a"


def _importable(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def _names(value: str, allowed: tuple[str, ...], what: str) -> list[str]:
    names = [item.strip() for item in value.split(",") if item.strip()]
    unknown = [item for item in names if item not in allowed]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown {what} {unknown} (use {', '.join(allowed)})")
    return names


def _counts(value: str) -> list[int]:
    try:
        counts = [int(item) for item in value.split(",") if item.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("--clients takes numbers, e.g. 1,8") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError("--clients takes numbers of at least 1, e.g. 1,8")
    return counts


def _sizes(value: str) -> list[int]:
    try:
        sizes = [int(item) for item in value.split(",") if item.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("--curve-sizes takes numbers, e.g. 200,2000") from None
    if sizes and min(sizes) < 1:
        raise argparse.ArgumentTypeError("--curve-sizes takes numbers of at least 1")
    return sizes


def main(argv: list[str] | None = None) -> int:
    """Parse options, run every backend, print the table; 1 when a request failed."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.server", description="Benchmark memsync-server on loopback."
    )
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument(
        "--backends",
        type=lambda v: _names(v, BACKENDS, "backend"),
        default=list(BACKENDS),
        help="comma-separated: sqlite,postgresql (default both)",
    )
    parser.add_argument(
        "--scenarios",
        type=lambda v: _names(v, SCENARIOS, "scenario"),
        default=list(SCENARIOS),
        help=f"comma-separated, default all: {','.join(SCENARIOS)}",
    )
    parser.add_argument(
        "--clients", type=_counts, default=[1, 8], help="concurrent clients per run (default 1,8)"
    )
    parser.add_argument(
        "--curve-sizes",
        type=_sizes,
        default=list(CURVE_SIZES),
        help="repo sizes of the commit-cost curve (default 200,2000,20000; '' skips it)",
    )
    parser.add_argument("--seconds", type=float, help="per run (default 5; quick 0.5)")
    parser.add_argument("--max-requests", type=int, help="per run (default 5000; quick 200)")
    args = parser.parse_args(argv)

    scenarios = [s for s in SCENARIOS if s in args.scenarios]  # put-2k must stay last
    limits = Limits(
        seconds=args.seconds if args.seconds is not None else (0.5 if args.quick else 5.0),
        max_requests=args.max_requests or (200 if args.quick else 5000),
        warmup_seconds=0.2 if args.quick else 1.0,
        warmup_requests=20 if args.quick else 200,
    )

    notes = make_notes(BIG_ENTRIES, seed=1)
    note_bytes = [len(text.encode()) for text in notes.values()]
    print(
        f"machine: {machine()}\n"
        f"load: {'/'.join(map(str, args.clients))} concurrent clients (threads, one httpx "
        f"keep-alive connection each) in this process, on the same cores as the server; "
        f"per run {limits.seconds:g} s or {limits.max_requests} requests, whichever first, "
        f"after {limits.warmup_seconds:g} s / {limits.warmup_requests} requests of warm-up\n"
        f"data: {BIG_REPO} = {len(notes)} notes of {min(note_bytes)}-{max(note_bytes)} bytes "
        f"(mean {sum(note_bytes) / len(note_bytes):.0f}); {SMALL_REPO} = {SMALL_ENTRIES} notes",
        flush=True,
    )

    rows: list[Row] = []
    points: list[CurvePoint] = []
    for backend in args.backends:
        before = _load_average()
        backend_rows, backend_points, version = run_backend(
            backend, limits, scenarios, args.clients, notes, args.curve_sizes
        )
        print(f"[{backend}] {version}; load average {before} before, {_load_average()} after")
        rows += backend_rows
        points += backend_points

    print()
    print(table(rows))
    if points:
        print("\nCommit cost: a one-key PUT (1 client) by repo size\n")
        print(curve_table(points))
    failed = False
    for point in points:
        for status, count in sorted(point.tally.errors.items()):
            failed = True
            sample = point.tally.error_samples.get(status, "")
            print(f"errors {point.backend}/curve-{point.entries}: {count} x {status}: {sample}")
    for row in rows:
        for status, count in sorted(row.tally.errors.items()):
            failed = True
            sample = row.tally.error_samples.get(status, "")
            print(
                f"errors {row.backend}/{row.scenario}/{row.clients}: {count} x {status}: {sample}"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
