"""Review benchmark: proposing, accepting and listing in a reviewed 2,000-note repo (SQLite).

Seeds, in a temp dir, a SQLite repo of `--notes` notes (default 2,000, ~4 KB Markdown
each, `bench/server.py`'s) plus a `MEMORY.md` index listing them, switches review on,
and serves it with a live server (uvicorn on 127.0.0.1 in this process, rate limit off).
alice writes without review rights, carol is a reviewer. Each scenario runs `--runs`
times after a warm-up, timed as the server sees it (`Server-Timing: app;dur=`: from the
request's arrival to the start of the answer) and as an httpx client on a keep-alive
connection sees it:

- `propose`: alice PUTs a new text of one note (a 202: checks, the base text kept);
- `accept, fast-forward`: carol accepts such a proposal, the team's text unchanged
  since its base (one commit of one note);
- `accept, merged`: carol accepts alice's appended index line after bob's line was
  committed at the same place (a three-way merge of the 2,000-line index, then one
  commit);
- `list 200 pending`: `GET /proposals` with 200 proposals waiting (keys and checksums);
- `list 200 pending, texts`: the same with `texts=1` (each key's texts, the team's, and
  similar notes from the ranked search over the 2,000 notes: about 2.4 MB of JSON,
  gzipped for the client).

    .venv/bin/python -m bench.review
    .venv/bin/python -m bench.review --notes 500 --runs 20
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from importlib import metadata
from pathlib import Path

import httpx

from bench._table import markdown_table
from bench.server import make_notes
from sync_server.config import Settings, sqlite_url
from tests.liveserver import LiveServer, run_live_server

API = "/v1/team_memory"
REPO = "bench/reviewed"
INDEX = "MEMORY.md"
PENDING = 200


def _index(keys: list[str]) -> str:
    return "# Index\n" + "".join(f"- [{key}]({key}): a note\n" for key in keys)


def _check(answer: httpx.Response, status: int, what: str) -> httpx.Response:
    if answer.status_code != status:
        raise SystemExit(f"{what}: {answer.status_code} {answer.text[:300]}")
    return answer


def _timed(call: Callable[[], httpx.Response]) -> tuple[float, float]:
    """(server ms, client ms) of one request."""
    started = time.perf_counter()
    answer = call()
    client_ms = (time.perf_counter() - started) * 1000
    if answer.status_code not in (200, 202):
        raise SystemExit(f"{answer.request.url}: {answer.status_code} {answer.text[:300]}")
    return float(answer.headers["server-timing"].split("dur=", 1)[1]), client_ms


def _propose(alice: httpx.Client, entries: dict[str, str]) -> int:
    answer = alice.put(API, params={"repo": REPO}, json={"entries": entries})
    return int(_check(answer, 202, "propose").json()["proposal"]["id"])


def _accept(carol: httpx.Client, proposal_id: int) -> httpx.Response:
    answer = carol.post(f"{API}/proposals/{proposal_id}/accept", params={"repo": REPO})
    return _check(answer, 200, "accept")


def run(server: LiveServer, notes: int, runs: int, warmup: int, seed: int) -> list[list[str]]:
    texts = make_notes(notes, seed)
    keys = sorted(texts)
    server.store.set_review(REPO, True)
    alice = server.client(server.token(name="alice"))
    bob = server.client(server.token(name="bob"))
    carol = server.client(server.token(name="carol", reviewer=True))
    seeded = carol.put(API, params={"repo": REPO}, json={"entries": {**texts, INDEX: _index(keys)}})
    _check(seeded, 200, "seed")
    results: dict[str, list[tuple[float, float]]] = {}
    counter = iter(range(10**9))

    def note_edit() -> dict[str, str]:
        n = next(counter)
        key = keys[n % len(keys)]
        return {key: texts[key] + f"\nA fact learned in run {n}.\n"}

    # propose
    samples = []
    for run_number in range(warmup + runs):
        edit = note_edit()
        timing = _timed(partial(alice.put, API, params={"repo": REPO}, json={"entries": edit}))
        if run_number >= warmup:
            samples.append(timing)
    results["propose"] = samples
    # accept, fast-forward: the team's text is still the base
    samples = []
    for run_number in range(warmup + runs):
        proposal_id = _propose(alice, note_edit())
        timing = _timed(partial(_accept, carol, proposal_id))
        if run_number >= warmup:
            samples.append(timing)
    results["accept, fast-forward"] = samples
    # accept, merged: both append an index line at its end
    samples = []
    for run_number in range(warmup + runs):
        index = bob.get(API, params={"repo": REPO, "key": INDEX}).json()["content"]
        proposal_id = _propose(alice, {INDEX: index + f"- [a{run_number}](a.md): alice\n"})
        _check(
            carol.put(
                API,
                params={"repo": REPO},
                json={"entries": {INDEX: index + f"- [b{run_number}](b.md): bob\n"}},
            ),
            200,
            "team edit",
        )
        timing = _timed(partial(_accept, carol, proposal_id))
        if run_number >= warmup:
            samples.append(timing)
    results["accept, merged"] = samples
    # the inbox's data with 200 pending
    for _ in range(PENDING):
        _propose(bob, note_edit())
    for texts_param, name in ((0, ""), (1, ", texts")):
        samples = []
        params: dict[str, str | int] = {"repo": REPO, "texts": texts_param}
        for run_number in range(warmup + runs):
            timing = _timed(partial(carol.get, f"{API}/proposals", params=params))
            if run_number >= warmup:
                samples.append(timing)
        results[f"list {PENDING} pending{name}"] = samples
    for client in (alice, bob, carol):
        client.close()
    lines = [["scenario", "server p50 ms", "server p95 ms", "client p50 ms", "client p95 ms"]]
    for name, timings in results.items():
        app = sorted(t[0] for t in timings)
        trip = sorted(t[1] for t in timings)
        lines.append(
            [
                name,
                f"{statistics.median(app):.1f}",
                f"{app[round(0.95 * (len(app) - 1))]:.1f}",
                f"{statistics.median(trip):.1f}",
                f"{trip[round(0.95 * (len(trip) - 1))]:.1f}",
            ]
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--seed", type=int, default=28)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memsync-bench-review-") as folder:
        settings = Settings(
            database_url=sqlite_url(Path(folder) / "memsync.sqlite3"),
            rate_limit_burst=0,
            max_entries=args.notes + 100,
            max_pending_proposals=10_000,
            max_body_bytes=50_000_000,
        )
        with run_live_server(settings) as server:
            lines = run(server, args.notes, args.runs, args.warmup, args.seed)
    print(
        f"python {platform.python_version()}, sqlalchemy {metadata.version('sqlalchemy')}, "
        f"sqlite {__import__('sqlite3').sqlite_version}; {args.notes} notes; {args.runs} runs "
        f"each after {args.warmup} warm-up\n"
    )
    print(markdown_table(lines, numeric={1, 2, 3, 4}))


if __name__ == "__main__":
    main()
