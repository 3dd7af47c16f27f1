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
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

import click

if TYPE_CHECKING:
    from sync_client.config import ClientConfig
    from sync_client.errors import TransientError
    from sync_client.workspace import Workspace

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NEEDS_USER = 3
# Skips that need the user (the file will not sync until they act).
_NEEDS_USER_SKIPS = {
    "secret",
    "too-large",
    "binary",
    "not-utf8",
    "too-many-entries",
    "invalid-key",
    "invalid-text",
    "path-clash",
}

F = TypeVar("F", bound=Callable[..., Any])

# The global options by name, as `global_options("json")` selects them.
_GLOBAL_OPTIONS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "server": (
        "server",
        click.option("--server", default=None, help="Server URL (or MEMSYNC_SERVER)."),
    ),
    "token": (
        "token",
        click.option("--token", default=None, help="Access token (or MEMSYNC_TOKEN)."),
    ),
    "repo": (
        "repo",
        click.option(
            "--repo", default=None, help="owner/name (or MEMSYNC_REPO; default: git origin)."
        ),
    ),
    "dir": (
        "team_dir",
        click.option("--dir", "team_dir", default=None, help="Team dir (or MEMSYNC_DIR)."),
    ),
    "json": (
        "as_json",
        click.option(
            "--json", "as_json", is_flag=True, default=None, help="Print one JSON object."
        ),
    ),
}


def _with_global_options(command: F, names: tuple[str, ...]) -> F:
    """`command` taking the named global options, merged into the context's options."""
    for name in reversed(names):
        command = _GLOBAL_OPTIONS[name][1](command)
    parameters = [_GLOBAL_OPTIONS[name][0] for name in names]

    @functools.wraps(command)
    def merged(*args: Any, **kwargs: Any) -> Any:
        context = click.get_current_context()
        options = context.ensure_object(dict)
        for parameter in parameters:
            value = kwargs.pop(parameter, None)
            if value is not None:
                options[parameter] = value
        return command(*args, **kwargs)

    return merged  # type: ignore[return-value]


@overload
def global_options(command: F, /) -> F: ...


@overload
def global_options(*names: str) -> Callable[[F], F]: ...


def global_options(*selected: Any) -> Any:
    """Accept global options here too, so they work after the subcommand.

    Bare (`@global_options`): all of them. With names (`@global_options("json")`, out
    of `server`, `token`, `repo`, `dir`, `json`): only those, so a command offers no
    option that does nothing for it.
    """
    if len(selected) == 1 and callable(selected[0]):
        return _with_global_options(selected[0], tuple(_GLOBAL_OPTIONS))
    unknown = [name for name in selected if name not in _GLOBAL_OPTIONS]
    if unknown:
        raise ValueError(f"unknown global options: {', '.join(map(str, unknown))}")
    names = tuple(name for name in _GLOBAL_OPTIONS if name in selected)

    def decorate(command: F) -> F:
        return _with_global_options(command, names)

    return decorate


def _options() -> dict[str, Any]:
    options: dict[str, Any] = click.get_current_context().ensure_object(dict)
    return options


def _as_json() -> bool:
    return bool(_options().get("as_json"))


def _config() -> ClientConfig:
    from sync_client.config import resolve_options

    return resolve_options(_options(), cwd=Path.cwd(), env=os.environ)


# Seconds each request may take (connect, or silence while reading) unless
# MEMSYNC_TIMEOUT says otherwise.
DEFAULT_TIMEOUT = 30.0


def _timeout() -> float:
    """MEMSYNC_TIMEOUT (seconds, above 0), else `DEFAULT_TIMEOUT`."""
    from sync_client.errors import ConfigError

    value = os.environ.get("MEMSYNC_TIMEOUT", "").strip()
    if not value:
        return DEFAULT_TIMEOUT
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds <= 3600:
        raise ConfigError(
            f"MEMSYNC_TIMEOUT must be seconds between 0 and 3600, like 30 (not {value!r})"
        )
    return seconds


@contextmanager
def _workspace() -> Iterator[Workspace]:
    from sync_client.api import Api
    from sync_client.workspace import Workspace

    config = _config()
    with Api(config.server, config.token, config.repo, timeout=_timeout()) as api:
        workspace = Workspace.open(config.team_dir, config.state_dir, api)
        try:
            yield workspace
        finally:
            workspace.close()


def _emit(payload: dict[str, Any], human: Callable[[], None]) -> None:
    """Print `payload` as one JSON object with `--json`, else call `human`."""
    if _as_json():
        click.echo(json.dumps(payload, ensure_ascii=False))
    else:
        human()


def _error_json(error: BaseException) -> dict[str, Any]:
    """`{"type", "message", ...}` of a failure: `MemsyncError.as_json`, or the two local
    failures that are not in the tree (`unsafe_key`, `local_io`)."""
    from sync_client.errors import MemsyncError
    from sync_client.local import UnsafeKey

    if isinstance(error, MemsyncError):
        return error.as_json()
    if isinstance(error, UnsafeKey):
        return {"type": "unsafe_key", "message": str(error), "key": error.key}
    if isinstance(error, OSError):
        return {"type": "local_io", "message": _os_words(error), "path": error.filename}
    return {"type": "error", "message": str(error)}


def _os_words(error: OSError) -> str:
    """`permission denied: /path` rather than `[Errno 13] Permission denied: '/path'`."""
    words = (error.strerror or str(error)).lower()
    return f"{words}: {error.filename}" if error.filename else words


def _fail(error: BaseException, *, reported: bool = False) -> None:
    """End with the failure: one line on stderr, the documented exit code, and with
    `--json` the `{"error": ...}` object on stdout (unless `reported` in the command's
    own object already)."""
    from sync_client.errors import MemsyncError

    code = error.exit_code if isinstance(error, MemsyncError) else EXIT_FAILED
    shown = _error_json(error)
    if _as_json() and not reported:
        click.echo(json.dumps({"error": shown}, ensure_ascii=False))
    click.echo(f"memsync: {shown['message']}", err=True)
    sys.exit(code)


