"""`memsync mcp` search benchmark: search_notes per call over 2,000 notes.

A temp team dir gets N notes (2,000, the server's default limit of entries per repo),
each with `name` and `description` frontmatter and a body of 80 to 400 words drawn
from a 3,000-word vocabulary with a Zipf-like skew (a few common words, a long tail),
about 1.5 KB each. Their mtimes are set an hour back, as a team's notes are: a file
written within the last 2 s is read again on every call until it is older (the racy
window), which a just-generated corpus would otherwise measure.

Two paths are timed, both as the tool runs them:

- **library**: `NoteCache.search()`: walk the team dir (a stat per file), re-read and
  re-index what changed, then score the notes holding the query's words;
- **tool**: the `search_notes` tool of `build_server()`, called in process through the
  SDK's `FastMCP.call_tool` (adds the thread hop and the result's serialization; the
  stdio framing is not included).

The cold call is the first (every file read and parsed); warm p50/p95 are over Q
queries (50) of one to three words afterwards.

    .venv/bin/python -m bench.mcp_search
    .venv/bin/python -m bench.mcp_search --notes 500 --queries 20
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench._table import markdown_table
from sync_client.config import ClientConfig
from sync_client.mcp_server import build_server
from sync_client.notes import NoteCache

AIM_WARM_MS = 50.0
VOCABULARY = 3_000


def _words(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    seen: set[str] = set()
    while len(seen) < VOCABULARY:
        seen.add("".join(rng.choices(letters, k=rng.randint(3, 10))))
    return sorted(seen)


def _pick(rng: random.Random, words: list[str], count: int) -> list[str]:
    # Zipf-like: index ~ N * u^3 favours the first words.
    return [words[int(len(words) * rng.random() ** 3)] for _ in range(count)]


def make_corpus(team: Path, notes: int, rng: random.Random) -> list[str]:
    """Write `notes` notes into `team`; return the vocabulary."""
    words = _words(rng)
    then = time.time() - 3_600
    for number in range(notes):
        folder = f"topic-{number % 40:02d}"
        name = " ".join(_pick(rng, words, rng.randint(2, 5)))
        description = " ".join(_pick(rng, words, rng.randint(6, 14)))
        lines = [
            " ".join(_pick(rng, words, rng.randint(8, 20))) + "." for _ in range(rng.randint(6, 22))
        ]
        text = f"---\nname: {name}\ndescription: {description}\n---\n\n" + "\n".join(lines) + "\n"
        path = team / folder / f"note-{number:04d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        os.utime(path, (then, then))
    return words


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _timed_library(team: Path, queries: list[str]) -> tuple[float, list[float]]:
    cache = NoteCache(team)
    times = []
    for query in ["cold start", *queries]:
        start = time.perf_counter()
        cache.search(query, 10)
        times.append((time.perf_counter() - start) * 1000)
    return times[0], times[1:]


def _timed_tool(team: Path, queries: list[str]) -> tuple[float, list[float]]:
    config = ClientConfig(
        server="http://127.0.0.1:9",
        token="mst_unused",
        repo="acme/app",
        team_dir=team,
        state_dir=team.parent / "state",
    )
    server = build_server(config)

    async def calls() -> list[float]:
        times = []
        for query in ["cold start", *queries]:
            start = time.perf_counter()
            await server.call_tool("search_notes", {"query": query, "limit": 10})
            times.append((time.perf_counter() - start) * 1000)
        return times

    times = asyncio.run(calls())
    return times[0], times[1:]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its table; exit status 1 when a warm p95 misses."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--notes", type=int, default=2_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--seed", type=int, default=11)
    arguments = parser.parse_args(argv)
    rng = random.Random(arguments.seed)
    with tempfile.TemporaryDirectory(prefix="memsync-bench-mcp-") as root:
        team = Path(root) / "team"
        words = make_corpus(team, arguments.notes, rng)
        size = sum(path.stat().st_size for path in team.rglob("*.md"))
        queries = [" ".join(_pick(rng, words, rng.randint(1, 3))) for _ in range(arguments.queries)]
        results = {
            "library (NoteCache.search)": _timed_library(team, queries),
            "tool (FastMCP.call_tool)": _timed_tool(team, queries),
        }
    print(
        f"{arguments.notes:,} notes, {size / 1e6:.1f} MB; {arguments.queries} warm queries; "
        f"Python {platform.python_version()}, {os.cpu_count()} cores"
    )
    lines = [["path", "cold first call", "warm p50", "warm p95", "warm max"]]
    missed = False
    for label, (cold, warm) in results.items():
        p95 = _percentile(warm, 0.95)
        missed = missed or p95 > AIM_WARM_MS
        lines.append(
            [
                label,
                f"{cold:,.1f} ms",
                f"{statistics.median(warm):.1f} ms",
                f"{p95:.1f} ms",
                f"{max(warm):.1f} ms",
            ]
        )
    print(markdown_table(lines, numeric={1, 2, 3, 4}))
    print(f"aim: warm p95 < {AIM_WARM_MS:.0f} ms: {'missed' if missed else 'met'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
