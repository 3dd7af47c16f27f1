"""The rules for entry keys, shared by the server and the client.

A key is a `/`-separated path relative to the team dir. Both sides refuse the same keys
(DESIGN.md section 3, "Keys a server and a client both refuse"): the server answers 400,
the client never writes such a key to disk whatever a server sends. `key_problem` is the
one function that decides; everything else calls it.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import unquote

MAX_KEY_BYTES = 512
MAX_KEY_SEGMENTS = 32

# `C:x`, `c:/x`: a Windows drive prefix makes a path absolute (or drive-relative).
_DRIVE_PREFIX = re.compile(r"^[A-Za-z]:")
# How many rounds of percent-decoding we look through: `%252e%252e` is `..` after two.
_DECODE_ROUNDS = 3


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


def key_problem(
    key: object,
    *,
    max_bytes: int = MAX_KEY_BYTES,
    max_segments: int = MAX_KEY_SEGMENTS,
) -> str | None:
    """Return why `key` is refused, or None when it is a valid key.

    The checks, in order: type and emptiness; encodable as UTF-8 (no lone surrogates);
    no control characters (NUL included); size in bytes and segments; the plain shape
    (no absolute path, backslash, empty, `.` or `..` segment); NFC form; and then the
    same shape rules on every percent-decoded form and on the NFKC form, so `%2e%2e`,
    `%252F` or full-width `．．／` cannot smuggle a traversal past a later decoder.
    """
    if not isinstance(key, str):
        return "is not a string"
    if key == "":
        return "is empty"
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        return "is not valid UTF-8"
    if any(unicodedata.category(ch) == "Cc" for ch in key):
        return "contains a control character"
    if size > max_bytes:
        return f"is longer than {max_bytes} bytes"
    segment_count = key.count("/") + 1
    if segment_count > max_segments:
        return f"has more than {max_segments} path segments"
    problem = _shape_problem(key, segment_count)
    if problem is not None:
        return problem
    if unicodedata.normalize("NFC", key) != key:
        return "is not NFC-normalized"
    decoded = key
    for _ in range(_DECODE_ROUNDS):
        if "%" not in decoded:
            break
        try:
            next_decoded = unquote(decoded, errors="strict")
        except UnicodeDecodeError:
            # Bytes that are not UTF-8 cannot spell a separator or a dot.
            break
        if next_decoded == decoded:
            break
        decoded = next_decoded
        if _shape_problem(decoded, segment_count) is not None:
            return "percent-encodes a separator or a '.' / '..' segment"
    compatible = unicodedata.normalize("NFKC", key)
    if compatible != key and (
        _shape_problem(compatible, segment_count) is not None
        or any(unicodedata.category(ch) == "Cc" for ch in compatible)
    ):
        return "normalizes (NFKC) into a separator or a '.' / '..' segment"
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
