"""`memsync`: the client command line. Thin: parse, call the library, render.

Global options (`--server`, `--token`, `--repo`, `--dir`, `--json`) are accepted before
or after the subcommand. Exit codes: 0 done; 1 failed (network, server, auth); 2 usage
or configuration error; 3 done but something needs the user (a conflict, a file
skipped for a secret, its size, its encoding, its name or text, or a file/folder
clash); 130 interrupted. Errors are one readable line on stderr; with `--json`, stdout
also gets `{"error": {"type", "message", ...}}` (`errors.MemsyncError.as_json`).
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
from typing import TYPE_CHECKING, Any, TypeVar

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
    "not-utf8",
    "too-many-entries",
    "invalid-key",
    "invalid-text",
    "path-clash",
}

F = TypeVar("F", bound=Callable[..., Any])

_GLOBAL_OPTIONS = (
    click.option("--server", default=None, help="Server URL (or MEMSYNC_SERVER)."),
    click.option("--token", default=None, help="Access token (or MEMSYNC_TOKEN)."),
    click.option("--repo", default=None, help="owner/name (or MEMSYNC_REPO; default: git origin)."),
    click.option("--dir", "team_dir", default=None, help="Team dir (or MEMSYNC_DIR)."),
    click.option("--json", "as_json", is_flag=True, default=None, help="Print one JSON object."),
)


def global_options(command: F) -> F:
    """Accept the global options here too, so they work after the subcommand."""
    for option in reversed(_GLOBAL_OPTIONS):
        command = option(command)

    @functools.wraps(command)
    def merged(*args: Any, **kwargs: Any) -> Any:
        context = click.get_current_context()
        options = context.ensure_object(dict)
        for name in ("server", "token", "repo", "team_dir", "as_json"):
            value = kwargs.pop(name, None)
            if value is not None:
                options[name] = value
        return command(*args, **kwargs)

    return merged  # type: ignore[return-value]


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


def _seconds(delay: float) -> str:
    """`2`, `0.6`: a wait as a person reads it."""
    return f"{delay:.0f}" if delay >= 10 else f"{delay:.1f}".removesuffix(".0")


def _retry_notice(error: TransientError, delay: float, attempt: int, attempts: int) -> None:
    """`memsync: server unreachable, retrying in 2 s (2/4)`, for a person watching."""
    if not _as_json():
        _notice(f"{error.retry_words()}, retrying in {_seconds(delay)} s ({attempt}/{attempts})")


class _Memsync(click.Group):
    """The command group, ending as Unix tools do on Ctrl-C and on a closed pipe, and
    saying so on a terminal when a request is retried."""

    def invoke(self, ctx: click.Context) -> Any:
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


@click.group(cls=_Memsync, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="memsync", prog_name="memsync")
@global_options
def main() -> None:
    """Keep a team's shared agent memory in sync."""


def _skip_words(row: dict[str, Any]) -> str:
    """One skipped file's reason in words: `too large: 312,004 bytes, the server allows ...`."""
    if row.get("label"):
        return f"{row['reason']} ({row['label']}, line {row['line']})"
    if row.get("detail"):
        return f"{str(row['reason']).replace('-', ' ')}: {row['detail']}"
    return str(row["reason"])


