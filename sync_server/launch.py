"""The `memsync-server` console script: the server, or one line on how to install it.

`pip install memsync` installs this script with the client, but not the server's stack
(the `server` extra). Without that stack the script says so in one line, exit code 2,
instead of a traceback. Standard library only until the stack is known to be there.
"""

from __future__ import annotations

import sys

# Top-level modules of the `server` extra in pyproject.toml (and what they pull in).
SERVER_MODULES = frozenset(
    {
        "alembic",
        "fastapi",
        "fastapi_offline",
        "itsdangerous",
        "jinja2",
        "markdown_it",
        "nh3",
        "prometheus_client",
        "psycopg",
        "pydantic",
        "pydantic_settings",
        "sqlalchemy",
        "starlette",
        "uvicorn",
    }
)
NOT_INSTALLED = "memsync-server: the server is not installed; pip install 'memsync[server]'"
EXIT_USAGE = 2


def main() -> None:
    """Run `sync_server.cli:main`, or explain how to install the server when it is missing."""
    try:
        from sync_server.cli import main as server_main
    except ImportError as error:
        # Only a missing server library means "not installed"; any other import error is
        # a bug and keeps its traceback.
        if (error.name or "").partition(".")[0] not in SERVER_MODULES:
            raise
        print(NOT_INSTALLED, file=sys.stderr)
        sys.exit(EXIT_USAGE)
    server_main()
