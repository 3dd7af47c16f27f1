"""`memsync setup AGENT`: the command over `agent_setup` (thin: parse, call, render)."""

from __future__ import annotations

import os
import sys

import click

from sync_client.agent_setup import AGENTS


def register(main: click.Group) -> None:
    """Add `memsync setup` to the command group."""
    from sync_client.cli import EXIT_OK, _emit, _notice, global_options, run_safely

    @main.command()
    @click.argument("agent", type=click.Choice(AGENTS))
    @click.option("--mcp", is_flag=True, help="Claude Code: also register the MCP server.")
    @click.option("--uninstall", is_flag=True, help="Remove exactly what setup added.")
    @global_options("json")
    @run_safely
    def setup(agent: str, mcp: bool, uninstall: bool) -> None:
        """Make an agent read and write the team memory (user settings only).

        claude-code: a SessionStart hook that puts the team's index into every session
        (`memsync context`) and a SessionEnd hook that sends what the session wrote
        when no watcher runs; with --mcp also the MCP server `memsync mcp` and its
        allow rule. codex, gemini, cursor: the MCP server. Every other setting is kept,
        a backup is taken first, a file that cannot be parsed is refused (nothing
        changes), and running it twice changes nothing. A repository's own settings are
        never written.

        When the only token is this shell's MEMSYNC_TOKEN, a warning on stderr says that
        an agent started from another terminal does not see it, and that `memsync login`
        saves it (setup still finishes, exit 0).

        \b
        Exit codes:
          0  set up (or already set up), or removed
          1  a file could not be written
          2  a settings file cannot be parsed, or a usage error (nothing changed)
        """
        from sync_client.agent_setup import setup as run_setup

        result = run_setup(agent, os.environ, mcp=mcp, uninstall=uninstall)

        def human() -> None:
            for row in result["files"]:
                what = row["removed"] if uninstall else row["added"]
                if what:
                    verb = "removed" if uninstall else "added"
                    preposition = "from" if uninstall else "to"
                    click.echo(f"{verb} {', '.join(what)} {preposition} {row['path']}")
                    if row["backup"]:
                        click.echo(f"  (the file as it was is saved at {row['backup']})")
                else:
                    state = "nothing of memsync's in" if uninstall else "already set up:"
                    click.echo(f"{state} {row['path']}")
            for note in result["notes"]:
                click.echo(f"note: {note}")
            if not uninstall and agent == "claude-code":
                click.echo(
                    "the next Claude Code session in a repo memsync syncs starts with the "
                    "team's index (`memsync context` shows it)"
                )

        _emit(result, human)
        if result["warning"]:
            _notice(f"warning: {result['warning']}")
        sys.exit(EXIT_OK)
