"""The one verdict on a file's bytes, and the stat-cache rows that remember it.

    judge_bytes(data) -> Verdict                   checksum, or skip rows (binary, secret...)
    cache_record(size, mtime_ns, inode, ...)       one stat-cache row, racy mtimes marked

Every surface that judges a file (a scan, and so `status`, `push`, the watcher and
`memsync index`; MCP's `write_note`) asks `judge_bytes`, so they never disagree. A scan
skips reading a file whose stat matches its cache row (`_cached_verdict`).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from memsync_protocol.checksums import PREFIX, entry_checksum, is_checksum
from memsync_protocol.keys import text_problem
from scanner import scan_text

# A file whose mtime is this close to the moment we read it may still change within the
# same mtime tick (2 s on FAT, 1 s on some network filesystems) without its stat
# changing; git calls such an entry "racily clean". We do not trust it next time.
RACY_WINDOW_NS = 2_000_000_000
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


class Verdict(NamedTuple):
    """What a file's bytes decided: a checksum, or skip rows `[reason, rule, label, line]`
    (for `invalid-text` the label is the problem in words)."""

    checksum: str | None
    skips: list[list[Any]]


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
