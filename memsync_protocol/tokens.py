"""The format of a memsync bearer token, which anyone can check without a database.

A token is `mst_` + 36 base62 characters + a 6-character base62 CRC32 of those 36. The
prefix and checksum let scanners (ours included) recognise a leaked token; the first 12
body characters are the public lookup id the server stores. Minting and checking a token
against the store is the server's business (`sync_server.auth`).
"""

from __future__ import annotations

import re
import zlib

TOKEN_PREFIX = "mst_"  # noqa: S105 (a prefix, not a secret)
ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
BODY_LENGTH = 36
CHECKSUM_LENGTH = 6
LOOKUP_LENGTH = 12
TOKEN_PATTERN = re.compile(
    rf"{TOKEN_PREFIX}([0-9A-Za-z]{{{BODY_LENGTH}}})([0-9A-Za-z]{{{CHECKSUM_LENGTH}}})"
)


def _base62(number: int, width: int) -> str:
    digits = []
    for _ in range(width):
        number, digit = divmod(number, 62)
        digits.append(ALPHABET[digit])
    return "".join(reversed(digits))


def token_checksum(body: str) -> str:
    """The 6-character checksum suffix of a token body."""
    return _base62(zlib.crc32(body.encode("ascii")), CHECKSUM_LENGTH)


def is_well_formed_token(token: str) -> bool:
    """True for `mst_` tokens whose checksum suffix matches their body."""
    match = TOKEN_PATTERN.fullmatch(token)
    return match is not None and token_checksum(match.group(1)) == match.group(2)
