"""The team dir on disk: what is synced, the stat cache, and writes that stay inside.

    scan_team_dir(team_dir, cache) -> LocalScan    checksums of syncable files, skips, cache
    judge_bytes(data) -> Verdict                   the one verdict on a file's bytes
    shown_key(key) -> str                          a key safe to print (bytes as \\xNN)
    read_ignore_rules(team_dir) -> IgnoreRules     the team dir's `.memsyncignore`
    read_entry(team_dir, key) -> str               one entry's text, never through a symlink
    safe_target(team_dir, key) -> Path             where `key` is written, or UnsafeKey
    write_entry(team_dir, key, text)               atomic write -> (size, mtime_ns, inode)
    write_entries(team_dir, texts)                 many: new files in place, few syncs
    remove_entry(team_dir, key)                    unlink, then prune emptied parent dirs
    cache_record(size, mtime_ns, inode, ...)       one stat-cache row, racy mtimes marked

A decomposed (NFD) file or directory name, as macOS writes them, is read as its NFC key,
like git's `core.precomposeunicode`: the scan reports it under that key, and reading,
writing and removing the key go to the name on disk, so a pull updates that file instead
of creating a second, NFC-named one beside it. The NFD spelling is only tried when the
NFC name is missing, which costs one more failed system call, never a directory
listing. When both spellings exist (possible on Linux) the NFC one is the entry and the
other is skipped as `duplicate-name`.

`.memsyncignore` in the team dir root (gitignore syntax) can only narrow what a scan
picks up: it is consulted after the rules for symlinks, hidden names and editor
leftovers, so a `!` pattern re-includes only what the file itself excluded, and as git
leaves tracked files alone, a key the team already has (one with a base) is never
ignored.

What is synced is docs/protocol.md 4.2; keeping writes inside the team dir is 4.4. Below the
team dir every operation walks directory file descriptors opened with `O_NOFOLLOW`, one
path component at a time, so a symlink that appears between a check and the operation
is refused, not followed. `safe_target` makes the same checks by path, for callers that
want to ask before acting. The team dir itself may be reached through symlinks (a user
may link `~/.claude` elsewhere); only what lies below it is held to these rules.

POSIX only: it relies on `O_NOFOLLOW`, `O_DIRECTORY` and the `dir_fd` arguments.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import re
import secrets
import stat
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeAlias, TypeVar, get_args

from memsync_protocol.checksums import PREFIX, entry_checksum, is_checksum
from memsync_protocol.keys import MAX_ENTRY_BYTES, text_problem
from memsync_protocol.keys import key_problem as _uncached_key_problem
from scanner import scan_text
from sync_client.errors import ConfigError
from sync_client.precheck import key_row, text_row

if TYPE_CHECKING:
    # Loaded only when a team dir has a .memsyncignore: most never do, and every scan
    # would pay its import.
    import pathspec

__all__ = [
    "EDITOR_LEFTOVER",
    "IGNORE_FILE",
    "RACY_WINDOW_NS",
    "VERDICT_RULES",
    "IgnoreFileError",
    "IgnoreRules",
    "LocalScan",
    "SkipReason",
    "Skipped",
    "UnsafeKey",
    "Verdict",
    "cache_record",
    "is_editor_leftover",
    "judge_bytes",
    "read_entry",
    "read_ignore_rules",
    "remove_entry",
    "safe_target",
    "scan_team_dir",
    "shown_key",
    "skips_of",
    "write_entry",
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
# The team dir's own list of files to leave out (gitignore syntax), never synced itself:
# its name starts with `.`.
IGNORE_FILE = ".memsyncignore"
# Far above any hand-written ignore file; a bigger one is refused, not read.
MAX_IGNORE_BYTES = 100_000
# A file whose mtime is this close to the moment we read it may still change within the
# same mtime tick (2 s on FAT, 1 s on some network filesystems) without its stat
# changing; git calls such an entry "racily clean". We do not trust it next time.
RACY_WINDOW_NS = 2_000_000_000

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
# Verdicts that depend on a file's bytes, so the stat cache may remember them.
_CONTENT_REASONS = frozenset({"binary", "not-utf8", "invalid-text", "secret"})
# What `judge_bytes` decides, by version: a stat cache made under other rules is dropped
# (`Workspace.scan`), so a file judged before a rule existed is judged again.
VERDICT_RULES = "verdicts-2"
# A file that is not UTF-8 and holds a NUL byte this early is binary, not mis-encoded
# text (git looks at the same first 8,000 bytes).
_BINARY_SNIFF_BYTES = 8000

# The size stored for a racily clean row: no real file has it, so the row never matches.
_RACY_SIZE = -1
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO swapped in after the type check must not hang the open.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# What open(O_NOFOLLOW) says about a symlink: ELOOP on Linux and macOS, EMLINK on FreeBSD.
_SYMLINK_ERRNOS = frozenset({errno.ELOOP, errno.EMLINK})
_NEW_FILE_MODE = 0o644
_NEW_DIR_MODE = 0o755
_READ_CHUNK = 1 << 16
T = TypeVar("T")


class UnsafeKey(ValueError):
    """A key the client will not read, write or remove on disk; `reason` says why."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"refusing key {key!r}: {reason}")
        self.key = key
        self.reason = reason


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
    not UTF-8 as `\\xNN`, control characters escaped (`\\n`), and then a backslash as
    `\\\\`, so the shown name reads back as bash's `$'...'` does. A printable key is
    itself."""
    if key.isprintable():
        return key
    shown = []
    for character in key:
        code = ord(character)
        if 0xDC80 <= code <= 0xDCFF:  # a byte `os.fsdecode` could not decode
            shown.append(f"\\x{code - 0xDC00:02x}")
        elif character == "\\" or unicodedata.category(character) in ("Cc", "Cs"):
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


@functools.lru_cache(maxsize=65_536)
def key_problem(key: str) -> str | None:
    """`memsync_protocol.keys.key_problem`, remembered: a walk asks it for every file."""
    return _uncached_key_problem(key)


class Verdict(NamedTuple):
    """What a file's bytes decided: a checksum, or skip rows `[reason, rule, label, line]`
    (for `invalid-text` the label is the problem in words)."""

    checksum: str | None
    skips: list[list[Any]]


# One compiled pattern for all leftovers: the walk asks this for every file.
_EDITOR_LEFTOVER_PATTERN = re.compile(
    "|".join(f"(?:{pattern})" for _, pattern in _LEFTOVER_RULES), re.DOTALL
)


def is_editor_leftover(name: str) -> bool:
    """True when a file name matches one of `EDITOR_LEFTOVER`: an editor's or a sync
    tool's temporary or leftover file, never a note."""
    return _EDITOR_LEFTOVER_PATTERN.fullmatch(name) is not None


