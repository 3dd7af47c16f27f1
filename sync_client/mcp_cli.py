"""`memsync mcp`: serve the team dir to an agent over MCP (stdio).

The server and its SDK are loaded only when the command runs, so every other command
starts as fast as before (tests/unit/test_imports.py).
"""

from __future__ import annotations

import click


def register(main: click.Group) -> None:
    """Add `memsync mcp` to the command group."""
    from sync_client.cli import _config, _timeout, global_options, run_safely

    @main.command()
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
          0  the client closed the connection
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
