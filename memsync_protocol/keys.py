"""The rules for entry keys and texts, and the limits, shared by the server and the client.

A key is a `/`-separated path relative to the team dir. Both sides refuse the same keys
(docs/protocol.md section 3, "Keys a server and a client both refuse"): the server answers 400,
the client never writes such a key to disk whatever a server sends. `key_problem` is the
one function that decides; everything else calls it. `path_clashes` is the one rule
between keys: no key may be both a file and the directory of another.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left
from collections.abc import Container, Iterable, Iterator, Sequence
from urllib.parse import unquote

from memsync_protocol.visible import BIDI_CONTROLS

# The limits of the wire: a server's defaults (its settings may change them; it reports
# the ones in force in a structured 413) and the most a client ever writes or sends.
MAX_KEY_BYTES = 512
MAX_KEY_SEGMENTS = 32
MAX_ENTRY_BYTES = 250_000  # UTF-8 bytes of one entry's text
MAX_ENTRIES = 2_000  # live entries of one repo
MAX_BODY_BYTES = 2_000_000  # bytes of one request body

# `C:x`, `c:/x`: a Windows drive prefix makes a path absolute (or drive-relative).
_DRIVE_PREFIX = re.compile(r"^[A-Za-z]:")
# How many rounds of percent-decoding we look through: `%252e%252e` is `..` after two.
_DECODE_ROUNDS = 3
# Characters a key may not hold though they are not control characters: the bidi
# controls (a name shown right to left from its middle reads as another name, in a
# listing, a log line or a terminal), and the invisible ones that make two different
# keys look alike: zero width space, word joiner, byte order mark, and the line and
# paragraph separators (a line break to a reader that splits lines the Unicode way).
# The zero width (non-)joiners U+200C/U+200D are kept: Persian words and emoji use them.
INVISIBLE_IN_KEYS = BIDI_CONTROLS | frozenset("\u200b\u2060\ufeff\u2028\u2029")
# Keys of ASCII letters, digits, `_`, `-` and `.` in non-empty segments: no `%`, no
# backslash, no colon, no control or non-ASCII character.
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*")


class InvalidKeyError(ValueError):
    """A key that neither side accepts; `reason` says why in a few words."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"invalid key {key!r}: {reason}")
        self.key = key
        self.reason = reason


def _shape_problem(path: str, segment_count: int) -> str | None:
    """Why a (decoded or normalized) form of a key would escape or alias, if it would."""
    if "\\" in path:
        return "contains a backslash"
    if path.startswith("/") or _DRIVE_PREFIX.match(path):
        return "is an absolute path"
    segments = path.split("/")
    if len(segments) != segment_count:
        return "encodes a path separator"
    for segment in segments:
        if segment in (".", ".."):
            return "contains a '.' or '..' segment"
        if segment == "":
            return "contains an empty segment"
    return None


def _later_readings(key: str) -> Iterator[str]:
    """Every text a later reader could make of `key`: up to `_DECODE_ROUNDS` rounds of
    percent-decoding, lenient like `unquote`'s default (an escape that is not UTF-8
    becomes U+FFFD and the rest is still decoded), with NFKC normalization before,
    between or after the rounds."""
    seen: set[tuple[str, int]] = set()
    pending = [(key, 0)]
    while pending:
        form, rounds = pending.pop()
        if (form, rounds) in seen:
            continue
        seen.add((form, rounds))
        yield form
        pending.append((unicodedata.normalize("NFKC", form), rounds))
        if rounds < _DECODE_ROUNDS and "%" in form:
            pending.append((unquote(form), rounds + 1))


def key_problem(
    key: object,
    *,
    max_bytes: int = MAX_KEY_BYTES,
    max_segments: int = MAX_KEY_SEGMENTS,
) -> str | None:
    """Return why `key` is refused, or None when it is a valid key.

    The checks, in order: type and emptiness; encodable as UTF-8 (no lone surrogates);
    no control characters (NUL included); no bidi control (U+202E) or invisible
    character (`INVISIBLE_IN_KEYS`); size in bytes and segments; the plain shape (no
    absolute path, backslash, empty, `.` or `..` segment); NFC form; and then the
    same shape rules (and no control character) on every form a later reader could
    make of it by percent-decoding and NFKC in any order, so `%2e%2e`, `%252F`,
    full-width `．．／`, `%ef%bc%8e%ef%bc%8e` or `%ff/%2e%2e` cannot smuggle a traversal
    past a later decoder.
    """
    if not isinstance(key, str):
        return "is not a string"
    if key == "":
        return "is empty"
    if _PLAIN_KEY.fullmatch(key) is not None:
        # Plain ASCII: nothing in it decodes or normalizes into anything else, so of
        # the checks below only size, depth and `.`/`..` segments can refuse it. (A
        # scan asks this of every file; tests/property/test_keys.py holds the two
        # paths to the same answers.)
        return _limits_and_shape_problem(key, len(key), max_bytes, max_segments)
    return _general_key_problem(key, max_bytes, max_segments)


