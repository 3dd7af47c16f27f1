"""`memsync_protocol.keys.path_clashes`: no key may be both a file and a directory."""

from __future__ import annotations

import pytest

from memsync_protocol.keys import path_clashes


@pytest.mark.parametrize(
    ("new", "live", "expected"),
    [
        # A new file under a live file.
        (["d/n.md"], ["d"], [("d/n.md", "d")]),
        # A new file that is the directory of a live file, however deep.
        (["d"], ["d/n.md"], [("d", "d/n.md")]),
        (["a/b"], ["a/b/c/d.md"], [("a/b", "a/b/c/d.md")]),
        (["a/b/c/d.md"], ["a/b"], [("a/b/c/d.md", "a/b")]),
        # Every ancestor that is a file is named.
        (["a/b/c.md"], ["a", "a/b"], [("a/b/c.md", "a"), ("a/b/c.md", "a/b")]),
        # Two new keys clash with each other: both are refused.
        (["d", "d/n.md"], [], [("d", "d/n.md"), ("d/n.md", "d")]),
        # A directory with many files: the smallest one names the clash.
        (["d"], ["d/z.md", "d/b.md", "d/a/x.md"], [("d", "d/a/x.md")]),
        (["d"], ["d/b.md"], [("d", "d/b.md")]),
    ],
)
def test_clashes_are_named_in_both_directions(
    new: list[str], live: list[str], expected: list[tuple[str, str]]
) -> None:
    assert path_clashes(new, live) == expected


@pytest.mark.parametrize(
    ("new", "live"),
    [
        # Siblings, and names that only share a prefix of characters, not of segments.
        (["d/a.md", "d/b.md"], ["d/c.md"]),
        (["a.md", "a-b.md", "a0", "ab/c.md"], ["a/b.md"]),
        (["a/b.md"], ["a.md", "a-b/c.md", "a.b", "a0/x"]),
        # `d.md` and `d/` are different paths.
        (["d.md"], ["d/n.md"]),
        # Nothing new: replacing a live key never clashes, not even with a clash that
        # was stored before this rule existed.
        (["d"], ["d", "d/n.md"]),
        (["d/n.md", "d"], ["d", "d/n.md"]),
        ([], ["d", "d/n.md"]),
        (["x.md"], []),
    ],
)
def test_no_clash(new: list[str], live: list[str]) -> None:
    assert path_clashes(new, live) == []


def test_a_replaced_key_still_counts_against_a_new_one() -> None:
    # `d` is live and rewritten in the same write as the new `d/n.md`: only the new key
    # is refused, so the rest of the write can go through without it.
    assert path_clashes(["d", "d/n.md"], ["d"]) == [("d/n.md", "d")]


def test_keys_are_compared_by_segment_whatever_sorts_between() -> None:
    # '-' and '.' sort before '/', '0' and letters after it: none of these is under `a/`.
    neighbours = [f"a{chr(code)}z" for code in range(0x21, 0x7F) if chr(code) != "/"]
    assert path_clashes(["a"], neighbours) == []
    assert path_clashes(["a"], [*neighbours, "a/z/y", "a/z"]) == [("a", "a/z")]
    assert path_clashes(["a/z"], [*neighbours, "a"]) == [("a/z", "a")]


def test_inputs_may_be_any_iterables_and_are_read_once() -> None:
    clashes = path_clashes(iter(["d/n.md"]), (key for key in ["d", "e"]))
    assert clashes == [("d/n.md", "d")]