def _push_lines(result: dict[str, Any]) -> None:
    uploaded, conflicts = result["uploaded"], result["conflicts"]
    if result.get("dry_run"):
        for row in result["would_push"]:
            click.echo(f"would push: {row['key']} ({row['change']}, {row['bytes']:,} bytes)")
        click.echo(
            f"would push {len(result['would_push'])} file(s) in {result['batches']} request(s)"
        )
    else:
        click.echo(f"pushed {len(uploaded)} file(s) in {result['batches']} request(s)")
    for key in conflicts:
        click.echo(f"conflict: {key} changed on the server too; run `memsync pull` to settle it")
    for row in result["skipped"]:
        click.echo(f"skipped: {row['key']}: {_skip_words(row)}")


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
    """Upload local edits (never overwriting a teammate's edit)."""
    from sync_client.push import push as push_now

    with _workspace() as workspace, _progress("pushing") as progress:
        result = push_now(workspace, dry_run=dry_run, progress=progress, notice=_notice).as_json()
    _emit(result, lambda: _push_lines(result))
    sys.exit(EXIT_NEEDS_USER if _needs_user_after_push(result) else EXIT_OK)


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
        click.echo(f"restored: {key} (it was missing here)")
    for key in merged:
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
    """Bring teammates' edits into the team dir (local edits are kept or saved)."""
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
    """Pull, then push; a failing push still reports what the pull did."""
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
        except (MemsyncError, UnsafeKey, OSError) as error:
            # A failing push never hides what the pull did (docs/protocol.md 4.4).
            failure = error

    def human() -> None:
        _pull_lines(pulled)
        if pushed is not None:
            _push_lines(pushed)

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
    """What differs: local edits, teammates' edits, conflicts, skipped files; the watcher."""
    from sync_client.status import status as status_now
    from sync_client.watch import read_watch_state

    if all_repos:
        _status_all()
        return
    with _workspace() as workspace:
        result = status_now(workspace)
        watcher = read_watch_state(workspace.state_dir)
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
        for row in result["skipped"]:
            click.echo(f"skipped: {row['key']}: {_skip_words(row)}")
        if not any(value for name, value in result.items() if name not in ("offline", "watcher")):
            click.echo("everything is in sync")
        click.echo(f"watcher: {_watcher_line(watcher)}")

    _emit(result, human)


@main.command()
@click.argument("key", required=False)
@global_options
@run_safely
def diff(key: str | None) -> None:
    """Show local edits against the base and against the server."""
    from sync_client.status import diff as diff_now

    with _workspace() as workspace:
        result = diff_now(workspace, key)
    paint = _colour_diff if _colour_stdout() else lambda text: text

    def human() -> None:
        if result["offline"]:
            click.echo(f"server unreachable ({result['offline']}): local against base only")
        for item in result["diffs"]:
            click.echo(paint(f"== {item['key']}: local against base\n"), nl=False)
            click.echo(paint(item["against_base"]) or "(no change)\n", nl=False)
            if item["against_server"] is not None:
                click.echo(paint(f"== {item['key']}: local against server\n"), nl=False)
                click.echo(paint(item["against_server"]) or "(no change)\n", nl=False)

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
@global_options
@run_safely
def rm(key: str) -> None:
    """Delete KEY for the whole team (kept in the server's history)."""
    from sync_client.status import remove

    with _workspace() as workspace:
        result = remove(workspace, key)
    _emit(result, lambda: click.echo(f"deleted {key} for the team (version {result['version']})"))


@main.command()
@click.argument("key")
@global_options
@run_safely
def log(key: str) -> None:
    """List the server's versions of KEY."""
    with _workspace() as workspace:
        versions = workspace.api.history(key)

    def human() -> None:
        for item in versions:
            click.echo(
                f"{item['version']:>6}  {item['at']}  {item['op']:<7}  {item['author']}  "
                f"{(item.get('checksum') or '-')[:19]}"
            )

    _emit({"key": key, "versions": versions}, human)


@main.command()
@click.argument("key")
@click.option("--version", "version", required=True, type=click.IntRange(min=1))
@click.option("--force", is_flag=True, help="Save an unpushed local edit of KEY, then restore.")
@global_options
@run_safely
def restore(key: str, version: int, force: bool) -> None:
    """Make version N of KEY current again for the team, then pull it."""
    from sync_client.resolve import restore as restore_now

    with _workspace() as workspace:
        result = restore_now(workspace, key, version, force=force)

    def human() -> None:
        if result["saved_to"]:
            click.echo(f"saved your local edit of {key} at {result['saved_to']}")
        click.echo(f"restored {key} to version {version} (now {result['version']})")

    _emit(result, human)


@main.command()
@click.argument("key")
@click.option("--mine", "side", flag_value="mine", help="Keep your text and send it to the team.")
@click.option("--theirs", "side", flag_value="theirs", help="Keep the team's (server's) side.")
@global_options
@run_safely
def resolve(key: str, side: str | None) -> None:
    """Settle a conflict on KEY: keep --mine (pushed) or --theirs (yours saved)."""
    from sync_client.errors import ConfigError
    from sync_client.resolve import resolve as resolve_now

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
    """List the local copies that pulls saved when the server won a conflict."""
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


