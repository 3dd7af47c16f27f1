"""The index's health in lines: a few per kind, the rest counted with where to see them."""

from __future__ import annotations

from typing import Any

from sync_client.index.team import problem_lines


def report(kind: str, count: int, *, exists: bool = True) -> dict[str, Any]:
    """An index report (`IndexReport.as_json`) with `count` problems of one kind."""
    return {
        "exists": exists,
        "problems": [
            {"kind": kind, "detail": f"problem {number}", "fix": "the fix"}
            for number in range(count)
        ],
    }


def test_each_kind_shows_its_first_lines_and_counts_the_rest() -> None:
    lines = problem_lines(report("dangling", 300), shown_per_kind=20)
    assert lines[:20] == [f"index: problem {number} (the fix)" for number in range(20)]
    assert lines[20:] == [
        "index: 280 more index lines that link to missing notes"
        " (`memsync index --json` lists every one)"
    ]


def test_a_few_problems_are_all_shown() -> None:
    lines = problem_lines(report("no-frontmatter", 3))
    assert lines == [f"index: problem {number} (the fix)" for number in range(3)]


def test_the_count_of_a_kind_follows_its_own_lines() -> None:
    both = report("orphan", 5)
    both["problems"] += report("no-frontmatter", 4)["problems"]
    assert problem_lines(both, shown_per_kind=2) == [
        "index: problem 0 (the fix)",
        "index: problem 1 (the fix)",
        "index: 3 more notes no index line lists (`memsync index --json` lists every one)",
        "index: problem 0 (the fix)",
        "index: problem 1 (the fix)",
        "index: 2 more notes without name and description (`memsync index --json` lists every one)",
    ]
