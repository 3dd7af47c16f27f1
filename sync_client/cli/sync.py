"""The commands that move notes between the team dir and the server, and say where they stand:
`push`, `pull`, `sync`, `status`, `diff`, `rm`, `resolve`, `conflicts`."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from sync_client.cli._common import (
    _HIDDEN_SKIPS,
    _NEEDS_USER_SKIPS,
    EXIT_NEEDS_USER,
    EXIT_OK,
    _as_json,
    _config,
    _diff_painter,
    _emit,
    _error_json,
    _fail,
    _notice,
    _say,
    _skip_lines,
    _workspace,
    global_options,
    personal_option,
    run_safely,
    team_copy_line,
)
from sync_client.skip_words import skip_words as _skip_words

if TYPE_CHECKING:
    from sync_client.workspace import Workspace


def _push_lines(result: dict[str, Any]) -> None:
    uploaded, conflicts = result["uploaded"], result["conflicts"]
    if result.get("dry_run"):
        for row in result["would_push"]:
            _say(f"would push: {row['key']} ({row['change']}, {row['bytes']:,} bytes)")
        _say(f"would push {len(result['would_push'])} file(s) in {result['batches']} request(s)")
    elif conflicts and not uploaded:
        # A request went out and the server had changed every file in it: say the
        # outcome, not a count that reads like a partial success.
        _say(f"pushed nothing: {len(conflicts)} file(s) changed on the server too")
    elif uploaded or not any(result.get(name) for name in ("proposed", "waiting", "reviewed")):
        _say(f"pushed {len(uploaded)} file(s) in {result['batches']} request(s)")
    _pull_review_lines(result)
    _proposal_lines(result)
    for key in conflicts:
        _say(f"conflict: {key} changed on the server too; run `memsync pull` to settle it")
    _skip_lines(result["skipped"])


def _proposal_lines(result: dict[str, Any]) -> None:
    """A push into a reviewed repo: what went as a proposal, what still waits."""
    from sync_client.watch.review import proposed_lines

    for line in proposed_lines(result.get("proposed") or []):
        _say(line)
    for key in result.get("waiting") or []:
        _say(f"proposed, waiting for review: {key} (not sent again until you edit it)")


def _pull_review_lines(result: dict[str, Any]) -> None:
    """A pull's or push's decided proposals of this person (accepted, rejected)."""
    from sync_client.watch.review import reviewed_lines

    for line in reviewed_lines(result.get("reviewed") or []):
        _say(line)


def _needs_user_after_push(result: dict[str, Any]) -> bool:
    return bool(result["conflicts"]) or any(
        row["reason"] in _NEEDS_USER_SKIPS for row in result["skipped"]
    )


@click.command()
@click.option(
    "--dry-run", is_flag=True, help="List what would be pushed and skipped; send nothing."
)
@personal_option
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
        result = push_now(
            workspace, dry_run=dry_run, progress=progress, notice=_notice, outcomes=True
        ).as_json()
        _add_index(workspace, result)

    def human() -> None:
        _push_lines(result)
        _index_lines(result)

    _emit(result, human)
    sys.exit(EXIT_NEEDS_USER if _needs_user_after_push(result) else EXIT_OK)


def _add_index(workspace: Workspace, result: dict[str, Any]) -> None:
    """Add the team index's health to a push's result (`index`, `index_blocked`)."""
    from sync_client.index import team as team_index
    from sync_client.personal import index_scan

    # The push's own scan: one walk of the team dir per command, not two.
    scanned = index_scan(workspace, workspace.last_scan or workspace.scan())
    result["index"] = team_index.health(workspace.team_dir, scanned, workspace.state_dir).as_json()
    result["index"]["team_deleted"] = team_index.team_deleted(workspace.state)
    result["index_blocked"] = team_index.blocked(result["skipped"])
    _mark_team_copy(workspace, result["index"])


def _mark_team_copy(workspace: Workspace, index: dict[str, Any]) -> None:
    """`index["team_copy"]`: MEMORY.md is missing here but the team has it (a base), so
    the next pull writes it back: no line may say there is none, or offer to start one."""
    from sync_client.index.memory import INDEX_NAME

    index["team_copy"] = not index["exists"] and INDEX_NAME in workspace.state.bases


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
        _say("already up to date")
    else:
        parts = [f"{len(written)} written"]
        if replaced:
            parts[0] += f" ({len(replaced)} replaced in a conflict)"
        if result["restored"]:
            parts.append(f"{len(result['restored'])} restored")
        parts.append(f"{len(merged)} merged")
        parts.append(f"{len(deleted)} deleted")
        parts.append(f"{len(result['kept_local'])} local edit(s) kept")
        _say("pulled: " + ", ".join(parts))
    from sync_client.index.deleted import rm_command

    for key in result["restored"]:
        _say(f"restored: {key}, deleted here: `{rm_command(key)}` deletes it for the team")
    additions = set(result.get("merged_additions") or ())
    for key in merged:
        if key in additions:
            _say(
                f"merged: {key}: you and the server added lines at the same place; both "
                "kept (the server's first); the next push sends the merge"
            )
        else:
            _say(f"merged: {key}: your edit and the server's; the next push sends the merge")
    for conflict in result["conflicts"]:
        key = conflict["key"]
        if conflict["kind"] == "deleted":
            _say(
                f"conflict: {key} was deleted for the team but you edited it; your file is "
                f"kept and not pushed: `memsync resolve {key} --mine` adds it back, "
                "`--theirs` removes it"
            )
        else:
            _say(
                f"conflict: {key}: both edited the same lines; took the server's version, "
                f"yours is saved at {conflict['saved_to']} (`memsync resolve {key} --mine` "
                "puts yours back)"
            )
    for row in result["refused"]:
        _say(f"refused: {row['key']}: {row['reason']}")
    _pull_review_lines(result)


_Report = Callable[[int, int | None], None]


def _pull_progress(bars: _ProgressBars | None) -> tuple[_Report | None, _Report | None]:
    """A pull's two bars: (the download, in bytes; then the files written)."""
    if bars is None:
        return None, None
    return (
        bars.phase("downloading", at_least=DOWNLOAD_BAR_BYTES, in_bytes=True),
        bars.phase("writing"),
    )


