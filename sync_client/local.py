"""The team dir on disk: what is synced, and the walk that finds it.

    scan_team_dir(team_dir, cache) -> LocalScan    checksums of syncable files, skips, cache
    shown_key(key) -> str                          a key safe to print (bytes as \\xNN)
    is_editor_leftover(name) -> bool               an editor's or sync tool's leftover file
    skips_of(key, verdict) -> list[Skipped]        a verdict's skip rows as `Skipped`

What is synced is docs/protocol.md 4.2. Its neighbours: `verdicts` judges a file's bytes
and keeps the stat cache, `ignore_rules` reads `.memsyncignore`, `team_files` reads and
writes under the team dir without leaving it (4.4).

A decomposed (NFD) file or directory name, as macOS writes them, is read as its NFC key,
like git's `core.precomposeunicode`: the scan reports it under that key, and
`team_files` reads, writes and removes the key at the name on disk. When both spellings
exist (possible on Linux) the NFC one is the entry and the other is skipped as
`duplicate-name`.

The walk never follows a symlink below the team dir: it opens each directory relative to
its parent with `O_NOFOLLOW`.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias, get_args

from memsync_protocol.keys import INVISIBLE_IN_KEYS, MAX_ENTRY_BYTES
from sync_client.ignore_rules import IgnoreRules
from sync_client.precheck import key_row, text_row
from sync_client.team_files import (
    _DIR_FLAGS,
    _READ_FLAGS,
    _SYMLINK_ERRNOS,
    _read_up_to,
    key_problem,
)
from sync_client.verdicts import _RACY_SIZE, Verdict, _cached_verdict, cache_record, judge_bytes

__all__ = [
    "EDITOR_LEFTOVER",
    "LocalScan",
    "SkipReason",
    "Skipped",
    "is_editor_leftover",
    "scan_team_dir",
    "shown_key",
    "skips_of",
]

# Files that are never notes, though they sit beside them: the swap, backup and autosave
# files of editors, the temp files of atomic writes (Node tools write
# `<name>.tmp.<pid>.<ms>`, Claude Code 2.1 `<name>.tmp.<pid>.<12 hex digits>`, and
# rename it over `<name>`), and what merge and sync
# tools leave behind (patch's `.orig`/`.rej`, Dropbox's "conflicted copy", Syncthing's
# `.sync-conflict-`). Matched on the file name only, case-sensitively (like a
# .gitignore); each is (as docs show it, the regular expression the whole name matches).
_LEFTOVER_RULES: tuple[tuple[str, str], ...] = (
    ("*~", r".*~"),
    ("*.swp", r".*\.swp"),
    ("#*#", r"#.*#"),
    ("*.tmp", r".*\.tmp"),
    ("*.tmp.<pid>.<digits or hex>", r".*\.tmp\.[0-9]+\.[0-9a-f]+"),
    ("*.orig", r".*\.orig"),
    ("*.rej", r".*\.rej"),
    ("* (...conflicted copy...)*", r".*\([^()]*conflicted copy[^()]*\).*"),
    ("*.sync-conflict-*", r".*\.sync-conflict-.*"),
)
EDITOR_LEFTOVER: tuple[str, ...] = tuple(shown for shown, _ in _LEFTOVER_RULES)

SkipReason: TypeAlias = Literal[
    "symlink",
    "hidden",
    "editor-leftover",
    "ignored",
    "binary",
    "not-utf8",
    "invalid-text",
    "too-large",
    "secret",
    "invalid-key",
    "duplicate-name",
    "not-a-regular-file",
    "unreadable",
]
_SKIP_REASONS: frozenset[str] = frozenset(get_args(SkipReason))


@dataclass(frozen=True)
class Skipped:
    """A file (or a directory not descended) that is not synced, and why.

    `key` is the `/`-separated relative path as found on disk, which may itself be an
    invalid key (a name that is not UTF-8 holds its bytes as `os.fsdecode` does, so the
    key still names the file); a decomposed (NFD) name in it is shown as its NFC key,
    except for the name a `duplicate-name` row is about, which keeps its spelling on
    disk. For a secret, `rule`, `label` and `line` say where; never the value. For
    `invalid-text`, `problem` says what (`contains a NUL character`). `folder` is True
    for a folder skipped as a whole (not descended); it describes the row and takes no
    part in comparisons.
    """

    key: str
    reason: SkipReason
    rule: str | None = None
    label: str | None = None
    line: int | None = None
    folder: bool = field(default=False, compare=False)
    problem: str | None = None

    def as_row(self) -> dict[str, Any]:
        """The row every surface shows (push, status, the watcher, `index`): key and
        reason; rule, label, line for secrets; problem and detail for an invalid name or
        text, in the words a push's own checks use; `"folder": true` for a folder
        skipped as a whole. The key is `shown_key`'s, safe to print and to log."""
        shown = shown_key(self.key)
        row: dict[str, Any]
        if self.reason == "invalid-key":
            row = key_row(shown, key_problem(self.key))
        elif self.reason == "invalid-text":
            row = text_row(shown, self.problem or "cannot be stored by the server")
        else:
            row = {"key": shown, "reason": self.reason}
        if self.rule is not None:
            row.update(rule=self.rule, label=self.label, line=self.line)
        if self.folder:
            row["folder"] = True
        return row