def cache_record(
    size: int,
    mtime_ns: int,
    inode: int,
    checksum: str | None,
    skips: Sequence[Sequence[Any]] | None = None,
    *,
    recorded_ns: int | None = None,
) -> list[Any]:
    """One stat-cache row: `[size, mtime_ns, inode, checksum, skips]`.

    `skips` is None for a syncable file, else a list of `[reason, rule, label, line]`
    rows (one per secret finding, or one `binary`, `not-utf8` or `invalid-text` row).
    When `mtime_ns` lies within `RACY_WINDOW_NS` of `recorded_ns` (default: now), the
    file could still change in the same mtime tick without its stat changing, so the
    size is stored as -1 and the next scan reads the file again. Use this for the stat
    `write_entry` returns too: a file just written is always racy.
    """
    now = time.time_ns() if recorded_ns is None else recorded_ns
    stored_size = _RACY_SIZE if now - mtime_ns < RACY_WINDOW_NS else size
    rows = None if skips is None else [list(row) for row in skips]
    return [stored_size, mtime_ns, inode, checksum, rows]


def _exact_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _cached_verdict(row: object, size: int, mtime_ns: int, inode: int) -> Verdict | None:
    """The cached verdict when `row` is well formed and its stat matches; else None.

    The cache comes from a file on disk: anything malformed is a miss, never an error.
    """
    # A list, as JSON gives it (checked before the slow ABC test for any sequence).
    if not isinstance(row, list) and (not isinstance(row, Sequence) or isinstance(row, str)):
        return None
    if len(row) != 5:
        return None
    cached_size, cached_mtime, cached_inode, checksum, skips = row
    # The common case first: a stat that differs is a miss, whatever else the row says.
    if cached_size != size or cached_mtime != mtime_ns or cached_inode != inode:
        return None
    # Equal to ints, so ints, floats or bools: only an int will do.
    if not (type(cached_size) is type(cached_mtime) is type(cached_inode) is int):
        return None
    if skips is None:
        return Verdict(checksum, []) if is_checksum(checksum) else None
    if checksum is not None or not isinstance(skips, list) or not skips:
        return None
    for skip in skips:
        if not (isinstance(skip, list) and len(skip) == 4 and skip[0] in _CONTENT_REASONS):
            return None
        _, rule, label, line = skip
        if not (
            (rule is None or isinstance(rule, str))
            and (label is None or isinstance(label, str))
            and (line is None or _exact_int(line))
        ):
            return None
    return Verdict(None, [list(skip) for skip in skips])


