"""`memsync log`, `show` and `restore`: a note's versions on the server (`history.py`)."""

from __future__ import annotations

from typing import Any

import click

from sync_client.cli._common import (
    _emit,
    _notice,
    _say,
    _workspace,
    global_options,
    personal_option,
    run_safely,
)

# `memsync log` without -n shows this many commits.
DEFAULT_LOG_COUNT = 20


@click.command()
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
@personal_option
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
        _say(line)


def _key_log_lines(versions: list[dict[str, Any]]) -> None:
    from sync_client.history import provenance_words

    for item in versions:
        _say(
            f"{item['version']:>6}  {item['at']}  {item['op']:<7}  {item['author']}  "
            f"{(item.get('checksum') or '-')[:19]}" + provenance_words(item)
        )


@click.command()
@click.argument("key", metavar="KEY[@N]")
@personal_option
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
        _say(result["content"], nl=False)

    _emit(result, human)


@click.command()
@click.argument("key", metavar="KEY[@N]")
@click.argument("number", metavar="[N]", required=False, type=click.IntRange(min=1))
@click.option("--version", "version", type=click.IntRange(min=1), help="The version to restore.")
@click.option("--before", metavar="TIME", help="The version current at TIME (as log --since).")
@click.option("--force", is_flag=True, help="Save an unpushed local edit of KEY, then restore.")
@personal_option
@global_options
@run_safely
def restore(
    key: str, number: int | None, version: int | None, before: str | None, force: bool
) -> None:
    """Make an old version of KEY current again for the team, then pull it.

    Version N (KEY@N, N or --version N), the version current at --before TIME, or,
    with neither, the last text before KEY was deleted (undo `memsync rm`). The index
    lines that listed KEY come back too (from the newest version of MEMORY.md that had
    them), at the end of the index, and are pushed. MEMORY.md deleted for the team and
    started anew since (rebuilt) comes back as its last version before the delete;
    lines of the replaced index that were the only link to a note are kept at its end.

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
        # Undo is whole: the index lines `memsync rm` took out come back too; an index
        # restored over another keeps the only lines of notes that still exist.
        proposed = result.get("proposal") is not None
        result["index_lines"], result["index_push"] = (
            ([], None) if proposed else history.index_lines_back(workspace, ref.key)
        )
        result["index_kept"], kept_push = (
            ([], None)
            if proposed
            else history.keep_replaced_lines(workspace, ref.key, int(result["version"]))
        )
        result["index_push"] = result["index_push"] or kept_push
    result["restored"] = chosen

    def human() -> None:
        if result.get("proposal") is not None:
            _say(
                f"proposed restoring {ref.key} to version {chosen} for review (proposal "
                f"{result['proposal']}): teammates get it once a reviewer accepts it"
            )
            return
        if result["saved_to"]:
            _say(f"saved your local edit of {ref.key} at {result['saved_to']}")
        _say(f"restored {ref.key} to version {chosen} (now {result['version']})")
        pushed = result["index_push"] or {}
        for row in result["index_lines"]:
            uploaded = row["index"] in pushed.get("uploaded", [])
            sent = "and pushed" if uploaded else "(not pushed yet)"
            count = len(row["lines"])
            _say(
                f"index: put back {count} line{'' if count == 1 else 's'} listing {ref.key} at "
                f"the end of {row['index']} (from its version {row['version']}) {sent}"
            )
        for row in result["index_kept"]:
            sent = "and pushed" if ref.key in pushed.get("uploaded", []) else "(not pushed yet)"
            _say(
                f"index: kept the line of the replaced {ref.key} that links "
                f"{', '.join(row['targets'])}, at its end, {sent} (the only link to a note "
                "that still exists)"
            )
        for key in pushed.get("conflicts", []):
            _say(f"conflict: {key} changed on the server too; `memsync pull` settles it")

    _emit(result, human)


COMMANDS = (log, show, restore)
