"""Which notes cite code that has changed since they were written, and which have expired.

A note that names `src/sync/retry.py:88` was true of the code the day it was written;
an agent reading it later states it as fact. This module checks every note of a team
dir against the git checkout it belongs to, where the code is:

    check(checkout, team_dir, state_dir) -> Report      per note: its reasons, if any
    record_written(workspace, keys)                     a push or pull remembers HEAD

A note's reasons:
- `gone`: a file it cites is no longer in the checkout;
- `changed`: a file it cites as a whole changed since the note's commit (how many
  commits touched it since, and the newest of them);
- `lines`: a line range it cites (`src/a.py:10`, `#L10-L20`) changed since;
- `expired` / `review`: its frontmatter's `expires: YYYY-MM-DD` has passed, or
  `review-after: N days` counted from when it was written.

When a note was written ("written at") is a commit where it is known, else a time:
this machine's own record (`written-at.json` in the state dir: each key's checksum with
the checkout's `HEAD` and the time, kept when a push commits the key or a pull writes
it, or the writer's commit the server reported, `sources`) while the note
still has that checksum, else the file's mtime. A time stands for
the newest commit at or before it. The commit is compared with `HEAD`: committed
changes count, uncommitted edits do not.

The cost is a handful of git processes for the whole team dir, never one per note:
one `git log --name-only` (every commit's time, subject and files: the commits since
each note's commit, the commit current at a time), at most one `git cat-file
--batch-check` (which cited paths that are gone now existed at the note's commit),
and at most one `git cat-file --batch` (the content of each cited file touched since:
at `HEAD`, and at each version notes were written against, that is the newest commit
at or before a note's commit that touched it). Line ranges are then compared in
Python, once per version of a file, as `git diff -U0 <version> HEAD -- <file>` would
(a diff per distinct note commit, even in one `git diff-tree --stdin`, diffs every
cited file from every old commit: 60 s for 2,000 notes over 5,000 commits, see
`bench/stale.py`). No checkout, no commit yet, or no git: nothing is stale, and
`Report.unchecked` says why.

A note citing nothing, or only paths the checkout never had, is never stale.
"""

from __future__ import annotations

import bisect
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from sync_client.freshness.citations import LineRange, citations, cited_paths

if TYPE_CHECKING:
    from sync_client.workspace import Workspace

# The session-start block runs this module (`stale_notes.for_block`) at every session start:
# what only a real check needs (subprocess, datetime, hashlib, the frontmatter reader)
# is imported when it runs, so a team dir whose notes cite nothing costs a walk.

__all__ = [
    "CODE_KINDS",
    "RECORD_FILE",
    "Commit",
    "NoteFreshness",
    "Reason",
    "Report",
    "WrittenAt",
    "check",
    "check_one",
    "checkout_head",
    "read_notes",
    "record_written",
    "stale_keys",
    "stale_kinds",
]

RECORD_FILE = "written-at.json"
GIT_TIMEOUT_SECONDS = 60.0
DAY_SECONDS = 86_400
# A record kept for this many keys at most: the oldest records go first.
MAX_RECORDS = 20_000
# The reasons about the code a note cites; the others (`expired`, `review`) are its date's.
CODE_KINDS = frozenset({"gone", "changed", "lines"})
_SEPARATOR = "\x1e"
_FIELD = "\x1f"
_REVIEW_AFTER = re.compile(r"(\d{1,5})\s*(?:days?|d)?", re.IGNORECASE)
_COMMIT = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
# A binary file's change has no line numbers: every line counts as changed.
_WHOLE_FILE = [(1, 10**9)]
# `memsync_protocol.keys.MAX_ENTRY_BYTES` (a test holds them equal): no note is larger.
_MAX_NOTE_BYTES = 250_000


class WrittenAt(NamedTuple):
    """When a note was written: a commit of the checkout if known, and a time.

    `source` is `record` (this machine's push or pull recorded the commit), `server`
    (the writer's commit, or the version's time, from the server's provenance) or
    `mtime` (the file's modification time; the commit is the one current then)."""

    commit: str | None
    time: float
    source: str

    def as_json(self) -> dict[str, Any]:
        return {"commit": self.commit, "at": _iso(self.time), "source": self.source}