def judge_bytes(data: bytes, known_clean: str | None = None) -> Verdict:
    """The one verdict on a file's bytes, for every surface: a scan (and so `status`,
    `push`, the watcher and `memsync index`) and MCP's `write_note` ask this.

    In order: `binary` (not UTF-8, with a NUL byte in its first 8,000), `not-utf8`,
    `invalid-text` (`text_problem`, the server's own rule: a NUL character; the
    problem is the row's label), `secret` (one row per finding); else the checksum.
    `known_clean` is the checksum this file had when last judged clean (under the same
    rules: the state drops the cache when they change). Equal bytes need no new scan,
    which matters right after a pull, when every written file is read once more.
    """
    if known_clean is not None and PREFIX + hashlib.sha256(data).hexdigest() == known_clean:
        return Verdict(known_clean, [])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        reason = "binary" if b"\x00" in data[:_BINARY_SNIFF_BYTES] else "not-utf8"
        return Verdict(None, [[reason, None, None, None]])
    problem = text_problem(text)
    if problem is not None:
        return Verdict(None, [["invalid-text", None, problem, None]])
    findings = scan_text(text)
    if findings:
        return Verdict(None, [["secret", f.rule, f.label, f.line] for f in findings])
    return Verdict(entry_checksum(text), [])


def skips_of(key: str, verdict: Verdict) -> list[Skipped]:
    """A verdict's skip rows as `Skipped` items of `key`."""
    return [
        Skipped(key, reason, problem=label)
        if reason == "invalid-text"
        else Skipped(key, reason, rule, label, line)
        for reason, rule, label, line in verdict.skips
    ]


def _read_up_to(fd: int, limit: int | None) -> bytes:
    """Read from `fd` until end of file, or until more than `limit` bytes were read."""
    chunks: list[bytes] = []
    total = 0
    while limit is None or total <= limit:
        chunk = os.read(fd, _READ_CHUNK)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


class IgnoreFileError(ConfigError):
    """A `.memsyncignore` that cannot be read or holds a pattern it may not (exit 2)."""


