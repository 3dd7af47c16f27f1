"""Properties of `memsync_protocol.keys.path_clashes` against a naive oracle.

The oracle compares every new key with every other key (quadratic, obviously right);
the function under test must give exactly the same pairs. Keys are built from segments
chosen so that clashes are common and so that characters sorting just before and after
`/` (`-`, `.`, `0`) sit next to real directories.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memsync_protocol.keys import path_clashes

segments = st.sampled_from(["a", "b", "a-", "a.", "a0", "a.md", "é", "ß", "日"])
keys = st.lists(segments, min_size=1, max_size=4).map("/".join)
key_sets = st.lists(keys, max_size=12)


def naive_clashes(new_keys: list[str], live_keys: list[str]) -> list[tuple[str, str]]:
    """Every key that would newly go live, against every other key, one by one."""
    live = set(live_keys)
    arriving = set(new_keys) - live
    every = live | arriving
    pairs: set[tuple[str, str]] = set()
    for key in arriving:
        descendants = []
        for other in every:
            if key.startswith(other + "/"):
                pairs.add((key, other))
            if other.startswith(key + "/"):
                descendants.append(other)
        if descendants:
            pairs.add((key, min(descendants)))
    return sorted(pairs)


def is_clash_free(keys: set[str]) -> bool:
    return not any(other.startswith(key + "/") for key in keys for other in keys)


@settings(max_examples=500)
@given(new=key_sets, live=key_sets)
def test_same_pairs_as_the_naive_oracle(new: list[str], live: list[str]) -> None:
    assert path_clashes(new, live) == naive_clashes(new, live)


@settings(max_examples=300)
@given(new=key_sets, live=key_sets)
def test_skipping_the_refused_keys_leaves_a_clash_free_repo(
    new: list[str], live: list[str]
) -> None:
    """What a client does with a 409: drop the keys named and write the rest."""
    stored: set[str] = set()
    for key in sorted(set(live), key=len):
        if not path_clashes([key], stored):
            stored.add(key)
    assert is_clash_free(stored)
    refused = {key for key, _ in path_clashes(new, stored)}
    rest = [key for key in new if key not in refused]
    assert path_clashes(rest, stored) == []
    assert is_clash_free(stored | set(rest))
