"""`LiveKeys`, the commit's cached view of a repo: always what recomputing gives.

Checked against `memsync_protocol`'s from-scratch `repo_checksum` and `path_clashes`
after many changes, with enough keys that every bucket fills and empties again.
"""

from __future__ import annotations

import random

import pytest

from memsync_protocol.checksums import EMPTY_REPO_CHECKSUM, entry_checksum, repo_checksum
from memsync_protocol.keys import path_clashes
from sync_server.storage.live import LiveKeys, LiveKeysCache

START = 768  # three keys a bucket on average


def random_key(rng: random.Random) -> str:
    depth = rng.randint(1, 3)
    return "/".join(
        rng.choice(["a", "b", "c", "dé", "e1"]) + str(rng.randrange(60)) for _ in range(depth)
    )


@pytest.mark.parametrize("seed", range(2))
def test_checksum_and_clashes_equal_a_recomputation_after_every_change(seed: int) -> None:
    rng = random.Random(seed)
    model = {f"k/{n:05d}.md": entry_checksum(str(n)) for n in range(START)}
    live = LiveKeys(7, model)
    assert live.checksum == repo_checksum(model)
    for step in range(400):
        # Mostly growth at first, then mostly deletes, until buckets empty out.
        growing = step < 200
        upserts = {
            random_key(rng): entry_checksum(str(rng.random()))
            for _ in range(rng.randint(0, 40 if growing else 10))
        }
        deletes = rng.sample(sorted(model), k=min(len(model), rng.randint(0, 6 if growing else 60)))
        deletes = [key for key in deletes if key not in upserts] + ["never/there.md"]
        assert live.clashes(upserts) == path_clashes(upserts, model)
        model.update(upserts)
        for key in deletes:
            model.pop(key, None)
        assert live.apply(upserts, deletes, step + 8) == repo_checksum(model)
        assert live.checksums == model
        assert live.ordered == sorted(model)
        assert live.version == step + 8


def test_emptied_repo_has_the_empty_checksum() -> None:
    model = {f"{n}.md": entry_checksum(str(n)) for n in range(START)}
    live = LiveKeys(1, model)
    assert live.apply({}, list(model), 2) == EMPTY_REPO_CHECKSUM
    assert live.apply({"x.md": entry_checksum("x")}, [], 3) == repo_checksum(
        {"x.md": entry_checksum("x")}
    )


def test_cache_keeps_the_repo_in_use_and_drops_the_least_recently_used() -> None:
    cache = LiveKeysCache(max_keys=10)
    small = LiveKeys(1, {f"{n}.md": entry_checksum("") for n in range(4)})
    other = LiveKeys(1, {f"{n}.md": entry_checksum("") for n in range(4)})
    cache.put(1, small)
    cache.put(2, other)
    assert cache.get(1) is small  # now the most recently used
    big = LiveKeys(1, {f"{n}.md": entry_checksum("") for n in range(30)})
    cache.put(3, big)
    assert (cache.get(1), cache.get(2), cache.get(3)) == (None, None, big)
    cache.drop(3)
    assert cache.get(3) is None
