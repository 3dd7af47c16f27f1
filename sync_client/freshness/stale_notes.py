"""The stale notes of a team dir as `memsync status` and the session-start block see them.

    stale_kinds_cached(checkout, team_dir, state_dir) -> {key: [kind]}   `freshness`'s
                        answer, kept in the state dir while nothing it came from changed
    for_block(index_text, cwd, team_dir, state_dir) -> StaleNotes | None
    block_lines(stale, room, shown_key) -> [str]    the block's words on them, in `room`

The block names the stale notes in a section of its own after the index, not on each
note's index line: a mark on every line lengthened the index, so that with most notes
stale the block showed a third of the lines it shows without them. The section is a
count per reason, code changed (`gone`, `changed`, `lines`) or the note's date
(`expired`, `review`), each with its own words, then as many of the notes' names as
fit: the index lines come first, and the section takes from the block's size only its
two counts; the names fill what the index leaves, up to `MAX_SECTION_CHARS`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from sync_client.claude_code import utf16_length
from sync_client.freshness.report import (
    _COMMIT,
    CODE_KINDS,
    RECORD_FILE,
    _checkout_above,
    _head,
    _note_files,
    stale_kinds,
)

__all__ = [
    "CACHE_FILE",
    "StaleNotes",
    "block_lines",
    "counts_cost",
    "for_block",
    "stale_kinds_cached",
]

# The last answer, and what it was computed from, in the state dir.
CACHE_FILE = "freshness-cache.json"
# The most the block's section on stale notes takes, names included.
MAX_SECTION_CHARS = 2_000


class StaleNotes(NamedTuple):
    """The stale notes of a team dir, index order first: those citing code that
    changed (`code`), those past their date (`dated`)."""

    code: tuple[str, ...]
    dated: tuple[str, ...]


def stale_kinds_cached(
    checkout: Path, team_dir: Path, state_dir: Path | None, exclude: str | None = None
) -> dict[str, list[str]]:
    """`freshness.stale_kinds`, kept in the state dir (`CACHE_FILE`) with what it was
    computed from: `HEAD` (read from git's files), the day, the notes' names, sizes and
    mtimes, and the record file's. While none of these changed, no note is read and git
    is not run: a session start then costs a walk of the team dir."""
    head = _head_from_files(checkout) or _head(checkout)
    if head is None or state_dir is None:
        return stale_kinds(checkout, team_dir, state_dir, exclude)
    try:
        records_mtime = (state_dir / RECORD_FILE).stat().st_mtime_ns
    except OSError:
        records_mtime = 0
    files = _note_files(team_dir, exclude)
    source = [
        str(checkout),
        head,
        time.strftime("%Y-%m-%d", time.gmtime()),
        records_mtime,
        [[key, info.st_size, info.st_mtime_ns] for key, _, info in files],
    ]
    cache = state_dir / CACHE_FILE
    try:
        kept = json.loads(cache.read_bytes())
        kinds = kept.get("kinds")
        if kept.get("source") == source and isinstance(kinds, dict):
            return {
                key: [kind for kind in value if isinstance(kind, str)]
                for key, value in kinds.items()
                if isinstance(key, str) and isinstance(value, list)
            }
    except (OSError, ValueError, AttributeError):
        pass
    found = stale_kinds(checkout, team_dir, state_dir, exclude)
    from sync_client.state import atomic_write

    atomic_write(cache, json.dumps({"source": source, "kinds": found}).encode("utf-8"))
    return found


def _head_from_files(checkout: Path) -> str | None:
    """The commit `HEAD` names, read from `.git` (a loose or packed branch, or a
    detached head); None when the files do not say it simply (a worktree's `.git`
    file, say): the caller then asks `git rev-parse`."""
    git = checkout / ".git"
    try:
        head = (git / "HEAD").read_text(encoding="utf-8").strip()
        if _COMMIT.fullmatch(head):
            return head
        if not head.startswith("ref: refs/"):
            return None
        ref = head.removeprefix("ref: ")
        try:
            loose = (git / ref).read_text(encoding="utf-8").strip()
            return loose if _COMMIT.fullmatch(loose) else None
        except FileNotFoundError:
            pass
        for line in (git / "packed-refs").read_text(encoding="utf-8").splitlines():
            commit, _, name = line.partition(" ")
            if name == ref and _COMMIT.fullmatch(commit):
                return commit
    except (OSError, UnicodeDecodeError):
        return None
    return None


def for_block(
    index_text: str | None, cwd: Path, team_dir: Path, state_dir: Path | None
) -> StaleNotes | None:
    """The stale notes of `team_dir`, checked against the checkout of `cwd`, those the
    index links first in its order; None when none is stale or nothing can be checked:
    a session start never fails for this."""
    try:
        checkout = _checkout_above(cwd)
        if checkout is None:
            return None
        kinds = stale_kinds_cached(checkout, team_dir, state_dir)
        if not kinds:
            return None
        from memsync_protocol.memory_index import links

        order = {key: None for key in sorted(kinds)}
        if index_text:
            linked = {link.target: None for link in links("MEMORY.md", index_text)}
            order = {**{key: None for key in linked if key in kinds}, **order}
        code = tuple(key for key in order if CODE_KINDS.intersection(kinds[key]))
        dated = tuple(key for key in order if set(kinds[key]) - CODE_KINDS)
        return StaleNotes(code, dated)
    except Exception:
        return None


def _plural(count: int, one: str, many: str) -> str:
    return one if count == 1 else many


def _heads(stale: StaleNotes) -> list[tuple[str, tuple[str, ...]]]:
    """Each reason's words, with its notes."""
    heads = []
    if stale.code:
        count = len(stale.code)
        heads.append(
            (
                f"Stale: {count:,} team {_plural(count, 'note cites', 'notes cite')} code "
                f"changed since {_plural(count, 'it was', 'they were')} written; check the "
                f"code before relying on {_plural(count, 'it', 'them')} (`memsync stale` "
                "says what changed)",
                stale.code,
            )
        )
    if stale.dated:
        count = len(stale.dated)
        heads.append(
            (
                f"Expired: {count:,} team {_plural(count, 'note is', 'notes are')} past "
                f"{_plural(count, 'its', 'their')} `expires` date or due for review; check "
                f"that {_plural(count, 'it still holds', 'they still hold')} before relying "
                f"on {_plural(count, 'it', 'them')}",
                stale.dated,
            )
        )
    return heads


def _line(head: str, names: list[str], left: int) -> str:
    if not names:
        return f"{head}."
    more = f", and {left:,} more" if left else ""
    return f"{head}: {', '.join(names)}{more}."


def counts_cost(stale: StaleNotes) -> int:
    """The room `block_lines` needs for the counts alone (UTF-16 units, newlines in)."""
    return sum(utf16_length(_line(head, [], 0)) + 1 for head, _ in _heads(stale))


def block_lines(stale: StaleNotes, room: int, shown_key: Callable[[str], str]) -> list[str]:
    """The block's section on `stale`, at most `room` UTF-16 units with a newline after
    each line (or `MAX_SECTION_CHARS`): each reason's count, then as many names as fit,
    each reason given an equal share of the room its count leaves (the shorter list
    first, what it does not use going to the other). [] when not even the counts fit."""
    heads = _heads(stale)
    lines = [_line(head, [], 0) for head, _ in heads]
    extra = min(room, MAX_SECTION_CHARS) - counts_cost(stale)
    if extra < 0:
        return []
    order = sorted(range(len(heads)), key=lambda number: len(heads[number][1]))
    for turn, number in enumerate(order):
        head, keys = heads[number]
        share = extra // (len(order) - turn)
        names: list[str] = []
        for key in keys:
            candidate = _line(head, [*names, shown_key(key)], len(keys) - len(names) - 1)
            grown = utf16_length(candidate) - utf16_length(lines[number])
            if grown > share:
                break
            names.append(shown_key(key))
            share -= grown
            extra -= grown
            lines[number] = candidate
    return lines
