"""The plumbing every `memsync` command shares, at the bottom of `sync_client.cli`.

Exit codes, the global options, the options' config, JSON output (`_emit`), turning a
failure into one line and its exit code (`run_safely`), and the few lines more than one
command group prints. Command modules import this module and nothing else of the
package, so a command group can move or grow without reaching into another.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

import click

from memsync_protocol.visible import visible as visible
from sync_client.skip_words import skip_words as _skip_words

if TYPE_CHECKING:
    from sync_client.config import ClientConfig
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
    "too-many-proposals",
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
    # Not among the bare `global_options`: only the commands `personal_option` marks.
    "personal": (
        "personal",
        click.option(
            "--personal",
            is_flag=True,
            default=None,
            help="Your private memory folder and your personal space, not the team's.",
        ),
    ),
    "agents": (
        "agents",
        click.option(
            "--agents",
            is_flag=True,
            default=None,
            help="Your agent memory (~/.claude/agent-memory) and its space; no repo needed.",
        ),
    ),
}
# The global options a bare `@global_options` adds.
_BARE = ("server", "token", "repo", "dir", "json")


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


def personal_option(command: F) -> F:
    """`--personal`: the command works on the private memory folder and the person's
    own space of the repo (`sync_client.personal`) instead of the team dir; `--agents`:
    on the user-scope agent memory and the person's global space, from any folder."""
    return _with_global_options(command, ("personal", "agents"))


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
        return _with_global_options(selected[0], _BARE)
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


def _target_config() -> ClientConfig:
    """The config of the folder a command works on: the team dir, or with `--personal`
    the private memory folder, or with `--agents` the agent memory (server and token
    alone: no repo, no checkout needed). Both at once is a `ConfigError` (exit 2)."""
    from sync_client.errors import ConfigError

    options = _options()
    if not options.get("agents"):
        config = _config()
        if options.get("personal"):
            from sync_client.personal import personal_config

            config = personal_config(config, os.environ)
        return config
    from sync_client.config import resolve_options_parts
    from sync_client.personal import agent_memory_target

    if options.get("personal"):
        raise ConfigError("--personal and --agents name different folders: give one of them")
    for name, flag in (("repo", "--repo"), ("team_dir", "--dir")):
        if options.get(name) is not None:
            raise ConfigError(f"--agents works on your agent memory, not a repo: drop {flag}")
    parts = resolve_options_parts(options, cwd=Path.cwd(), env=os.environ)
    server, token = parts.server, parts.token
    if isinstance(server, ConfigError):
        raise server
    if isinstance(token, ConfigError):
        raise token
    return agent_memory_target(server, token, os.environ)


@contextmanager
def _workspace() -> Iterator[Workspace]:
    from sync_client.api import Api
    from sync_client.workspace import Workspace

    config = _target_config()
    with Api(
        config.server, config.token, config.repo, timeout=_timeout(), space=config.space
    ) as api:
        workspace = Workspace.open(config.team_dir, config.state_dir, api)
        try:
            yield workspace
        finally:
            workspace.close()


def _say(message: str = "", *, nl: bool = True, err: bool = False) -> None:
    """Print a line for a person, with every control and bidi character in it made
    visible (`memsync_protocol.visible`): a line may hold a note's text, a key, an
    author's name, a reason or a server's message, and none of them may move the
    cursor, erase a line or turn text around, on a terminal or in a pipe.

    Every human-readable line of the CLI goes through here; the JSON of `--json`
    does not (it is exact: a program reads each text as it is); a coloured
    diff goes through `_diff_painter`, which makes the text visible before colouring."""
    click.echo(visible(message), nl=nl, err=err)


def _diff_painter() -> Callable[[str], str]:
    """What a diff's lines are printed through: made visible, then, for a person,
    coloured (the colour's own escapes are the only ones that reach a terminal)."""
    if _colour_stdout():
        return lambda text: _colour_diff(visible(text))
    return visible


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
    from sync_client.team_files import UnsafeKey

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
    _say(f"memsync: {shown['message']}", err=True)
    sys.exit(code)


def run_safely(command: F) -> F:
    """Turn library failures into one line and the documented exit code."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from sync_client.errors import MemsyncError
        from sync_client.team_files import UnsafeKey

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
            _say(f"skipped: {row['key']}: {_skip_words(row)}")
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
        _say(f"skipped {_count(len(more), 'more file')}: {words} (`--json` lists every one)")
    counted = []
    if hidden[False]:
        counted.append(_count(hidden[False], "hidden or leftover file"))
    if hidden[True]:
        counted.append(_count(hidden[True], "hidden folder"))
    if ignored[False] or ignored[True]:
        counted.append(f"{_things(ignored[False], ignored[True])} matched by .memsyncignore")
    if counted:
        _say("ignored " + ", ".join(counted))


def _notice(line: str) -> None:
    """A fact worth seeing while a command runs (`creating team memory for ...`).

    Written to `sys.stderr` as it is now: while a progress bar is up, rich has put its
    proxy there, which prints the line above the bar (click's own stderr would not).
    """
    click.echo(visible(f"memsync: {line}"), file=sys.stderr)


def team_copy_line(index: dict[str, Any] | None) -> list[str]:
    """The line for a MEMORY.md missing here that the team has (`index["team_copy"]`):
    the team's index is not lost, and what brings it back."""
    if not index or index.get("exists") or not index.get("team_copy"):
        return []
    return [
        "index: MEMORY.md is missing here; the team has one: the next pull (or a running "
        "watcher) writes it back, `memsync index --fix` does it now "
        "(`memsync rm MEMORY.md --delete-team-index` deletes it for the team)"
    ]


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