@main.command()
@global_options
@run_safely
def login() -> None:
    """Save the server URL and token in the user's credentials file (mode 0600)."""
    from sync_client.config import config_home, write_credentials

    options = _options()
    token = options.get("token") or os.environ.get("MEMSYNC_TOKEN")
    if not token:
        token = click.prompt("token", hide_input=True)
    server = options.get("server") or os.environ.get("MEMSYNC_SERVER")
    path = write_credentials(config_home(os.environ), server=server, token=token)
    _emit({"credentials": str(path)}, lambda: click.echo(f"saved credentials to {path}"))


@main.command()
@global_options
def doctor() -> None:
    """Check config, repo, team dir, server, auth and clock; one line each."""
    from sync_client.doctor import run_checks

    rows = run_checks(_options(), cwd=Path.cwd(), env=os.environ)

    def human() -> None:
        for row in rows:
            mark = "ok  " if row["ok"] else "FAIL"
            fix = f"  -> {row['fix']}" if not row["ok"] and row.get("fix") else ""
            click.echo(f"{mark} {row['check']}: {row['detail']}{fix}")

    _emit(rows, human)
    sys.exit(EXIT_OK if all(row["ok"] for row in rows) else EXIT_FAILED)


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@global_options
def scan(paths: tuple[Path, ...]) -> None:
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
    if _as_json():
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
    sys.exit(EXIT_NEEDS_USER if rows else EXIT_OK)


def _watcher_line(watcher: dict[str, Any] | None) -> str:
    """One line about a repo's watcher, from its state file."""
    if watcher is None:
        return "not running here (`memsync watch`, or `memsync enable` and a service)"
    counters = watcher.get("counters") or {}
    facts = [
        f"last push {watcher.get('last_push') or 'never'}",
        f"last pull {watcher.get('last_pull') or 'never'}",
        f"{counters.get('events', 0)} events, {counters.get('pushes', 0)} pushes",
    ]
    if watcher.get("running"):
        via = {"events": "events stream", "poll": "polling"}.get(str(watcher.get("live")))
        state = f"running (pid {watcher.get('pid')}{', ' + via if via else ''})"
    else:
        state = "stopped" + (" (it did not exit cleanly)" if watcher.get("stale") else "")
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
    from sync_client.watch import read_watch_state

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

    _emit({"repos": rows}, human)


@main.command()
@global_options
@run_safely
def enable() -> None:
    """Enroll this repo's team dir and server for `memsync watch --all`."""
    from sync_client.config import (
        Enrollment,
        config_home,
        enroll,
        enrolled_config,
        git_root,
        resolve_target,
    )
    from sync_client.errors import NoCredentials

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
    item = Enrollment(server=server, repo=repo, team_dir=team_dir, git_root=git_root(Path.cwd()))
    added = enroll(config_home(os.environ), item)
    note = None
    try:
        enrolled_config(item, token=options.get("token"), env=os.environ)
    except NoCredentials as error:
        note = f"{error}; the watcher waits for it"

    def human() -> None:
        verb = "enabled" if added else "already enabled"
        click.echo(f"{verb}: {repo} (team dir {team_dir}, server {server})")
        click.echo("`memsync watch --all` serves it (`memsync watch --install` runs that at login)")
        if note:
            click.echo(f"note: {note}")

    _emit({"enabled": item.as_json(), "added": added, "note": note}, human)


