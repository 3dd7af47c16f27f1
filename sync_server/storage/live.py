"""What a commit needs to know about a repo's live keys, kept between commits.

A commit must refuse a file/directory clash and compute the new repo checksum (the
ETag). Reading every live row for that made a one-key PUT cost O(entries). `LiveKeys`
keeps the key -> entry checksum map of one repo at one version, sorted, and updates it
with each change; `LiveKeysCache` keeps one per repo in a server process.

The checksum is definition 2 (`memsync_protocol.checksums`): keys fall into 256
buckets by a hash of the key, each bucket has its own digest, and the checksum hashes
the 256 digests. A change rehashes only the buckets it touched (about entries / 256
keys each) and the 8 KiB of digests, so a one-key commit costs the same at 20,000
entries as at 2,000.

A cached map is only trusted under the repo lock and only when its version and
checksum are the repo row's: another process's commit, a repo delete or a rolled-back
transaction make it stale, and it is then caught up from the rows written since its
version (verified against the row's checksum) or read again.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, insort
from collections import OrderedDict
from collections.abc import Iterable, Mapping

from memsync_protocol.checksums import (
    BUCKETS,
    bucket_digest,
    combine_buckets,
    entry_line,
    key_bucket,
)
from memsync_protocol.keys import path_clashes_sorted

# Live keys kept by one process's cache, over all repos (about 50 MB); the repo in use
# is always kept, whatever its size.
CACHE_MAX_KEYS = 100_000


class LiveKeys:
    """The live keys of one repo at one version, with their entry checksums, sorted.

    `checksums` maps key -> entry checksum, `ordered` is the sorted keys, `checksum` the
    repo checksum of exactly these. Not thread-safe: use it under the repo's lock.
    """

    def __init__(self, version: int, checksums: Mapping[str, str]) -> None:
        self.version = version
        self.checksums: dict[str, str] = dict(checksums)
        self.ordered: list[str] = sorted(self.checksums)
        # Per bucket, key -> its `entry_line`, kept so a touched bucket is only joined.
        self._buckets: list[dict[str, str]] = [{} for _ in range(BUCKETS)]
        for key, checksum in self.checksums.items():
            self._buckets[key_bucket(key)][key] = entry_line(key, checksum)
        self._digests = [bucket_digest(bucket) for bucket in self._buckets]
        self.checksum = combine_buckets(self._digests, empty=not self.checksums)

    def clashes(self, new_keys: Iterable[str]) -> list[tuple[str, str]]:
        """`memsync_protocol.keys.path_clashes` of `new_keys` against these keys."""
        return path_clashes_sorted(new_keys, self.checksums, self.ordered)

    def apply(self, upserts: Mapping[str, str], deletes: Iterable[str], version: int) -> str:
        """Set keys to entry checksums and remove keys (absent ones are ignored); the
        result is `version`. Returns the new repo checksum."""
        touched: set[int] = set()
        for key, checksum in upserts.items():
            if key not in self.checksums:
                insort(self.ordered, key)
            self.checksums[key] = checksum
            bucket = key_bucket(key)
            self._buckets[bucket][key] = entry_line(key, checksum)
            touched.add(bucket)
        for key in deletes:
            if self.checksums.pop(key, None) is None:
                continue
            del self.ordered[bisect_left(self.ordered, key)]
            bucket = key_bucket(key)
            del self._buckets[bucket][key]
            touched.add(bucket)
        for bucket in touched:
            self._digests[bucket] = bucket_digest(self._buckets[bucket])
        self.version = version
        self.checksum = combine_buckets(self._digests, empty=not self.checksums)
        return self.checksum


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
