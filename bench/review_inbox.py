"""Review inbox benchmark: the web page's Review inbox of a reviewed repo with 200
pending proposals.

Builds, in a temp dir, a SQLite repo of `--notes` notes (default 2,000, the ~4 KB
Markdown notes of `bench/server.py`), turns review on for it and has `--authors`
non-reviewer tokens (default 5) send `--proposals` writes (default 200) through the
API, each a PUT answered 202: most rewrite a paragraph of one note and add a line,
one in ten is a new note, one in twenty a delete. A reviewer then signs in to `/ui/`
and, on a live server (uvicorn on 127.0.0.1 in this process, rate limit off), each
page is loaded `--runs` times after a warm-up; three times are taken:

- `read`: the store call the page makes (the proposals with their texts and the
  team's; for the repo page, the team's texts), alone, in this thread;
- `server`: the answer's `Server-Timing: app;dur=` header: inside the app from the
  request's arrival to the start of the response (session check, the proposals read
  with their texts, the team's texts, the diffs, the template);
- `client`: the round trip as an httpx client on a keep-alive connection sees it.

Pages: the reviewer's inbox (all 200 proposals read with their texts, the newest 50
shown with each key's diff against the team's text), its last page (`before`: the
oldest proposals), one author's inbox (their own 40, signed in as that author), and
the repo page, whose header carries the pending count. The inbox keeps the diffs it
made (a proposal never changes; a checksum names the team's text), so its first page
is timed twice: a first load (that cache emptied before each request) and a reload
(what a reviewer gets after each accept or reject, all but one proposal's diffs kept).

    .venv/bin/python -m bench.review_inbox
    .venv/bin/python -m bench.review_inbox --notes 500 --proposals 50 --runs 20
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import httpx

from bench._table import markdown_table
from bench.server import make_note, make_notes, put_batches
from sync_server.auth import issue_token
from sync_server.config import Settings, sqlite_url
from sync_server.ui.review import CHANGES, PAGE
from tests.liveserver import LiveServer, run_live_server

API = "/v1/team_memory"
REPO = "bench/reviewed"
AIM_MS = 100.0


def propose(
    server: LiveServer, tokens: list[str], texts: dict[str, str], count: int, seed: int
) -> float:
    """`count` proposals through the API, spread over the authors' tokens; seconds."""
    rng = random.Random(seed)
    keys = list(texts)
    started = time.perf_counter()
    clients = [server.client(token) for token in tokens]
    try:
        for number in range(count):
            client = clients[number % len(clients)]
            kind = rng.random()
            if kind < 0.05:
                answer = client.delete(API, params={"repo": REPO, "key": rng.choice(keys)})
            else:
                if kind < 0.15:
                    key = f"proposed/new-{number:04d}.md"
                    text = make_note(rng, number % 40, 90_000 + number)
                else:
                    key = rng.choice(keys)
                    paragraphs = texts[key].split("\n\n")
                    spot = rng.randrange(1, len(paragraphs))
                    paragraphs[spot] = make_note(rng, 1, number, 400).split("\n", 2)[-1]
                    text = "\n\n".join(paragraphs) + f"\n- proposal {number}: one more line\n"
                answer = client.put(API, params={"repo": REPO}, json={"entries": {key: text}})
            if answer.status_code != 202:
                raise SystemExit(f"proposal {number}: {answer.status_code} {answer.text[:300]}")
    finally:
        for client in clients:
            client.close()
    return time.perf_counter() - started


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def signed_in(server: LiveServer, token: str) -> httpx.Client:
    """An httpx client with a web page session for `token`."""
    client = httpx.Client(base_url=server.base_url, timeout=60)
    answer = client.post("/ui/signin", data={"token": token}, headers={"Origin": server.base_url})
    if answer.status_code != 303:
        raise SystemExit(f"sign-in: {answer.status_code} {answer.text[:300]}")
    return client


