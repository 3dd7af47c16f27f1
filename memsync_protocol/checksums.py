"""Entry and repo checksums, exactly as docs/protocol.md section 2 defines them.

Both sides of the wire compute these strings the same way, so comparing two of them is
plain string equality.

The repo checksum (the ETag) has two definitions, numbered:

1. SHA-256 over `key\\nentry checksum\\n` of every live key in key order. Simple, but a
   commit must rehash from the changed key to the end, so its cost grows with the repo.
   Snapshot files (`snapshot.json`, format 1) keep this definition.
2. (what a server answers today, `"checksumVersion": 2`) the same lines, cut into 256
   buckets by the first byte of the SHA-256 of the key; each bucket is hashed alone, and
   the checksum is the SHA-256 of the 256 bucket digests. A commit rehashes only the
   buckets it touched and 8 KiB of digests, whatever the repo's size.

Under both, a repo without live keys has the SHA-256 of the empty string, so the
empty state a client assumes before it ever reached a server is the same string.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence

PREFIX = "sha256:"
CHECKSUM_PATTERN = re.compile(r"sha256:[0-9a-f]{64}")
EMPTY_REPO_CHECKSUM = PREFIX + hashlib.sha256(b"").hexdigest()

# The repo checksum definition a server computes, and every one this module knows.
REPO_CHECKSUM_VERSION = 2
REPO_CHECKSUM_VERSIONS = (1, 2)
# Definition 2: how many buckets, and the digest of an empty one.
BUCKETS = 256
EMPTY_BUCKET = hashlib.sha256(b"").digest()

Pairs = Mapping[str, str] | Iterable[tuple[str, str]]


def entry_checksum(text: str) -> str:
    """`sha256:` + hex SHA-256 of the UTF-8 bytes of one entry's text."""
    return PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()


def entry_line(key: str, checksum: str) -> str:
    """The line both definitions hash for one live key: `key\nentry checksum\n`."""
    return f"{key}\n{checksum}\n"


def key_bucket(key: str) -> int:
    """Definition 2: the bucket of a key, the first byte of the SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(key.encode("utf-8")).digest()[0]


def bucket_digest(lines: Mapping[str, str]) -> bytes:
    """Definition 2: the raw SHA-256 of one bucket, given as key -> `entry_line`, the
    lines joined in ascending key order.

    Keys are ordered by their UTF-8 bytes; for valid keys (no lone surrogates) that is
    the same as Python's code-point order, so a plain sort is exact.
    """
    if not lines:
        return EMPTY_BUCKET
    return hashlib.sha256("".join([lines[key] for key in sorted(lines)]).encode("utf-8")).digest()


def combine_buckets(digests: Sequence[bytes], *, empty: bool) -> str:
    """Definition 2: the repo checksum from the 256 bucket digests (`empty`: no live key)."""
    if empty:
        return EMPTY_REPO_CHECKSUM
    return PREFIX + hashlib.sha256(b"".join(digests)).hexdigest()


def repo_checksum(entry_checksums: Pairs, version: int = REPO_CHECKSUM_VERSION) -> str:
    """The repo checksum (ETag) over live keys and their entry checksums, by definition
    `version` (1 or 2; see the module's docstring)."""
    pairs = entry_checksums.items() if isinstance(entry_checksums, Mapping) else entry_checksums
    if version == 1:
        joined = "".join(entry_line(key, checksum) for key, checksum in sorted(pairs))
        return PREFIX + hashlib.sha256(joined.encode("utf-8")).hexdigest()
    if version != 2:
        raise ValueError(f"unknown repo checksum version {version!r}")
    buckets: list[dict[str, str]] = [{} for _ in range(BUCKETS)]
    for key, checksum in pairs:
        buckets[key_bucket(key)][key] = entry_line(key, checksum)
    return combine_buckets([bucket_digest(bucket) for bucket in buckets], empty=not any(buckets))


def matches_any_definition(checksum: str | None, entry_checksums: Mapping[str, str]) -> bool:
    """True when `checksum` is the repo checksum of these entries by a known definition
    (for a checksum kept from a server whose definition was not recorded)."""
    return any(checksum == repo_checksum(entry_checksums, v) for v in REPO_CHECKSUM_VERSIONS)


def is_checksum(value: object) -> bool:
    """True when `value` is a well-formed `sha256:<64 lowercase hex>` string."""
    return isinstance(value, str) and CHECKSUM_PATTERN.fullmatch(value) is not None


def quote_etag(checksum: str) -> str:
    """The HTTP form of a checksum: a strong, quoted entity tag."""
    return f'"{checksum}"'


def parse_etag_list(header: str) -> list[str]:
    """Entity tags named by an `If-Match` / `If-None-Match` header, unquoted.

    `*` is returned as itself; weak tags (`W/"..."`) are returned without the `W/` since
    our tags are content hashes, so weak and strong comparison agree.
    """
    tags: list[str] = []
    for part in header.split(","):
        tag = part.strip()
        if tag.startswith("W/"):
            tag = tag[2:]
        if len(tag) >= 2 and tag[0] == tag[-1] == '"':
            tag = tag[1:-1]
        if tag:
            tags.append(tag)
    return tags
