"""CLI benchmark: every everyday `memsync` command, whole process, one tree or several.

What a person waits for is a new `memsync` process (the installed console script,
Python's start-up included) until it exits, so that is what is timed, each command in
a git checkout whose team dir (Claude Code's folder for the checkout) holds a
`MEMORY.md` index and its notes, all pushed, with HOME and XDG_* in a temp dir, the
server URL and token in the environment and the repo from the checkout's origin. The rows:

- `--help`                  click's entry point and the command list
- `status`                  nothing changed: a scan, and the server's checksums
- `context`                 the session-start block (the console script's fast path)
- `log`                     the repo's commits, from the server
- `diff`                    nothing differs here: a scan against the bases
- `diff KEY@1..2`           two versions of one note, from the server
- `index`                   the MEMORY.md check
- `doctor`                  every check, the server's included
- `push` (no-op)            nothing changed: no request
- `pull` (no-op)            nothing new: the server's 304

With several trees (`--tree before=/tmp/wt-before/.venv/bin/memsync --tree
after=.venv/bin/memsync`, each a console script of its own checkout and venv) the
trees take turns for each command within each run, in an order that rotates, so a
machine that slows down during the run slows every tree alike. The first two runs of
each command in each tree are untimed (the first writes the bytecode, as an installed
command's first run does, and `context` pulls on its first run) and the second's output
is compared across trees: the `same output` column says whether every tree printed the
same bytes and exit code (the seconds of `doctor`'s clock row aside).

    .venv/bin/python -m bench.cli_commands                  # this tree, 15 runs
    .venv/bin/python -m bench.cli_commands --runs 5 --tree before=... --tree after=...

One server (this tree's, in this process, SQLite in a temp dir) serves every tree. Only
127.0.0.1 is used. Prints a Markdown table of medians in milliseconds; exit status 1
when a command failed.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from bench._table import markdown_table
from sync_server.config import Settings
from sync_server.database_url import sqlite_url
from tests.liveserver import run_live_server

REPO = "acme/app"
EDITED = "notes/n1.md"
# `index` exits 3 when MEMORY.md needs a fix, `doctor` when a check warns: both are
# answers, not failures.
ANSWERED = (0, 3)


class Tree(NamedTuple):
    """One checkout's console script, under a label for the table."""

    label: str
    memsync: str


class Command(NamedTuple):
    label: str
    args: list[str]


COMMANDS = [
    Command("--help", ["--help"]),
    Command("status", ["status"]),
    Command("context", ["context"]),
    Command("log", ["log"]),
    Command("diff", ["diff"]),
    Command("diff KEY@1..2", ["diff", f"{EDITED}@1..2"]),
    Command("index", ["index"]),
    Command("doctor", ["doctor"]),
    Command("push (no-op)", ["push"]),
    Command("pull (no-op)", ["pull"]),
]


def _tree(value: str) -> Tree:
    label, _, path = value.partition("=")
    if not label or not path:
        raise argparse.ArgumentTypeError(f"expected LABEL=PATH, got {value!r}")
    return Tree(label, os.path.abspath(path))


def _checkout(root: Path, server: str, token: str) -> tuple[Path, dict[str, str]]:
    """A git checkout whose origin names the repo, and the environment a user has."""
    home = root / "home"
    repo = root / "src" / "app"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(
        ["git", "remote", "add", "origin", f"git@github.com:{REPO}.git"], cwd=repo, check=True
    )
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(home / ".state"),
        "MEMSYNC_SERVER": server,
        "MEMSYNC_TOKEN": token,
    }
    return repo, env


def _fill(repo: Path, env: dict[str, str], notes: int, memsync: str) -> None:
    """`notes` notes and the index listing them, pushed; then one note edited and pushed,
    so the log has two commits and `EDITED` two versions."""
    from sync_client.config import resolve

    team = resolve(server=None, token=None, repo=None, team_dir=None, cwd=repo, env=env).team_dir
    (team / "notes").mkdir(parents=True)
    lines = ["# Team memory", ""]
    for number in range(notes):
        key = f"notes/n{number}.md"
        (team / key).write_text(
            f"---\nname: n{number}\ndescription: fact {number}\n---\n\nFact {number}.\n"
        )
        lines.append(f"- [Note {number}]({key}) — what fact {number} is about")
    (team / "MEMORY.md").write_text("\n".join(lines) + "\n")
    subprocess.run([memsync, "push"], cwd=repo, env=env, check=True, capture_output=True)
    with (team / EDITED).open("a") as note:
        note.write("\nA second line, from a later session.\n")
    subprocess.run([memsync, "push"], cwd=repo, env=env, check=True, capture_output=True)