class Commit(NamedTuple):
    """One commit of the checkout's history, as `git log` lists it."""

    sha: str
    time: int
    subject: str

    def as_json(self) -> dict[str, Any]:
        return {
            "commit": self.sha,
            "short": self.sha[:7],
            "subject": self.subject,
            "date": _iso(self.time),
        }

    def words(self) -> str:
        """`abc1234 "Move the retry loop" (2026-11-30)`."""
        from datetime import UTC, datetime

        day = datetime.fromtimestamp(self.time, UTC).date().isoformat()
        return f'{self.sha[:7]} "{self.subject}" ({day})'


class Reason(NamedTuple):
    """Why a note may no longer be true: one cited file or range, or its expiry."""

    kind: str  # gone | changed | lines | expired | review
    path: str | None = None
    lines: LineRange | None = None
    commits: int = 0
    newest: Commit | None = None
    due: str | None = None

    def cited(self) -> str:
        """`src/a.py`, `src/a.py:10` or `src/a.py:10-20`: the citation as written."""
        if self.lines is None:
            return self.path or ""
        first, last = self.lines
        return f"{self.path}:{first}" if first == last else f"{self.path}:{first}-{last}"

    def words(self) -> str:
        """One line for a person or an agent."""
        if self.kind == "expired":
            return f"expired on {self.due} (its `expires` frontmatter)"
        if self.kind == "review":
            return f"due for review since {self.due} (its `review-after` frontmatter)"
        since = ""
        if self.commits and self.newest is not None:
            noun = "commit" if self.commits == 1 else "commits"
            since = f" ({self.commits} {noun} since, newest {self.newest.words()})"
        if self.kind == "gone":
            return f"{self.path} is gone from the checkout{since}"
        return f"{self.cited()} changed{since}"

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": self.path,
            "lines": list(self.lines) if self.lines is not None else None,
            "commits": self.commits,
            "newest": self.newest.as_json() if self.newest is not None else None,
            "due": self.due,
            "words": self.words(),
        }


class NoteFreshness(NamedTuple):
    """One note's check: when it was written, what it cites, and why it may be stale."""

    key: str
    written_at: WrittenAt
    base: str | None  # the commit its citations are compared from
    cites: tuple[str, ...]
    reasons: tuple[Reason, ...]

    @property
    def stale(self) -> bool:
        return bool(self.reasons)

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "stale": self.stale,
            "written_at": self.written_at.as_json(),
            "base": self.base,
            "cites": list(self.cites),
            "reasons": [reason.as_json() for reason in self.reasons],
        }


class Report(NamedTuple):
    """Every note's check against one checkout; `unchecked` says why none was made."""

    checkout: Path | None
    head: str | None
    notes: tuple[NoteFreshness, ...] = ()
    unchecked: str | None = None

    @property
    def stale(self) -> list[NoteFreshness]:
        return [note for note in self.notes if note.stale]

    def of(self, key: str) -> NoteFreshness | None:
        for note in self.notes:
            if note.key == key:
                return note
        return None

    def as_json(self) -> dict[str, Any]:
        return {
            "checkout": str(self.checkout) if self.checkout is not None else None,
            "head": self.head,
            "unchecked": self.unchecked,
            "checked": len(self.notes),
            "stale": [note.as_json() for note in self.stale],
        }


