"""Deterministic, byte-bounded PUT batches (docs/protocol.md 4.3, step 3).

Keys are sorted and packed greedily; each batch's body is at most `limit` bytes counted
on the exact bytes that will be sent, which this module also produces. One entry larger
than the limit goes alone. The same entries always give the same batches.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

BATCH_LIMIT = 200_000


def _json(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


@dataclass(frozen=True)
class Batch:
    """Keys and the exact body that PUTs them."""

    keys: list[str]
    body: bytes


def _body(pieces: list[bytes], base_pieces: list[bytes] | None) -> bytes:
    body = b'{"entries":{' + b",".join(pieces) + b"}"
    if base_pieces is not None:
        body += b',"baseChecksums":{' + b",".join(base_pieces) + b"}"
    return body + b"}"


def make_batches(
    texts: Mapping[str, str],
    *,
    base_checksums: Mapping[str, str | None] | None = None,
    limit: int = BATCH_LIMIT,
) -> list[Batch]:
    """Pack `texts` (with their bases, when given) into PUT bodies of at most `limit`."""
    batches: list[Batch] = []
    keys: list[str] = []
    pieces: list[bytes] = []
    base_pieces: list[bytes] | None = [] if base_checksums is not None else None
    size = len(_body([], base_pieces))

    def close() -> None:
        nonlocal keys, pieces, base_pieces, size
        if keys:
            batches.append(Batch(keys=keys, body=_body(pieces, base_pieces)))
        keys, pieces = [], []
        base_pieces = [] if base_checksums is not None else None
        size = len(_body([], base_pieces))

    for key in sorted(texts):
        piece = _json(key) + b":" + _json(texts[key])
        base_piece = (
            _json(key) + b":" + _json(base_checksums.get(key))
            if base_checksums is not None
            else None
        )
        added = len(piece) + (1 if keys else 0)
        if base_piece is not None:
            added += len(base_piece) + (1 if keys else 0)
        if keys and size + added > limit:
            close()
            added = len(piece) + (len(base_piece) if base_piece is not None else 0)
        keys.append(key)
        pieces.append(piece)
        if base_piece is not None and base_pieces is not None:
            base_pieces.append(base_piece)
        size += added
    close()
    return batches
