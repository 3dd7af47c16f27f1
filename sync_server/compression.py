"""gzip on the wire (docs/protocol.md 3.2, 3.3): answers to clients that accept it,
request bodies from clients that send it.

Only gzip: it is in every HTTP client and in the standard library, and a cold pull of
Markdown notes already takes a fraction of git's bytes with it. The limits stay on the
uncompressed bytes: a request body is expanded incrementally and refused as soon as
it would pass `max_body_bytes`, so a small "gzip bomb" never grows in memory.
"""

from __future__ import annotations

import gzip
import zlib

GZIP = "gzip"
# Smaller answers are sent as they are: gzip's header and trailer would eat the gain.
MIN_COMPRESS_BYTES = 1024
# zlib's default: most of level 9's ratio at a third of its time (8.7 MB in ~80 ms).
COMPRESS_LEVEL = 6
# Deflate's worst case grows incompressible input by 5 bytes per 16 KB block, plus
# gzip's 18-byte frame: a compressed body longer than this expands past the limit.
_FRAME_SLACK = 1024


def accepts_gzip(accept_encoding: str | None) -> bool:
    """Whether an `Accept-Encoding` header admits gzip: `gzip` (or `x-gzip`) with q > 0,
    else `*` with q > 0 (a named coding's weight wins over the wildcard's)."""
    weights: dict[str, float] = {}
    for item in (accept_encoding or "").split(","):
        coding, *params = (part.strip() for part in item.split(";"))
        weight = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        weights[coding.lower()] = weight
    named = [weights[name] for name in ("gzip", "x-gzip") if name in weights]
    if named:
        return max(named) > 0
    return weights.get("*", 0.0) > 0


def compress(body: bytes) -> bytes:
    """gzip `body` (no timestamp in the header, so the same body gives the same bytes)."""
    return gzip.compress(body, compresslevel=COMPRESS_LEVEL, mtime=0)


def max_compressed_bytes(max_body_bytes: int) -> int:
    """The most compressed bytes a body within `max_body_bytes` can take."""
    return max_body_bytes + max_body_bytes // 16384 * 5 + _FRAME_SLACK


class CorruptBody(Exception):
    """The body is not one well-formed gzip stream."""


class GzipBody:
    """A gzip request body expanded chunk by chunk, never past `limit` bytes."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._inflater = zlib.decompressobj(wbits=zlib.MAX_WBITS | 16)  # gzip framing only
        self._parts: list[bytes] = []
        self._size = 0

    def feed(self, data: bytes) -> bool:
        """Expand one received chunk; False as soon as the whole would pass the limit.

        Raises `CorruptBody` for bytes that are not gzip, or that follow its end.
        """
        inflater = self._inflater
        try:
            while data:
                if inflater.eof:
                    raise CorruptBody("data after the end of the gzip stream")
                # At most one byte past the limit is ever expanded (max_length >= 1;
                # 0 would mean "no limit").
                out = inflater.decompress(data, self._limit - self._size + 1)
                self._size += len(out)
                if self._size > self._limit:
                    return False
                self._parts.append(out)
                data = inflater.unconsumed_tail
            if inflater.unused_data:
                raise CorruptBody("data after the end of the gzip stream")
        except zlib.error:
            raise CorruptBody("the body is not valid gzip") from None
        return True

    def finish(self) -> bytes:
        """The expanded body; `CorruptBody` when the stream ended early."""
        if not self._inflater.eof:
            raise CorruptBody("the gzip stream is truncated")
        return b"".join(self._parts)
