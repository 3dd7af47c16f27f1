"""Entry and repo checksums, exactly as docs/protocol.md section 2 defines them.

Both sides of the wire compute these strings the same way, so comparing two of them is
plain string equality.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping

PREFIX = "sha256:"
CHECKSUM_PATTERN = re.compile(r"sha256:[0-9a-f]{64}")
EMPTY_REPO_CHECKSUM = PREFIX + hashlib.sha256(b"").hexdigest()


def entry_checksum(text: str) -> str:
    """`sha256:` + hex SHA-256 of the UTF-8 bytes of one entry's text."""
    return PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()


def repo_checksum(entry_checksums: Mapping[str, str] | Iterable[tuple[str, str]]) -> str:
    """The repo checksum (ETag) over live keys and their entry checksums.

    Keys are ordered by their UTF-8 bytes; for valid keys (no lone surrogates) that is
    the same as Python's code-point order, so a plain sort is exact.
    """
    pairs = entry_checksums.items() if isinstance(entry_checksums, Mapping) else entry_checksums
    # One join and one hash call: a commit recomputes this over every live key.
    joined = "".join(f"{key}\n{checksum}\n" for key, checksum in sorted(pairs))
    return PREFIX + hashlib.sha256(joined.encode("utf-8")).hexdigest()


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
