"""`memsync index`, and the index lines every other command prints.

The words for the team index's health live here once: `status`, `push`, `sync`,
`doctor` and `index` print the same lines, and the watcher logs them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

# Lines shown per kind of problem; the rest are counted in one line. `memsync index`
# shows more of each, still a screenful: a 300-line index is not 300 lines of output.
SHOWN_PER_KIND = 3
INDEX_SHOWN_PER_KIND = 20
_KIND_WORDS = {
    "dangling": "index lines that link to missing notes",
    "orphan": "notes no index line lists",
    "no-frontmatter": "notes without name and description",
}


def problem_lines(
    index: dict[str, Any] | None, *, shown_per_kind: int = SHOWN_PER_KIND
) -> list[str]:
    """`index: ...` lines for an index report (`IndexReport.as_json`), a few per kind,
    each with its fix."""
    if not index:
        return []
    lines: list[str] = []
    counts: dict[str, int] = {}
    orphans = [problem for problem in index["problems"] if problem["kind"] == "orphan"]
    if orphans and not index["exists"]:
        # One line, not one per note: with no index at all, every note is unlisted.
        noun = "the note" if len(orphans) == 1 else f"the {len(orphans):,} notes"
        lines.append(
            f"index: there is no MEMORY.md, so Claude Code finds none of {noun} here "
            "(`memsync index --fix` creates it, with a line for each)"
        )
        counts["orphan"] = -len(orphans)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for problem in index["problems"]:
        if counts.get(problem["kind"], 0) >= 0:
            by_kind.setdefault(problem["kind"], []).append(problem)
    # Each kind's first lines, then the count of the rest of that kind, beside them.
    shown = max(shown_per_kind, 0)
    for kind, problems in by_kind.items():
        lines.extend(f"index: {row['detail']} ({row['fix']})" for row in problems[:shown])
        if len(problems) > shown:
            more = len(problems) - shown
            words = _KIND_WORDS.get(kind, kind)
            lines.append(f"index: {more:,} more {words} (`memsync index --json` lists every one)")
    return lines


def blocked_line(row: dict[str, Any] | None, words: str) -> list[str]:
    """The line saying the team's index is not shared, with why (`words`) and the fix."""
    if row is None:
        return []
    return [
        f"index NOT SHARED: {row['key']} is not being sent to the team: {words}; "
        "teammates keep the team's older index until it can be pushed"
    ]


def _team_dir() -> Path:
    from sync_client.cli import _options
    from sync_client.config import resolve_options_parts

    parts = resolve_options_parts(_options(), cwd=Path.cwd(), env=os.environ)
    if isinstance(parts.team_dir, Exception):
        raise parts.team_dir
    return parts.team_dir


def register(main: click.Group) -> None:
    """Add `memsync index` to the command group."""
    from sync_client.cli import EXIT_NEEDS_USER, EXIT_OK, _emit, global_options, run_safely

    @main.command()
    @click.option(
        "--fix",
        is_flag=True,
        help="Add a line for each unlisted note and remove lines whose note is gone.",
    )
    @global_options("repo", "dir", "json")
    @run_safely
    def index(fix: bool) -> None:
        """Check the team's MEMORY.md as Claude Code reads it (and fix it).

        Shows the first 20 problems of each kind and counts the rest (--json lists
        every one).

        Reports an index longer than Claude Code loads (200 lines, 25,000 characters),
        lines that link to a note that does not exist, notes no line lists, and notes
        without the `name` and `description` frontmatter Claude Code recalls them by.
        With --fix, adds `- [name](path) — description` for each unlisted note at the
        end and removes lines whose every link is gone; every other line is kept as it
        is. The fix is an ordinary edit: the next push (or the watcher) sends it.

        \b
        Exit codes:
          0  the index is healthy (after --fix: nothing is left to fix by hand)
          1  failed (the team dir cannot be read or written)
          2  usage or configuration error
          3  problems that need you (each line says the fix)
        """
        from sync_client import team_index

        team_dir = _team_dir()
        scanned = team_index.scan_alone(team_dir)
        fixed: dict[str, Any] | None = None
        if fix:
            fixed = team_index.fix(team_dir, scanned)
            scanned = team_index.scan_alone(team_dir)
        report = team_index.health(team_dir, scanned).as_json()
        result = {"team_dir": str(team_dir), **report, "fixed": fixed}

        def human() -> None:
            if fixed is not None:
                for key in fixed["added"]:
                    click.echo(f"added: a line for {key} to MEMORY.md")
                for row in fixed["removed"]:
                    click.echo(
                        f"removed: {row['index']} line {row['line']} (it linked to "
                        f"{row['target']}, which does not exist)"
                    )
                if not fixed["changed"]:
                    click.echo("nothing to fix")
            for line in problem_lines(report, shown_per_kind=INDEX_SHOWN_PER_KIND):
                click.echo(line)
            if not report["problems"]:
                load = report["claude_code"]
                if load is None:
                    click.echo("no MEMORY.md and no notes: nothing to check")
                else:
                    click.echo(
                        f"MEMORY.md is healthy: {load['lines']:,} lines, every note listed, "
                        "Claude Code loads all of it"
                    )

        _emit(result, human)
        sys.exit(EXIT_NEEDS_USER if report["problems"] else EXIT_OK)