def measure(
    client: httpx.Client,
    path: str,
    runs: int,
    warmup: int,
    *,
    cold: bool,
    read: Callable[[], object],
) -> tuple[list[float], ...]:
    """Store, server and client times in ms, and the page's size in bytes (one sample).
    `cold`: the inbox's cache of diffs is emptied before each load; `read` is the
    store call the page makes, timed alone just before it."""
    store_ms: list[float] = []
    server_ms: list[float] = []
    client_ms: list[float] = []
    size = 0
    for run in range(warmup + runs):
        if cold:
            CHANGES.clear()
        started = time.perf_counter()
        read()
        stored = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        answer = client.get(path)
        round_trip = (time.perf_counter() - started) * 1000
        if answer.status_code != 200:
            raise SystemExit(f"{path}: {answer.status_code} {answer.text[:300]}")
        size = len(answer.content)
        if run >= warmup:
            store_ms.append(stored)
            server_ms.append(float(answer.headers["server-timing"].split("dur=", 1)[1]))
            client_ms.append(round_trip)
    return store_ms, server_ms, client_ms, [float(size)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=2000)
    parser.add_argument("--proposals", type=int, default=200)
    parser.add_argument("--authors", type=int, default=5)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--seed", type=int, default=28)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memsync-bench-review-") as folder:
        url = sqlite_url(Path(folder) / "memsync.sqlite3")
        settings = Settings(database_url=url, rate_limit_burst=0, max_entries=100_000)
        with run_live_server(settings) as server:
            store = server.store
            texts = make_notes(args.notes, args.seed)
            _, reviewer = issue_token(store, repo_pattern=REPO, name="rita", reviewer=True)
            with server.client(reviewer) as api:
                for body in put_batches(texts):
                    answer = api.put(
                        API,
                        params={"repo": REPO},
                        content=body,
                        headers={"Content-Type": "application/json"},
                    )
                    if not answer.is_success:
                        raise SystemExit(f"seed: {answer.status_code} {answer.text[:300]}")
            store.set_review(REPO, True)
            authors = [server.token(REPO, name=f"author-{n}") for n in range(args.authors)]
            seconds = propose(server, authors, texts, args.proposals, args.seed)
            print(
                f"repo: {args.notes} notes; {args.proposals} proposals by {args.authors} "
                f"authors through the API in {seconds:.1f} s"
            )
            print(
                f"python {platform.python_version()}, sqlalchemy {metadata.version('sqlalchemy')}, "
                f"sqlite {__import__('sqlite3').sqlite_version}; {args.runs} runs each after "
                f"{args.warmup} warm-up\n"
            )
            own = args.proposals // args.authors

            def every() -> object:
                return store.proposals(REPO, texts=True)

            def one() -> object:
                return store.proposals(REPO, person="author-0", texts=True)

            def notes() -> object:
                return store.snapshot(REPO, with_texts=True)

            oldest = store.proposals(REPO, limit=PAGE * ((args.proposals - 1) // PAGE) + 1)
            last = f"/review?before={oldest[-2].id}" if len(oldest) > 1 else "/review"
            pages = [
                (f"inbox: {args.proposals} pending, first load", reviewer, "/review", True, every),
                (f"inbox: {args.proposals} pending, reload", reviewer, "/review", False, every),
                (f"inbox: {args.proposals} pending, last page", reviewer, last, True, every),
                (f"inbox: one author's {own} pending", authors[0], "/review", True, one),
                ("repo page (pending count in the header)", reviewer, "", False, notes),
            ]
            lines = [
                [
                    "page",
                    "read p50",
                    "server p50",
                    "server p99",
                    "client p50",
                    "client p99",
                    "bytes",
                    "aim (server)",
                ]
            ]
            for title, token, suffix, cold, read in pages:
                client = signed_in(server, token)
                try:
                    store_ms, server_ms, client_ms, size = measure(
                        client,
                        f"/ui/repo/{REPO}{suffix}",
                        args.runs,
                        args.warmup,
                        cold=cold,
                        read=read,
                    )
                finally:
                    client.close()
                lines.append(
                    [
                        title,
                        f"{statistics.median(store_ms):.2f}",
                        f"{statistics.median(server_ms):.2f}",
                        f"{percentile(server_ms, 0.99):.2f}",
                        f"{statistics.median(client_ms):.2f}",
                        f"{percentile(client_ms, 0.99):.2f}",
                        f"{int(size[0]):,}",
                        f"< {AIM_MS:.0f} ms" if suffix else "",
                    ]
                )
            print(markdown_table(lines, numeric={1, 2, 3, 4, 5, 6}))
            print("\ntimes in ms")


if __name__ == "__main__":
    main()
