"""The commands an agent meets memsync by: `setup AGENT` (over `agent_setup`), `mcp` and
`context` (thin: parse, call, render).

The MCP server and its SDK are loaded only when `memsync mcp` runs, so every other command
starts as fast as before (tests/unit/test_imports.py).
"""

from __future__ import annotations

import os
import sys

import click

from sync_client.agent_hooks import DEFAULT_AGENT, SHAPES
from sync_client.agent_setup import AGENTS
from sync_client.cli._common import (
    EXIT_OK,
    _config,
    _emit,
    _notice,
    _say,
    _timeout,
    global_options,
    run_safely,
)


@click.command()
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
    allow rule. codex: the same two hooks in ~/.codex/hooks.json (Codex runs them
    once you trust them in its /hooks) and the MCP server, through which a Codex
    session writes notes. qwen: the same two hooks and the MCP server (its team dir is
    Qwen Code's own folder when Claude Code has no memsync hook). gemini: the same two
    hooks and the MCP server, trusted (its tools run unprompted), in
    ~/.gemini/settings.json; Gemini CLI runs them only in a folder you trust, which
    setup never does for you. cursor: the MCP server. Every other setting is kept,
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
                _say(f"{verb} {', '.join(what)} {preposition} {row['path']}")
                if row["backup"]:
                    _say(f"  (the file as it was is saved at {row['backup']})")
            else:
                state = "nothing of memsync's in" if uninstall else "already set up:"
                _say(f"{state} {row['path']}")
        for note in result["notes"]:
            _say(f"note: {note}")
        if result["next_session"]:
            _say(result["next_session"])

    _emit(result, human)
    if result["warning"]:
        _notice(f"warning: {result['warning']}")
    sys.exit(EXIT_OK)


@click.command()
@global_options("server", "repo", "dir")
@run_safely
def mcp() -> None:
    """Serve the team's memory to an AI agent over MCP (stdio).

    Serves the team dir of the repo of the current directory (or --repo, --dir,
    --server) with five tools: memory_index, read_note, search_notes, write_note
    and note_history. write_note applies every rule a push does (name, text, size,
    secrets) before it writes anything, and a refused write returns its reason;
    an accepted one is synced by the running watcher, or pushed at once. Register
    it with an agent as the command `memsync mcp`, e.g.
    `claude mcp add memsync -- memsync mcp`.

    \b
    Exit codes:
      0  the client closed the connection (stdin ended), or Ctrl-C
      1  failed
      2  usage or configuration error (no server or token, no repo)
    """
    config = _config()
    timeout = _timeout()
    import importlib.util

    if importlib.util.find_spec("mcp") is None:
        from sync_client.errors import ConfigError

        raise ConfigError("the MCP server needs the MCP SDK: pip install 'memsync[mcp]'")
    from sync_client.mcp_server import serve

    serve(config, timeout=timeout)


@click.command()
@click.option("--hook", is_flag=True, help="Run as an agent's SessionStart hook (reads its JSON).")
@click.option(
    "--session-end", is_flag=True, help="Run as the SessionEnd hook: push in the background."
)
@click.option("--no-pull", is_flag=True, help="Do not pull first, even without a watcher.")
@click.option(
    "--agent",
    type=click.Choice(tuple(SHAPES)),
    default=DEFAULT_AGENT,
    show_default=True,
    help="Fit the block to this agent's limit (with --hook: in its output format).",
)
def context(hook: bool, session_end: bool, no_pull: bool, agent: str) -> None:
    """Print the team memory block a Claude Code session starts with.

    For the repo of the current directory: that this is the team's shared memory, the
    team dir, short rules for the agent, how fresh the local copy is, then the team
    MEMORY.md, cut on a line boundary to fit 10,000 characters (saying how many lines
    were left out); with --agent codex, 10,000 bytes, and with --hook as Codex's
    JSON; with --agent gemini and --hook, as Gemini CLI's JSON. Without a running
    watcher it pulls first, for at most a second. Not set up for memsync: prints
    nothing. `memsync setup claude-code` (or codex, gemini) installs it as a hook.

    \b
    Exit codes:
      0  printed, or nothing to print (a problem is one line on stderr: Claude Code
         throws away the output of a hook that fails)
      2  usage error (an unknown option)
    """
    from sync_client.context import run

    arguments = [
        flag
        for flag, given in (
            ("--hook", hook),
            ("--session-end", session_end),
            ("--no-pull", no_pull),
        )
        if given
    ]
    arguments += ["--agent", agent] if agent != DEFAULT_AGENT else []
    sys.exit(run(arguments, stdin=sys.stdin if hook or session_end else None))


COMMANDS = (setup, mcp, context)
