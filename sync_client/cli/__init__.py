"""`memsync`: the client command line. Thin: parse, call the library, render.

Global options (`--server`, `--token`, `--repo`, `--dir`, `--json`) are accepted before
or after the subcommand. Exit codes: 0 done; 1 failed (network, server, auth); 2 usage
or configuration error; 3 done but something needs the user (a conflict, a file
skipped for a secret, its size, its encoding, its name or text, or a file/folder
clash; a service `watch --install` wrote but could not start); 130 interrupted.
Errors are one readable line on stderr; with `--json`, stdout also gets
`{"error": {"type", "message", ...}}` (`errors.MemsyncError.as_json`).
Retry notices and progress bars are for a person: on a terminal only, never with
`--json`.

This module is the group (`main`) and its help; the commands are in one module per
group (`sync`, `history`, `index`, `agents`, `watch`, `snapshot`, `repo`, `review`,
`stale`, `verify`), each over the
shared plumbing in `_common` and never over each other (tests/unit/test_cli_package.py).
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import click

from sync_client.cli._common import (
    EXIT_INTERRUPTED,
    EXIT_PIPE_CLOSED,
    _as_json,
    _HelpGroup,
    _notice,
    _say,
    global_options,
)

if TYPE_CHECKING:
    from sync_client.errors import TransientError


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


# `memsync --help` lists the commands in the order a person meets them; a command not
# named here comes last, alphabetically.
COMMAND_ORDER = (
    "login",
    "logout",
    "doctor",
    "pull",
    "push",
    "sync",
    "status",
    "stale",
    "verify",
    "diff",
    "conflicts",
    "resolve",
    "log",
    "show",
    "restore",
    "rm",
    "review",
    "index",
    "context",
    "setup",
    "mcp",
    "enable",
    "disable",
    "watch",
    "snapshot",
    "scan",
)


def _seconds(delay: float) -> str:
    """`2`, `0.6`: a wait as a person reads it."""
    return f"{delay:.0f}" if delay >= 10 else f"{delay:.1f}".removesuffix(".0")


def _retry_notice(error: TransientError, delay: float, attempt: int, attempts: int) -> None:
    """`memsync: server unreachable, retrying in 2 s (2/4)`, for a person watching."""
    if not _as_json():
        _notice(f"{error.retry_words()}, retrying in {_seconds(delay)} s ({attempt}/{attempts})")


class _Memsync(_HelpGroup):
    """The command group, ending as Unix tools do on Ctrl-C and on a closed pipe, and
    saying so on a terminal when a request is retried."""

    def invoke(self, ctx: click.Context) -> Any:
        # httpx's package imports its own command line (`httpx._main`: rich, pygments,
        # some 40 ms) whenever those are installed; memsync never runs it, so it is not
        # loaded here (httpx then defines a stand-in `httpx.main`). No effect once httpx
        # is imported.
        sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
        from sync_client.retries import retry_notices

        notices = retry_notices(_retry_notice) if sys.stderr.isatty() else nullcontext()
        try:
            try:
                with notices:
                    return super().invoke(ctx)
            finally:
                sys.stdout.flush()
        except BrokenPipeError:
            # `memsync status | head -1`: the reader has all it wants; end quietly.
            _silence_stdout()
            ctx.exit(EXIT_PIPE_CLOSED)
        except KeyboardInterrupt:
            # Outside a transfer (those say what they did: `errors.Interrupted`).
            if isinstance(ctx.obj, dict) and ctx.obj.get("as_json"):
                failure = {"type": "interrupted", "message": "interrupted"}
                click.echo(json.dumps({"error": failure}))
            _say("memsync: interrupted", err=True)
            ctx.exit(EXIT_INTERRUPTED)


_EXAMPLES = """\b
Examples:
  memsync login --server https://memsync.example.com
  memsync doctor                      check the setup, one line each
  memsync sync                        pull teammates' edits, push yours
  memsync status                      what differs, what is skipped and why
  memsync diff notes/db.md            your edit of one note
  memsync resolve notes/db.md --mine  settle a conflict, keeping your text
  memsync enable                      let the watcher serve this repo
  memsync watch --install             and start it at every login
"""


@click.group(
    cls=_Memsync,
    order=COMMAND_ORDER,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=_EXAMPLES,
)
@click.version_option(package_name="memsync", prog_name="memsync")
@global_options
def main() -> None:
    """Keep a team's shared agent memory in sync.

    memsync syncs the team dir (by default Claude Code's team memory folder of this git
    checkout) with the team's server, one file at a time and git-like: a teammate's
    edit is never overwritten unseen. Options given before the command apply to it.

    A KEY is a file's path relative to the team dir, with `/` between folders, e.g.
    `notes/db.md`.

    Hidden files, editor leftovers and new files `.memsyncignore` (gitignore syntax, in
    the team dir) lists are not pushed. Each command's --help lists its exit codes: 0
    done, 1 failed, 2 usage or configuration error, 3 done but something needs you;
    130 interrupted (Ctrl-C), 141 the reader closed the pipe.
    """


# Each command group's module adds its commands; they share only `_common`.
from sync_client.cli import (  # noqa: E402
    agents,
    history,
    index,
    repo,
    review,
    snapshot,
    stale,
    sync,
    verify,
    watch,
)

for _group in (agents, history, index, repo, review, snapshot, stale, sync, verify, watch):
    for _command in _group.COMMANDS:
        main.add_command(_command)
