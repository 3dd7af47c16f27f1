"""Session-start benchmark: `memsync context`, cold process to last byte.

Every Claude Code session start waits for this hook, so what is measured is what the
session waits for: a new `memsync context --hook` process (the installed console
script, Python's start-up included) in a git checkout whose team dir holds a 200-line
`MEMORY.md` (and 200 notes), until its stdout closes. Configured through the
environment (server URL and token; the server is never asked: a row with a watcher
that reads as running, which is the everyday case, and a `--no-pull` row). For
comparison, `memsync --version` (the click entry point) and a bare `python -c pass`.

    .venv/bin/python -m bench.context             # 40 runs per row
    .venv/bin/python -m bench.context --runs 10

Prints a Markdown table (median and p95 in milliseconds). Only local files are used.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._table import markdown_table


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


def _fill(repo: Path, env: dict[str, str]) -> Path:
    from sync_client.config import resolve

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
    (team / "MEMORY.md").write_text("\n".join(lines) + "\n")
    # A watcher that reads as running and live: the hook then reads local files only.
    config.state_dir.mkdir(parents=True, exist_ok=True)
    (config.state_dir / "watch.json").write_text(
        json.dumps({"running": True, "pid": os.getpid(), "live": "events", "last_pull": None})
    )
    return team


def _time(
    command: list[str], cwd: Path, env: dict[str, str], runs: int, stdin: bytes
) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, cwd=cwd, env=env, input=stdin, capture_output=True, check=True)
        times.append((time.perf_counter() - started) * 1000)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    runs = parser.parse_args().runs
    memsync = str(Path(sys.executable).with_name("memsync"))
    with tempfile.TemporaryDirectory() as folder:
        repo, env = _checkout(Path(folder))
        _fill(repo, env)
        hook_input = json.dumps({"cwd": str(repo), "hook_event_name": "SessionStart"}).encode()
        block = subprocess.run(
            [memsync, "context", "--hook"],
            cwd=repo,
            env=env,
            input=hook_input,
            capture_output=True,
            check=True,
        ).stdout.decode()
        rows = [
            (
                "memsync context --hook (watcher running)",
                [memsync, "context", "--hook"],
                hook_input,
            ),
            ("memsync context --no-pull (no watcher file)", [memsync, "context", "--no-pull"], b""),
            ("memsync --version (click entry point)", [memsync, "--version"], b""),
            ("python -c pass", [sys.executable, "-c", "pass"], b""),
        ]
        table = [["command", "median ms", "p95 ms"]]
        for label, command, stdin in rows:
            if "no watcher" in label:
                for path in (Path(env["XDG_STATE_HOME"])).rglob("watch.json"):
                    path.unlink()
            times = sorted(_time(command, repo, env, runs, stdin))
            p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
            table.append([label, f"{statistics.median(times):.0f}", f"{p95:.0f}"])
    print(f"block: {len(block):,} characters, {block.count(chr(10)):,} lines; {runs} runs per row")
    print(markdown_table(table, numeric={1, 2}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
