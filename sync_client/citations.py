"""The code a note cites: repository paths in its text, with the lines they point at.

Pure (no file system, no git), so the rules are tested on texts alone:

    citations(text) -> [Citation]       every path-like mention, `:10`, `:10-20`,
                                        `#L10`, `#L10-L20` read as a line range
    cited_paths(citations, exists) -> {path: [range | None]}   the ones the checkout knows

A note names code the way people write it: `src/sync/retry.py:88` in a sentence, in
backticks, as a Markdown link's target (`[retry](src/sync/retry.py#L88)`), at the end of
a sentence (`settings/base.py.`), in an editor's `file.py:10:5`. A mention counts only
when it is a relative path inside the repository: never a URL (`https://...`), never an
absolute path (`/etc/hosts`, `~/x`), never one with a `.` or `..` segment past a leading
`./`. Which mentions are real files is the checkout's to say (`freshness`): a word that
merely looks like a path (`e.g.`, `v1.2`) is dropped there, so guessing wide here costs
nothing but a lookup.

Fenced code blocks are read too: a command or a stack trace in a note (`python
scripts/migrate.py`) relies on that file as much as a sentence does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import NamedTuple

__all__ = ["Citation", "LineRange", "citations", "cited_paths"]

# A line range, 1-based and inclusive.
LineRange = tuple[int, int]

# A path: segments of word characters, `-`, `.` and `+`, joined by `/`, then an optional
# line part. The character before it must not make it part of something bigger (an
# absolute path's `/`, an address's `@`, a home's `~`, a word).
_PATH = re.compile(
    r"(?<![\w/@~.\-+\\])"
    r"(?P<path>(?:\./)?[\w\-+][\w\-.+]*(?:/[\w\-.+]+)*)"
    r"(?:"
    r":(?P<line>\d+)(?:-(?P<line_end>\d+)|:\d+)?"
    r"|#L(?P<anchor>\d+)(?:-L?(?P<anchor_end>\d+))?"
    r")?"
)
# A file extension: letters first (`.py`, `.md`, `.h`, `.tsx`, `.mp4`), so `v1.2` is none.
_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,9}$")
# A backticked span holding one bare name: `Makefile`, `Dockerfile`, `bin/run`.
_BACKTICKED = re.compile(r"`([^`\s]+)`")
# Never read more lines of a range than this (a typo like `:1-999999999`).
_MAX_LINE = 10_000_000


class Citation(NamedTuple):
    """A path a note mentions and, when it gives one, the line range it points at."""

    path: str
    lines: LineRange | None = None


def _clean(path: str) -> str | None:
    """`path` as a repository-relative path, or None when it cannot be one."""
    path = path.removeprefix("./")
    # Sentence punctuation is not part of the name: `see docs/b.md.` ends with a `.`.
    path = path.rstrip(".")
    if not path or path.startswith("/"):
        return None
    segments = path.split("/")
    if any(segment in ("", ".", "..") for segment in segments):
        return None
    return path


def _looks_like_file(path: str) -> bool:
    """A mention outside backticks: it has a folder or an extension (`README.md`)."""
    return "/" in path or _EXTENSION.search(path) is not None


def _range(start: str | None, end: str | None) -> LineRange | None:
    if start is None:
        return None
    first = int(start)
    last = int(end) if end is not None else first
    if first < 1 or first > _MAX_LINE:
        return None
    last = min(max(last, first), _MAX_LINE)
    return (first, last)


def citations(text: str) -> list[Citation]:
    """Every path-like mention in `text`, in order of first appearance, each (path,
    range) once. Whether a path exists is not judged here (see `cited_paths`)."""
    found: dict[Citation, None] = {}
    # Word by word (a path holds no space): only a word with a `/` or a `.` can hold
    # one, which keeps the pattern off most of the text.
    for word in text.split():
        if ("/" not in word and "." not in word) or "://" in word or "mailto:" in word:
            continue
        for match in _PATH.finditer(word):
            path = _clean(match.group("path"))
            if path is None or not _looks_like_file(path):
                continue
            if match.group("line") is not None:
                lines = _range(match.group("line"), match.group("line_end"))
            else:
                lines = _range(match.group("anchor"), match.group("anchor_end"))
            found.setdefault(Citation(path, lines))
    for match in _BACKTICKED.finditer(text):
        inner = _PATH.fullmatch(match.group(1))
        if inner is None or inner.group("line") or inner.group("anchor"):
            continue  # with a line part it was found above, extension or not
        path = _clean(inner.group("path"))
        if path is not None and not _looks_like_file(path):
            found.setdefault(Citation(path, None))
    return list(found)


def cited_paths(
    found: Iterable[Citation], exists: Callable[[str], bool]
) -> dict[str, list[LineRange | None]]:
    """The mentions whose path `exists` (in the checkout now, or at the note's commit),
    by path: its line ranges, or `[None]` among them when the whole file is cited."""
    paths: dict[str, list[LineRange | None]] = {}
    for citation in found:
        if not exists(citation.path):
            continue
        ranges = paths.setdefault(citation.path, [])
        if citation.lines not in ranges:
            ranges.append(citation.lines)
    return paths