def _run(tree: Tree, command: Command, repo: Path, env: dict[str, str]) -> tuple[int, bytes]:
    done = subprocess.run(
        [tree.memsync, *command.args], cwd=repo, env=env, capture_output=True, check=False
    )
    # doctor's clock row counts whole seconds off the server's `Date`: it may differ by one.
    return done.returncode, re.sub(rb"clock: \d+ s", b"clock: N s", done.stdout)


def _timed(tree: Tree, command: Command, repo: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    code = subprocess.run(
        [tree.memsync, *command.args],
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    ).returncode
    elapsed = time.perf_counter() - start
    if code not in ANSWERED:
        raise RuntimeError(f"{tree.label}: memsync {' '.join(command.args)} exited {code}")
    return elapsed * 1000


def measure(
    trees: list[Tree], repo: Path, env: dict[str, str], runs: int
) -> tuple[dict[tuple[str, str], list[float]], dict[str, bool]]:
    """Milliseconds by (command, tree), and whether every tree gave the same output."""
    same: dict[str, bool] = {}
    for command in COMMANDS:
        for tree in trees:
            _run(tree, command, repo, env)  # bytecode, and a first pull (`context`)
    for command in COMMANDS:
        answers = {tree.label: _run(tree, command, repo, env) for tree in trees}
        if any(code not in ANSWERED for code, _ in answers.values()):
            raise RuntimeError(f"memsync {' '.join(command.args)} failed: {answers}")
        same[command.label] = len(set(answers.values())) == 1
        if not same[command.label]:
            shown = {label: (code, out[:300]) for label, (code, out) in answers.items()}
            print(f"{command.label}: the trees differ: {shown}", file=sys.stderr)
    times: dict[tuple[str, str], list[float]] = {}
    for run in range(runs):
        for command in COMMANDS:
            for index in range(len(trees)):
                tree = trees[(index + run) % len(trees)]
                elapsed = _timed(tree, command, repo, env)
                times.setdefault((command.label, tree.label), []).append(elapsed)
    return times, same


def table(
    trees: list[Tree], times: dict[tuple[str, str], list[float]], same: dict[str, bool]
) -> str:
    header = ["command", *(f"{tree.label} ms" for tree in trees)]
    if len(trees) > 1:
        header += [f"{trees[-1].label} vs {trees[0].label}", "same output"]
    lines = [header]
    for command in COMMANDS:
        medians = [statistics.median(times[command.label, tree.label]) for tree in trees]
        line = [command.label, *(f"{value:.0f}" for value in medians)]
        if len(trees) > 1:
            line += [f"{(medians[-1] / medians[0] - 1) * 100:+.0f}%"]
            line += ["yes" if same[command.label] else "no"]
        lines.append(line)
    return markdown_table(lines, numeric=set(range(1, len(trees) + 2)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="timed runs per command and tree")
    parser.add_argument("--notes", type=int, default=200, help="notes in the team dir")
    parser.add_argument(
        "--tree",
        type=_tree,
        action="append",
        metavar="LABEL=MEMSYNC",
        help="a console script to time (repeat to compare; default: this tree's)",
    )
    args = parser.parse_args(argv)
    trees: list[Tree] = args.tree or [Tree("this", str(Path(sys.executable).with_name("memsync")))]
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        settings = Settings(database_url=sqlite_url(root / "memsync.sqlite3"), rate_limit_burst=0)
        with run_live_server(settings) as live:
            repo, env = _checkout(root, live.base_url, live.token(name="bench"))
            _fill(repo, env, args.notes, trees[-1].memsync)
            try:
                times, same = measure(trees, repo, env, args.runs)
            except RuntimeError as error:
                print(f"cli_commands: {error}", file=sys.stderr)
                return 1
    print(
        f"{args.notes} notes and MEMORY.md; median of {args.runs} runs per command and tree; "
        f"{os.cpu_count()} CPUs; Python {sys.version.split()[0]}"
    )
    print(table(trees, times, same))
    return 0


if __name__ == "__main__":
    sys.exit(main())
