"""The team's `MEMORY.md`: parsing, health and fixes, as Claude Code reads it. Pure.

Shared: the client checks and fixes the index of a team dir, the server's web page
shows the health of a repo's index (`sync_client.index.memory` re-exports this).

Claude Code finds notes only through an index: `MEMORY.md` holds one line per note,
`- [Title](file.md) — one-line hook`, and each note starts with frontmatter whose
`name` and `description` it recalls notes by. It loads the index into the model's
context cut to its first 200 lines and then to 25,000 characters (UTF-16 code units,
as JavaScript counts; it calls them bytes), ending on a line boundary.

Here: the links of an index (relative Markdown links, resolved against the index's
folder; links in fenced code, to other sites or outside the team dir do not count),
a note's frontmatter, what Claude Code loads of an index, the health report (too
long, dangling lines, orphan notes, notes without `name`/`description`), and the two
edits memsync makes to an index: adding a line per orphan and dropping lines whose
notes are gone. Neither ever reorders or rewrites a line it keeps. The health check
runs on what it needs of each file (`file_facts`), so a client can keep that per file
and check thousands of notes without reading them again (`check_facts`).

The team index is `MEMORY.md` at the root of the team dir; a `MEMORY.md` it links to
(in a folder, say) is an index too, so its notes are found.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import unquote

# (In a module of their own, for `memsync context`; re-exported here.)
from memsync_protocol.claude_text import INDEX_NAME as INDEX_NAME
from memsync_protocol.claude_text import utf16_length as utf16_length

_NESTED_INDEX = "/" + INDEX_NAME

# What Claude Code (2.1.197 and later) loads of an index.
CLAUDE_MAX_LINES = 200
CLAUDE_MAX_CHARS = 25_000
# The frontmatter fields Claude Code recalls a note by.
RECALL_FIELDS = ("name", "description")
# An added line's hook is cut to this many characters (Claude Code asks for index
# lines under ~150 characters).
HOOK_CHARS = 120

_LINK = re.compile(
    r"\[(?P<text>(?:[^\[\]\\]|\\.)*)\]\((?P<target><[^>\n]*>|[^()\s]+)(?:\s+\"[^\"\n]*\")?\)"
)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
# A relative path that is already a key: no scheme, anchor, query, escape, `.` or `..`
# segment, empty segment or trailing slash (each segment starts with no dot).
_PLAIN_TARGET = re.compile(r"(?:[A-Za-z0-9_-][A-Za-z0-9_.-]*/)*[A-Za-z0-9_-][A-Za-z0-9_.-]*\Z")


def is_index_key(key: str) -> bool:
    """Whether `key` names an index (`MEMORY.md`, at the root or in a folder)."""
    # `posixpath.basename(key) == INDEX_NAME`, without building the name: a check asks
    # this of every file.
    return key == INDEX_NAME or key.endswith(_NESTED_INDEX)


def is_note_key(key: str) -> bool:
    """Whether `key` is a note an index should list: a Markdown file, not an index."""
    return key.endswith(".md") and not is_index_key(key)


@dataclass(frozen=True)
class Link:
    """A link of an index to a key of the team dir, on 1-based `line`."""

    line: int
    target: str


def link_target(index_key: str, raw: str) -> str | None:
    """The team key a link's target names, or None (another site, an anchor, a path
    outside the team dir, an absolute path)."""
    if index_key == INDEX_NAME and _PLAIN_TARGET.match(raw):
        return raw  # what the steps below make of it, without them (the common line)
    target = raw[1:-1] if raw.startswith("<") and raw.endswith(">") else raw
    target = target.split("#", 1)[0].split("?", 1)[0]
    if not target or target.startswith("/") or _SCHEME.match(target):
        return None
    target = unquote(target)
    if "\\" in target or "\0" in target:
        return None
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(index_key), target))
    if joined in (".", "") or joined == ".." or joined.startswith("../"):
        return None
    return joined


def _lines_outside_code(text: str) -> Iterable[tuple[int, str]]:
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        opening = _FENCE.match(line)
        if opening is not None:
            mark = opening.group(1)
            if fence is None:
                fence = mark[0] * len(mark)
                continue
            if mark.startswith(fence):
                fence = None
                continue
        if fence is None:
            yield number, line


def links(index_key: str, text: str) -> list[Link]:
    """Every link of the index `index_key` to a key of the team dir, in order."""
    found = []
    for number, line in _lines_outside_code(text):
        for match in _LINK.finditer(line):
            target = link_target(index_key, match.group("target"))
            if target is not None:
                found.append(Link(number, target))
    return found


def _targets(index_key: str, text: str, seen: dict[str, list[str]]) -> set[str]:
    """The keys `links` finds, without their lines; `seen` keeps each line's keys, so a
    line the old and the new text share is read once (`unlisted` runs on every write of
    an index to the server)."""
    found: set[str] = set()
    for _, line in _lines_outside_code(text):
        if "](" not in line:
            continue
        targets = seen.get(line)
        if targets is None:
            targets = seen[line] = [
                target
                for match in _LINK.finditer(line)
                if (target := link_target(index_key, match.group("target"))) is not None
            ]
        found.update(targets)
    return found


def frontmatter(text: str) -> dict[str, str] | None:
    """The top-level `key: value` fields of a note's frontmatter, or None without one.

    Frontmatter is a block between `---` lines at the very start. Only what the
    health check needs is read: top-level scalar fields (quotes taken off), not YAML
    in full; nested fields (`metadata:` and its children) count as present, empty.
    """
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return None
    fields: dict[str, str] = {}
    for line in lines[1:]:
        if line.strip() in ("---", "..."):
            return fields
        if not line or line[0] in " \t#-":
            continue
        name, colon, value = line.partition(":")
        if colon:
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            fields[name.strip()] = value.strip()
    return None  # never closed: Claude Code reads no frontmatter either


def missing_recall_fields(text: str) -> list[str]:
    """The `name`/`description` fields a note lacks (empty counts as missing)."""
    fields = frontmatter(text) or {}
    return [name for name in RECALL_FIELDS if not fields.get(name)]


@dataclass(frozen=True)
class ClaudeLoad:
    """How much of an index Claude Code puts in the model's context.

    `lines` and `chars` describe the whole index (trimmed, as Claude Code trims it),
    `loaded_lines` and `loaded_chars` what it loads; chars are UTF-16 code units.
    """

    lines: int
    chars: int
    loaded_lines: int
    loaded_chars: int

    @property
    def truncated(self) -> bool:
        """Whether part of the index is never seen by the model."""
        return self.loaded_lines < self.lines or self.loaded_chars < self.chars


def claude_load(text: str) -> ClaudeLoad:
    """Claude Code's cut of an index: the first 200 lines, then at most 25,000
    characters ending before the last newline within them (or at 25,000 when there
    is none)."""
    trimmed = text.strip()
    all_lines = trimmed.split("\n")
    kept = "\n".join(all_lines[:CLAUDE_MAX_LINES])
    units = kept.encode("utf-16-le")
    if len(units) // 2 > CLAUDE_MAX_CHARS:
        head = units[: 2 * (CLAUDE_MAX_CHARS + 1)]
        cut = CLAUDE_MAX_CHARS
        for position in range(len(head) // 2 - 1, 0, -1):
            if head[2 * position : 2 * position + 2] == b"\n\x00":
                cut = position
                break
        kept = units[: 2 * cut].decode("utf-16-le", errors="ignore")
    loaded_lines = 0 if not kept else kept.count("\n") + 1
    return ClaudeLoad(
        lines=len(all_lines) if trimmed else 0,
        chars=utf16_length(trimmed),
        loaded_lines=loaded_lines,
        loaded_chars=utf16_length(kept),
    )


@dataclass(frozen=True)
class IndexProblem:
    """One thing about the team's index worth a person's (or an agent's) attention.

    `kind`: `too-long` (Claude Code will not load all of `key`), `dangling` (`key`'s
    line `line` links to `target`, which does not exist), `orphan` (no index line
    links to the note `key`) or `no-frontmatter` (`key` lacks `missing`).
    """

    kind: str
    key: str
    line: int | None = None
    target: str | None = None
    missing: tuple[str, ...] = ()
    detail: str = ""
    fix: str = ""

    def as_row(self) -> dict[str, Any]:
        """The `--json` row: the fields that apply to this kind."""
        # vars(), not asdict(): a repo without an index has thousands of these rows.
        row = {name: value for name, value in vars(self).items() if value not in (None, "", ())}
        if self.missing:
            row["missing"] = list(self.missing)
        return row


@dataclass
class IndexReport:
    """The health of the team's index over the team dir's files."""

    index: str = INDEX_NAME
    exists: bool = False
    load: ClaudeLoad | None = None
    indexes: list[str] = field(default_factory=list)
    problems: list[IndexProblem] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[IndexProblem]:
        """The problems of one kind, in report order."""
        return [problem for problem in self.problems if problem.kind == kind]

    def as_json(self) -> dict[str, Any]:
        """The `index` object of `status --json`, `doctor --json`, `index --json`."""
        load = (
            None if self.load is None else {**asdict(self.load), "truncated": self.load.truncated}
        )
        return {
            "index": self.index,
            "exists": self.exists,
            "indexes": self.indexes,
            "claude_code": load,
            "problems": [problem.as_row() for problem in self.problems],
        }


def reachable_indexes(texts: Mapping[str, str], root: str = INDEX_NAME) -> list[str]:
    """The root index and every index it links to, transitively, in the order found."""
    return _reachable(
        {key: links(key, text) for key, text in texts.items() if is_index_key(key)}, root
    )


def _reachable(index_links: Mapping[str, Sequence[Link]], root: str = INDEX_NAME) -> list[str]:
    """`reachable_indexes` over each index's links (`index_links`: index key -> links)."""
    if root not in index_links:
        return []
    found = [root]
    for index_key in found:
        for link in index_links[index_key]:
            if link.target in index_links and link.target not in found:
                found.append(link.target)
    return found


@dataclass(frozen=True)
class FileFacts:
    """What the health check needs of one file (`file_facts`): an index's links and,
    for the root index, what Claude Code loads of it; a note's missing recall fields.

    Each depends only on the file's key and text, so a client keeps them per file and
    checks a big team dir without reading every note again (`check_facts`).
    """

    links: tuple[Link, ...] = ()
    load: ClaudeLoad | None = None
    missing: tuple[str, ...] = ()


def file_facts(key: str, text: str) -> FileFacts:
    """What `check_facts` needs of the file `key` holding `text`."""
    if is_index_key(key):
        load = claude_load(text) if key == INDEX_NAME else None
        return FileFacts(links=tuple(links(key, text)), load=load)
    if is_note_key(key):
        return FileFacts(missing=tuple(missing_recall_fields(text)))
    return FileFacts()


def check(texts: Mapping[str, str], present: Iterable[str] = ()) -> IndexReport:
    """The health of the team's index.

    `texts`: key -> text of the team dir's synced Markdown files (notes and indexes);
    `present`: every other key a file exists for (a link to it is not dangling).
    """
    return check_facts({key: file_facts(key, text) for key, text in texts.items()}, present)


def check_facts(facts: Mapping[str, FileFacts], present: Iterable[str] = ()) -> IndexReport:
    """`check` over each file's `file_facts` instead of its text."""
    existing = set(facts) | set(present)
    report = IndexReport(exists=INDEX_NAME in facts)
    index_links = {key: fact.links for key, fact in facts.items() if is_index_key(key)}
    report.indexes = _reachable(index_links)
    listed: set[str] = set()
    load = facts[INDEX_NAME].load if report.exists else None
    if load is not None:
        report.load = load
        if load.truncated:
            report.problems.append(_too_long(load))
    for index_key in report.indexes:
        for link in facts[index_key].links:
            listed.add(link.target)
            if link.target not in existing:
                report.problems.append(
                    IndexProblem(
                        kind="dangling",
                        key=index_key,
                        line=link.line,
                        target=link.target,
                        detail=f"{index_key} line {link.line} links to {link.target}, "
                        "which does not exist",
                        fix="`memsync index --fix` removes the line",
                    )
                )
    notes = sorted(key for key in facts if key.endswith(".md") and key not in index_links)
    for key in notes:
        if key not in listed:
            report.problems.append(
                IndexProblem(
                    kind="orphan",
                    key=key,
                    detail=f"no line of {INDEX_NAME} links to {key}: Claude Code will not find it",
                    fix="`memsync index --fix` adds a line for it",
                )
            )
    for key in notes:
        missing = facts[key].missing
        if missing:
            report.problems.append(
                IndexProblem(
                    kind="no-frontmatter",
                    key=key,
                    missing=missing,
                    detail=f"{key} has no {' or '.join(missing)} in its frontmatter: Claude "
                    "Code recalls notes by them",
                    fix="start the note with `---`, `name: ...`, `description: ...`, `---`",
                )
            )
    return report


def _too_long(load: ClaudeLoad) -> IndexProblem:
    unseen_lines = load.lines - load.loaded_lines
    unseen_chars = load.chars - load.loaded_chars
    size = f"{load.lines:,} lines and {load.chars:,} characters"
    return IndexProblem(
        kind="too-long",
        key=INDEX_NAME,
        detail=f"{INDEX_NAME} has {size}; Claude Code loads only the first "
        f"{CLAUDE_MAX_LINES} lines and {CLAUDE_MAX_CHARS:,} characters, so "
        f"{unseen_lines:,} lines ({unseen_chars:,} characters) never reach the agent",
        fix="keep one short line per note and move detail into the notes",
    )


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _title_and_hook(key: str, text: str) -> tuple[str, str]:
    """A note's title and hook for its index line: its frontmatter's name and
    description, else its first heading (or file name) and first line of prose."""
    fields = frontmatter(text) or {}
    title = _one_line(fields.get("name", ""))
    hook = _one_line(fields.get("description", ""))
    body = text
    if text.startswith("---"):
        parts = text.split("\n---", 1)
        body = parts[1].split("\n", 1)[1] if len(parts) == 2 and "\n" in parts[1] else ""
    for line in body.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            title = title or _one_line(stripped.lstrip("#"))
            continue
        hook = hook or _one_line(stripped)
        if title and hook:
            break
    title = title or posixpath.splitext(posixpath.basename(key))[0]
    if len(hook) > HOOK_CHARS:
        hook = hook[: HOOK_CHARS - 1].rstrip() + "…"
    # The title sits inside [...]: brackets would end the link early.
    title = title.replace("[", "(").replace("]", ")")
    return title, hook


def _link_path(index_key: str, key: str) -> str:
    relative = posixpath.relpath(key, posixpath.dirname(index_key) or ".")
    return relative.replace(" ", "%20").replace("(", "%28").replace(")", "%29")


def index_line(key: str, text: str, index_key: str = INDEX_NAME) -> str:
    """The line that lists the note `key` (text `text`): `- [name](key) — description`."""
    title, hook = _title_and_hook(key, text)
    line = f"- [{title}]({_link_path(index_key, key)})"
    return f"{line} — {hook}" if hook else line


def drop_lines_linking(index_key: str, text: str, gone: set[str]) -> tuple[str, list[int]]:
    """`text` without the lines whose team links all point into `gone`; (new text,
    1-based numbers of the removed lines). Every other line is kept byte for byte."""
    by_line: dict[int, list[str]] = {}
    for link in links(index_key, text):
        by_line.setdefault(link.line, []).append(link.target)
    doomed = {
        number
        for number, targets in by_line.items()
        if targets and all(target in gone for target in targets)
    }
    if not doomed:
        return text, []
    kept = [
        line
        for number, line in enumerate(text.splitlines(keepends=True), start=1)
        if number not in doomed
    ]
    return "".join(kept), sorted(doomed)


def lines_linking(index_key: str, text: str, targets: set[str]) -> list[str]:
    """The lines of `text` (without their line ends) that link to a key of `targets`,
    in order, each once: what an undo puts back, what a rewrite must not drop."""
    numbers = sorted({link.line for link in links(index_key, text) if link.target in targets})
    all_lines = text.splitlines()
    return [all_lines[number - 1] for number in numbers]


# Texts of an index read back, newest first, to find the lines that listed a note being
# restored: by `memsync restore` (each read is a request) and the web page's restore.
RESTORE_LOOKBACK = 50


def restore_lines(
    index_key: str, key: str, versions: Iterable[tuple[int, str | None]]
) -> tuple[int, list[str]] | None:
    """The lines a restore of the note `key` puts back at the end of `index_key`:
    (version, lines) of the newest version of the index that had lines linking `key`,
    or None when none of its last `RESTORE_LOOKBACK` texts did.

    `versions`: the index's versions newest first, (version, text; None for a delete,
    which is skipped and not counted). It is read lazily, only as far as needed, so a
    caller may read each text when asked for it. The caller checks first that the index
    does not link `key` now (then nothing is put back).
    """
    read = 0
    for version, text in versions:
        if text is None:
            continue
        found = lines_linking(index_key, text, {key})
        if found:
            return version, found
        read += 1
        if read >= RESTORE_LOOKBACK:
            break
    return None


def unlisted(index_key: str, old_text: str, new_text: str, live: Container[str]) -> set[str]:
    """The keys of `live` that `old_text` (the index `index_key` as it is) links and
    `new_text` (a rewrite of it) no longer links anywhere.

    The team index's rule (DESIGN 9): a live note's index line is removed only with the
    note. A rewrite may drop none of these; the client puts their lines back
    (`keep_listed`), the server refuses a PUT that drops one (docs/protocol.md 3.3).
    `live`: the keys live once the write is made (a note deleted by the same write is
    not, so its line may go with it).
    """
    if old_text.endswith("\n") and new_text.startswith(old_text):
        return set()  # lines added at the end: every old line reads as it did (the most
        # common write of an index, a new note's line), with no need to read them
    seen: dict[str, list[str]] = {}
    linked = {target for target in _targets(index_key, old_text, seen) if target in live}
    if not linked:
        return set()
    return linked - _targets(index_key, new_text, seen)


@dataclass(frozen=True)
class KeptLine:
    """A line of the old index that a rewrite dropped and `keep_listed` put back: the
    only link to `targets`, live notes that the new text no longer links."""

    line: str
    targets: tuple[str, ...]


def keep_listed(
    index_key: str, old_text: str, new_text: str, live: set[str]
) -> tuple[str, list[KeptLine]]:
    """`new_text` with every line of `old_text` that linked a note of `live` which
    `new_text` no longer links put back at its end; (text, the lines put back).

    A rewrite may reword, reorder and regroup lines: a note linked anywhere in the new
    text is listed, whatever the line says. Only a note that is gone from `live` may
    lose its last line; deleting the note is how a team drops it from the index.
    """
    orphaned = unlisted(index_key, old_text, new_text, live)
    if not orphaned:
        return new_text, []
    old_lines = old_text.splitlines()
    targets_by_line: dict[int, list[str]] = {}
    for link in links(index_key, old_text):
        if link.target in orphaned and link.target not in targets_by_line.get(link.line, []):
            targets_by_line.setdefault(link.line, []).append(link.target)
    kept = [
        KeptLine(old_lines[number - 1], tuple(targets))
        for number, targets in sorted(targets_by_line.items())
    ]
    return append_lines(new_text, [item.line for item in kept]), kept


def append_lines(text: str, lines: list[str]) -> str:
    """`text` with `lines` added at its end (a newline first when it lacks one)."""
    if not lines:
        return text
    head = text if not text or text.endswith("\n") else text + "\n"
    return head + "".join(line + "\n" for line in lines)


@dataclass(frozen=True)
class IndexFix:
    """What `memsync index --fix` does: the new text of each index it changes, the
    notes it lists at the end of the root index, and the dangling lines it removes
    (`{index, line, target}`, numbered as in the old text)."""

    texts: dict[str, str]
    added: list[str]
    removed: list[dict[str, Any]]

    @property
    def changed(self) -> bool:
        """Whether any index text changes."""
        return bool(self.texts)


def fix(texts: Mapping[str, str], present: Iterable[str] = ()) -> IndexFix:
    """Every index without the lines whose every link dangles, and the root index
    with a line added for each orphan (sorted by key, at its end; the root index is
    created when there is none)."""
    report = check(texts, present)
    dangling: dict[str, dict[int, str]] = {}
    for problem in report.of_kind("dangling"):
        if problem.line is not None and problem.target is not None:
            dangling.setdefault(problem.key, {})[problem.line] = problem.target
    new_texts: dict[str, str] = {}
    removed: list[dict[str, Any]] = []
    for index_key, targets in dangling.items():
        new_text, numbers = drop_lines_linking(index_key, texts[index_key], set(targets.values()))
        if numbers:
            new_texts[index_key] = new_text
            removed.extend(
                {"index": index_key, "line": n, "target": targets.get(n)} for n in numbers
            )
    orphans = [problem.key for problem in report.of_kind("orphan")]
    if orphans:
        current = new_texts.get(INDEX_NAME, texts.get(INDEX_NAME, ""))
        new_texts[INDEX_NAME] = append_lines(current, [index_line(k, texts[k]) for k in orphans])
    return IndexFix(texts=new_texts, added=orphans, removed=removed)
