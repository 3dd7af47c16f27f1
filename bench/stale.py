"""Freshness benchmark: `memsync stale` over 2,000 notes in a repository of 5,000 commits.

The repository is made with `git fast-import` (fixed author and dates, one to three of
500 files changed per commit, so every file has a long history). Each of the 2,000 notes
cites three files, one of them by a line range. When each note was written comes in
both ways the client knows: half have a record (`written-at.json`, at one of 200
commits), half only their mtime, spread over the whole history, so the check compares
from many distinct commits (the costly case: one diff per distinct commit, all in one
`git diff-tree --stdin`).

Rows: `memsync stale --json` as a person runs it (a new process, Python's start
included); `freshness.check` in-process; and `stale_notes.stale_kinds_cached` once its cache is
filled (what `memsync status` and the session-start block pay while HEAD and the notes
are unchanged).

    .venv/bin/python -m bench.stale             # 7 runs per row
    .venv/bin/python -m bench.stale --runs 3

Prints a Markdown table (median and worst in milliseconds) and how many notes are stale.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench._table import markdown_table
from memsync_protocol.checksums import entry_checksum
from sync_client.freshness import report as freshness
from sync_client.freshness import stale_notes

COMMITS = 5_000
FILES = 500
NOTES = 2_000
RECORDED_COMMITS = 200
LINES = 60
START = 1_700_000_000  # 2023-11-14
STEP = 3_600  # an hour between commits


def _history(checkout: Path) -> None:
    """`COMMITS` commits over `FILES` files, through one `git fast-import`."""
    generator = random.Random(29)
    contents = [[f"value_{n} = {n}" for n in range(LINES)] for _ in range(FILES)]
    chunks: list[bytes] = []

    def data(payload: bytes) -> None:
        chunks.append(b"data %d\n" % len(payload) + payload + b"\n")

    for number in range(COMMITS):
        stamp = START + number * STEP
        chunks.append(b"commit refs/heads/main\n")
        chunks.append(b"committer Bench <bench@example.com> %d +0000\n" % stamp)
        data(b"change %d" % number)  # (each commit continues the branch's last one)
        touched = range(FILES) if number == 0 else generator.sample(range(FILES), 3)
        for index in touched:
            if number:
                line = generator.randrange(LINES)
                contents[index][line] = f"value_{line} = {number}"
            text = ("\n".join(contents[index]) + "\n").encode()
            chunks.append(b"M 100644 inline src/mod%03d.py\n" % index)
            data(text)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=checkout, check=True)
    subprocess.run(
        ["git", "fast-import", "--quiet"], cwd=checkout, input=b"".join(chunks), check=True
    )
    subprocess.run(["git", "reset", "-q", "--hard", "main"], cwd=checkout, check=True)


def _notes(checkout: Path, team: Path, state_dir: Path) -> None:
    """`NOTES` notes citing three files each; half recorded at a commit, half by mtime."""
    generator = random.Random(2029)
    shas = subprocess.run(
        ["git", "rev-list", "main"], cwd=checkout, capture_output=True, text=True, check=True
    ).stdout.split()
    recorded_at = generator.sample(shas, RECORDED_COMMITS)
    records: dict[str, dict[str, object]] = {}
    (team / "notes").mkdir(parents=True)
    for number in range(NOTES):
        first, second, third = generator.sample(range(FILES), 3)
        line = generator.randrange(1, LINES - 5)
        text = (
            f"---\nname: note {number}\ndescription: fact {number}\n---\n\n"
            f"The value lives in `src/mod{first:03d}.py:{line}-{line + 3}`; it is read by "
            f"`src/mod{second:03d}.py` and written by [the writer](src/mod{third:03d}.py).\n"
        )
        key = f"notes/n{number:04d}.md"
        path = team / key
        path.write_text(text)
        if number % 2:
            records[key] = {
                "checksum": entry_checksum(text),
                "commit": recorded_at[number % RECORDED_COMMITS],
                "at": START,
            }
        else:
            written = START + generator.randrange(COMMITS) * STEP
            os.utime(path, (written, written))
    data = {"checkout": str(checkout), "notes": records}
    (state_dir / freshness.RECORD_FILE).write_text(json.dumps(data))


def _timed(action: Callable[[], object], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    memsync = str(Path(sys.executable).with_name("memsync"))
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        checkout, team, state_dir = root / "app", root / "team", root / "state"
        for directory in (checkout, team, state_dir):
            directory.mkdir()
        made = time.perf_counter()
        _history(checkout)
        _notes(checkout, team, state_dir)
        made = time.perf_counter() - made
        env = {**os.environ, "MEMSYNC_DIR": str(team)}
        env.pop("MEMSYNC_SERVER", None)

        def command() -> None:
            done = subprocess.run(
                [memsync, "stale", "--json"], cwd=checkout, env=env, capture_output=True
            )
            assert done.returncode in (0, 3), done.stderr

        report = freshness.check(checkout, team, state_dir)
        stale_notes.stale_kinds_cached(checkout, team, state_dir)
        rows = [
            ("memsync stale --json (new process)", _timed(command, runs)),
            (
                "freshness.check (in-process)",
                _timed(lambda: freshness.check(checkout, team, state_dir), runs),
            ),
            (
                "stale_kinds_cached, cache filled (status, session start)",
                _timed(lambda: stale_notes.stale_kinds_cached(checkout, team, state_dir), runs),
            ),
        ]
    table = [["what", "median ms", "worst ms"]]
    for label, times in rows:
        table.append([label, f"{statistics.median(times):,.0f}", f"{max(times):,.0f}"])
    bases = len({note.base for note in report.notes})
    print(
        f"{NOTES:,} notes citing 3 files each, {COMMITS:,} commits over {FILES} files "
        f"(made in {made:.1f} s); {len(report.stale):,} stale, compared from {bases:,} "
        f"distinct commits; {runs} runs per row"
    )
    print(markdown_table(table, numeric={1, 2}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
