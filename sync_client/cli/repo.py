"""`memsync login`, `logout`, `doctor` and `scan`: the setup of this machine, and its check."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from sync_client.cli._common import (
    EXIT_FAILED,
    EXIT_NEEDS_USER,
    EXIT_OK,
    _as_json,
    _emit,
    _options,
    _say,
    global_options,
    run_safely,
    visible,
)


def _login_value(given: str | None, prompt: str, missing: str, *, hide_input: bool) -> str:
    """A login value: the one given, else asked on a terminal, else exit 2 (no prompt
    without a terminal: getpass would read the pipe and warn that it cannot hide it)."""
    from sync_client.errors import ConfigError

    if given:
        return given
    if not sys.stdin.isatty():
        raise ConfigError(missing)
    # On stderr, so `memsync login --json` still prints only its object on stdout.
    value: str = click.prompt(prompt, hide_input=hide_input, err=True)
    return value


# How long a piped `login` without --token-stdin waits for the token to arrive on
# stdin: a stdin nobody writes to (a script's inherited pipe) never holds it up longer.
STDIN_TOKEN_WAIT_SECONDS = 2.0


def _token_from_stdin(wait: float | None) -> str | None:
    """The first non-blank line of stdin (`echo mst_... | memsync login`), None when
    stdin ends without one or, when `wait` is given, nothing arrives within `wait`
    seconds. Only that line is read: a writer that keeps the pipe open is no hang."""
    if wait is not None:
        import select

        try:
            ready, _, _ = select.select([sys.stdin], [], [], wait)
        except (OSError, ValueError):
            ready = [sys.stdin]  # not a descriptor select takes: read it as it is
        if not ready:
            return None
    while True:
        line = sys.stdin.readline()
        if not line:
            return None
        if line.strip():
            return line


def _login_lines(result: dict[str, Any], token_words: str | None) -> None:
    repo = result["repo"]
    if token_words is not None:
        _say(token_words)
    if repo is not None and repo["covered"] is not None:
        this = f"this repo, {repo['name']} (from {repo['source']}),"
        if repo["covered"]:
            _say(f"{this} is covered")
        else:
            _say(
                f"note: {this} is not covered by this token: ask the server's operator"
                f" for one that reaches {repo['name']}"
            )
    if result["note"]:
        _say(f"note: {result['note']}")
    saved = f"saved credentials for {result['server']} to {result['credentials']}"
    if not result["verified"]:
        saved += " (not checked with the server: --no-verify; `memsync doctor` checks them)"
    _say(saved)


@click.command()
@click.option("--no-verify", is_flag=True, help="Save without asking the server (offline setup).")
@click.option(
    "--token-stdin",
    is_flag=True,
    help="Read the token from stdin (`pass show memsync | memsync login --token-stdin`).",
)
@global_options("server", "token", "repo", "json")
@run_safely
def login(no_verify: bool, token_stdin: bool) -> None:
    """Check a server URL and token with the server, then save them for every command.

    Asks for the URL and the token on a terminal when they are not given. A token
    piped on stdin is read (`echo mst_... | memsync login --server URL`; --token-stdin
    waits for it as long as it takes, without it 2 s). They go to the credentials file
    in your config dir (mode 0600); nothing is saved when a check fails. --repo names
    the repo whose coverage to report (default: this checkout's).

    \b
    Exit codes:
      0  saved (a note says when the token does not reach this repo)
      1  a check failed: the server is unreachable, not memsync, or refused the token
      2  usage or configuration error (a mistyped token, no URL or token without a terminal)
    """
    import warnings

    from sync_client.config import normalize_server, resolve_server
    from sync_client.doctor import describe_token
    from sync_client.errors import ConfigError, MemsyncError
    from sync_client.login import login as login_now

    options = _options()
    # A Python warning (getpass, httpx, ssl) is never the user's business here, even
    # under PYTHONWARNINGS=error: it would print a traceback instead of the answer.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # A URL pasted with a space or newline around it is still that URL.
        given_server = (options.get("server") or "").strip() or None
        chosen = resolve_server(given_server, os.environ)
        if chosen is not None:
            server = chosen[0]
        else:
            typed = _login_value(
                None,
                "memsync server URL",
                "no server URL: give --server URL (or set MEMSYNC_SERVER)",
                hide_input=False,
            )
            server = normalize_server(typed.strip(), "server URL")
        given_token = options.get("token") or os.environ.get("MEMSYNC_TOKEN")
        if token_stdin and options.get("token"):
            raise ConfigError("give the token once: --token or --token-stdin, not both")
        if (token_stdin or not given_token) and not sys.stdin.isatty():
            given_token = _token_from_stdin(None if token_stdin else STDIN_TOKEN_WAIT_SECONDS)
            if given_token is None and token_stdin:
                raise ConfigError("--token-stdin: stdin ended without a token")
        elif token_stdin:
            given_token = None  # a terminal: asked for without echo, never read as typed
        token = _login_value(
            given_token,
            "token",
            "no token: give --token mst_..., pipe it on stdin (--token-stdin) or set MEMSYNC_TOKEN",
            hide_input=True,
        )
        try:
            result = login_now(
                server=server,
                token=token,
                repo=options.get("repo"),
                cwd=Path.cwd(),
                env=os.environ,
                verify=not no_verify,
            )
        except MemsyncError as error:
            _say(f"memsync: {error} (nothing was saved)", err=True)
            sys.exit(error.exit_code)
    payload = result.as_json()
    token_words = None if result.token is None else describe_token(result.token)
    _emit(payload, lambda: _login_lines(payload, token_words))


@click.command()
@global_options("json")
@run_safely
def logout() -> None:
    """Remove the saved server URL and token (the credentials file).

    \b
    Exit codes:
      0  removed, or there was nothing to remove
      1  failed (the file cannot be removed)
      2  usage error
    """
    from sync_client.config import CREDENTIALS_FILE, config_home, remove_credentials

    home = config_home(os.environ)
    removed = remove_credentials(home)
    note = (
        "MEMSYNC_TOKEN is still set in this environment, and commands use it: unset it too"
        if os.environ.get("MEMSYNC_TOKEN")
        else None
    )
    payload = {
        "removed": None if removed is None else str(removed[0]),
        "server": None if removed is None else removed[1],
        "note": note,
    }

    def human() -> None:
        if removed is None:
            _say(f"nothing to remove: no saved credentials at {home / CREDENTIALS_FILE}")
        else:
            path, server = removed
            _say(f"removed the saved credentials{f' for {server}' if server else ''}: {path}")
        if note:
            _say(f"note: {note}")

    _emit(payload, human)


@click.command()
@global_options
def doctor() -> None:
    """Check config, repo, team dir, server, auth, clock and the team's MEMORY.md.

    One line each, every check even after one fails, with the fix for any that fails.

    \b
    Exit codes:
      0  every check passed
      1  a check failed (its line says how to fix it)
      2  usage error
    """
    from sync_client.doctor import run_checks

    result = run_checks(_options(), cwd=Path.cwd(), env=os.environ)

    def human() -> None:
        for row in result["checks"]:
            mark = "--  " if row["skipped"] else "ok  " if row["ok"] else "FAIL"
            if row.get("warning"):
                mark = "warn"
            shows_fix = not row["ok"] or row.get("warning")
            fix = f"  -> {row['fix']}" if shows_fix and row.get("fix") else ""
            _say(f"{mark} {row['check']}: {row['detail']}{fix}")

    _emit(result, human)
    sys.exit(EXIT_OK if result["ok"] else EXIT_FAILED)


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@global_options("json")
def scan(paths: tuple[Path, ...]) -> None:
    """Look for credentials in files or folders (never prints one).

    Folders are searched recursively, symlinks not followed; each finding names the
    file, line and kind of secret, never its value: a table on a terminal, else one
    PATH:LINE: LABEL (RULE) line per finding. --json prints {"findings": [...]}.

    \b
    Exit codes:
      0  nothing found
      1  a file could not be read
      2  usage error (a missing PATH)
      3  something was found
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
        _say(f"memsync: cannot read {error.filename}: {error.strerror}", err=True)
        sys.exit(EXIT_FAILED)
    if _as_json():
        click.echo(json.dumps({"findings": rows}, ensure_ascii=False))
    elif rows and not sys.stdout.isatty():
        # Piped: whole paths, one finding per line, as grep and compilers print them.
        for row in rows:
            _say(f"{row['path']}:{row['line']}: {row['label']} ({row['rule']})")
    elif rows:
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        table = Table("path", "line", "secret", title=f"{len(rows)} secret(s) found")
        for row in rows:
            # Text, not markup: a file named `[red]x.md` is shown as it is named.
            table.add_row(*(Text(visible(str(row[name]))) for name in ("path", "line", "label")))
        Console().print(table)
    else:
        _say("no secrets found")
    sys.exit(EXIT_NEEDS_USER if rows else EXIT_OK)


COMMANDS = (login, logout, doctor, scan)
