"""`memsync-server` operator commands: wall time of one run, as a shell sees it.

Each command runs as its own process (the venv's `memsync-server` script) against a
migrated SQLite database in a temp dir, once to warm up and then `--runs` times (11);
the table gives the median and the fastest run. Two floors for reference: an empty
Python, and importing the two libraries the token commands no longer need on SQLite
(SQLAlchemy, pydantic-settings).

    .venv/bin/python -m bench.server_cli
    .venv/bin/python -m bench.server_cli --source /tmp/memsync-old   # another checkout
    .venv/bin/python -m bench.server_cli --database-url postgresql+psycopg://...
    .venv/bin/python -m bench.server_cli --cached-bytecode

`--source` puts that checkout's code first on PYTHONPATH, so an older commit can be
measured with this venv (`git worktree add /tmp/memsync-old COMMIT`). `--database-url`
measures against that database instead (migrated first; the tokens it makes, named
`n<run><i>-*`, are left in it). With PYTHONDONTWRITEBYTECODE set, as in some sandboxes,
every run compiles the checkout's modules again; `--cached-bytecode` keeps their
bytecode (in a temp PYTHONPYCACHEPREFIX), as an installed package has it.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench._table import markdown_table


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        command, env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr.strip()}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--source", type=Path, help="measure the code of this checkout")
    parser.add_argument("--database-url", help="measure against this database (default: SQLite)")
    parser.add_argument(
        "--cached-bytecode", action="store_true", help="keep compiled modules between runs"
    )
    args = parser.parse_args()
    script = str(Path(sys.executable).with_name("memsync-server"))
    with tempfile.TemporaryDirectory(prefix="memsync-bench-cli-") as folder:
        url = args.database_url or f"sqlite:///{folder}/memsync.sqlite3"
        env = {**os.environ, "MEMSYNC_DATABASE_URL": url}
        if args.source is not None:
            env["PYTHONPATH"] = str(args.source.resolve())
        if args.cached_bytecode:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = f"{folder}/pycache"
        timed([script, "migrate"], env)
        counter = iter(range(1_000_000))
        run = secrets.token_hex(3)  # names no earlier run on the same database has taken

        def create(*names: str) -> list[str]:
            flags = [f"--name=n{run}{next(counter)}-{name}" for name in names]
            return [script, "token", "create", "--repo", "acme/*", *flags]

        cases: list[tuple[str, Callable[[], list[str]]]] = [
            ("python -c pass (floor)", lambda: [sys.executable, "-c", "pass"]),
            (
                "import sqlalchemy, pydantic_settings (floor)",
                lambda: [sys.executable, "-c", "import sqlalchemy, pydantic_settings"],
            ),
            ("memsync-server --help", lambda: [script, "--help"]),
            ("token create --name X", lambda: create("a")),
            ("token create, 3 names", lambda: create("a", "b", "c")),
            ("token list", lambda: [script, "token", "list"]),
            ("token list --json", lambda: [script, "token", "list", "--json"]),
        ]
        rows = [["command", "median s", "fastest s"]]
        for label, make in cases:
            try:
                timed(make(), env)  # warm-up: the page cache, and bytecode when kept
                times = [timed(make(), env) for _ in range(args.runs)]
            except SystemExit as failure:  # e.g. several names on an older checkout
                rows.append([label, "n/a", str(failure)[:40]])
                continue
            rows.append([label, f"{statistics.median(times):.3f}", f"{min(times):.3f}"])
    print(markdown_table(rows, numeric={1, 2}))


if __name__ == "__main__":
    main()