class IgnoreRules:
    """What a team dir's `.memsyncignore` leaves out of a scan.

    `spec` holds the file's patterns (None: no file). `tracked` are keys the team
    already has (their base): like tracked files in git they are never ignored, nor
    are the folders holding them, so pulls and pushes of them go on as before.
    """

    def __init__(self, spec: pathspec.GitIgnoreSpec | None, tracked: Iterable[str] = ()) -> None:
        self.spec = spec
        self.tracked = frozenset(tracked)
        self.tracked_folders = frozenset(
            "/".join(key.split("/")[:end])
            for key in self.tracked
            for end in range(1, key.count("/") + 1)
        )

    def keeping(self, tracked: Iterable[str]) -> IgnoreRules:
        """The same patterns, never applied to `tracked` keys or the folders holding them."""
        return self if self.spec is None else IgnoreRules(self.spec, tracked)

    def ignores_file(self, key: str) -> bool:
        """True when the patterns leave out the file `key`."""
        return self.spec is not None and key not in self.tracked and self.spec.match_file(key)

    def ignores_folder(self, key: str) -> bool:
        """True when the patterns leave out the folder `key` and all it holds."""
        return (
            self.spec is not None
            and key not in self.tracked_folders
            and self.spec.match_file(key + "/")
        )


def _ignore_pattern_problem(line: str) -> str | None:
    """Why one line of `.memsyncignore` is refused, or None (blank lines and comments pass)."""
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return None
    if "\x00" in line:
        return "contains a NUL character"
    path = stripped[1:] if stripped.startswith("!") else stripped
    # gitignore patterns are relative to the folder holding the file: one that climbs
    # out of it would never match, and saying so beats silently ignoring nothing.
    if ".." in path.strip("/").split("/"):
        return f"{stripped!r} points outside the team dir (patterns are relative to it)"
    import pathspec

    try:
        pathspec.GitIgnoreSpec.from_lines([line])
    except ValueError:
        return f"{stripped!r} is not a valid gitignore pattern"
    return None


def read_ignore_rules(team_dir: Path) -> IgnoreRules:
    """The patterns of `team_dir/.memsyncignore`; no rules when there is no such file.

    Raises `IgnoreFileError` (one line naming the file, and the line when a pattern is
    refused) for a file that is a symlink or not a regular file, unreadable, larger
    than `MAX_IGNORE_BYTES`, not UTF-8, or that holds a pattern climbing out of the
    team dir (`..`) or one gitignore does not accept.
    """
    path = Path(team_dir) / IGNORE_FILE
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        return IgnoreRules(None)
    except OSError as error:
        if error.errno in _SYMLINK_ERRNOS:
            raise IgnoreFileError(f"{path}: is a symbolic link; it must be a file") from error
        raise IgnoreFileError(f"{path}: cannot be read: {error.strerror}") from error
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IgnoreFileError(f"{path}: is not a regular file")
        data = _read_up_to(fd, MAX_IGNORE_BYTES)
    except OSError as error:
        raise IgnoreFileError(f"{path}: cannot be read: {error.strerror}") from error
    finally:
        os.close(fd)
    if len(data) > MAX_IGNORE_BYTES:
        raise IgnoreFileError(f"{path}: is larger than {MAX_IGNORE_BYTES:,} bytes")
    try:
        lines = data.decode("utf-8-sig").splitlines()
    except UnicodeDecodeError as error:
        raise IgnoreFileError(f"{path}: is not UTF-8 text") from error
    for number, line in enumerate(lines, start=1):
        problem = _ignore_pattern_problem(line)
        if problem is not None:
            raise IgnoreFileError(f"{path}: line {number}: {problem}")
    import pathspec

    return IgnoreRules(pathspec.GitIgnoreSpec.from_lines(lines))


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


def _decomposed(name: str) -> str | None:
    """The NFD spelling of an NFC name when it differs (the name macOS may have written)."""
    if name.isascii():
        return None
    decomposed = unicodedata.normalize("NFD", name)
    return None if decomposed == name else decomposed


