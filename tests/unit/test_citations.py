"""Which code a note cites: the path rules of `sync_client.freshness.citations`, on texts alone."""

from __future__ import annotations

import pytest

from sync_client.freshness.citations import Citation, citations, cited_paths


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # A sentence: a path with a line counts, a bare path only names a file.
        (
            "The retry loop is in src/a.py:10, config in docs/b.md.",
            [Citation("src/a.py", (10, 10))],
        ),
        ("see src/app.py for the rest (./src/a.py)", []),
        # In backticks it counts, with or without a line, in a longer span too.
        ("config in `docs/b.md`.", [Citation("docs/b.md")]),
        ("run `python scripts/x.py --dry`", [Citation("scripts/x.py")]),
        # A Markdown link's target, with a GitHub line anchor and a range.
        ("[retry](src/sync/retry.py#L88-L90)", [Citation("src/sync/retry.py", (88, 90))]),
        ("[the docs](./docs/b.md)", [Citation("docs/b.md")]),
        ("see `src/a.py#L5-9`", [Citation("src/a.py", (5, 9))]),
        # An editor's file:line:column is line 10.
        ("fails at file.py:10:5", [Citation("file.py", (10, 10))]),
        ("src/a.py:3-7;", [Citation("src/a.py", (3, 7))]),
        # Bare names count in backticks only.
        ("run `Makefile` then `make test`", [Citation("Makefile")]),
        ("a Makefile and a Dockerfile", []),
        # Inside a code fence too: a command relies on the file.
        ("```sh\npython scripts/migrate.py --dry\n```", [Citation("scripts/migrate.py")]),
        # Each (path, range) once, in order of first mention.
        (
            "`src/a.py` and src/a.py:2 and `src/a.py`",
            [Citation("src/a.py"), Citation("src/a.py", (2, 2))],
        ),
        # A reversed range is its first line; line 0 is the whole file (in backticks).
        ("src/a.py:20-10 `src/b.py:0`", [Citation("src/a.py", (20, 20)), Citation("src/b.py")]),
        # A description's path is the body's when the body cites it: the body's line
        # citation is not turned into the whole file; a path only the description
        # names counts, by the same rules (a bare one does not).
        (
            "---\ndescription: the loop in `src/a.py`, see docs/c.md\n---\nAt `src/a.py:10`.\n",
            [Citation("src/a.py", (10, 10))],
        ),
        (
            "---\nname: x\ndescription: see `src/b.py`\n---\nAt src/a.py:10.\n",
            [Citation("src/b.py"), Citation("src/a.py", (10, 10))],
        ),
    ],
)
def test_mentions_read_as_paths_and_lines(text: str, expected: list[Citation]) -> None:
    assert citations(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "https://github.com/acme/app/blob/main/src/a.py#L3",
        "file:///home/alice/src/a.py",
        "mail bob@example.com",
        "/etc/hosts and /usr/lib/python3/x.py:4",
        "~/notes/todo.md",
        "../outside/secret.md and src/../../x.py and a/./b.py",
        "C:\\src\\a.py",
        "version 1.2.3 and 3.14",
    ],
)
def test_never_a_url_an_absolute_path_or_dot_dot(text: str) -> None:
    assert citations(text) == []


def test_only_paths_that_exist_are_cited() -> None:
    found = citations("src/a.py:10, e.g. `src/a.py` and `nowhere/x.py`; also `README.md` at :3")
    existing = {"src/a.py", "README.md"}
    assert cited_paths(found, existing.__contains__) == {
        "src/a.py": [(10, 10), None],
        "README.md": [None],
    }


def test_a_hostile_line_is_read_in_linear_time() -> None:
    """Backtick runs no run closes, and links that never end: each run and each `(` is
    looked at a bounded number of times (a backtracking pattern took hours on these)."""
    text = "x " + "`" * 50_000 + " `src/a.py` " + "](a " * 20_000 + "``" + "a`" * 30_000
    # (`a` between two backticks is a bare name, like `Makefile`: the checkout judges it.)
    assert citations(text) == [Citation("src/a.py"), Citation("a")]