@click.command()
@personal_option
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


@click.command()
@personal_option
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
    from sync_client.pull import pull as pull_now
    from sync_client.push import push as push_now
    from sync_client.team_files import UnsafeKey

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


@click.command()
@click.option(
    "--all", "all_repos", is_flag=True, help="Every enrolled repo and its watcher (no request)."
)
@personal_option
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
         to resolve, a MEMORY.md that cannot be shared or that was deleted for the
         team, a paused watcher
    """
    from sync_client.config import config_home
    from sync_client.personal import synced_folders
    from sync_client.state import read_watch_state
    from sync_client.status import status as status_now

    if all_repos:
        _status_all()
        return
    with _workspace() as workspace:
        result = status_now(workspace)
        watcher = read_watch_state(workspace.state_dir)
        _mark_team_copy(workspace, result["index"])
        synced = synced_folders(
            workspace.api.server,
            workspace.api.repo,
            workspace.team_dir,
            workspace.api.space,
            config_home(os.environ),
        )
    result["watcher"] = watcher
    if synced:
        result["synced"] = synced

    def human() -> None:
        if result["offline"]:
            _say(f"server unreachable ({result['offline']}): showing local changes only")
        for label, name in (
            ("modified", "modified"),
            ("new", "new"),
            ("changed on the server", "server_changed"),
        ):
            for key in result[name]:
                _say(f"{label}: {key}")
        for key in result["deleted_locally"]:
            _say(f"deleted locally: {key} (the next pull restores it; `memsync rm` deletes)")
        for key in result["both_changed"]:
            _say(
                f"conflict: {key} changed here and on the server; the next pull merges "
                "different lines, or takes the server's text and saves yours"
            )
        for key in result["deleted_on_server"]:
            _say(
                f"conflict: {key} was deleted for the team but you edited it; "
                f"`memsync resolve {key} --mine` adds it back, `--theirs` removes it"
            )
        for row in result["conflicts"]:
            _say(
                f"conflict copy: {row['key']} saved at {row['saved_to']} "
                f"(`memsync resolve {row['key']} --mine|--theirs`)"
            )
        for row in result["refused"]:
            _say(f"refused by the server: {row['key']}: {_skip_words(row)}")
        for row in synced:
            _say(f"synced: {row['folder']} <-> {row['space']}")
        _review_lines(result)
        _skip_lines(result["skipped"])
        _index_lines(result)
        if result["stale_notes"]:
            _say(f"{_counted(result['stale_notes'], 'note')} may be stale: `memsync stale`")
        quiet = all(row["reason"] in {*_HIDDEN_SKIPS, "ignored"} for row in result["skipped"])
        if (
            quiet
            and not result["index"].get("team_deleted")
            and not any(
                value
                for name, value in result.items()
                if name
                not in ("offline", "watcher", "skipped", "index", "stale_notes", "review", "synced")
            )
        ):
            _say("everything is in sync")
        _say(f"watcher: {_watcher_line(watcher)}")

    _emit(result, human)
    sys.exit(EXIT_NEEDS_USER if _status_needs_user(result) else EXIT_OK)


def _review_lines(result: dict[str, Any]) -> None:
    """A reviewed repo's status lines: proposals waiting, rejected ones, and for a
    reviewer how many wait."""
    from sync_client.review.proposals import rejected_words, returned

    for row in result.get("proposed") or []:
        _say(f"proposed, waiting for review: {row['key']} (proposal {row['id']})")
    for row in result.get("rejected") or []:
        _say(rejected_words(row) if returned(row) else f"rejected: {rejected_words(row)}")
    flags = result.get("review")
    if not flags:
        return
    if flags.get("reviewer"):
        count = int(flags.get("pending") or 0)
        if count:
            _say(
                f"review: {_counted(count, 'proposal waits', 'proposals wait')} for review "
                "(`memsync review` lists them)"
            )
    else:
        _say("review: this repo is reviewed: your edits reach teammates once accepted")


def _status_needs_user(result: dict[str, Any]) -> bool:
    """Whether `status` shows something only the person can settle: a skipped file
    with a fix, a refusal, a conflict copy or deletion to resolve, an index that cannot
    be shared, a watcher paused until they act."""
    watcher = result.get("watcher") or {}
    return bool(
        result["index_blocked"]
        or result["index"].get("team_deleted")
        or result["refused"]
        or result["conflicts"]
        or result["deleted_on_server"]
        or any(row["reason"] in _NEEDS_USER_SKIPS for row in result["skipped"])
        or (watcher.get("running") and watcher.get("suppressed"))
    )


def blocked_line(row: dict[str, Any] | None, words: str) -> list[str]:
    """The line saying the team's index is not shared, with why (`words`) and the fix."""
    if row is None:
        return []
    return [
        f"index NOT SHARED: {row['key']} is not being sent to the team: {words}; "
        "teammates keep the team's older index until it can be pushed"
    ]


