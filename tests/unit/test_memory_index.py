"""The team index as Claude Code reads it: links, frontmatter, its cut, health, fixes."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from sync_client.index import memory as memory_index
from sync_client.index.memory import (
    CLAUDE_MAX_CHARS,
    CLAUDE_MAX_LINES,
    check,
    claude_load,
    drop_lines_linking,
    fix,
    frontmatter,
    index_line,
    links,
)


def note(name: str, description: str, body: str = "The fact.\n") -> str:
    return (
        f"---\nname: {name}\ndescription: {description}\nmetadata:\n  type: project\n---\n\n{body}"
    )


def test_links_resolve_against_the_index_folder_and_skip_what_is_not_a_note() -> None:
    text = (
        "# Team memory\n"
        "- [DB](decisions/db.md) — Postgres 16\n"
        "- [Web](https://example.com/x.md) and [anchor](#top)\n"
        "- [Up](../private.md) [abs](/etc/passwd.md) [space](my%20note.md#part)\n"
        "```\n- [in code](code.md)\n```\n"
        '- [Angle](<with space.md>) [titled](t.md "Title")\n'
    )
    found = [(link.line, link.target) for link in links("MEMORY.md", text)]
    assert found == [(2, "decisions/db.md"), (4, "my note.md"), (8, "with space.md"), (8, "t.md")]
    nested = [link.target for link in links("decisions/MEMORY.md", "- [a](a.md) [b](../b.md)\n")]
    assert nested == ["decisions/a.md", "b.md"]


def test_frontmatter_fields_and_missing_ones() -> None:
    assert frontmatter(note("db", "the database")) == {
        "name": "db",
        "description": "the database",
        "metadata": "",
    }
    assert frontmatter("no frontmatter\n") is None
    assert frontmatter("---\nname: never closed\n") is None
    assert frontmatter("---\nname: 'quoted'\ndescription: \"\"\n---\n") == {
        "name": "quoted",
        "description": "",
    }
    assert memory_index.missing_recall_fields("---\nname: x\ndescription:\n---\n") == [
        "description"
    ]
    assert memory_index.missing_recall_fields("plain\n") == ["name", "description"]


def test_claude_code_loads_200_lines_then_25000_characters_on_a_line_boundary() -> None:
    short = "".join(f"- line {n}\n" for n in range(150))
    assert not claude_load(short).truncated
    long = "".join(f"- [n{n}](n{n}.md) — a hook\n" for n in range(260))
    load = claude_load(long)
    assert (load.lines, load.loaded_lines) == (260, CLAUDE_MAX_LINES)
    assert load.truncated
    wide = "".join("- " + "x" * 198 + "\n" for _ in range(150))  # 150 lines, 30,000 chars
    load = claude_load(wide)
    assert load.loaded_chars <= CLAUDE_MAX_CHARS
    assert load.loaded_lines == 124  # lines of 201 characters with their newline: 124 fit
    assert (load.lines - load.loaded_lines, load.loaded_chars) == (26, 124 * 201 - 1)
    # Characters as JavaScript counts them: an emoji is two.
    emoji = "😀" * 12_600
    assert claude_load(emoji).chars == 25_200
    assert claude_load(emoji).truncated


def test_check_reports_every_kind_with_its_fix() -> None:
    texts = {
        "MEMORY.md": "- [DB](db.md) — db\n- [Gone](gone.md) — removed\n",
        "db.md": note("db", "the database"),
        "orphan.md": note("orphan", "nobody lists me"),
        "bare.md": "Just text, no frontmatter.\n",
        "data.json": "{}",
    }
    report = check(texts, present=["skipped-here.md"])
    kinds = [(problem.kind, problem.key) for problem in report.problems]
    assert kinds == [
        ("dangling", "MEMORY.md"),
        ("orphan", "bare.md"),
        ("orphan", "orphan.md"),
        ("no-frontmatter", "bare.md"),
    ]
    dangling = report.of_kind("dangling")[0]
    assert (dangling.line, dangling.target) == (2, "gone.md")
    assert "memsync index --fix" in dangling.fix
    assert report.of_kind("no-frontmatter")[0].missing == ("name", "description")
    rows = report.as_json()["problems"]
    assert rows[0] == {
        "kind": "dangling",
        "key": "MEMORY.md",
        "line": 2,
        "target": "gone.md",
        "detail": "MEMORY.md line 2 links to gone.md, which does not exist",
        "fix": "`memsync index --fix` removes the line",
    }
    # A link to a file that is here but not synced (skipped) does not dangle.
    assert not check({"MEMORY.md": "- [s](skipped-here.md)\n"}, ["skipped-here.md"]).problems


def test_too_long_says_how_much_claude_code_will_not_load() -> None:
    lines = "".join(f"- [n{n}](n{n}.md) — hook\n" for n in range(260))
    texts = {"MEMORY.md": lines, **{f"n{n}.md": note(f"n{n}", "d") for n in range(260)}}
    [problem] = check(texts).problems
    assert problem.kind == "too-long"
    assert "260 lines" in problem.detail
    assert "60 lines" in problem.detail


def test_notes_listed_by_a_linked_index_are_not_orphans() -> None:
    texts = {
        "MEMORY.md": "- [Decisions](decisions/MEMORY.md)\n",
        "decisions/MEMORY.md": "- [DB](db.md) — the database\n",
        "decisions/db.md": note("db", "the database"),
        "stray/MEMORY.md": "- [x](x.md)\n",  # linked from nowhere: not an index
    }
    report = check(texts)
    assert report.indexes == ["MEMORY.md", "decisions/MEMORY.md"]
    assert report.problems == []


def test_fix_adds_orphans_and_drops_dangling_lines_keeping_every_other_line() -> None:
    index = "# Team\n\n- [DB](db.md)   — kept *exactly*\n- [Gone](gone.md) — removed\nfree prose\n"
    texts = {
        "MEMORY.md": index,
        "db.md": note("db", "the database"),
        "b/new.md": note("New [thing]", "what it is"),
        "a.md": "# A heading\n\nFirst line of prose that is the hook.\n",
    }
    planned = fix(texts)
    assert planned.added == ["a.md", "b/new.md"]
    assert planned.removed == [{"index": "MEMORY.md", "line": 4, "target": "gone.md"}]
    assert planned.texts["MEMORY.md"] == (
        "# Team\n\n- [DB](db.md)   — kept *exactly*\nfree prose\n"
        "- [A heading](a.md) — First line of prose that is the hook.\n"
        "- [New (thing)](b/new.md) — what it is\n"
    )
    fixed = {**texts, "MEMORY.md": planned.texts["MEMORY.md"]}
    assert [p.kind for p in check(fixed).problems] == ["no-frontmatter"]
    assert not fix(fixed).changed  # idempotent


def test_fix_creates_the_index_when_there_is_none() -> None:
    planned = fix({"x.md": note("x", "the x")})
    assert planned.texts == {"MEMORY.md": "- [x](x.md) — the x\n"}


def test_index_line_shape_and_a_long_hook_is_cut() -> None:
    line = index_line("my notes/a b.md", note("ab", "y" * 300))
    assert line.startswith("- [ab](my%20notes/a%20b.md) — ")
    assert len(line) < 160
    assert line.endswith("…")
    assert [link.target for link in links("MEMORY.md", line)] == ["my notes/a b.md"]


@pytest.mark.parametrize(
    ("text", "expected", "removed"),
    [
        ("- [x](x.md)\n- [y](y.md)\n", "- [y](y.md)\n", [1]),
        ("- [x](x.md) see [y](y.md)\n", "- [x](x.md) see [y](y.md)\n", []),
        ("- [x](x.md)\n- [x again](./x.md#top)", "- [x](x.md)\n"[:0], [1, 2]),
        ("no links\n", "no links\n", []),
    ],
)
def test_drop_lines_linking(text: str, expected: str, removed: list[int]) -> None:
    assert drop_lines_linking("MEMORY.md", text, {"x.md"}) == (expected, removed)


TEAM_INDEX = (
    "# Team memory\n"
    "- [DB](decisions/db.md) — Postgres 16\n"
    "- [Deploy](deploy.md) and [CI](ci.md)\n"
    "- [Gone](gone.md) — deleted for the team\n"
)


def test_keep_listed_puts_back_the_only_links_to_live_notes_at_the_end() -> None:
    rewritten = "# Index\n- [Deploy](deploy.md) — how we ship\n"
    live = {"decisions/db.md", "deploy.md", "ci.md"}
    text, kept = memory_index.keep_listed("MEMORY.md", TEAM_INDEX, rewritten, live)
    assert (
        text
        == rewritten
        + "- [DB](decisions/db.md) — Postgres 16\n- [Deploy](deploy.md) and [CI](ci.md)\n"
    )
    assert [(item.line, item.targets) for item in kept] == [
        ("- [DB](decisions/db.md) — Postgres 16", ("decisions/db.md",)),
        ("- [Deploy](deploy.md) and [CI](ci.md)", ("ci.md",)),
    ]


def test_keep_listed_lets_a_rewrite_reword_and_reorder_and_drop_deleted_notes() -> None:
    reworded = "- [CI](ci.md)\n## Ops\n- [Deploy: blue/green](deploy.md)\n* [db](decisions/db.md)\n"
    live = {"decisions/db.md", "deploy.md", "ci.md"}
    assert memory_index.keep_listed("MEMORY.md", TEAM_INDEX, reworded, live) == (reworded, [])


def test_lines_linking_names_each_line_once_in_order() -> None:
    assert memory_index.lines_linking("MEMORY.md", TEAM_INDEX, {"ci.md", "deploy.md", "db.md"}) == [
        "- [Deploy](deploy.md) and [CI](ci.md)"
    ]
    assert memory_index.lines_linking("MEMORY.md", TEAM_INDEX, {"nothing.md"}) == []


def test_unlisted_names_the_live_notes_a_rewrite_drops_whatever_the_server_or_client() -> None:
    live = {"decisions/db.md", "deploy.md", "ci.md"}
    one_line = "# Index\n- [Deploy](deploy.md)\n"
    assert memory_index.unlisted("MEMORY.md", TEAM_INDEX, one_line, live) == {
        "decisions/db.md",
        "ci.md",
    }
    # A note deleted with its line (not live after the write), a note that never had a
    # line, a new note's line: nothing is dropped.
    assert memory_index.unlisted("MEMORY.md", TEAM_INDEX, one_line, {"deploy.md", "x.md"}) == set()
    added = TEAM_INDEX + "- [New](new.md)\n"
    assert memory_index.unlisted("MEMORY.md", TEAM_INDEX, added, live | {"new.md"}) == set()
    # Lines added at the end keep every old line's links, even a fence opened after them;
    # text added to an unfinished last line is read again.
    fence_after = TEAM_INDEX + "```\n- [X](x.md)\n"
    assert memory_index.unlisted("MEMORY.md", TEAM_INDEX, fence_after, live) == set()
    unfinished = "- [q](<[A](a.md)"
    assert memory_index.unlisted("MEMORY.md", unfinished, unfinished + ">)", {"a.md"}) == {"a.md"}
    # A link in a code block lists nothing.
    fenced = "```\n- [DB](decisions/db.md)\n```\n- [Deploy](deploy.md) [CI](ci.md)\n"
    assert memory_index.unlisted("MEMORY.md", TEAM_INDEX, fenced, live) == {"decisions/db.md"}


def test_restore_lines_takes_the_newest_version_that_listed_the_note_within_the_lookback() -> None:
    line = "- [DB](db.md) — Postgres"
    with_line, without = f"# Index\n{line}\n", "# Index\n"
    reads: list[int] = []

    def versions(texts: Sequence[str | None]) -> Iterator[tuple[int, str | None]]:
        for number, text in zip(range(len(texts), 0, -1), texts, strict=True):
            reads.append(number)
            yield number, text

    assert memory_index.restore_lines(
        "MEMORY.md", "db.md", versions([without, None, with_line, with_line])
    ) == (2, [line])
    assert reads == [4, 3, 2]  # read lazily: the oldest is never asked for
    lookback = memory_index.RESTORE_LOOKBACK
    # Deletes are not counted: the line found past them, just within the lookback.
    within = [without] * (lookback - 1) + [None, with_line]
    assert memory_index.restore_lines("MEMORY.md", "db.md", versions(within)) == (1, [line])
    reads.clear()
    beyond = [without] * lookback + [with_line]
    assert memory_index.restore_lines("MEMORY.md", "db.md", versions(beyond)) is None
    assert len(reads) == lookback
    assert memory_index.restore_lines("MEMORY.md", "db.md", iter(())) is None