def _on_disk(name: str, operation: Callable[[str], T]) -> T:
    """`operation(name)`; when that finds nothing, `operation` on the NFD spelling.

    `operation` acts on one name in one directory and raises `FileNotFoundError` when it
    is missing. The NFD spelling is only tried then, so an existing NFC name costs
    nothing extra, and a missing one a single failed call (no directory listing).
    """
    try:
        return operation(name)
    except FileNotFoundError as missing:
        alias = _decomposed(name)
        if alias is None:
            raise
        try:
            return operation(alias)
        except FileNotFoundError:
            raise missing from None


def _lstat_mode(parent: Path, name: str) -> tuple[str, int]:
    """(`name`, the mode of `parent / name`), not following a symlink."""
    return name, os.lstat(parent / name).st_mode


def _is_inside(path: str, root: str) -> bool:
    return os.path.commonpath([path, root]) == root


def safe_target(team_dir: Path, key: str) -> Path:
    """The path to write `key` at, or `UnsafeKey` when that would not be safe.

    Refused: a key `key_problem` refuses; any existing component below the team dir that
    is a symlink (even one pointing inside: the simplest rule that is safe); an existing
    parent that is not a directory, or an existing target that is not a regular file;
    and a deepest existing ancestor whose real path is not inside the real team dir.
    The path returned uses the spelling on disk of each existing component (an NFD
    name for an NFC key, see the module docstring).
    """
    problem = key_problem(key)
    if problem is not None:
        raise UnsafeKey(key, problem)
    segments = key.split("/")
    root = Path(team_dir)
    deepest_existing = root
    existing: list[str] = []
    for index, segment in enumerate(segments):
        parent = deepest_existing
        try:
            name, mode = _on_disk(segment, functools.partial(_lstat_mode, parent))
        except FileNotFoundError:
            break
        candidate = parent / name
        shown = "/".join(segments[: index + 1])
        if stat.S_ISLNK(mode):
            raise UnsafeKey(key, f"{shown!r} is a symbolic link")
        is_target = index == len(segments) - 1
        if not is_target and not stat.S_ISDIR(mode):
            raise UnsafeKey(key, f"{shown!r} is not a directory")
        if is_target and not stat.S_ISREG(mode):
            raise UnsafeKey(key, f"{shown!r} is not a regular file")
        deepest_existing = candidate
        existing.append(name)
    if not _is_inside(os.path.realpath(deepest_existing), os.path.realpath(root)):
        raise UnsafeKey(key, "resolves outside the team dir")
    return root.joinpath(*existing, *segments[len(existing) :])


def _not_a_directory_reason(parent_fd: int, name: str, shown: str) -> str:
    """Why `name` in `parent_fd` could not be opened as a directory without following."""
    try:
        mode = os.lstat(name, dir_fd=parent_fd).st_mode
    except OSError:
        return f"{shown!r} could not be opened as a directory"
    if stat.S_ISLNK(mode):
        return f"{shown!r} is a symbolic link"
    return f"{shown!r} is not a directory"


def _open_directory(parent_fd: int, name: str, key: str, shown: str) -> int:
    """Open directory `name` in `parent_fd` without following a symlink; a symlink or a
    non-directory there is an `UnsafeKey`."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except OSError as error:
        if error.errno in (errno.ENOTDIR, *_SYMLINK_ERRNOS):
            raise UnsafeKey(key, _not_a_directory_reason(parent_fd, name, shown)) from error
        raise


def _open_subdirectory(
    parent_fd: int, segment: str, key: str, shown: str, *, create: bool, durable: bool = True
) -> tuple[str, int]:
    """`_open_directory` on `segment`'s spelling on disk: (that name, its descriptor).

    A missing directory is created (with the NFC name of the key) when asked to, and
    its parent fsynced unless not `durable` (the caller syncs once for many).
    """
    try:
        return _on_disk(segment, lambda name: (name, _open_directory(parent_fd, name, key, shown)))
    except FileNotFoundError:
        if not create:
            raise
    # Whoever wins a race to create it, the O_NOFOLLOW open decides whether what is
    # there now is a directory we may use.
    with suppress(FileExistsError):
        os.mkdir(segment, _NEW_DIR_MODE, dir_fd=parent_fd)
        if durable:
            os.fsync(parent_fd)
    return segment, _open_directory(parent_fd, segment, key, shown)


class _Parents(NamedTuple):
    """The open directories on a key's path: `descriptors[0]` is the team dir, and
    `descriptors[i + 1]` the directory `names[i]` (its spelling on disk) inside
    `descriptors[i]`. The last descriptor is the target's parent."""

    descriptors: list[int]
    names: list[str]