def _index_lines(result: dict[str, Any]) -> None:
    """The team index's lines: not shared (and why), then its health warnings."""
    from sync_client.index.team import kept_lines, problem_lines

    blocked = result.get("index_blocked")
    for line in blocked_line(blocked, _skip_words(blocked) if blocked else ""):
        _say(line)
    if "deleted_locally" not in result:  # (status says it on its `deleted locally` line)
        for line in team_copy_line(result.get("index")):
            _say(line)
    for line in problem_lines(result.get("index")):
        _say(line)
    for line in kept_lines(result.get("index_kept") or []):
        _say(line)


@click.command()
@click.argument("key", required=False, metavar="[KEY[@N[..M]]]")
@personal_option
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
    paint = _diff_painter()
    if ref is not None and ref.version is not None:
        _diff_versions(ref, paint)
        return
    from sync_client.diff import diff as diff_now

    with _workspace() as workspace:
        result = diff_now(workspace, key)

    def human() -> None:
        if result["offline"]:
            _say(f"server unreachable ({result['offline']}): local against base only")
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


@click.command()
@click.argument("key")
@click.option(
    "--keep-index", is_flag=True, help="Leave the MEMORY.md lines that link to KEY as they are."
)
@click.option(
    "--delete-team-index",
    "delete_index",
    is_flag=True,
    help="KEY is an index (MEMORY.md): delete it for every teammate.",
)
@global_options
@run_safely
def rm(key: str, keep_index: bool, delete_index: bool) -> None:
    """Delete KEY for the whole team (kept in the server's history).

    The file goes here too; an edit of it you had not pushed is saved first. The
    MEMORY.md lines that link to KEY are removed in the same commit (--keep-index
    leaves them). An index (MEMORY.md) is how every teammate's agent finds the notes:
    it is deleted only with --delete-team-index (`memsync restore MEMORY.md` brings
    it back).

    \b
    Exit codes:
      0  deleted
      1  failed: network, server or auth (one line says why)
      2  usage or configuration error (an invalid KEY, or an index without
         --delete-team-index)
    """
    from sync_client.index.memory import is_index_key
    from sync_client.remove import remove

    with _workspace() as workspace:
        result = remove(workspace, key, keep_index=keep_index, delete_index=delete_index)

    def human() -> None:
        if result.get("proposal") is not None:
            _say(
                f"proposed deleting {key} for review (proposal {result['proposal']}): "
                "teammates keep it until a reviewer accepts; the file stays here meanwhile"
            )
            for row in result["index_lines_removed"]:
                lines = ", ".join(str(number) for number in row["lines"])
                plural = "s" if len(row["lines"]) > 1 else ""
                _say(
                    f"proposed with it: removing {row['index']} line{plural} {lines} "
                    f"(linking to {key})"
                )
            return
        _say(f"deleted {key} for the team (version {result['version']})")
        if is_index_key(key):
            _say(
                f"index: teammates' agents find no note through {key} now; "
                f"`memsync restore {key}` brings it back"
            )
        for row in result["index_lines_removed"]:
            lines = ", ".join(str(number) for number in row["lines"])
            plural = "s" if len(row["lines"]) > 1 else ""
            how = (
                "here; it goes to the team with the next push (a teammate changed it)"
                if result["index_pending"]
                else "in the same commit"
            )
            _say(f"removed {row['index']} line{plural} {lines} (linking to {key}) {how}")

    _emit(result, human)


