"""Batches are deterministic, byte-bounded on the exact body, and lose nothing."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from sync_client.batching import BATCH_LIMIT, make_batches

keys = st.text(alphabet="abcdefghij/é.-_", min_size=1, max_size=20)
texts = st.text(max_size=3000).filter(lambda text: "\x00" not in text)


@settings(max_examples=60, deadline=None)
@given(entries=st.dictionaries(keys, texts, max_size=40), limit=st.integers(300, 20_000))
def test_batches_are_exact_bounded_and_complete(entries: dict[str, str], limit: int) -> None:
    bases = {key: None for key in entries}
    batches = make_batches(entries, base_checksums=bases, limit=limit)
    seen: dict[str, str] = {}
    for batch in batches:
        body = json.loads(batch.body)
        assert list(body["entries"]) == batch.keys
        assert body["baseChecksums"] == {key: None for key in batch.keys}
        seen.update(body["entries"])
        assert len(batch.body) <= limit or len(batch.keys) == 1
    assert seen == entries
    assert [key for batch in batches for key in batch.keys] == sorted(entries)
    assert (
        make_batches(dict(reversed(entries.items())), base_checksums=bases, limit=limit) == batches
    )


def test_default_limit_and_a_large_entry_alone() -> None:
    entries = {f"n{index:03}.md": "x" * 4000 for index in range(100)}
    entries["big.md"] = "y" * 250_000
    batches = make_batches(entries)
    assert all(len(batch.body) <= BATCH_LIMIT for batch in batches if batch.keys != ["big.md"])
    assert ["big.md"] in [batch.keys for batch in batches]
    assert sum(len(batch.keys) for batch in batches) == 101