@main.command()
@global_options
@run_safely
def disable() -> None:
    """Remove this repo (or --repo/--dir) from the repos `memsync watch --all` serves."""
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

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("memsync watch: %(levelname)s %(message)s"))
    logger = logging.getLogger("memsync.watch")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def _service(uninstall: bool, no_start: bool) -> None:
    from sync_client import service

    kind = service.service_kind()
    if uninstall:
        done = service.uninstall(os.environ, kind, activate=not no_start)
    else:
        done = service.install(os.environ, kind, activate=not no_start)

    def human() -> None:
        if uninstall:
            click.echo(f"removed {done.path}" if done.changed else f"no service at {done.path}")
            if done.changed and not done.activated:
                click.echo(f"if it still runs: `{done.command}`")
            return
        click.echo(f"wrote {done.path}" if done.changed else f"{done.path} is up to date")
        if done.activated:
            click.echo("started; it runs `memsync watch --all` at every login")
        else:
            click.echo(f"to start it now and at every login: `{done.command}`")

    _emit(done.as_json(), human)


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
    """Sync in the foreground as files change, until SIGINT or SIGTERM."""
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
    from sync_client.errors import ConfigError, MemsyncError, NoCredentials, NoRepoIdentity
    from sync_client.watch import Target, Watcher, WatchSettings, read_watch_state

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
        with contextlib.suppress(NoCredentials, NoRepoIdentity):
            here = resolve_here()
            label = here.repo
            other = read_watch_state(here.state_dir)
            if other and other.get("running"):
                raise MemsyncError(
                    f"{label} is already watched by process {other.get('pid')}"
                    " (`memsync status` shows it)"
                )

        def targets() -> list[Target]:
            return [Target(label=label, resolve=resolve_here, identity=("here",), git_cwd=cwd)]

    _watch_logging()
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    watcher = Watcher(
        targets,
        WatchSettings(debounce=debounce, poll_interval=poll_interval),
        env=env,
        watch_file=watch_file,
    )
    watcher.run(stop)
    sys.exit(EXIT_OK)


# --- snapshot seeding for subagents (sync_client/snapshot.py) ---------------------------


@main.group()
def snapshot() -> None:
    """Committed seeds of the team memory for subagents: export, check, seed."""


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
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The subagent's memory dir.",
)


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
    """Write the team memory as a deterministic snapshot for subagents of type TYPE."""
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
        for row in result["skipped"]:
            click.echo(f"skipped: {row['key']}: {_skip_words(row)}")

    _emit(result, human)
    needs_user = any(row["reason"] in _NEEDS_USER_SKIPS for row in result["skipped"])
    sys.exit(EXIT_NEEDS_USER if needs_user else EXIT_OK)


@snapshot.command("check")
@_AGENT_OPTION
@_MEMORY_DIR_OPTION
@_SNAPSHOTS_OPTION
@global_options
@run_safely
def snapshot_check(agent: str, memory_dir: Path, snapshots: Path | None) -> None:
    """Print what MEMORY_DIR needs: none, initialize or prompt-update."""
    from sync_client.errors import ConfigError
    from sync_client.snapshot import InvalidSnapshot, agent_type, check, snapshot_dir

    agent_type(agent)
    try:
        directory = snapshot_dir(Path.cwd(), snapshots, agent)
    except (InvalidSnapshot, ConfigError):
        action = "none"  # outside a repository, or a symlinked folder: no valid snapshot
    else:
        action = check(directory, Path(os.path.abspath(memory_dir)))
    _emit({"action": action}, lambda: click.echo(action))


@snapshot.command("seed")
@_AGENT_OPTION
@_MEMORY_DIR_OPTION
@_SNAPSHOTS_OPTION
@click.option("--update", "mode", flag_value="update", help="Add and overwrite snapshot files.")
@click.option("--replace", "mode", flag_value="replace", help="Make MEMORY_DIR equal to it.")
@global_options
@run_safely
def snapshot_seed(agent: str, memory_dir: Path, snapshots: Path | None, mode: str | None) -> None:
    """Copy the snapshot into MEMORY_DIR (local files it replaces are saved first)."""
    from sync_client.snapshot import SeedMode, saves_dir, seed, snapshot_dir

    directory = snapshot_dir(Path.cwd(), snapshots, agent)
    target = Path(os.path.abspath(memory_dir))
    chosen: SeedMode = "initialize"
    if mode == "update":
        chosen = "update"
    elif mode == "replace":
        chosen = "replace"
    result = seed(directory, target, chosen, saves_dir(os.environ, target))

    def human() -> None:
        click.echo(
            f"seeded {result['memory_dir']} ({result['action']}): "
            f"{len(result['written'])} written, {len(result['removed'])} removed, "
            f"{result['unchanged']} unchanged"
        )
        for row in result["saved"]:
            click.echo(f"saved: {row['key']}: your copy is at {row['saved_to']}")

    _emit(result, human)
