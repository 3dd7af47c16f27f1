"""What a commit needs to know about a repo's live keys, kept between commits.

A commit must refuse a file/directory clash and compute the new repo checksum (the
ETag: SHA-256 over `key\\nentry checksum\\n` of every live key, in key order). Reading
every live row for that made a one-key PUT cost O(entries). `LiveKeys` keeps the
key -> entry checksum map of one repo at one version, sorted, and updates it with each
change; `LiveKeysCache` keeps one per repo in a server process.

The checksum keeps its exact definition (`memsync_protocol.checksums.repo_checksum`):
the sorted keys are cut into blocks, each block's bytes are kept, and so is the SHA-256
state before each block. A change re-serializes only its block and re-hashes from that
block on, at hashlib's speed, instead of formatting and hashing every key in Python.

A cached map is only trusted under the repo lock and only when its version and
checksum are the repo row's: another process's commit, a repo delete or a rolled-back
transaction make it stale, and it is then caught up from the rows written since its
version (verified against the row's checksum) or read again.
"""

from __future__ import annotations

import hashlib
import threading
from bisect import bisect_left, bisect_right, insort
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from memsync_protocol.checksums import PREFIX
from memsync_protocol.keys import path_clashes_sorted

# Keys per block: a change re-serializes one block; a block splits at twice this.
BLOCK = 256
# Live keys kept by one process's cache, over all repos (about 40 MB); the repo in use
# is always kept, whatever its size.
CACHE_MAX_KEYS = 100_000


def _serialize(pairs: Iterable[tuple[str, str]]) -> bytes:
    # The same bytes `repo_checksum` hashes for these pairs, in this order.
    return "".join(f"{key}\n{checksum}\n" for key, checksum in pairs).encode("utf-8")


class LiveKeys:
    """The live keys of one repo at one version, with their entry checksums, sorted.

    `checksums` maps key -> entry checksum, `ordered` is the sorted keys, `checksum` the
    repo checksum of exactly these. Not thread-safe: use it under the repo's lock.
    """

    def __init__(self, version: int, checksums: Mapping[str, str]) -> None:
        self.version = version
        self.checksums: dict[str, str] = dict(checksums)
        self.ordered: list[str] = sorted(self.checksums)
        self._rebuild_blocks()
        self.checksum = self._digest()

    def _rebuild_blocks(self) -> None:
        # Block i holds the keys k with bounds[i] <= k < bounds[i + 1]; bounds[0] is "",
        # below every key. A bound need not be a live key, so a delete moves no bound.
        self._bounds = ["", *self.ordered[BLOCK::BLOCK]]
        # Serialized bytes of each block; None when it changed since.
        self._bytes: list[bytes | None] = [None] * len(self._bounds)
        # _states[i]: the SHA-256 state after blocks 0..i-1 (valid for every i kept).
        self._states: list[Any] = [hashlib.sha256()]

    def _block_of(self, key: str) -> int:
        return bisect_right(self._bounds, key) - 1

    def _span(self, block: int) -> tuple[int, int]:
        """The slice of `ordered` that block `block` holds."""
        start = bisect_left(self.ordered, self._bounds[block])
        if block + 1 == len(self._bounds):
            return start, len(self.ordered)
        return start, bisect_left(self.ordered, self._bounds[block + 1], start)

    def _touch(self, block: int) -> None:
        self._bytes[block] = None
        del self._states[block + 1 :]

    def clashes(self, new_keys: Iterable[str]) -> list[tuple[str, str]]:
        """`memsync_protocol.keys.path_clashes` of `new_keys` against these keys."""
        return path_clashes_sorted(new_keys, self.checksums, self.ordered)

    def apply(self, upserts: Mapping[str, str], deletes: Iterable[str], version: int) -> str:
        """Set keys to entry checksums and remove keys (absent ones are ignored); the
        result is `version`. Returns the new repo checksum."""
        for key, checksum in upserts.items():
            block = self._block_of(key)
            if key not in self.checksums:
                insort(self.ordered, key)
                start, end = self._span(block)
                if end - start > 2 * BLOCK:
                    # Split in the middle; the new bound is a live key of this block.
                    self._bounds.insert(block + 1, self.ordered[(start + end) // 2])
                    self._bytes.insert(block + 1, None)
            self.checksums[key] = checksum
            self._touch(block)
        for key in deletes:
            if self.checksums.pop(key, None) is None:
                continue
            del self.ordered[bisect_left(self.ordered, key)]
            self._touch(self._block_of(key))
        # Many deletes and splits leave many small blocks: start over, now and then.
        if len(self._bounds) > 8 + 2 * len(self.ordered) // BLOCK:
            self._rebuild_blocks()
        self.version = version
        self.checksum = self._digest()
        return self.checksum

    def _digest(self) -> str:
        """Hash from the first changed block on, keeping the state before each block."""
        state = self._states[-1].copy()
        for block in range(len(self._states) - 1, len(self._bounds)):
            data = self._bytes[block]
            if data is None:
                start, end = self._span(block)
                keys = self.ordered[start:end]
                data = self._bytes[block] = _serialize((key, self.checksums[key]) for key in keys)
            state.update(data)
            if block + 1 < len(self._bounds):
                self._states.append(state.copy())
        digest: str = state.hexdigest()
        return PREFIX + digest


class LiveKeysCache:
    """`LiveKeys` per repo id in one process, least recently used dropped first."""

    def __init__(self, max_keys: int = CACHE_MAX_KEYS) -> None:
        self._max_keys = max_keys
        self._items: OrderedDict[int, LiveKeys] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, repo_id: int) -> LiveKeys | None:
        """The cached keys of a repo (possibly stale: check version and checksum)."""
        with self._lock:
            found = self._items.get(repo_id)
            if found is not None:
                self._items.move_to_end(repo_id)
            return found

    def put(self, repo_id: int, live: LiveKeys) -> None:
        """Keep `live` for the repo, dropping the least recently used others over the cap."""
        with self._lock:
            self._items[repo_id] = live
            self._items.move_to_end(repo_id)
            total = sum(len(item.checksums) for item in self._items.values())
            while total > self._max_keys and len(self._items) > 1:
                _, dropped = self._items.popitem(last=False)
                total -= len(dropped.checksums)

    def drop(self, repo_id: int) -> None:
        """Forget a repo (its entries were removed)."""
        with self._lock:
            self._items.pop(repo_id, None)