def _iso(seconds: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- the notes and records


class _NoteFile(NamedTuple):
    text: str
    mtime: float


def _note_files(
    team_dir: Path, exclude: str | None = None
) -> list[tuple[str, str, os.stat_result]]:
    """(key, path, stat) of every note file of the team dir: Markdown, not an index
    (`is_note_key`), no symlink or hidden name, within the entry limit, not under the
    folder `exclude` (`team/` of a private memory folder). No file is read."""
    found: list[tuple[str, str, os.stat_result]] = []

    def walk(folder: str, prefix: str) -> None:
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError:
            return
        for entry in entries:
            name = entry.name
            if name.startswith("."):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    if f"{prefix}{name}/" != exclude:
                        walk(entry.path, f"{prefix}{name}/")
                    continue
                if not name.endswith(".md") or name == "MEMORY.md":
                    continue
                if not entry.is_file(follow_symlinks=False):
                    continue
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if info.st_size <= _MAX_NOTE_BYTES:
                found.append((prefix + name, entry.path, info))

    walk(str(team_dir), "")
    return found


def read_notes(team_dir: Path, exclude: str | None = None) -> dict[str, _NoteFile]:
    """Every note of the team dir (`_note_files`) that is UTF-8 text, with its mtime."""
    found: dict[str, _NoteFile] = {}
    for key, path, info in _note_files(team_dir, exclude):
        try:
            with open(path, "rb") as stream:
                text = stream.read().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        found[key] = _NoteFile(text, info.st_mtime)
    return found


def _read_records(state_dir: Path | None) -> dict[str, Any]:
    if state_dir is None:
        return {}
    try:
        raw = json.loads((state_dir / RECORD_FILE).read_bytes())
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


def _written_at(key: str, note: _NoteFile, records: Mapping[str, Any]) -> WrittenAt:
    """The record of `key` while the note still has the recorded text, else its mtime."""
    record = records.get(key)
    if not isinstance(record, dict):
        return WrittenAt(None, note.mtime, "mtime")
    from memsync_protocol.checksums import entry_checksum

    if record.get("checksum") == entry_checksum(note.text):
        commit, at = record.get("commit"), record.get("at")
        # `server`: the writer's commit (or time) from GET /provenance (`sources`).
        source = "server" if record.get("source") == "server" else "record"
        known = isinstance(commit, str) and _COMMIT.fullmatch(commit)
        if (known or (commit is None and source == "server")) and isinstance(at, int | float):
            return WrittenAt(commit if known else None, float(at), source)
    return WrittenAt(None, note.mtime, "mtime")


def _is_checkout(path: Path) -> bool:
    return (path / ".git").exists()


def _checkout_of(team_dir: Path, remembered: object) -> Path | None:
    """The checkout a push or pull of `team_dir` records `HEAD` of: the one remembered
    with the records, else the current folder's, when the team dir can be its (the
    watcher serves many repos from wherever it was started)."""
    if isinstance(remembered, str) and _is_checkout(Path(remembered)):
        return Path(remembered)
    from sync_client.claude_code import sanitize_path
    from sync_client.config.git import git_root

    root = git_root(Path.cwd())
    if root is None:
        return None
    # Claude Code's layout names the checkout: another checkout's HEAD is not ours.
    claude_layout = team_dir.name == "team" and team_dir.parent.name == "memory"
    if claude_layout and team_dir.parent.parent.name != sanitize_path(root):
        return None
    return root


def _checkout_above(folder: Path) -> Path | None:
    """The nearest folder at or above `folder` holding `.git`: `config.git.git_root`
    without loading the configuration, for the session start."""
    for candidate in (folder, *folder.parents):
        if _is_checkout(candidate):
            return candidate
    return None


def _head(checkout: Path) -> str | None:
    output = _git(checkout, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    head = output.strip() if output is not None else ""
    return head if _COMMIT.fullmatch(head) else None


def checkout_head(workspace: Workspace) -> str | None:
    """`HEAD` of the team dir's checkout (one `git rev-parse`), None when unknown: what
    a write's provenance names as its commit, and `record_written` keeps."""
    try:
        records = _read_records(workspace.state_dir)
        checkout = _checkout_of(workspace.team_dir, records.get("checkout"))
    except OSError:
        return None
    return _head(checkout) if checkout is not None else None


def record_written(workspace: Workspace, keys: Iterable[str], head: str | None = None) -> None:
    """Remember, for each of `keys` a push just committed or a pull just wrote, its
    checksum with the checkout's `HEAD` and the time: its "written at" for `check`.

    One `git rev-parse HEAD` per call, none when `keys` is empty; nothing in a team dir
    whose checkout is unknown or not a git checkout. Never fails the push or pull it
    follows: the record is a hint, and the mtime stands in without it. `head`, when
    the caller already read it, saves the `git rev-parse`."""
    from memsync_protocol.memory_index import is_note_key

    keys = [key for key in keys if is_note_key(key) and key in workspace.state.bases]
    if not keys:
        return
    try:
        records = _read_records(workspace.state_dir)
        checkout = _checkout_of(workspace.team_dir, records.get("checkout"))
        head = head or (_head(checkout) if checkout is not None else None)
        if checkout is None or head is None:
            return
        notes = records.get("notes")
        notes = dict(notes) if isinstance(notes, dict) else {}
        now = int(time.time())
        for key in keys:
            notes.pop(key, None)  # re-inserted last: the newest survive the bound
            notes[key] = {"checksum": workspace.state.bases[key], "commit": head, "at": now}
        if len(notes) > MAX_RECORDS:
            notes = dict(list(notes.items())[-MAX_RECORDS:])
        from sync_client.state import atomic_write

        data = {"checkout": str(checkout), "notes": notes}
        atomic_write(workspace.state_dir / RECORD_FILE, json.dumps(data).encode("utf-8"))
    except (OSError, ValueError):
        return  # (`_git` answers None for every failure of git itself)


# ---------------------------------------------------------------- git


def _git_bytes(checkout: Path, *arguments: str, stdin: bytes | None = None) -> bytes | None:
    """`git <arguments>`'s output in `checkout`, or None when git fails or is missing."""
    import subprocess

    try:
        completed = subprocess.run(
            ["git", "-c", "core.quotepath=off", *arguments],
            cwd=checkout,
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return completed.stdout if completed.returncode == 0 else None


def _git(checkout: Path, *arguments: str, stdin: str | None = None) -> str | None:
    """`_git_bytes` as text."""
    output = _git_bytes(checkout, *arguments, stdin=None if stdin is None else stdin.encode())
    return None if output is None else output.decode("utf-8", errors="replace")


class History:
    """The checkout's commits, newest first, and which of them touched each path."""

    def __init__(self) -> None:
        self.commits: list[Commit] = []
        self.position: dict[str, int] = {}
        self.touched: dict[str, list[int]] = {}
        # Commit times ascending, with the newest (lowest) position at or before each.
        self._times: list[int] = []
        self._newest_until: list[int] = []

    @classmethod
    def parse(cls, output: str) -> History:
        """`git log --format=<SEP>%H<F>%ct<F>%s --name-only` as a `History`."""
        history = cls()
        for block in output.split(_SEPARATOR)[1:]:
            header, _, names = block.partition("\n")
            sha, _, rest = header.partition(_FIELD)
            stamp, _, subject = rest.partition(_FIELD)
            if not _COMMIT.fullmatch(sha) or not stamp.isdigit():
                continue
            index = len(history.commits)
            history.commits.append(Commit(sha, int(stamp), subject))
            history.position[sha] = index
            for name in names.splitlines():
                if name:
                    history.touched.setdefault(name, []).append(index)
        order = sorted(range(len(history.commits)), key=lambda i: history.commits[i].time)
        newest = len(history.commits)
        for index in order:
            newest = min(newest, index)
            history._times.append(history.commits[index].time)
            history._newest_until.append(newest)
        return history

    def at_time(self, seconds: float) -> str | None:
        """The newest commit made at or before `seconds`, if any."""
        found = bisect.bisect_right(self._times, seconds)
        return self.commits[self._newest_until[found - 1]].sha if found else None

    def version_at(self, base: str, path: str) -> str | None:
        """The newest commit at or before `base` that touched `path`: the file at `base`
        is the file at that commit, so notes of many commits share one version."""
        position = self.position.get(base)
        indexes = self.touched.get(path, [])
        if position is None:
            return None
        found = bisect.bisect_left(indexes, position)
        return self.commits[indexes[found]].sha if found < len(indexes) else None

    def since(self, base: str, path: str) -> tuple[int, Commit | None]:
        """How many commits after `base` touched `path`, and the newest of them."""
        position = self.position.get(base)
        indexes = self.touched.get(path, [])
        if position is None or not indexes:
            return 0, None
        count = bisect.bisect_left(indexes, position)
        return count, self.commits[indexes[0]] if count else None


def _log(checkout: Path) -> History | None:
    output = _git(
        checkout,
        "log",
        "--no-renames",
        "--no-color",
        f"--format={_SEPARATOR}%H{_FIELD}%ct{_FIELD}%s",
        "--name-only",
        "HEAD",
        "--",
    )
    return None if output is None else History.parse(output)


def _existed(checkout: Path, pairs: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """Which (commit, path) pairs name a file at that commit: one `git cat-file`."""
    if not pairs:
        return set()
    lines = "".join(f"{commit}:{path}\n" for commit, path in pairs)
    output = _git(checkout, "cat-file", "--batch-check=%(objecttype)", stdin=lines)
    if output is None:
        return set()
    answers = output.splitlines()
    return {pair for pair, answer in zip(pairs, answers, strict=False) if answer == "blob"}


def _contents(checkout: Path, names: list[str]) -> dict[str, bytes]:
    """The content of each object named `<commit>:<path>` that is a file (one `git
    cat-file --batch` for all of them); a name that is not a file is left out."""
    if not names:
        return {}
    output = _git_bytes(
        checkout, "cat-file", "--batch", stdin="".join(f"{n}\n" for n in names).encode()
    )
    if output is None:
        return {}
    found: dict[str, bytes] = {}
    position = 0
    for name in names:
        end = output.find(b"\n", position)
        if end < 0:
            break
        header = output[position:end].split()
        position = end + 1
        if len(header) != 3 or not header[2].isdigit():
            continue  # `<name> missing`
        size = int(header[2])
        if header[1] == b"blob":
            found[name] = output[position : position + size]
        position += size + 1
    return found


def changed_ranges(old: bytes, new: bytes) -> list[tuple[int, int]]:
    """The lines of `old` that differ in `new`, as `git diff -U0` gives them: (start,
    count) in the old file's lines, count 0 for an insertion after line `start`.

    As git does, the lines both share at the start and at the end are set aside first:
    only what lies between them is diffed."""
    from difflib import SequenceMatcher

    before, after = old.split(b"\n"), new.split(b"\n")
    shortest = min(len(before), len(after))
    head = 0
    while head < shortest and before[head] == after[head]:
        head += 1
    tail = 0
    while tail < shortest - head and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    matcher = SequenceMatcher(
        None, before[head : len(before) - tail], after[head : len(after) - tail], autojunk=False
    )
    ranges = []
    for tag, old_start, old_end, _, _ in matcher.get_opcodes():
        if tag == "insert":
            ranges.append((head + old_start, 0))
        elif tag != "equal":
            ranges.append((head + old_start + 1, old_end - old_start))
    return ranges


class _Changes:
    """What changed in each cited file between a note's commit and `HEAD`, computed
    once per version of the file (not per note): the file's content at the newest
    commit before the note that touched it, against its content at `HEAD`."""

    def __init__(self, checkout: Path, history: History, asked: set[tuple[str, str]]) -> None:
        head = history.commits[0].sha
        versions = {(base, path): history.version_at(base, path) for base, path in asked}
        names = {f"{version}:{path}" for (_, path), version in versions.items() if version}
        names |= {f"{head}:{path}" for _, path in asked}
        self._contents = _contents(checkout, sorted(names))
        self._versions = versions
        self._head = head
        self._ranges: dict[str, list[tuple[int, int]]] = {}

    def _texts(self, base: str, path: str) -> tuple[str, bytes | None, bytes | None]:
        version = self._versions.get((base, path))
        name = f"{version}:{path}"
        old = self._contents.get(name) if version else None
        return name, old, self._contents.get(f"{self._head}:{path}")

    def differs(self, base: str, path: str) -> bool:
        """Whether `path` at `HEAD` differs from what the note saw at `base`."""
        _, old, new = self._texts(base, path)
        return old is None or new is None or old != new

    def ranges(self, base: str, path: str) -> list[tuple[int, int]]:
        """The changed ranges of `path` from `base` to `HEAD` (empty: unchanged)."""
        name, old, new = self._texts(base, path)
        if old is None or new is None:
            # Not a file at the note's commit (or not one git can give): all of it is new.
            return list(_WHOLE_FILE)
        if old == new:
            return []
        if name not in self._ranges:
            self._ranges[name] = changed_ranges(old, new)
        return self._ranges[name]


def _known(
    here: Mapping[str, bool], existed: set[tuple[str, str]], base: str | None
) -> Callable[[str], bool]:
    """Whether a mentioned path is a file now, or was one at the note's commit."""

    def known(path: str) -> bool:
        return here[path] or (base is not None and (base, path) in existed)

    return known


def _overlaps(hunks: list[tuple[int, int]], lines: LineRange) -> bool:
    """Whether a change touches `lines` (an insertion counts when it lands inside)."""
    first, last = lines
    for start, count in hunks:
        if count == 0:
            if first <= start < last:
                return True
        elif start <= last and start + count - 1 >= first:
            return True
    return False


# ---------------------------------------------------------------- expiry


def _expiry_fields(text: str) -> dict[str, str]:
    """The frontmatter fields that set a note's expiry, if any."""
    if "expires" not in text and "review-after" not in text:
        return {}
    from memsync_protocol.memory_index import frontmatter

    fields = frontmatter(text) or {}
    return {name: fields[name] for name in ("expires", "review-after") if name in fields}


def _expiry(text: str, written: float, now: float) -> list[Reason]:
    """`expires: YYYY-MM-DD` once that day is over (UTC); `review-after: N days` once
    N days have passed since the note was written."""
    from datetime import UTC, date, datetime

    fields = _expiry_fields(text)
    reasons: list[Reason] = []
    expires = fields.get("expires", "").strip()
    if expires:
        try:
            last_day: date | None = date.fromisoformat(expires[:10])
        except ValueError:
            last_day = None
        if last_day is not None and datetime.fromtimestamp(now, UTC).date() > last_day:
            reasons.append(Reason("expired", due=last_day.isoformat()))
    review = _REVIEW_AFTER.fullmatch(fields.get("review-after", "").strip())
    if review is not None:
        due = written + int(review.group(1)) * DAY_SECONDS
        if now >= due:
            reasons.append(
                Reason("review", due=datetime.fromtimestamp(due, UTC).date().isoformat())
            )
    return reasons


# ---------------------------------------------------------------- the check


def check(
    checkout: Path | None,
    team_dir: Path,
    state_dir: Path | None,
    *,
    now: float | None = None,
    notes: Mapping[str, _NoteFile] | None = None,
    exclude: str | None = None,
) -> Report:
    """Every note of `team_dir` (but those under `exclude`) checked against the git
    checkout `checkout` (see the module's docstring). `notes`: already read
    (`read_notes`)."""
    if checkout is None or not _is_checkout(checkout):
        return Report(checkout, None, unchecked="not a git checkout: no note was checked")
    now = time.time() if now is None else now
    notes = read_notes(team_dir, exclude) if notes is None else notes
    records = _read_records(state_dir).get("notes")
    records = records if isinstance(records, dict) else {}
    mentions = {key: citations(note.text) for key, note in notes.items()}
    if not any(mentions.values()) and not any(_expiry_fields(n.text) for n in notes.values()):
        # Nothing to compare with the code: no git process at all.
        return Report(
            checkout,
            None,
            tuple(
                NoteFreshness(key, _written_at(key, note, records), None, (), ())
                for key, note in sorted(notes.items())
            ),
        )
    history = _log(checkout)
    if history is None or not history.commits:
        return Report(checkout, None, unchecked="the checkout has no commits, or git failed")
    head = history.commits[0].sha

    # Which commit each note is compared from.
    written = {key: _written_at(key, note, records) for key, note in notes.items()}
    bases: dict[str, str | None] = {}
    for key, when in written.items():
        known = when.commit if when.commit in history.position else None
        bases[key] = known or history.at_time(when.time)

    # Which mentioned paths are files now, and which of the others were at the base.
    here: dict[str, bool] = {}
    for found in mentions.values():
        for citation in found:
            if citation.path not in here:
                here[citation.path] = os.path.isfile(checkout / citation.path)
    pairs = sorted(
        {
            (base, citation.path)
            for key, found in mentions.items()
            if (base := bases[key]) is not None
            for citation in found
            if not here[citation.path]
        }
    )
    existed = _existed(checkout, pairs)
    cited: dict[str, dict[str, list[LineRange | None]]] = {}
    # The (commit, file) pairs whose file was touched since: only those are read.
    asked: set[tuple[str, str]] = set()
    for key, found in mentions.items():
        base = bases[key]
        cited[key] = cited_paths(found, _known(here, existed, base))
        if base is None or base == head:
            continue
        for path in cited[key]:
            if here[path] and history.since(base, path)[0]:
                asked.add((base, path))
    changes = _Changes(checkout, history, asked)

    checked = []
    for key in sorted(notes):
        base = bases[key]
        reasons: list[Reason] = []
        for path, ranges in cited[key].items():
            count, newest = history.since(base, path) if base is not None else (0, None)
            if not here[path]:
                reasons.append(Reason("gone", path, commits=count, newest=newest))
                continue
            if base is None or (base, path) not in asked or not changes.differs(base, path):
                continue
            if None in ranges:
                reasons.append(Reason("changed", path, commits=count, newest=newest))
                continue
            hunks = changes.ranges(base, path)
            reasons.extend(
                Reason("lines", path, lines, commits=count, newest=newest)
                for lines in ranges
                if lines is not None and _overlaps(hunks, lines)
            )
        reasons += _expiry(notes[key].text, written[key].time, now)
        checked.append(NoteFreshness(key, written[key], base, tuple(cited[key]), tuple(reasons)))
    return Report(checkout, head, tuple(checked))


def check_one(
    checkout: Path | None, team_dir: Path, state_dir: Path | None, key: str, text: str
) -> tuple[NoteFreshness | None, str]:
    """One note's check (the note's `text` as just read) and a line saying what it
    found: the reasons, that nothing it cites changed, or why nothing was checked."""
    try:
        mtime = os.stat(team_dir / key).st_mtime
    except OSError:
        mtime = time.time()
    report = check(checkout, team_dir, state_dir, notes={key: _NoteFile(text, mtime)})
    if report.unchecked is not None:
        return None, f"not checked against the code: {report.unchecked}"
    note = report.of(key)
    if note is None:
        return None, "not checked against the code"
    if note.stale:
        reasons = "; ".join(reason.words() for reason in note.reasons)
        if any(reason.kind in CODE_KINDS for reason in note.reasons):
            return note, f"may no longer be true: {reasons}; check it against the code first"
        return note, f"may no longer be true: {reasons}; check that it still holds first"
    if not note.cites:
        return note, "cites no file of this checkout"
    return note, f"the code it cites ({', '.join(note.cites)}) has not changed since it was written"


def stale_keys(checkout: Path | None, team_dir: Path, state_dir: Path | None) -> set[str]:
    """The keys of the notes `check` finds stale (none when nothing can be checked)."""
    return {note.key for note in check(checkout, team_dir, state_dir).stale}


def stale_kinds(
    checkout: Path | None, team_dir: Path, state_dir: Path | None, exclude: str | None = None
) -> dict[str, list[str]]:
    """Each note `check` finds stale, with the kinds of its reasons (`Reason.kind`)."""
    report = check(checkout, team_dir, state_dir, exclude=exclude)
    return {note.key: sorted({reason.kind for reason in note.reasons}) for note in report.stale}
