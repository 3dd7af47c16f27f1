"""Three-way merge of one note, line by line, as git merges a text file.

Pure: base text + my text + the server's text -> the merged text, or None when the two
edits overlap. Overlap (or edits on adjacent lines) is a conflict exactly as in git;
conflict markers are never produced, because agents read these files as they are. The
line alignment is `merge3`'s (the diff3 of Bazaar and Breezy), not ours.
"""

from __future__ import annotations


def merge_texts(base: str, mine: str, theirs: str) -> str | None:
    """The merge of `mine` and `theirs` against `base`; None when they conflict."""
    if mine == theirs or theirs == base:
        return mine
    if mine == base:
        return theirs
    import merge3  # only for a real three-way merge: most pulls never need one

    merger = merge3.Merge3(
        base.splitlines(keepends=True),
        mine.splitlines(keepends=True),
        theirs.splitlines(keepends=True),
    )
    merged: list[str] = []
    for group in merger.merge_groups():
        if group[0] == "conflict":
            return None
        merged.extend(group[1])
    return "".join(merged)