@contextmanager
def _parent_directories(team_dir: Path, key: str, *, create: bool) -> Iterator[_Parents]:
    """Open descriptors of the team dir and of each directory on `key`'s path.

    Every directory below the team dir is opened relative to its parent with
    `O_NOFOLLOW`, so none of them can be a symlink at the moment it is used. Raises
    FileNotFoundError for a missing one unless `create`.
    """
    segments = key.split("/")[:-1]
    parents = _Parents([os.open(team_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)], [])
    try:
        for index, segment in enumerate(segments):
            shown = "/".join(segments[: index + 1])
            name, descriptor = _open_subdirectory(
                parents.descriptors[-1], segment, key, shown, create=create
            )
            parents.descriptors.append(descriptor)
            parents.names.append(name)
        yield parents
    finally:
        for descriptor in reversed(parents.descriptors):
            os.close(descriptor)


def _open_for_reading(parent_fd: int, name: str, key: str) -> int:
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=parent_fd)
    except OSError as error:
        if error.errno in _SYMLINK_ERRNOS:
            raise UnsafeKey(key, "is a symbolic link") from error
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeKey(key, "is not a regular file")
    return fd


def read_entry(team_dir: Path, key: str) -> str:
    """The UTF-8 text of `key`'s file, read without following any symlink below the
    team dir.

    Raises UnsafeKey (refused key, symlink, not a regular file), FileNotFoundError,
    and UnicodeDecodeError for a file that is not UTF-8.
    """
    safe_target(team_dir, key)
    with _parent_directories(team_dir, key, create=False) as parents:
        parent_fd = parents.descriptors[-1]
        leaf = key.rsplit("/", 1)[-1]
        fd = _on_disk(leaf, lambda name: _open_for_reading(parent_fd, name, key))
        try:
            data = _read_up_to(fd, None)
        finally:
            os.close(fd)
    return data.decode("utf-8")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _stage(team_dir: Path, key: str, data: bytes, *, durable: bool) -> tuple[str, str]:
    """Write `data` to a hidden temp file beside `key`'s target; return the temp file's
    name and the target's (its spelling on disk when it exists).

    Missing parent dirs are created one at a time, each opened without following
    symlinks. An existing file's permission bits are carried over; a new one gets
    0o644 less the umask. The temp name is short and hidden: it fits any name length
    and the scan skips it.
    """
    safe_target(team_dir, key)
    name = key.rsplit("/", 1)[-1]
    with _parent_directories(team_dir, key, create=True) as parents:
        parent_fd = parents.descriptors[-1]
        existing_mode: int | None = None
        with suppress(FileNotFoundError):
            name, existing_mode = _on_disk(
                name, lambda spelling: (spelling, os.lstat(spelling, dir_fd=parent_fd).st_mode)
            )
        if existing_mode is not None and not stat.S_ISREG(existing_mode):
            kind = "a symbolic link" if stat.S_ISLNK(existing_mode) else "not a regular file"
            raise UnsafeKey(key, f"is {kind}")
        temp_name = f".memsync-{secrets.token_hex(8)}.tmp"
        fd = os.open(temp_name, _TEMP_FLAGS, _NEW_FILE_MODE, dir_fd=parent_fd)
        try:
            try:
                if existing_mode is not None:
                    os.fchmod(fd, stat.S_IMODE(existing_mode))
                _write_all(fd, data)
                if durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
        except BaseException:
            with suppress(FileNotFoundError):
                os.unlink(temp_name, dir_fd=parent_fd)
            raise
    return temp_name, name