@click.command()
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
                _say(f"resolved {key}: kept yours and pushed it")
            else:
                _say(f"resolved {key}: kept yours; it was not pushed yet")
                if pushed:
                    _push_lines(pushed)
        else:
            saved = f" (your copy is kept at {result['saved_to']})" if result["saved_to"] else ""
            _say(f"resolved {key}: took the team's side{saved}")

    _emit(result, human)
    pushed = result["push"]
    sys.exit(EXIT_NEEDS_USER if pushed and _needs_user_after_push(pushed) else EXIT_OK)


@click.command()
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
            _say("no saved conflict copies")
        for row in rows:
            _say(f"{row['when']}  {row['key']}  {row['saved_to']}")

    _emit({"conflicts": rows}, human)


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


def _target_lines(watcher: dict[str, Any] | None) -> None:
    """The lines under a `status --all` row: its watcher and what its last push left out."""
    _say(f"  watcher: {_watcher_line(watcher)}")
    for skipped in (watcher or {}).get("skipped") or []:
        _say(f"  skipped: {skipped['key']}: {skipped['words']}")


def _status_all() -> None:
    from sync_client.config import config_home, read_enrolled, state_dir_for
    from sync_client.state import read_watch_state
    from sync_client.watch.personal import personal_rows

    rows: list[dict[str, Any]] = []
    home = config_home(os.environ)
    enrolled = read_enrolled(home)
    for item in enrolled:
        state_dir = state_dir_for(os.environ, item.server, item.repo, item.team_dir)
        rows.append({**item.as_json(), "watcher": read_watch_state(state_dir)})
    personal = []
    for row in personal_rows(enrolled, home, os.environ):
        state_dir = row.pop("state_dir")
        personal.append({**row, "dir": str(row["dir"]), "watcher": read_watch_state(state_dir)})

    def human() -> None:
        if not rows:
            _say("no enrolled repos: `memsync enable` in a repository adds one")
        for row in rows:
            _say(f"{row['repo']}  {row['dir']}  ({row['server']})")
            _target_lines(row["watcher"])
        for row in personal:
            _say(f"{row['space']}  {row['dir']}  ({row['server']})")
            _target_lines(row["watcher"])

    _emit({"repos": rows, "personal": personal} if personal else {"repos": rows}, human)
    watchers = [row["watcher"] or {} for row in [*rows, *personal]]
    needs_user = any(
        any(skipped["reason"] in _NEEDS_USER_SKIPS for skipped in watcher.get("skipped") or [])
        or (watcher.get("running") and watcher.get("suppressed"))
        for watcher in watchers
    )
    sys.exit(EXIT_NEEDS_USER if needs_user else EXIT_OK)


COMMANDS = (push, pull, sync, status, diff, rm, resolve, conflicts)