def shown_key(key: str) -> str:
    """`key` as it can be printed, logged and put in JSON: the bytes of a name that is
    not UTF-8 as `\\xNN`, control characters and the invisible ones a key may not hold
    escaped (`\\n`, `\\u202e`), and then a backslash as `\\\\`, so the shown name reads
    back as bash's `$'...'` does. A printable key is itself."""
    if key.isprintable():
        return key
    shown = []
    for character in key:
        code = ord(character)
        if 0xDC80 <= code <= 0xDCFF:  # a byte `os.fsdecode` could not decode
            shown.append(f"\\x{code - 0xDC00:02x}")
        elif (
            character == "\\"
            or unicodedata.category(character) in ("Cc", "Cs")
            or character in INVISIBLE_IN_KEYS
        ):
            shown.append(repr(character)[1:-1])
        else:
            shown.append(character)
    return "".join(shown)


@dataclass
class LocalScan:
    """What `scan_team_dir` found.

    `checksums` maps every syncable key to its entry checksum, keys sorted. `skipped`
    is sorted by key. `cache` is the updated stat cache, JSON-serializable, holding only
    keys that exist now; the caller persists it and passes it to the next scan.
    """

    checksums: dict[str, str] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)
    cache: dict[str, list[Any]] = field(default_factory=dict)


# One compiled pattern for all leftovers: the walk asks this for every file.
_EDITOR_LEFTOVER_PATTERN = re.compile(
    "|".join(f"(?:{pattern})" for _, pattern in _LEFTOVER_RULES), re.DOTALL
)


def is_editor_leftover(name: str) -> bool:
    """True when a file name matches one of `EDITOR_LEFTOVER`: an editor's or a sync
    tool's temporary or leftover file, never a note."""
    return _EDITOR_LEFTOVER_PATTERN.fullmatch(name) is not None


def skips_of(key: str, verdict: Verdict) -> list[Skipped]:
    """A verdict's skip rows as `Skipped` items of `key`."""
    return [
        Skipped(key, reason, problem=label)
        if reason == "invalid-text"
        else Skipped(key, reason, rule, label, line)
        for reason, rule, label, line in verdict.skips
    ]


