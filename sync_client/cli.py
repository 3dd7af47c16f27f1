"""`memsync`: the client command line (only `scan` so far; sync commands follow).

Exit codes: 0 done and clean, 1 failed, 2 usage or configuration error, 3 done but
something needs the user (here: a secret was found).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NEEDS_USER = 3


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="memsync", prog_name="memsync")
def main() -> None:
    """Keep a team's shared agent memory in sync."""


@main.command()
@click.argument(
    "paths",
    nargs=-1,
    required=True,
    type=click.Path(exists=True, path_type=Path),
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of findings.")
def scan(paths: tuple[Path, ...], as_json: bool) -> None:
    """Look for credentials in files or folders; never prints a secret's value.

    Exit 0 when clean, 3 when something is found, 2 on usage errors.
    """
    from scanner import scan_path

    rows: list[dict[str, object]] = []
    try:
        for path in paths:
            for file, finding in scan_path(path):
                rows.append(
                    {
                        "path": str(file),
                        "line": finding.line,
                        "rule": finding.rule,
                        "label": finding.label,
                    }
                )
    except OSError as error:
        click.echo(f"memsync: cannot read {error.filename}: {error.strerror}", err=True)
        sys.exit(EXIT_FAILED)
    if as_json:
        click.echo(json.dumps(rows, ensure_ascii=False))
    elif rows:
        from rich.console import Console
        from rich.table import Table

        table = Table("path", "line", "secret", title=f"{len(rows)} secret(s) found")
        for row in rows:
            table.add_row(str(row["path"]), str(row["line"]), str(row["label"]))
        Console().print(table)
    else:
        click.echo("no secrets found")
    sys.exit(EXIT_NEEDS_USER if rows else 0)
