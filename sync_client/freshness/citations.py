"""The code a note cites: repository paths in its text, with the lines they point at.

Pure (no file system, no git), so the rules are tested on texts alone:

    citations(text) -> [Citation]       every path it cites, `:10`, `:10-20`, `#L10`,
                                        `#L10-L20` read as a line range
    cited_paths(citations, exists) -> {path: [range | None]}   the ones the checkout knows

A note cites code the way people point at it: in backticks (`` `src/sync/retry.py` ``),
as a Markdown link's target (`[retry](src/sync/retry.py#L88)`), in a fenced code block
(a command or a stack trace, `python scripts/migrate.py`, relies on the file), or with
a line (`src/sync/retry.py:88`, an editor's `file.py:10:5`, `#L88`) anywhere, a
sentence too. A bare path in a sentence without a line ("see src/app.py for the
rest") only names a file: it cites nothing, so its every change does not make the
note stale. The frontmatter (`description: ...`) is read by the same rules, and a path
the body cites too is the body's: a description naming `src/app.py` does not turn the
body's `src/app.py:10` into a citation of the whole file.

A mention counts only when it is a relative path inside the repository: never a URL
(`https://...`), never an absolute path (`/etc/hosts`, `~/x`), never one with a `.` or
`..` segment past a leading `./`; sentence punctuation after it (`settings/base.py.`)
is not part of it. Which mentions are real files is the checkout's to say
(`freshness`): a word that merely looks like a path (`e.g.`, `v1.2`) is dropped there,
so guessing wide here costs nothing but a lookup.
"""

from __future__ import annotations

import bisect
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


# A fenced code block's fence: three or more backticks or tildes.
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
# A run of backticks: a code span opens with one and closes with the next of its length.
_TICKS = re.compile(r"`+")
# A Markdown link's target, `](target)` or `](target "title")`. Neither part crosses a
# `(`, so every try stops at the next one: linear in the line, whatever a note holds.
_LINK = re.compile(r"\]\(\s{0,8}<?(?P<target>[^()\s<>]{1,1000})>?(?:\s[^()]{0,1000})?\)")


def _words(text: str, found: dict[Citation, None], *, prose: bool) -> None:
    """The path mentions of `text` into `found`; in `prose`, only those with a line."""
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
            if lines is not None or not prose:
                found.setdefault(Citation(path, lines))


def _span(code: str, found: dict[Citation, None]) -> None:
    """A code span: its paths, and a bare name (`Makefile`) when it holds only that."""
    _words(code, found, prose=False)
    inner = _PATH.fullmatch(code.strip())
    if inner is None or inner.group("line") or inner.group("anchor"):
        return  # with a line part it was found above, extension or not
    path = _clean(inner.group("path"))
    if path is not None and not _looks_like_file(path):
        found.setdefault(Citation(path, None))


def _spans(line: str) -> list[tuple[int, int]]:
    """The code spans of `line` as (start, end) of their backtick runs' insides, in
    order. A run opens a span closed by the next run of its length; a run no later
    run matches is text. Each run is looked up once: linear, whatever a note holds."""
    runs = [(match.start(), match.end()) for match in _TICKS.finditer(line)]
    by_length: dict[int, list[int]] = {}
    for number, (start, end) in enumerate(runs):
        by_length.setdefault(end - start, []).append(number)
    spans = []
    number = 0
    while number < len(runs):
        start, end = runs[number]
        same = by_length[end - start]
        later = bisect.bisect_right(same, number)
        if later == len(same):
            number += 1
            continue
        closer = same[later]
        spans.append((end, runs[closer][0]))
        number = closer + 1
    return spans


def _prose(text: str, found: dict[Citation, None]) -> None:
    """Text outside code spans: its link targets, and its sentences."""
    position = 0
    for match in _LINK.finditer(text):
        _words(text[position : match.start()], found, prose=True)
        _words(match.group("target"), found, prose=False)
        position = match.end()
    _words(text[position:], found, prose=True)


def _line(line: str, found: dict[Citation, None]) -> None:
    """One line outside a fenced block: its code spans, link targets and sentences."""
    position = 0
    for start, end in _spans(line):
        # (The text before a span ends with its opening run: no path holds a backtick.)
        _prose(line[position:start], found)
        if end > start:
            _span(line[start:end], found)
        position = end
    _prose(line[position:], found)


def _closes(opened: re.Match[str] | None, fence: str, line: str) -> bool:
    """Whether `line` (its fence match `opened`) closes the block `fence` opened."""
    if opened is None or opened.group(1)[0] != fence[0] or len(opened.group(1)) < len(fence):
        return False
    return not line[opened.end() :].strip()


def _read(lines: list[str]) -> dict[Citation, None]:
    """The citations of `lines`, in order, each once."""
    found: dict[Citation, None] = {}
    fence: str | None = None
    for line in lines:
        opened = _FENCE.match(line)
        if fence is not None:
            if _closes(opened, fence, line):
                fence = None
                continue
            _words(line, found, prose=False)
        elif opened is not None:
            fence = opened.group(1)
        else:
            _line(line, found)
    return found


def _frontmatter_end(lines: list[str]) -> int:
    """How many of `lines` the frontmatter takes (its `---` lines included), 0: none."""
    if not lines or lines[0].lstrip("\ufeff").rstrip() != "---":
        return 0
    for number, line in enumerate(lines[1:], start=1):
        if line.rstrip() in ("---", "..."):
            return number + 1
    return 0


def citations(text: str) -> list[Citation]:
    """Every path `text` cites, frontmatter first, in order of first appearance, each
    (path, range) once; a path the body cites is cited only as the body cites it.
    Whether a path exists is not judged here (see `cited_paths`)."""
    lines = text.splitlines()
    end = _frontmatter_end(lines)
    body = _read(lines[end:])
    in_body = {citation.path for citation in body}
    described = [c for c in _read(lines[1 : end - 1]) if c.path not in in_body] if end else []
    return [*described, *(citation for citation in body if citation not in described)]


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