class _Walk:
    """One scan of a team dir: the state `scan_team_dir` builds up as it descends."""

    def __init__(
        self, cache: Mapping[str, Sequence[Any]], max_bytes: int, ignore: IgnoreRules | None
    ) -> None:
        self.old_cache = cache
        self.max_bytes = max_bytes
        self.ignore = ignore
        self.checksums: dict[str, str] = {}
        self.skipped: list[Skipped] = []
        self.new_cache: dict[str, list[Any]] = {}

    def skip(self, key: str, reason: SkipReason, *, folder: bool = False) -> None:
        self.skipped.append(Skipped(key, reason, folder=folder))

    def directory(self, dir_fd: int, prefix: str) -> None:
        """Scan the open directory `dir_fd`, whose entries' keys start with `prefix`."""
        with os.scandir(dir_fd) as iterator:
            entries = sorted(iterator, key=lambda entry: entry.name)
        names: set[str] | None = None
        for entry in entries:
            name = entry.name
            precomposed = _precomposed(name)
            if precomposed is not None:
                names = names if names is not None else {item.name for item in entries}
                if precomposed in names:
                    # The NFC spelling is the entry; this one could never be written.
                    self.skip(prefix + name, "duplicate-name")
                    continue
                name = precomposed
            try:
                self.entry(dir_fd, entry, prefix + name)
            except FileNotFoundError:
                # Deleted while we looked: it simply is not there any more.
                continue

    def entry(self, dir_fd: int, entry: os.DirEntry[str], key: str) -> None:
        name = entry.name
        if entry.is_symlink():
            self.skip(key, "symlink")
        elif name.startswith("."):
            self.skip(key, "hidden", folder=entry.is_dir(follow_symlinks=False))
        elif entry.is_dir(follow_symlinks=False):
            if self.ignore is not None and self.ignore.ignores_folder(key):
                # Reported once, not descended (as git does).
                self.skip(key, "ignored", folder=True)
            else:
                self.subdirectory(dir_fd, name, key)
        elif is_editor_leftover(name):
            self.skip(key, "editor-leftover")
        elif not entry.is_file(follow_symlinks=False):
            self.skip(key, "not-a-regular-file")
        elif self.ignore is not None and self.ignore.ignores_file(key):
            # After the rules above: a `!` pattern cannot bring back what they leave out.
            self.skip(key, "ignored")
        elif key_problem(key) is not None:
            self.skip(key, "invalid-key")
        else:
            self.file(dir_fd, entry, key)

    def subdirectory(self, dir_fd: int, name: str, key: str) -> None:
        """Descend into `name` (its spelling on disk), whose key is `key`."""
        # A key whose directory part is refused is refused whatever follows it, so an
        # invalid directory is reported once instead of per file; this also bounds the
        # depth of the walk (too many segments is a key problem).
        if key_problem(key) is not None:
            self.skip(key, "invalid-key", folder=True)
            return
        try:
            child_fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except PermissionError:
            self.skip(key, "unreadable", folder=True)
            return
        except OSError as error:
            if error.errno in (errno.ENOTDIR, *_SYMLINK_ERRNOS):
                self.skip(key, "symlink")  # swapped for a symlink since we listed it
                return
            raise
        try:
            self.directory(child_fd, key + "/")
        except PermissionError:
            self.skip(key, "unreadable", folder=True)
        finally:
            os.close(child_fd)

    def file(self, dir_fd: int, entry: os.DirEntry[str], key: str) -> None:
        # Size from stat before reading: a huge file costs a stat, not a read.
        listed = entry.stat(follow_symlinks=False)
        if listed.st_size > self.max_bytes:
            self.skip(key, "too-large")
            return
        row = self.old_cache.get(key)
        verdict = _cached_verdict(row, listed.st_size, listed.st_mtime_ns, listed.st_ino)
        if verdict is not None:
            assert row is not None
            self.new_cache[key] = list(row)
        else:
            verdict = self.read(dir_fd, entry.name, key)
            if verdict is None:
                return
        if verdict.checksum is not None:
            self.checksums[key] = verdict.checksum
        self.skipped.extend(skips_of(key, verdict))

    def read(self, dir_fd: int, name: str, key: str) -> Verdict | None:
        """Read, judge and cache one file; None when it turned out not to be readable."""
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
        except PermissionError:
            self.skip(key, "unreadable")
            return None
        except OSError as error:
            if error.errno in _SYMLINK_ERRNOS:
                self.skip(key, "symlink")
                return None
            raise
        try:
            # The stat of what we opened, not of what we listed: it is what we read.
            opened = os.fstat(fd)
            if not stat.S_ISREG(opened.st_mode):
                self.skip(key, "not-a-regular-file")
                return None
            if opened.st_size > self.max_bytes:
                self.skip(key, "too-large")
                return None
            data = _read_up_to(fd, self.max_bytes)
        finally:
            os.close(fd)
        if len(data) > self.max_bytes:
            self.skip(key, "too-large")
            return None
        previous = self.old_cache.get(key)
        known_clean = (
            previous[3]
            if isinstance(previous, list | tuple) and len(previous) == 5 and not previous[4]
            else None
        )
        verdict = judge_bytes(data, known_clean if isinstance(known_clean, str) else None)
        row = cache_record(
            opened.st_size,
            opened.st_mtime_ns,
            opened.st_ino,
            verdict.checksum,
            verdict.skips or None,
        )
        if len(data) != opened.st_size:
            row[0] = _RACY_SIZE  # it changed while we read it: read it again next time
        self.new_cache[key] = row
        return verdict


def scan_team_dir(
    team_dir: Path,
    cache: Mapping[str, Sequence[Any]],
    *,
    max_bytes: int = MAX_ENTRY_BYTES,
    ignore: IgnoreRules | None = None,
) -> LocalScan:
    """Walk the team dir: checksum every syncable file, report every skipped one.

    Symlinks are never followed (a symlinked directory is reported, not descended), a
    hidden directory is reported once by its key, and a file whose (size, mtime_ns,
    inode) match its `cache` row is not opened: its cached checksum or skip is reused.
    `ignore` (a team dir's `read_ignore_rules`) leaves out what it matches, reported as
    `ignored` (a folder once, not descended). A missing team dir has no files.
    """
    try:
        root_fd = os.open(team_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return LocalScan()
    walk = _Walk(cache, max_bytes, ignore)
    try:
        walk.directory(root_fd, "")
    finally:
        os.close(root_fd)
    return LocalScan(
        checksums=dict(sorted(walk.checksums.items())),
        # Stable: a file's findings keep the scanner's order.
        skipped=sorted(walk.skipped, key=lambda skipped: skipped.key),
        cache=dict(sorted(walk.new_cache.items())),
    )


def _precomposed(name: str) -> str | None:
    """The NFC spelling of a decomposed (NFD, as macOS writes) name, or None.

    None for a name that is already NFC, and for one that is neither NFC nor NFD: the
    latter stays an invalid key, since writing its key could never find it again.
    """
    if name.isascii() or unicodedata.is_normalized("NFC", name):
        return None
    if not unicodedata.is_normalized("NFD", name):
        return None
    return unicodedata.normalize("NFC", name)
