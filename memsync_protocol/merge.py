"""Three-way merge of one note, line by line, as git merges a text file.

Shared by the client's pull and the server's accept of a proposal (docs/protocol.md
section 3.12), so a reviewer's accept merges exactly as a teammate's pull would.

Pure: base text + my text + the server's text -> the merged text, or None when the two
edits overlap. The line alignment is `merge3`'s (the diff3 of Bazaar and Breezy), not
ours. Conflict markers are never produced, because agents read these files as they are.

One rule differs from git's default: two sides that only *inserted* lines at the same
place (the conflicting region holds no base line: nothing there was changed or removed)
do not conflict. Both blocks are kept, the server's first, then mine without the lines
the server's block already has (git's `merge=union`, applied only to pure insertions).
This is the everyday case of two agents appending an index line, or a fact, to one note
at the same time. Likewise, lines one side removed while the other kept them as they
were and only added lines right next to them merge to the additions (a teammate's
index line appended after the line `memsync rm` took out). Edits of the same lines,
or an edit of lines the other side removed, still conflict, exactly as in git.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class NoteMerge:
    """A clean merge: its text, and whether additions at one place were both kept."""

    text: str
    kept_both_additions: bool = False


def merge_texts(base: str, mine: str, theirs: str) -> str | None:
    """The merge of `mine` and `theirs` against `base`; None when they conflict."""
    merged = merge_notes(base, mine, theirs)
    return None if merged is None else merged.text


def merge_notes(base: str, mine: str, theirs: str, *, union: bool = True) -> NoteMerge | None:
    """The merge of `mine` and `theirs` against `base`, or None when they conflict.

    `union=False` turns the pure-insertion rule off (git's plain rule): a caller uses it
    for two files both created from nothing, whose "insertions" are whole notes.
    """
    if mine == theirs or theirs == base:
        return NoteMerge(mine)
    if mine == base:
        return NoteMerge(theirs)
    merged = _merge_lines(base, mine, theirs, union=union)
    if merged is not None or not union:
        return merged
    # A file without its last newline: appending a line changes the old last line
    # (`b` -> `b\n`), which would make both appends an edit of the same line.
    texts = (base, mine, theirs)
    if all(text == "" or text.endswith("\n") for text in texts):
        return None
    ended = [text if text == "" or text.endswith("\n") else text + "\n" for text in texts]
    merged = _merge_lines(*ended, union=True)
    if merged is None:
        return None
    if not (mine.endswith("\n") or theirs.endswith("\n")) and merged.text.endswith("\n"):
        merged = NoteMerge(merged.text[:-1], merged.kept_both_additions)
    return merged


def _merge_lines(base: str, mine: str, theirs: str, *, union: bool) -> NoteMerge | None:
    import merge3  # only for a real three-way merge: most pulls never need one

    merger = merge3.Merge3(
        base.splitlines(keepends=True),
        mine.splitlines(keepends=True),
        theirs.splitlines(keepends=True),
    )
    merged: list[str] = []
    kept_both = False
    for group in merger.merge_groups():
        if group[0] != "conflict":
            merged.extend(group[1])
            continue
        _, base_lines, my_lines, their_lines = group
        if not union:
            return None
        if not base_lines:
            merged.extend(insertions_of_both(their_lines, my_lines))
            kept_both = True
            continue
        kept = _removed_beside_added(base_lines, my_lines, their_lines)
        if kept is None:
            kept = _removed_beside_added(base_lines, their_lines, my_lines)
        if kept is None:
            return None
        merged.extend(kept)
    return NoteMerge("".join(merged), kept_both)


def _removed_beside_added(
    base: Sequence[str], removing: Sequence[str], adding: Sequence[str]
) -> list[str] | None:
    """One side removed the region's lines, the other kept them as they were and added
    lines right before or after: the additions alone (both edits hold). None otherwise."""
    if removing:
        return None
    size = len(base)
    if len(adding) > size and list(adding[:size]) == list(base):
        return list(adding[size:])
    if len(adding) > size and list(adding[-size:]) == list(base):
        return list(adding[:-size])
    return None


def insertions_of_both(theirs: Sequence[str], mine: Sequence[str]) -> list[str]:
    """Both blocks inserted at one place: theirs, then mine without the lines theirs
    already has (blank lines always kept, they only separate)."""
    seen = {line.rstrip("\r\n") for line in theirs if line.strip()}
    out = list(theirs)
    if out and not out[-1].endswith("\n") and mine:
        out[-1] += "\n"
    for line in mine:
        if line.strip() and line.rstrip("\r\n") in seen:
            continue
        out.append(line)
    return out