def _commit_staged(
    team_dir: Path, key: str, staged: tuple[str, str], *, durable: bool
) -> tuple[int, int, int]:
    """Rename a staged temp file over `key`'s target (both named by `_stage`); return
    the target's stat."""
    temp_name, name = staged
    with _parent_directories(team_dir, key, create=False) as parents:
        parent_fd = parents.descriptors[-1]
        try:
            os.replace(temp_name, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
        except BaseException:
            with suppress(FileNotFoundError):
                os.unlink(temp_name, dir_fd=parent_fd)
            raise
        written = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        if durable:
            os.fsync(parent_fd)
    return written.st_size, written.st_mtime_ns, written.st_ino


def write_entry(team_dir: Path, key: str, text: str) -> tuple[int, int, int]:
    """Write `text` as `key`'s file atomically; return its (size, mtime_ns, inode).

    The text goes to a hidden temp file in the target's directory, is fsynced, renamed
    over the target, and the directory is fsynced: a reader sees the old file or the
    new one, never a part. The team dir itself is created if missing. Store the
    returned stat with `cache_record`, which marks it racy.
    """
    # Encode first: a text that cannot be written must not leave anything on disk.
    # (`_stage` applies `safe_target`.)
    data = text.encode("utf-8")
    Path(team_dir).mkdir(parents=True, exist_ok=True)
    staged = _stage(team_dir, key, data, durable=True)
    return _commit_staged(team_dir, key, staged, durable=True)


class _DirectoryWalk:
    """The open directories on the path of the key written last, for writing many keys
    in sorted order: keys sharing a folder share its descriptors, so each folder below
    the team dir is opened (created when missing) and checked once, not once per file.

    Each folder is opened relative to its parent with `O_NOFOLLOW` (`_open_subdirectory`),
    and its real path is checked against the real team dir once, as `safe_target` does.
    """

    def __init__(self, team_dir: Path) -> None:
        self.root = Path(team_dir)
        self.real_root = os.path.realpath(self.root)
        # (segment of the key, name on disk, descriptor), outermost first; [0] is the root.
        self.open: list[tuple[str, str, int]] = [
            ("", "", os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        ]

    def parent(self, key: str) -> int:
        """The descriptor of the folder holding `key`, created if missing; UnsafeKey when
        a folder on the way is a symlink, not a folder, or resolves outside."""
        segments = key.split("/")[:-1]
        kept = 1
        while kept < len(self.open) and kept <= len(segments):
            if self.open[kept][0] != segments[kept - 1]:
                break
            kept += 1
        self._close_from(kept)
        for index in range(kept - 1, len(segments)):
            shown = "/".join(segments[: index + 1])
            name, descriptor = _open_subdirectory(
                self.open[-1][2], segments[index], key, shown, create=True, durable=False
            )
            self.open.append((segments[index], name, descriptor))
            on_disk = self.root.joinpath(*(entry[1] for entry in self.open[1:]))
            if not _is_inside(os.path.realpath(on_disk), self.real_root):
                self._close_from(len(self.open) - 1)
                raise UnsafeKey(key, "resolves outside the team dir")
        return self.open[-1][2]

    def _close_from(self, index: int) -> None:
        while len(self.open) > max(index, 1):
            os.close(self.open.pop()[2])

    def close(self) -> None:
        """Close every descriptor, the team dir's too."""
        self._close_from(1)
        os.close(self.open.pop()[2])


def _create_new(walk: _DirectoryWalk, key: str, data: bytes) -> tuple[int, int, int] | None:
    """Write `data` as a new file at `key`'s target: (size, mtime_ns, inode), or None
    when something is there already (or may be: an NFD spelling), for the careful path.

    `O_CREAT | O_EXCL` with `O_NOFOLLOW` creates the file or fails: it never opens an
    existing file or follows a symlink, so nobody's file is overwritten here. A file
    that did not exist holds nothing to lose, so it is written in place, without a temp
    file: a crash can leave it short, but the state only records it after the caller's
    sync, and the next pull compares such an unrecorded file like any other.
    """
    leaf = key.rsplit("/", 1)[-1]
    if _decomposed(leaf) is not None:
        return None  # an NFD spelling may be on disk: the careful path finds it
    parent_fd = walk.parent(key)
    try:
        fd = os.open(leaf, _TEMP_FLAGS, _NEW_FILE_MODE, dir_fd=parent_fd)
    except FileExistsError:
        return None
    try:
        try:
            _write_all(fd, data)
            written = os.fstat(fd)
        finally:
            os.close(fd)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(leaf, dir_fd=parent_fd)
        raise
    return written.st_size, written.st_mtime_ns, written.st_ino


def write_entries(
    team_dir: Path, texts: Mapping[str, str], *, sync: bool = True
) -> dict[str, tuple[int, int, int] | UnsafeKey | OSError]:
    """Write many files with at most three `sync()` calls instead of fsyncs per file.

    A key whose file does not exist yet is created in place (`_create_new`): there is
    nothing to replace, so no temp file and no sync before it. A key whose file exists
    is replaced atomically: every such text is first staged in a temp file; one
    `os.sync()` makes all of them durable; then each is renamed over its target (a
    crash leaves the old file or the whole new one). With `sync`, a last `os.sync()`
    makes everything durable; a caller writing in chunks passes False and calls
    `os.sync()` once itself, before it records the writes anywhere durable. Per key:
    the stat written, or the error that refused it.
    """
    Path(team_dir).mkdir(parents=True, exist_ok=True)
    outcome: dict[str, tuple[int, int, int] | UnsafeKey | OSError] = {}
    existing: dict[str, bytes] = {}
    walk = _DirectoryWalk(team_dir)
    try:
        for key, text in sorted(texts.items()):
            data = text.encode("utf-8")
            try:
                problem = key_problem(key)
                if problem is not None:
                    raise UnsafeKey(key, problem)
                created = _create_new(walk, key, data)
            except (UnsafeKey, OSError) as error:
                outcome[key] = error
                continue
            if created is None:
                existing[key] = data
            else:
                outcome[key] = created
    finally:
        walk.close()
    staged: dict[str, tuple[str, str]] = {}
    for key, data in existing.items():
        try:
            staged[key] = _stage(team_dir, key, data, durable=False)
        except (UnsafeKey, OSError) as error:
            outcome[key] = error
    if staged:
        os.sync()
    for key, names in staged.items():
        try:
            outcome[key] = _commit_staged(team_dir, key, names, durable=False)
        except (UnsafeKey, OSError) as error:
            outcome[key] = error
    if sync and any(isinstance(result, tuple) for result in outcome.values()):
        os.sync()
    return outcome


def remove_entry(team_dir: Path, key: str) -> None:
    """Remove `key`'s file (no error if it is already gone), then every parent dir it
    leaves empty, up to but not including the team dir. Raises UnsafeKey like
    `safe_target`.
    """
    safe_target(team_dir, key)
    segments = key.split("/")
    try:
        with _parent_directories(team_dir, key, create=False) as parents:
            descriptors = parents.descriptors
            with suppress(FileNotFoundError):
                _on_disk(segments[-1], lambda name: os.unlink(name, dir_fd=descriptors[-1]))
                os.fsync(descriptors[-1])
            # descriptors[i] is the directory holding names[i].
            for index in range(len(segments) - 2, -1, -1):
                try:
                    os.rmdir(parents.names[index], dir_fd=descriptors[index])
                except OSError:
                    break  # not empty (or no longer ours): it and its parents stay
                os.fsync(descriptors[index])
    except FileNotFoundError:
        return  # the team dir or a parent dir is already gone, and the file with it
