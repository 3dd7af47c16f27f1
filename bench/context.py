"""Session-start benchmark: `memsync context`, cold process to last byte.

Every Claude Code session start waits for this hook, so what is measured is what the
session waits for: a new `memsync context --hook` process (the installed console
script, Python's start-up included) in a git checkout whose team dir holds a 200-line
`MEMORY.md` (and 200 notes), until its stdout closes. Configured through the
environment (server URL and token; the server is never asked). The everyday case is
the first row: a watcher runs (this process holds the repo's watch lock and wrote its
state file) and the index is the team's (its base and stat-cache row are in the sync
state), after a first run that filled `context-cache.json`. Then the same without that
cache (the configuration resolved as on a checkout's first session), a `--no-pull` row
without a watcher, and the floors: `python -c pass` (the interpreter's start) and `cat`
of the index (reading it at all); `memsync --version` is the click entry point.

Two more rows time the `PostToolUse` hook (`memsync context --tool-use`), which runs
after every Write and Edit of a Claude Code session: recording a write into the team
dir (the JSON Claude Code sends on stdin; the record file is rewritten each time), and
a write elsewhere in the checkout (nothing recorded).

    .venv/bin/python -m bench.context             # 40 runs per row
    .venv/bin/python -m bench.context --runs 10

Prints a Markdown table (median and p95 in milliseconds). Only local files are used.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from bench._table import markdown_table
from sync_client.watch.lock import RepoLock


def _checkout(root: Path) -> tuple[Path, dict[str, str]]:
    home = root / "home"
    repo = root / "src" / "app"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(
        ["git", "remote", "add", "origin", "git@github.com:acme/app.git"], cwd=repo, check=True
    )
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(home / ".state"),
        "MEMSYNC_SERVER": "http://127.0.0.1:9",
        "MEMSYNC_TOKEN": "mst_bench",
    }
    return repo, env


def _fill(repo: Path, env: dict[str, str]) -> tuple[Path, Path]:
    """A 200-line index and 200 notes, synced: (team dir, state dir)."""
    from sync_client.config import resolve
    from sync_client.verdicts import cache_record

    config = resolve(server=None, token=None, repo=None, team_dir=None, cwd=repo, env=env)
    team = config.team_dir
    (team / "notes").mkdir(parents=True)
    lines = ["# Team memory", ""]
    for number in range(198):
        key = f"notes/n{number}.md"
        (team / key).write_text(
            f"---\nname: n{number}\ndescription: fact {number}\n---\n\nFact {number}.\n"
        )
        lines.append(f"- [Note {number}]({key}) — what fact {number} is about, in a few words")
    index = team / "MEMORY.md"
    index.write_bytes(("\n".join(lines) + "\n").encode())
    checksum = "sha256:" + hashlib.sha256(index.read_bytes()).hexdigest()
    info = index.stat()
    config.state_dir.mkdir(parents=True, exist_ok=True)
    state = {
        "bases": {"MEMORY.md": checksum},
        "stat_cache": {
            # Recorded well after the write: not a racy row, as a watcher's sync leaves it.
            "MEMORY.md": cache_record(
                info.st_size,
                info.st_mtime_ns,
                info.st_ino,
                checksum,
                recorded_ns=time.time_ns() + 10**10,
            )
        },
        "last_pull": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (config.state_dir / "state.json").write_text(json.dumps(state))
    return team, config.state_dir


def _watcher_running(state_dir: Path) -> RepoLock:
    """This process plays the watcher: it holds the watch lock and wrote its state."""
    lock = RepoLock(state_dir)
    assert lock.try_acquire()
    (state_dir / "watch.json").write_text(
        json.dumps({"running": True, "pid": os.getpid(), "live": "events", "last_pull": None})
    )
    return lock


class _Row(NamedTuple):
    label: str
    command: list[str]
    stdin: bytes = b""
    before: Callable[[], object] = lambda: None
    after: Callable[[], object] = lambda: None


def _time_rows(rows: list[_Row], cwd: Path, env: dict[str, str], runs: int) -> list[list[float]]:
    """Each row `runs` times, in turn (one run of each row, then the next round), so a
    machine that gets busier for a while slows every row alike."""
    times: list[list[float]] = [[] for _ in rows]
    for _ in range(runs):
        for row, row_times in zip(rows, times, strict=True):
            row.before()
            started = time.perf_counter()
            subprocess.run(
                row.command, cwd=cwd, env=env, input=row.stdin, capture_output=True, check=True
            )
            row_times.append((time.perf_counter() - started) * 1000)
            row.after()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    runs = parser.parse_args().runs
    memsync = str(Path(sys.executable).with_name("memsync"))
    with tempfile.TemporaryDirectory() as folder:
        repo, env = _checkout(Path(folder))
        team, state_dir = _fill(repo, env)
        lock = _watcher_running(state_dir)
        hook_input = json.dumps({"cwd": str(repo), "hook_event_name": "SessionStart"}).encode()
        block = subprocess.run(
            [memsync, "context", "--hook"],
            cwd=repo,
            env=env,
            input=hook_input,
            capture_output=True,
            check=True,
        ).stdout.decode()
        assert "kept current by the memsync watcher" in block, block
        # (the hook rows are checked after the table: their record must exist)
        cache = Path(env["XDG_STATE_HOME"]) / "memsync" / "context-cache.json"
        hook = [memsync, "context", "--hook"]
        tool_use = [memsync, "context", "--tool-use"]

        def wrote(path: Path) -> bytes:
            payload = {
                "session_id": "5e55-10n",
                "cwd": str(repo),
                "hook_event_name": "PostToolUse",
                "tool_name": "Write",
                "tool_input": {"file_path": str(path), "content": "..."},
            }
            return json.dumps(payload).encode()

        rows = [
            _Row("memsync context --hook (watcher running)", hook, hook_input),
            _Row(
                "the same, configuration not cached",
                hook,
                hook_input,
                before=lambda: cache.unlink(missing_ok=True),
            ),
            _Row(
                "memsync context --no-pull (no watcher)",
                [memsync, "context", "--no-pull"],
                before=lock.release,
                after=lock.try_acquire,
            ),
            _Row(
                "memsync context --tool-use (a note of the team dir)",
                tool_use,
                wrote(team / "notes" / "n1.md"),
            ),
            _Row("memsync context --tool-use (a file outside it)", tool_use, wrote(repo / "a.py")),
            _Row("memsync --version (click entry point)", [memsync, "--version"]),
            _Row("python -c pass", [sys.executable, "-c", "pass"]),
            _Row("cat MEMORY.md", ["cat", str(team / "MEMORY.md")]),
        ]
        table = [["command", "median ms", "p95 ms"]]
        for row, times in zip(rows, _time_rows(rows, repo, env, runs), strict=True):
            times.sort()
            p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
            table.append([row.label, f"{statistics.median(times):.0f}", f"{p95:.0f}"])
        recorded = json.loads((state_dir / "agent-writes.json").read_text())
        assert recorded["keys"]["notes/n1.md"]["session"] == "5e55-10n", recorded
    print(f"block: {len(block):,} characters, {block.count(chr(10)):,} lines; {runs} runs per row")
    print(markdown_table(table, numeric={1, 2}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
