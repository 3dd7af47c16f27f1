"""The `memsync` console script: `memsync context` first, everything else by click.

`memsync context` runs at every Claude Code session start, which waits for it, so it
must not pay for click, rich or httpx (over 100 ms here). With only its own flags it
goes straight to `context.run`; with anything else (`--help`, global flags) it is the
click command like every other.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Run `memsync` with `sys.argv`."""
    arguments = sys.argv[1:]
    if arguments == ["context", "--tool-use"]:
        # Claude Code's PostToolUse hook, after every write: the quickest path of all.
        import os

        from sync_client.provenance import run_hook

        sys.exit(run_hook(sys.stdin, os.environ))
    if arguments[:1] == ["context"]:
        from sync_client.context import fast, run

        if fast(arguments[1:]):
            sys.exit(run(arguments[1:], stdin=sys.stdin))
    from sync_client.cli import main as cli_main

    cli_main()