def _limits_and_shape_problem(key: str, size: int, max_bytes: int, max_segments: int) -> str | None:
    if size > max_bytes:
        return f"is longer than {max_bytes} bytes"
    segment_count = key.count("/") + 1
    if segment_count > max_segments:
        return f"has more than {max_segments} path segments"
    return _shape_problem(key, segment_count)


def _general_key_problem(key: str, max_bytes: int, max_segments: int) -> str | None:
    """`key_problem` for any non-empty string."""
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        return "is not valid UTF-8"
    if any(unicodedata.category(ch) == "Cc" for ch in key):
        return "contains a control character"
    hidden = next((ch for ch in key if ch in INVISIBLE_IN_KEYS), None)
    if hidden is not None:
        return f"contains an invisible or bidi control character (U+{ord(hidden):04X})"
    problem = _limits_and_shape_problem(key, size, max_bytes, max_segments)
    if problem is not None:
        return problem
    segment_count = key.count("/") + 1
    if unicodedata.normalize("NFC", key) != key:
        return "is not NFC-normalized"
    for reading in _later_readings(key):
        if reading != key and (
            _shape_problem(reading, segment_count) is not None
            or any(unicodedata.category(ch) == "Cc" for ch in reading)
        ):
            return "decodes (percent-encoding, NFKC) into a separator or a '.' / '..' segment"
    return None


def validate_key(
    key: object,
    *,
    max_bytes: int = MAX_KEY_BYTES,
    max_segments: int = MAX_KEY_SEGMENTS,
) -> str:
    """Return `key` when it is valid; raise `InvalidKeyError` otherwise."""
    problem = key_problem(key, max_bytes=max_bytes, max_segments=max_segments)
    if problem is not None:
        raise InvalidKeyError(str(key), problem)
    assert isinstance(key, str)
    return key


def text_problem(text: str) -> str | None:
    """Why an entry text cannot be stored the same way on every backend, if it cannot.

    PostgreSQL cannot store NUL, and no backend may accept what another refuses; a
    lone surrogate is not UTF-8 at all.
    """
    if "\x00" in text:
        return "contains a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8 (lone surrogate)"
    return None


def path_clashes(new_keys: Iterable[str], live_keys: Iterable[str]) -> list[tuple[str, str]]:
    """The `(key, clashes_with)` pairs that writing `new_keys` next to `live_keys` would
    make: a key that is both a file and a directory (`d` and `d/n.md`). Sorted.

    Only a key that is not live yet is checked, so replacing a live key never clashes
    (not with itself, nor with a clash stored before this rule). Each such key is paired
    with every ancestor that is a live or another new key, and with its smallest
    descendant among them (one is enough to name the clash; a directory may hold
    thousands). Cost: one sort of all keys plus a bisect and a few set lookups per new
    key, so a 2,000-key write into a 20,000-key repo stays in milliseconds.
    """
    live = set(live_keys)
    return path_clashes_sorted(new_keys, live, sorted(live))


def path_clashes_sorted(
    new_keys: Iterable[str], live: Container[str], live_sorted: Sequence[str]
) -> list[tuple[str, str]]:
    """`path_clashes` for a caller that keeps the live keys both as a set (or dict) and
    as a sorted list: no pass over the live keys, only a few set lookups and two
    bisects per new key (the server's commit, which must not cost more in a big repo).
    """
    arriving = sorted({key for key in new_keys if key not in live})
    if not arriving:
        return []
    arriving_set = set(arriving)
    pairs: list[tuple[str, str]] = []
    for key in arriving:
        cut = key.find("/")
        while cut != -1:
            parent = key[:cut]
            if parent in live or parent in arriving_set:
                pairs.append((key, parent))
            cut = key.find("/", cut + 1)
        # Everything under `d/` is one contiguous run of any sorted list of strings:
        # the smallest descendant is the first key at or after `d/`, in either list.
        below = key + "/"
        found = []
        for ordered in (live_sorted, arriving):
            index = bisect_left(ordered, below)
            if index < len(ordered) and ordered[index].startswith(below):
                found.append(ordered[index])
        if found:
            pairs.append((key, min(found)))
    return sorted(pairs)