def run_safely(command: F) -> F:
    """Turn library failures into one line and the documented exit code."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from sync_client.errors import MemsyncError
        from sync_client.local import UnsafeKey

        try:
            return command(*args, **kwargs)
        except BrokenPipeError:
            raise  # a closed pipe is not a failure: the group ends quietly
        except (MemsyncError, UnsafeKey, OSError) as error:
            _fail(error)
        return None

    return wrapper  # type: ignore[return-value]


EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C
EXIT_PIPE_CLOSED = 141  # 128 + SIGPIPE, as git and other tools end on a closed pipe


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
    "diff",
    "conflicts",
    "resolve",
    "log",
    "show",
    "restore",
    "rm",
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


def _summary(command: click.Command) -> str:
    """A command's one-line description, whole: its short help or its help's first
    paragraph (click would cut it at the width with "...")."""
    if command.short_help:
        return " ".join(command.short_help.split())
    first = (command.help or "").strip().split("\n\n", 1)[0]
    return " ".join(first.split())


class _HelpGroup(click.Group):
    """A group whose help lists its commands in `order` (the rest after, sorted), each
    with its whole one-line description."""

    def __init__(self, *args: Any, order: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.order = order

    def list_commands(self, ctx: click.Context) -> list[str]:
        """The commands in `order`, then any other, alphabetically."""
        known = super().list_commands(ctx)
        first = [name for name in self.order if name in known]
        return first + [name for name in known if name not in self.order]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands section: name and whole description (wrapped, never cut)."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, _summary(command)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


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
        from sync_client.api import retry_notices

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
            click.echo("memsync: interrupted", err=True)
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


from sync_client.skip_words import skip_words as _skip_words  # noqa: E402


def _count(number: int, thing: str) -> str:
    return f"{number:,} {thing}" + ("" if number == 1 else "s")


# Files that are not notes: counted in one line on every push and status (with those
# `.memsyncignore` leaves out), never listed one by one (`--json` still lists each).
_HIDDEN_SKIPS = frozenset({"hidden", "editor-leftover"})


def _things(files: int, folders: int) -> str:
    """`2 files and 1 folder`."""
    return " and ".join(
        _count(number, noun) for number, noun in ((files, "file"), (folders, "folder")) if number
    )


# Skipped files listed one per line for each reason; the rest are counted in one line.
_SKIPS_SHOWN_PER_REASON = 3


def _skip_lines(rows: list[dict[str, Any]]) -> None:
    """A line per skipped file that needs words (at most a few per reason, then one line
    counting the rest), then one counting the ignored ones:
    `ignored 3 hidden or leftover files, 1 hidden folder, 2 files matched by .memsyncignore`."""
    hidden = {False: 0, True: 0}
    ignored = {False: 0, True: 0}
    shown: dict[str, int] = {}
    unshown: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        reason = row["reason"]
        if reason in _HIDDEN_SKIPS:
            hidden[bool(row.get("folder"))] += 1
        elif reason == "ignored":
            ignored[bool(row.get("folder"))] += 1
        elif shown.get(reason, 0) < _SKIPS_SHOWN_PER_REASON:
            shown[reason] = shown.get(reason, 0) + 1
            click.echo(f"skipped: {row['key']}: {_skip_words(row)}")
        else:
            unshown.setdefault(reason, []).append(row)
    for reason, more in unshown.items():
        # A full repo refuses every new file alike: a thousand identical lines would
        # bury the one that matters. The words are the same for each such file.
        words = (
            _skip_words(more[0])
            if reason == "too-many-entries"
            else f"{reason.replace('-', ' ')}, like the files above"
        )
        click.echo(f"skipped {_count(len(more), 'more file')}: {words} (`--json` lists every one)")
    counted = []
    if hidden[False]:
        counted.append(_count(hidden[False], "hidden or leftover file"))
    if hidden[True]:
        counted.append(_count(hidden[True], "hidden folder"))
    if ignored[False] or ignored[True]:
        counted.append(f"{_things(ignored[False], ignored[True])} matched by .memsyncignore")
    if counted:
        click.echo("ignored " + ", ".join(counted))


def _push_lines(result: dict[str, Any]) -> None:
    uploaded, conflicts = result["uploaded"], result["conflicts"]
    if result.get("dry_run"):
        for row in result["would_push"]:
            click.echo(f"would push: {row['key']} ({row['change']}, {row['bytes']:,} bytes)")
        click.echo(
            f"would push {len(result['would_push'])} file(s) in {result['batches']} request(s)"
        )
    elif conflicts and not uploaded:
        # A request went out and the server had changed every file in it: say the
        # outcome, not a count that reads like a partial success.
        click.echo(f"pushed nothing: {len(conflicts)} file(s) changed on the server too")
    else:
        click.echo(f"pushed {len(uploaded)} file(s) in {result['batches']} request(s)")
    for key in conflicts:
        click.echo(f"conflict: {key} changed on the server too; run `memsync pull` to settle it")
    _skip_lines(result["skipped"])


def _needs_user_after_push(result: dict[str, Any]) -> bool:
    return bool(result["conflicts"]) or any(
        row["reason"] in _NEEDS_USER_SKIPS for row in result["skipped"]
    )


@main.command()
@click.option(
    "--dry-run", is_flag=True, help="List what would be pushed and skipped; send nothing."
)
@global_options
@run_safely
def push(dry_run: bool) -> None:
    """Upload your local edits (never overwriting a teammate's).

    Sends every file that changed since the last sync, in a few requests. A file the
    server would refuse (a secret, too large, not UTF-8 text, a bad name, a file/folder
    clash, no room left) is skipped with its reason and the fix; the rest go up.
    Hidden files, editor leftovers and files `.memsyncignore` lists are counted in one
    line.

    \b
    Exit codes:
      0  pushed (or nothing to push)
      1  failed: network, server or auth (one line says why)
      2  usage or configuration error (a bad option, no server or token)
      3  pushed the rest; a skipped file or a conflict needs you
    """
    from sync_client.push import push as push_now

    with _workspace() as workspace, _progress("pushing") as progress:
        result = push_now(workspace, dry_run=dry_run, progress=progress, notice=_notice).as_json()
        _add_index(workspace, result)

    def human() -> None:
        _push_lines(result)
        _index_lines(result)

    _emit(result, human)
    sys.exit(EXIT_NEEDS_USER if _needs_user_after_push(result) else EXIT_OK)


def _add_index(workspace: Workspace, result: dict[str, Any]) -> None:
    """Add the team index's health to a push's result (`index`, `index_blocked`)."""
    from sync_client import team_index

    # The push's own scan: one walk of the team dir per command, not two.
    scanned = workspace.last_scan or workspace.scan()
    result["index"] = team_index.health(workspace.team_dir, scanned, workspace.state_dir).as_json()
    result["index_blocked"] = team_index.blocked(result["skipped"])
    _mark_team_copy(workspace, result["index"])


def _mark_team_copy(workspace: Workspace, index: dict[str, Any]) -> None:
    """`index["team_copy"]`: MEMORY.md is missing here but the team has it (a base), so
    the next pull writes it back: no line may say there is none, or offer to start one."""
    from sync_client.memory_index import INDEX_NAME

    index["team_copy"] = not index["exists"] and INDEX_NAME in workspace.state.bases


def _notice(line: str) -> None:
    """A fact worth seeing while a command runs (`creating team memory for ...`).

    Written to `sys.stderr` as it is now: while a progress bar is up, rich has put its
    proxy there, which prints the line above the bar (click's own stderr would not).
    """
    click.echo(f"memsync: {line}", file=sys.stderr)


# A pull's download gets a bar from this size on (below, it is over in a blink).
DOWNLOAD_BAR_BYTES = 500_000


class _ProgressBars:
    """Rich progress bars on stderr, one phase at a time (a new phase ends the last
    one's bar): a count of files from 50 on, or bytes from `at_least`."""

    def __init__(self) -> None:
        self._progress: Any = None
        self._task: Any = None
        self._phase: str | None = None

    def phase(
        self, label: str, *, at_least: int = 50, in_bytes: bool = False
    ) -> Callable[[int, int | None], None]:
        """The callback of one phase: `report(done, total or None)`."""

        def report(done: int, total: int | None) -> None:
            if self._phase != label:
                if (done if total is None else total) < at_least:
                    return
                self.close()
                self._start(label, total, in_bytes)
            self._progress.update(self._task, completed=done, total=total)

        return report

    def _start(self, label: str, total: int | None, in_bytes: bool) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        counts = (DownloadColumn(), TransferSpeedColumn()) if in_bytes else (MofNCompleteColumn(),)
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            *counts,
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task(label, total=total)
        self._phase = label

    def close(self) -> None:
        """Take the current bar off the screen."""
        if self._progress is not None:
            self._progress.stop()
        self._progress, self._task, self._phase = None, None, None


@contextmanager
def _progress_bars() -> Iterator[_ProgressBars | None]:
    """Progress bars on a terminal; nothing when stderr is piped or with `--json`."""
    if not sys.stderr.isatty() or _as_json():
        yield None
        return
    bars = _ProgressBars()
    try:
        yield bars
    finally:
        bars.close()


@contextmanager
def _progress(label: str) -> Iterator[Callable[[int, int | None], None] | None]:
    """One phase's progress callback on a terminal (see `_progress_bars`), else None."""
    with _progress_bars() as bars:
        yield None if bars is None else bars.phase(label)


def _pull_lines(result: dict[str, Any]) -> None:
    written, merged, deleted = result["written"], result["merged"], result["deleted"]
    replaced = [row for row in result["conflicts"] if row["kind"] == "edited"]
    if result["not_modified"] and not (written or merged or deleted or result["conflicts"]):
        click.echo("already up to date")
    else:
        parts = [f"{len(written)} written"]
        if replaced:
            parts[0] += f" ({len(replaced)} replaced in a conflict)"
        if result["restored"]:
            parts.append(f"{len(result['restored'])} restored")
        parts.append(f"{len(merged)} merged")
        parts.append(f"{len(deleted)} deleted")
        parts.append(f"{len(result['kept_local'])} local edit(s) kept")
        click.echo("pulled: " + ", ".join(parts))
    for key in result["restored"]:
        click.echo(f"restored: {key}, deleted here: `memsync rm {key}` deletes it for the team")
    additions = set(result.get("merged_additions") or ())
    for key in merged:
        if key in additions:
            click.echo(
                f"merged: {key}: you and the server added lines at the same place; both "
                "kept (the server's first); the next push sends the merge"
            )
        else:
            click.echo(f"merged: {key}: your edit and the server's; the next push sends the merge")
    for conflict in result["conflicts"]:
        key = conflict["key"]
        if conflict["kind"] == "deleted":
            click.echo(
                f"conflict: {key} was deleted for the team but you edited it; your file is "
                f"kept and not pushed: `memsync resolve {key} --mine` adds it back, "
                "`--theirs` removes it"
            )
        else:
            click.echo(
                f"conflict: {key}: both edited the same lines; took the server's version, "
                f"yours is saved at {conflict['saved_to']} (`memsync resolve {key} --mine` "
                "puts yours back)"
            )
    for row in result["refused"]:
        click.echo(f"refused: {row['key']}: {row['reason']}")


_Report = Callable[[int, int | None], None]


def _pull_progress(bars: _ProgressBars | None) -> tuple[_Report | None, _Report | None]:
    """A pull's two bars: (the download, in bytes; then the files written)."""
    if bars is None:
        return None, None
    return (
        bars.phase("downloading", at_least=DOWNLOAD_BAR_BYTES, in_bytes=True),
        bars.phase("writing"),
    )


@main.command()
@global_options
@run_safely
def pull() -> None:
    """Bring in teammates' edits; your local edits are kept or saved.

    Edits of different lines are merged; when both sides changed the same lines the
    server's text is written and yours is saved (`memsync conflicts` lists the copies,
    `memsync resolve` puts yours back). A note you deleted here is restored.

    \b
    Exit codes:
      0  pulled (or already up to date)
      1  failed: network, server or auth (one line says why)
      2  usage or configuration error (a bad option, no server or token)
      3  pulled; a conflict or a note that could not be written needs you
    """
    from sync_client.pull import pull as pull_now

    with _workspace() as workspace, _progress_bars() as bars:
        download, progress = _pull_progress(bars)
        result = pull_now(workspace, progress=progress, download=download).as_json()
    _emit(result, lambda: _pull_lines(result))
    sys.exit(EXIT_NEEDS_USER if result["conflicts"] or result["refused"] else EXIT_OK)


@main.command()
@global_options
@run_safely
def sync() -> None:
    """Pull, then push; a failing push still reports what the pull did.

    \b
    Exit codes:
      0  both done
      1  failed: the pull, or the push after the pull's report
      2  usage or configuration error (a bad option, no server or token)
      3  done; a conflict or a skipped file needs you (see its line)
    """
    from sync_client.errors import MemsyncError
    from sync_client.local import UnsafeKey
    from sync_client.pull import pull as pull_now
    from sync_client.push import push as push_now

    pushed: dict[str, Any] | None = None
    failure: MemsyncError | UnsafeKey | OSError | None = None
    with _workspace() as workspace:
        with _progress_bars() as bars:
            download, progress = _pull_progress(bars)
            pulled = pull_now(workspace, progress=progress, download=download).as_json()
        try:
            with _progress("pushing") as progress:
                pushed = push_now(workspace, progress=progress, notice=_notice).as_json()
            _add_index(workspace, pushed)
        except (MemsyncError, UnsafeKey, OSError) as error:
            # A failing push never hides what the pull did (docs/protocol.md 4.4).
            failure = error

    def human() -> None:
        _pull_lines(pulled)
        if pushed is not None:
            _push_lines(pushed)
            _index_lines(pushed)

    failed = None if failure is None else _error_json(failure)
    _emit({"pull": pulled, "push": pushed, "error": failed}, human)
    if failure is not None:
        _fail(failure, reported=True)
    assert pushed is not None
    needs_user = pulled["conflicts"] or pulled["refused"] or _needs_user_after_push(pushed)
    sys.exit(EXIT_NEEDS_USER if needs_user else EXIT_OK)


@main.command()
@click.option(
    "--all", "all_repos", is_flag=True, help="Every enrolled repo and its watcher (no request)."
)
@global_options
@run_safely
def status(all_repos: bool) -> None:
    """What differs, what is skipped and why, and the watcher.

    Lists files modified or new here, changed on the server, in conflict, refused by
    the server before (with its reason), and skipped (with the fix); hidden files,
    editor leftovers and files `.memsyncignore` lists are counted in one line. When the
    server cannot be reached it shows the local side only.

    Also checks the team's MEMORY.md as Claude Code reads it (see `memsync index`).

    With --all: every enrolled repo, its watcher and the files its last push left
    out, from the watchers' state files (no request).

    \b
    Exit codes:
      0  shown (also when the server is unreachable)
      1  failed: network, server or auth (one line says why)
      2  usage or configuration error (a bad option, no server or token)
      3  shown; something needs you: a file skipped with a fix, a refusal, a conflict
         to resolve, a MEMORY.md that cannot be shared, a paused watcher
    """
    from sync_client.state import read_watch_state
    from sync_client.status import status as status_now

    if all_repos:
        _status_all()
        return
    with _workspace() as workspace:
        result = status_now(workspace)
        watcher = read_watch_state(workspace.state_dir)
        _mark_team_copy(workspace, result["index"])
    result["watcher"] = watcher

    def human() -> None:
        if result["offline"]:
            click.echo(f"server unreachable ({result['offline']}): showing local changes only")
        for label, name in (
            ("modified", "modified"),
            ("new", "new"),
            ("changed on the server", "server_changed"),
        ):
            for key in result[name]:
                click.echo(f"{label}: {key}")
        for key in result["deleted_locally"]:
            click.echo(f"deleted locally: {key} (the next pull restores it; `memsync rm` deletes)")
        for key in result["both_changed"]:
            click.echo(
                f"conflict: {key} changed here and on the server; the next pull merges "
                "different lines, or takes the server's text and saves yours"
            )
        for key in result["deleted_on_server"]:
            click.echo(
                f"conflict: {key} was deleted for the team but you edited it; "
                f"`memsync resolve {key} --mine` adds it back, `--theirs` removes it"
            )
        for row in result["conflicts"]:
            click.echo(
                f"conflict copy: {row['key']} saved at {row['saved_to']} "
                f"(`memsync resolve {row['key']} --mine|--theirs`)"
            )
        for row in result["refused"]:
            click.echo(f"refused by the server: {row['key']}: {_skip_words(row)}")
        _skip_lines(result["skipped"])
        _index_lines(result)
        quiet = all(row["reason"] in {*_HIDDEN_SKIPS, "ignored"} for row in result["skipped"])
        if quiet and not any(
            value
            for name, value in result.items()
            if name not in ("offline", "watcher", "skipped", "index")
        ):
            click.echo("everything is in sync")
        click.echo(f"watcher: {_watcher_line(watcher)}")

    _emit(result, human)
    sys.exit(EXIT_NEEDS_USER if _status_needs_user(result) else EXIT_OK)


def _status_needs_user(result: dict[str, Any]) -> bool:
    """Whether `status` shows something only the person can settle: a skipped file
    with a fix, a refusal, a conflict copy or deletion to resolve, an index that cannot
    be shared, a watcher paused until they act."""
    watcher = result.get("watcher") or {}
    return bool(
        result["index_blocked"]
        or result["refused"]
        or result["conflicts"]
        or result["deleted_on_server"]
        or any(row["reason"] in _NEEDS_USER_SKIPS for row in result["skipped"])
        or (watcher.get("running") and watcher.get("suppressed"))
    )


def _index_lines(result: dict[str, Any]) -> None:
    """The team index's lines: not shared (and why), then its health warnings."""
    from sync_client.index_cli import blocked_line, kept_lines, problem_lines, team_copy_line

    blocked = result.get("index_blocked")
    for line in blocked_line(blocked, _skip_words(blocked) if blocked else ""):
        click.echo(line)
    if "deleted_locally" not in result:  # (status says it on its `deleted locally` line)
        for line in team_copy_line(result.get("index")):
            click.echo(line)
    for line in problem_lines(result.get("index")):
        click.echo(line)
    for line in kept_lines(result.get("index_kept") or []):
        click.echo(line)


@main.command()
@click.argument("key", required=False, metavar="[KEY[@N[..M]]]")
@global_options
@run_safely
def diff(key: str | None) -> None:
    """Show local edits against the base and against the server.

    With KEY, only that file (and its saved conflict copy, if any, against the file);
    without, every file that differs. KEY@N: version N against the server's current
    text; KEY@N..M: version N against version M (`memsync log KEY` lists them).

    \b
    Exit codes:
      0  shown
      1  failed: network, server or auth, or a server too old for KEY@N
      2  usage or configuration error, an invalid KEY, or a KEY or version that is
         nowhere (not here, not in the last sync, not on the server)
    """
    from sync_client.history import parse_key_ref

    ref = parse_key_ref(key) if key is not None else None
    paint = _colour_diff if _colour_stdout() else lambda text: text
    if ref is not None and ref.version is not None:
        _diff_versions(ref, paint)
        return
    from sync_client.status import diff as diff_now

    with _workspace() as workspace:
        result = diff_now(workspace, key)

    def human() -> None:
        if result["offline"]:
            click.echo(f"server unreachable ({result['offline']}): local against base only")
        for item in result["diffs"]:
            click.echo(paint(f"== {item['key']}: local against base\n"), nl=False)
            click.echo(paint(item["against_base"]) or "(no change)\n", nl=False)
            if item["against_server"] is not None:
                click.echo(paint(f"== {item['key']}: local against server\n"), nl=False)
                click.echo(paint(item["against_server"]) or "(no change)\n", nl=False)
            if item["conflict_copy"] is not None:
                title = f"== {item['key']}: your saved copy ({item['conflict_copy']}) against local"
                click.echo(paint(title + "\n"), nl=False)
                click.echo(paint(item["copy_against_local"]) or "(no change)\n", nl=False)

    _emit(result, human)


def _diff_versions(ref: Any, paint: Callable[[str], str]) -> None:
    """`memsync diff KEY@N[..M]`: two of the server's versions, in one request."""
    from sync_client.history import diff_versions, version_words

    with _workspace() as workspace:
        result = diff_versions(workspace, ref)

    def human() -> None:
        title = f"== {result['key']}: {version_words(result['from'])} against "
        click.echo(paint(title + version_words(result["to"]) + "\n"), nl=False)
        click.echo(paint(result["diff"]) or "(no change)\n", nl=False)

    _emit(result, human)


def _colour_stdout() -> bool:
    """Colour for a person: stdout is a terminal and NO_COLOR is unset (or empty)."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


# How git colours a unified diff: headers bold, hunks cyan, removed red, added green.
_DIFF_STYLES = (
    ("== ", {"bold": True}),
    ("--- ", {"bold": True}),
    ("+++ ", {"bold": True}),
    ("@@", {"fg": "cyan"}),
    ("-", {"fg": "red"}),
    ("+", {"fg": "green"}),
)


def _colour_diff(text: str) -> str:
    """`text` (diff lines) with each line coloured by what it is."""
    lines = []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\n")
        style = next((style for prefix, style in _DIFF_STYLES if body.startswith(prefix)), None)
        painted = click.style(body, **style) if style and body else body
        lines.append(painted + line[len(body) :])
    return "".join(lines)


@main.command()
@click.argument("key")
@click.option(
    "--keep-index", is_flag=True, help="Leave the MEMORY.md lines that link to KEY as they are."
)
@global_options
@run_safely
def rm(key: str, keep_index: bool) -> None:
    """Delete KEY for the whole team (kept in the server's history).

    The file goes here too; an edit of it you had not pushed is saved first. The
    MEMORY.md lines that link to KEY are removed in the same commit (--keep-index
    leaves them).

    \b
    Exit codes:
      0  deleted
      1  failed: network, server or auth (one line says why)
      2  usage or configuration error (an invalid KEY)
    """
    from sync_client.status import remove

    with _workspace() as workspace:
        result = remove(workspace, key, keep_index=keep_index)

    def human() -> None:
        click.echo(f"deleted {key} for the team (version {result['version']})")
        for row in result["index_lines_removed"]:
            lines = ", ".join(str(number) for number in row["lines"])
            plural = "s" if len(row["lines"]) > 1 else ""
            how = (
                "here; it goes to the team with the next push (a teammate changed it)"
                if result["index_pending"]
                else "in the same commit"
            )
            click.echo(f"removed {row['index']} line{plural} {lines} (linking to {key}) {how}")

    _emit(result, human)


# `memsync log` without -n shows this many commits.
DEFAULT_LOG_COUNT = 20


@main.command()
@click.argument("key", required=False)
@click.option("--since", metavar="TIME", help="Only from TIME on: 2026-12-01[T10:00], 2h, 3d, 2w.")
@click.option("--author", metavar="NAME", help="Only by NAME (a token's name).")
@click.option(
    "-n",
    "--max-count",
    "count",
    type=click.IntRange(min=1),
    default=None,
    help=f"Show at most N (default {DEFAULT_LOG_COUNT}; for KEY: all).",
)
@click.option("--deleted", is_flag=True, help="List deleted notes: who deleted them, when.")
@global_options
@run_safely
def log(
    key: str | None, since: str | None, author: str | None, count: int | None, deleted: bool
) -> None:
    """List who changed what: the repo's commits, newest first.

    One line each: version, time, author, what it did, the keys it touched. With KEY,
    that note's versions, oldest first (version, time, op, author, checksum). With
    --deleted, the notes deleted for the team (`memsync restore KEY` brings one back).

    \b
    Exit codes:
      0  listed
      1  failed: network, server or auth, or a server too old for the repo's log
      2  usage or configuration error (an invalid KEY or TIME, no server or token)
    """
    from sync_client import history

    ref = history.parse_key_ref(key, versions=0) if key is not None else None
    when = history.parse_time(since) if since is not None else None
    if ref is not None and deleted:
        raise click.UsageError("--deleted lists every deleted note: give no KEY with it")
    with _workspace() as workspace:
        if ref is not None:
            versions = history.key_log(workspace, ref.key, count=count, author=author, since=when)
            _emit({"key": ref.key, "versions": versions}, lambda: _key_log_lines(versions))
            return
        if deleted:
            result = history.deleted_notes(workspace, count=count, author=author, since=when)
            rows = result["deleted"]
            _emit(result, lambda: _echo_lines(history.deleted_lines(rows)))
            return
        result = history.repo_log(
            workspace, count=count or DEFAULT_LOG_COUNT, author=author, since=when
        )
    _emit(result, lambda: _echo_lines(history.commit_lines(result["commits"])))


def _echo_lines(lines: list[str]) -> None:
    for line in lines:
        click.echo(line)


def _key_log_lines(versions: list[dict[str, Any]]) -> None:
    for item in versions:
        click.echo(
            f"{item['version']:>6}  {item['at']}  {item['op']:<7}  {item['author']}  "
            f"{(item.get('checksum') or '-')[:19]}"
        )


@main.command()
@click.argument("key", metavar="KEY[@N]")
@global_options
@run_safely
def show(key: str) -> None:
    """Print a note's text at version N, or as the server has it now.

    Offline, without @N: the text of the last sync, with a note on stderr.

    \b
    Exit codes:
      0  printed
      1  failed: network, server or auth (one line says why)
      2  usage or configuration error (an invalid KEY), or a KEY or version that is
         not on the server, or a version that is the note's delete
    """
    from sync_client.history import parse_key_ref
    from sync_client.history import show as show_now

    ref = parse_key_ref(key, versions=1)
    with _workspace() as workspace:
        result = show_now(workspace, ref)

    def human() -> None:
        if result["offline"]:
            _notice(f"server unreachable ({result['offline']}): {ref.key} as of the last sync")
        click.echo(result["content"], nl=False)

    _emit(result, human)


@main.command()
@click.argument("key", metavar="KEY[@N]")
@click.argument("number", metavar="[N]", required=False, type=click.IntRange(min=1))
@click.option("--version", "version", type=click.IntRange(min=1), help="The version to restore.")
@click.option("--before", metavar="TIME", help="The version current at TIME (as log --since).")
@click.option("--force", is_flag=True, help="Save an unpushed local edit of KEY, then restore.")
@global_options
@run_safely
def restore(
    key: str, number: int | None, version: int | None, before: str | None, force: bool
) -> None:
    """Make an old version of KEY current again for the team, then pull it.

    Version N (KEY@N, N or --version N), the version current at --before TIME, or,
    with neither, the last text before KEY was deleted (undo `memsync rm`). The index
    lines that listed KEY come back too (from the newest version of MEMORY.md that had
    them), at the end of the index, and are pushed.

    \b
    Exit codes:
      0  restored
      1  failed: network, server, auth, or KEY has an unpushed edit (--force saves it)
      2  usage or configuration error (an invalid KEY, TIME or version), or nothing
         to restore: KEY is not deleted, or did not exist at TIME
    """
    from sync_client import history
    from sync_client.settle import restore as restore_now

    ref = history.parse_key_ref(key, versions=1)
    given = [number for number in (ref.version, number, version) if number is not None]
    if len(given) > 1 or (given and before is not None):
        raise click.UsageError("give one version: KEY@N, N, --version N or --before TIME")
    when = history.parse_time(before, option="--before") if before is not None else None
    with _workspace() as workspace:
        chosen = given[0] if given else history.restore_version(workspace, ref.key, before=when)
        result = restore_now(workspace, ref.key, chosen, force=force)
        # Undo is whole: the index lines `memsync rm` took out come back too.
        result["index_lines"], result["index_push"] = history.index_lines_back(workspace, ref.key)
    result["restored"] = chosen

    def human() -> None:
        if result["saved_to"]:
            click.echo(f"saved your local edit of {ref.key} at {result['saved_to']}")
        click.echo(f"restored {ref.key} to version {chosen} (now {result['version']})")
        pushed = result["index_push"] or {}
        for row in result["index_lines"]:
            uploaded = row["index"] in pushed.get("uploaded", [])
            sent = "and pushed" if uploaded else "(not pushed yet)"
            count = len(row["lines"])
            click.echo(
                f"index: put back {count} line{'' if count == 1 else 's'} listing {ref.key} at "
                f"the end of {row['index']} (from its version {row['version']}) {sent}"
            )
        for key in pushed.get("conflicts", []):
            click.echo(f"conflict: {key} changed on the server too; `memsync pull` settles it")

    _emit(result, human)


@main.command()
@click.argument("key")
@click.option("--mine", "side", flag_value="mine", help="Keep your text and send it to the team.")
@click.option("--theirs", "side", flag_value="theirs", help="Keep the team's (server's) side.")
@global_options
@run_safely
def resolve(key: str, side: str | None) -> None:
    """Settle a conflict on KEY: keep --mine or --theirs.

    --mine puts your text back (or adds a note deleted for the team back) and pushes
    it; --theirs keeps the team's side and saves your copy.

    \b
    Exit codes:
      0  settled
      1  failed: network, server or auth (one line says why)
      2  usage or configuration error (neither --mine nor --theirs)
      3  kept yours, but its push skipped it or met a new conflict
    """
    from sync_client.errors import ConfigError
    from sync_client.settle import resolve as resolve_now

    if side not in ("mine", "theirs"):
        raise ConfigError("say which side to keep: --mine or --theirs")
    with _workspace() as workspace:
        result = resolve_now(workspace, key, "mine" if side == "mine" else "theirs")

    def human() -> None:
        if side == "mine":
            pushed = result["push"] or {}
            if key in pushed.get("uploaded", []):
                click.echo(f"resolved {key}: kept yours and pushed it")
            else:
                click.echo(f"resolved {key}: kept yours; it was not pushed yet")
                if pushed:
                    _push_lines(pushed)
        else:
            saved = f" (your copy is kept at {result['saved_to']})" if result["saved_to"] else ""
            click.echo(f"resolved {key}: took the team's side{saved}")

    _emit(result, human)
    pushed = result["push"]
    sys.exit(EXIT_NEEDS_USER if pushed and _needs_user_after_push(pushed) else EXIT_OK)


@main.command()
@global_options
@run_safely
def conflicts() -> None:
    """List the copies of your text saved when a pull took the server's.

    \b
    Exit codes:
      0  listed (also when there are none)
      1  failed (the state dir cannot be read)
      2  usage or configuration error (a bad option, no server or token)
    """
    from sync_client.state import list_conflicts

    config = _config()
    rows = [
        {"when": when, "key": key, "saved_to": str(path)}
        for when, key, path in list_conflicts(config.state_dir)
    ]

    def human() -> None:
        if not rows:
            click.echo("no saved conflict copies")
        for row in rows:
            click.echo(f"{row['when']}  {row['key']}  {row['saved_to']}")

    _emit({"conflicts": rows}, human)


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


def _login_lines(result: dict[str, Any], token_words: str | None) -> None:
    repo = result["repo"]
    if token_words is not None:
        click.echo(token_words)
    if repo is not None and repo["covered"] is not None:
        this = f"this repo, {repo['name']} (from {repo['source']}),"
        if repo["covered"]:
            click.echo(f"{this} is covered")
        else:
            click.echo(
                f"note: {this} is not covered by this token: ask the server's operator"
                f" for one that reaches {repo['name']}"
            )
    if result["note"]:
        click.echo(f"note: {result['note']}")
    saved = f"saved credentials for {result['server']} to {result['credentials']}"
    if not result["verified"]:
        saved += " (not checked with the server: --no-verify; `memsync doctor` checks them)"
    click.echo(saved)


@main.command()
@click.option("--no-verify", is_flag=True, help="Save without asking the server (offline setup).")
@global_options("server", "token", "repo", "json")
@run_safely
def login(no_verify: bool) -> None:
    """Check a server URL and token with the server, then save them for every command.

    Asks for the URL and the token on a terminal when they are not given. They go to
    the credentials file in your config dir (mode 0600); nothing is saved when a check
    fails. --repo names the repo whose coverage to report (default: this checkout's).

    \b
    Exit codes:
      0  saved (a note says when the token does not reach this repo)
      1  a check failed: the server is unreachable, not memsync, or refused the token
      2  usage or configuration error (a mistyped token, no URL or token without a terminal)
    """
    import warnings

    from sync_client.config import normalize_server, resolve_server
    from sync_client.doctor import describe_token
    from sync_client.errors import MemsyncError
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
        token = _login_value(
            options.get("token") or os.environ.get("MEMSYNC_TOKEN"),
            "token",
            "no token: give --token mst_... (or set MEMSYNC_TOKEN)",
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
            click.echo(f"memsync: {error} (nothing was saved)", err=True)
            sys.exit(error.exit_code)
    payload = result.as_json()
    token_words = None if result.token is None else describe_token(result.token)
    _emit(payload, lambda: _login_lines(payload, token_words))


@main.command()
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
            click.echo(f"nothing to remove: no saved credentials at {home / CREDENTIALS_FILE}")
        else:
            path, server = removed
            click.echo(f"removed the saved credentials{f' for {server}' if server else ''}: {path}")
        if note:
            click.echo(f"note: {note}")

    _emit(payload, human)


@main.command()
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
            click.echo(f"{mark} {row['check']}: {row['detail']}{fix}")

    _emit(result, human)
    sys.exit(EXIT_OK if result["ok"] else EXIT_FAILED)


@main.command()
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
        click.echo(f"memsync: cannot read {error.filename}: {error.strerror}", err=True)
        sys.exit(EXIT_FAILED)
    if _as_json():
        click.echo(json.dumps({"findings": rows}, ensure_ascii=False))
    elif rows and not sys.stdout.isatty():
        # Piped: whole paths, one finding per line, as grep and compilers print them.
        for row in rows:
            click.echo(f"{row['path']}:{row['line']}: {row['label']} ({row['rule']})")
    elif rows:
        from rich.console import Console
        from rich.table import Table

        table = Table("path", "line", "secret", title=f"{len(rows)} secret(s) found")
        for row in rows:
            table.add_row(str(row["path"]), str(row["line"]), str(row["label"]))
        Console().print(table)
    else:
        click.echo("no secrets found")
    sys.exit(EXIT_NEEDS_USER if rows else EXIT_OK)


def _counted(count: int, one: str, many: str | None = None) -> str:
    """`1 push`, `2 pushes`, `0 events`."""
    return f"{count:,} {one if count == 1 else many or one + 's'}"


def _watcher_line(watcher: dict[str, Any] | None) -> str:
    """One line about a repo's watcher, from its state file."""
    if watcher is None:
        return "not running here (`memsync watch`, or `memsync enable` and a service)"
    counters = watcher.get("counters") or {}
    facts = [
        f"last push {watcher.get('last_push') or 'never'}",
        f"last pull {watcher.get('last_pull') or 'never'}",
        _counted(int(counters.get("events", 0)), "event"),
        _counted(int(counters.get("pushes", 0)), "push", "pushes"),
    ]
    if watcher.get("running"):
        via = {"events": "events stream", "poll": "polling"}.get(str(watcher.get("live")))
        state = f"running (pid {watcher.get('pid')}{', ' + via if via else ''})"
        if watcher.get("taking_over"):
            state += "; it has just taken over from a watcher that stopped"
        if watcher.get("unreachable_since"):
            state += f"; the server has not answered since {watcher['unreachable_since']}"
        if watcher.get("file_events") == "polling":
            state += "; no inotify left: polling the team dir for changes"
    else:
        state = "stopped" + (" (it did not exit cleanly)" if watcher.get("stale") else "")
    if watcher.get("standby"):
        state += f"; process {watcher['standby']} stands by to take over"
    suppressed = watcher.get("suppressed")
    if suppressed:
        state += (
            f"; suppressed since {suppressed['since']}: {suppressed['message']};"
            f" waiting for {suppressed['waiting_for']}"
            f" ({counters.get('suppressed_events', 0)} changes not pushed)"
        )
    return f"{state}; " + ", ".join(facts)


def _status_all() -> None:
    from sync_client.config import config_home, read_enrolled, state_dir_for
    from sync_client.state import read_watch_state

    rows: list[dict[str, Any]] = []
    for item in read_enrolled(config_home(os.environ)):
        state_dir = state_dir_for(os.environ, item.server, item.repo, item.team_dir)
        rows.append({**item.as_json(), "watcher": read_watch_state(state_dir)})

    def human() -> None:
        if not rows:
            click.echo("no enrolled repos: `memsync enable` in a repository adds one")
        for row in rows:
            click.echo(f"{row['repo']}  {row['dir']}  ({row['server']})")
            click.echo(f"  watcher: {_watcher_line(row['watcher'])}")
            for skipped in (row["watcher"] or {}).get("skipped") or []:
                click.echo(f"  skipped: {skipped['key']}: {skipped['words']}")

    _emit({"repos": rows}, human)
    watchers = [row["watcher"] or {} for row in rows]
    needs_user = any(
        any(skipped["reason"] in _NEEDS_USER_SKIPS for skipped in watcher.get("skipped") or [])
        or (watcher.get("running") and watcher.get("suppressed"))
        for watcher in watchers
    )
    sys.exit(EXIT_NEEDS_USER if needs_user else EXIT_OK)


@main.command()
@global_options
@run_safely
def enable() -> None:
    """Enroll this repo for `memsync watch --all`.

    Saves its team dir and server (or --repo, --dir, --server) in your config dir.

    \b
    Exit codes:
      0  enabled (or already enabled)
      1  failed (the list cannot be written)
      2  usage or configuration error (no server, no team dir)
    """
    from sync_client.config import (
        Enrollment,
        config_home,
        enroll,
        enrolled_config,
        git_root,
        resolve_target,
    )
    from sync_client.errors import NoCredentials
    from sync_client.service import token_warning

    options = _options()
    server, repo, team_dir = resolve_target(
        server=options.get("server"),
        repo=options.get("repo"),
        team_dir=options.get("team_dir"),
        cwd=Path.cwd(),
        env=os.environ,
    )
    assert server is not None  # required above
    assert team_dir is not None
    from sync_client.claude_code import canonical_root

    # A worktree enrolls its main checkout: one repo, one folder, never a second copy.
    checkout = git_root(Path.cwd())
    root = None if checkout is None else canonical_root(checkout)
    item = Enrollment(server=server, repo=repo, team_dir=team_dir, git_root=root)
    added = enroll(config_home(os.environ), item)
    note = None
    try:
        enrolled_config(item, token=options.get("token"), env=os.environ)
    except NoCredentials as error:
        note = f"{error}; the watcher waits for it"
    warning = None if note else token_warning(os.environ, [item], token=options.get("token"))

    def human() -> None:
        verb = "enabled" if added else "already enabled"
        click.echo(f"{verb}: {repo} (team dir {team_dir}, server {server})")
        click.echo("`memsync watch --all` serves it (`memsync watch --install` runs that at login)")
        if note:
            click.echo(f"note: {note}")

    _emit({"enabled": item.as_json(), "added": added, "note": note}, human)
    if warning:
        _notice(f"warning: {warning}")


@main.command()
@global_options("server", "repo", "dir", "json")
@run_safely
def disable() -> None:
    """Stop `memsync watch --all` serving this repo (or --repo, --dir).

    \b
    Exit codes:
      0  disabled (or it was not enabled)
      1  failed (the list cannot be written)
      2  usage or configuration error
    """
    from sync_client.config import config_home, resolve_target, unenroll

    options = _options()
    server, repo, team_dir = resolve_target(
        server=options.get("server"),
        repo=options.get("repo"),
        team_dir=options.get("team_dir"),
        cwd=Path.cwd(),
        env=os.environ,
        require_server=False,
        require_team_dir=False,
    )
    # The saved server is the one enable used; only an explicit one narrows the match.
    explicit_server = options.get("server") or os.environ.get("MEMSYNC_SERVER")
    removed = unenroll(
        config_home(os.environ),
        repo=repo,
        server=server if explicit_server else None,
        team_dir=team_dir,
    )

    def human() -> None:
        if not removed:
            click.echo(f"{repo} was not enabled")
        for item in removed:
            click.echo(f"disabled: {item.repo} (team dir {item.team_dir}, server {item.server})")

    _emit({"removed": [item.as_json() for item in removed]}, human)


def _watch_logging() -> None:
    """The watcher's log on stderr, one line per message (journald keeps it)."""
    import logging
    import time

    handler = logging.StreamHandler(sys.stderr)
    # A UTC timestamp on every line: a log read days later (or copied out of journald)
    # still says when each thing happened.
    formatter = logging.Formatter(
        "%(asctime)s.%(msecs)03dZ memsync watch: %(levelname)s %(message)s",
        datefmt="%Y-%m-%dT%H:%M:%S",
    )
    formatter.converter = time.gmtime
    handler.setFormatter(formatter)
    logger = logging.getLogger("memsync.watch")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def _service(uninstall: bool, no_start: bool) -> None:
    from sync_client import service
    from sync_client.config import config_home, read_enrolled
    from sync_client.errors import ConfigError

    kind = service.service_kind()
    if uninstall:
        done = service.uninstall(os.environ, kind, activate=not no_start)
        warning = None
    else:
        try:
            enrolled = read_enrolled(config_home(os.environ))
        except ConfigError:
            enrolled = []  # `memsync watch --all` names the damaged file when it starts
        warning = service.token_warning(os.environ, enrolled, token=_options().get("token"))
        done = service.install(os.environ, kind, activate=not no_start)
    not_started = (
        None
        if done.activation_error is None
        else f"the service is installed but not started: {done.activation_error}"
    )

    def human() -> None:
        if uninstall:
            click.echo(f"removed {done.path}" if done.changed else f"no service at {done.path}")
            if done.changed and not done.activated:
                if done.activation_error is not None:
                    click.echo(f"not stopped: {done.activation_error}")
                click.echo(f"if it still runs: `{done.command}`")
            return
        click.echo(f"wrote {done.path}" if done.changed else f"{done.path} is up to date")
        if done.activated:
            click.echo("started; it runs `memsync watch --all` at every login")
        elif not_started is None:
            click.echo(f"to start it now and at every login: `{done.command}`")
        else:
            _notice(not_started)
            for line in done.instead():
                click.echo(line)

    _emit(done.as_json(), human)
    if uninstall:
        return
    if not_started is not None and _as_json():
        _notice(not_started)
    if warning:
        _notice(f"warning: {warning}")
    if not_started is not None:
        sys.exit(EXIT_NEEDS_USER)


@main.command()
@click.option("--all", "all_repos", is_flag=True, help="Every enrolled repo (`memsync enable`).")
@click.option(
    "--debounce",
    type=click.FloatRange(min=0.0, max=3600.0),
    default=2.0,
    show_default=True,
    help="Seconds of quiet before a push.",
)
@click.option(
    "--poll-interval",
    type=click.FloatRange(min=1.0),
    default=30.0,
    show_default=True,
    help="Seconds between pulls when the server's events stream is unavailable.",
)
@click.option("--install", is_flag=True, help="Install a user service running `watch --all`.")
@click.option("--uninstall", is_flag=True, help="Stop and remove that service.")
@click.option("--no-start", is_flag=True, help="With --install/--uninstall: only the file.")
@global_options
@run_safely
def watch(
    all_repos: bool,
    debounce: float,
    poll_interval: float,
    install: bool,
    uninstall: bool,
    no_start: bool,
) -> None:
    """Sync in the foreground as files change, until SIGINT or SIGTERM.

    --all serves every repo `memsync enable` enrolled; --install sets up a user service
    that runs `memsync watch --all` at every login. One watcher serves a repo: a second
    one stands by and takes over when the first stops.

    \b
    Exit codes:
      0  stopped by SIGINT or SIGTERM (or the service was installed or removed)
      1  failed
      2  usage or configuration error (a bad option, no server or token)
      3  --install wrote the service but could not start it (no user session bus, no
         systemctl): the lines printed say why and what to run
    """
    import contextlib
    import signal
    import threading

    from sync_client.config import (
        ENROLLED_FILE,
        config_home,
        enrolled_config,
        read_enrolled,
        resolve_options,
        state_dir_for,
    )
    from sync_client.errors import ConfigError, NoCredentials, NoRepoIdentity
    from sync_client.watch import Target, Watcher, WatchSettings

    if install and uninstall:
        raise ConfigError("--install and --uninstall exclude each other")
    if install or uninstall:
        _service(uninstall, no_start)
        return
    options = dict(_options())
    env = dict(os.environ)
    cwd = Path.cwd()
    watch_file = None
    if all_repos:
        home = config_home(env)
        watch_file = home / ENROLLED_FILE
        read_enrolled(home)  # a malformed file is the user's to fix: exit 2 now

        def targets() -> list[Target]:
            return [
                Target(
                    label=item.repo,
                    resolve=functools.partial(
                        enrolled_config, item, token=options.get("token"), env=env
                    ),
                    identity=(item.server, item.repo, str(item.team_dir)),
                    git_cwd=item.git_root,
                    state_dir=state_dir_for(env, item.server, item.repo, item.team_dir),
                )
                for item in read_enrolled(home)
            ]
    else:
        resolve_here = functools.partial(resolve_options, options, cwd=cwd, env=env)
        label = cwd.name
        # Without a token or a git remote, the watcher waits for `memsync login` or one.
        # Another watcher of this repo: this one stands by to take over (the log says).
        with contextlib.suppress(NoCredentials, NoRepoIdentity):
            label = resolve_here().repo

        def targets() -> list[Target]:
            return [Target(label=label, resolve=resolve_here, identity=("here",), git_cwd=cwd)]

    _watch_logging()
    stop = threading.Event()
    watcher = Watcher(
        targets,
        WatchSettings(debounce=debounce, poll_interval=poll_interval),
        env=env,
        watch_file=watch_file,
    )

    def on_signal(signum: int, _frame: object) -> None:
        # Named in the shutdown line; a second signal while it flushes changes nothing.
        if watcher.stop_reason is None:
            watcher.stop_reason = signal.Signals(signum).name
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    watcher.run(stop)
    sys.exit(EXIT_OK)


# --- snapshot seeding for subagents (sync_client/snapshot.py) ---------------------------


@main.group(cls=_HelpGroup, order=("export", "check", "seed"))
def snapshot() -> None:
    """Committed seeds of the team memory for subagents.

    `export` writes a snapshot into the repository, `check` says whether a subagent's
    memory dir needs it, `seed` copies it there.

    \b
    Exit codes:
      0  done
      1  failed
      2  usage or configuration error
      3  export: done, but a file was skipped that needs you
    """


_AGENT_OPTION = click.option("--agent", "agent", required=True, help="The subagent's type.")
_SNAPSHOTS_OPTION = click.option(
    "--snapshots",
    "snapshots",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder holding <TYPE>/ (default: .claude/agent-memory-snapshots of this repo).",
)
_MEMORY_DIR_OPTION = click.option(
    "--memory-dir",
    "memory_dir",
    default=None,
    type=click.Path(file_okay=False, path_type=Path),
    help="The subagent's memory dir (default: Claude Code's, by --agent and --scope).",
)
_SCOPE_OPTION = click.option(
    "--scope",
    "scope",
    type=click.Choice(["user", "project", "local"]),
    default=None,
    help="Which memory dir of the agent: project (.claude/agent-memory/TYPE, the default), "
    "local (.claude/agent-memory-local/TYPE) or user (~/.claude/agent-memory/TYPE).",
)


def _snapshot_memory_dir(
    agent: str, memory_dir: Path | None, scope: str | None, *, create: bool = False
) -> Path:
    """The memory dir `check` and `seed` work on: --memory-dir, else Claude Code's
    memory dir of the agent type in --scope (project when not given)."""
    from sync_client.errors import ConfigError
    from sync_client.snapshot import DEFAULT_SCOPE, agent_memory_dir

    if memory_dir is not None:
        if scope is not None:
            raise ConfigError("--memory-dir and --scope both name the memory dir: pass one")
        return Path(os.path.abspath(memory_dir))
    chosen = DEFAULT_SCOPE
    if scope == "user":
        chosen = "user"
    elif scope == "local":
        chosen = "local"
    return agent_memory_dir(Path.cwd(), os.environ, agent, chosen, create=create)


@snapshot.command("export")
@_AGENT_OPTION
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write <OUT>/<TYPE>/ instead of .claude/agent-memory-snapshots/<TYPE>/.",
)
@click.option("--from-server", is_flag=True, help="Export the server's memory, not the team dir's.")
@click.option(
    "--version", "version", type=click.IntRange(min=1), default=None, help="With --from-server."
)
@global_options
@run_safely
def snapshot_export(agent: str, out: Path | None, from_server: bool, version: int | None) -> None:
    """Write the team memory as a snapshot for subagents of one type.

    The same memory always gives the same files. Files that may not be in it (a
    secret, a bad name or text) are skipped with their reason.

    \b
    Exit codes:
      0  exported
      1  failed: network, server or auth (one line says why)
      2  usage or configuration error (a bad option, no server or token)
      3  exported; a file was skipped that needs you
    """
    from sync_client.errors import ConfigError
    from sync_client.snapshot import (
        agent_type,
        export_snapshot,
        memory_from_server,
        memory_from_team_dir,
        snapshot_dir,
    )

    agent_type(agent)
    if version is not None and not from_server:
        raise ConfigError("--version needs --from-server")
    snapshot_dir(Path.cwd(), out, agent)  # a bad place fails before any request
    with _workspace() as workspace:
        if from_server:
            memory = memory_from_server(workspace.api, version)
        else:
            memory = memory_from_team_dir(workspace)
    result = export_snapshot(memory, snapshot_dir(Path.cwd(), out, agent, create=True))

    def human() -> None:
        shown = "no version" if result["version"] is None else f"version {result['version']}"
        click.echo(
            f"exported {result['entries']} file(s) to {result['snapshot']} "
            f"({shown}, updated {result['updatedAt']}): {len(result['written'])} written, "
            f"{len(result['removed'])} removed"
        )
        if result["note"]:
            click.echo(f"note: {result['note']}")
        _skip_lines(result["skipped"])

    _emit(result, human)
    needs_user = any(row["reason"] in _NEEDS_USER_SKIPS for row in result["skipped"])
    sys.exit(EXIT_NEEDS_USER if needs_user else EXIT_OK)


@snapshot.command("check")
@_AGENT_OPTION
@_MEMORY_DIR_OPTION
@_SCOPE_OPTION
@_SNAPSHOTS_OPTION
@global_options("json")
@run_safely
def snapshot_check(
    agent: str, memory_dir: Path | None, scope: str | None, snapshots: Path | None
) -> None:
    """Print what the memory dir needs: none, initialize or prompt-update.

    The memory dir is --memory-dir, else Claude Code's for the agent type in --scope.

    \b
    Exit codes:
      0  printed (none also when there is no valid snapshot)
      2  usage error (an invalid --agent, both --memory-dir and --scope)
    """
    from sync_client.errors import ConfigError
    from sync_client.snapshot import InvalidSnapshot, agent_type, check, snapshot_dir

    agent_type(agent)
    if memory_dir is not None and scope is not None:
        _snapshot_memory_dir(agent, memory_dir, scope)  # says why
    try:
        directory = snapshot_dir(Path.cwd(), snapshots, agent)
        target = _snapshot_memory_dir(agent, memory_dir, scope)
    except (InvalidSnapshot, ConfigError):
        # Outside a repository, or a symlinked folder: no valid snapshot, or no memory
        # dir a seed would write.
        action = "none"
    else:
        action = check(directory, target)
    _emit({"action": action}, lambda: click.echo(action))


@snapshot.command("seed")
@_AGENT_OPTION
@_MEMORY_DIR_OPTION
@_SCOPE_OPTION
@_SNAPSHOTS_OPTION
@click.option(
    "--update",
    "mode",
    flag_value="update",
    help="Merge each note: keep the agent's edits, take the snapshot's changes.",
)
@click.option("--replace", "mode", flag_value="replace", help="Make the memory dir equal to it.")
@global_options("json")
@run_safely
def snapshot_seed(
    agent: str,
    memory_dir: Path | None,
    scope: str | None,
    snapshots: Path | None,
    mode: str | None,
) -> None:
    """Copy the snapshot into the memory dir (files it replaces are saved first).

    The memory dir is --memory-dir, else Claude Code's for the agent type in --scope.
    --update merges each note with what the last seed wrote and says what it did.

    \b
    Exit codes:
      0  seeded
      1  failed (the snapshot is missing or not valid, a write failed)
      2  usage error
    """
    from sync_client.snapshot import SeedMode, saves_dir, seed, seed_lines, snapshot_dir

    directory = snapshot_dir(Path.cwd(), snapshots, agent)
    target = _snapshot_memory_dir(agent, memory_dir, scope)
    chosen: SeedMode = "initialize"
    if mode == "update":
        chosen = "update"
    elif mode == "replace":
        chosen = "replace"

    def make_dir() -> None:
        _snapshot_memory_dir(agent, memory_dir, scope, create=True)

    result = seed(
        directory,
        target,
        chosen,
        saves_dir(os.environ, target),
        make_dir=None if memory_dir is not None else make_dir,
    )
    _emit(result, lambda: click.echo("\n".join(seed_lines(result))))


@main.command()
@click.option(
    "--hook", is_flag=True, help="Run as Claude Code's SessionStart hook (reads its JSON)."
)
@click.option(
    "--session-end", is_flag=True, help="Run as the SessionEnd hook: push in the background."
)
@click.option("--no-pull", is_flag=True, help="Do not pull first, even without a watcher.")
def context(hook: bool, session_end: bool, no_pull: bool) -> None:
    """Print the team memory block a Claude Code session starts with.

    For the repo of the current directory: that this is the team's shared memory, the
    team dir, short rules for the agent, how fresh the local copy is, then the team
    MEMORY.md, cut on a line boundary to fit 10,000 characters (saying how many lines
    were left out). Without a running watcher it pulls first, for at most a second.
    Not set up for memsync: prints nothing. `memsync setup claude-code` installs it as
    a hook.

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
    sys.exit(run(arguments, stdin=sys.stdin if hook or session_end else None))


from sync_client.index_cli import register as _register_index  # noqa: E402

_register_index(main)


from sync_client.mcp_cli import register as _register_mcp  # noqa: E402

_register_mcp(main)


from sync_client.setup_cli import register as _register_setup  # noqa: E402

_register_setup(main)
