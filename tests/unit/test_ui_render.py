"""The web page's pure helpers: hint text as HTML, the bounded health list, notices,
a proposal's changes in the Review inbox."""

from __future__ import annotations

from datetime import UTC, datetime

from memsync_protocol.memory_index import check
from sync_server.storage.base import Proposal, ProposalEntry
from sync_server.ui.render import code_spans, problem_groups
from sync_server.ui.review import DIFF_LINES, KEYS_SHOWN, ChangeCache, change_of, view_of
from sync_server.ui.session import NOTICE_CHARS, Session, Sessions


def test_code_spans_escape_everything_and_turn_backticks_into_code() -> None:
    html = code_spans("`memsync index --fix` adds <b>a</b> line for `x<y>.md` & more")
    assert str(html) == (
        "<code>memsync index --fix</code> adds &lt;b&gt;a&lt;/b&gt; line for "
        "<code>x&lt;y&gt;.md</code> &amp; more"
    )
    assert str(code_spans("a lone ` stays")) == "a lone ` stays"


def test_problem_groups_count_every_problem_and_list_a_bounded_number_of_each_kind() -> None:
    texts = {f"n{number:04}.md": "# A note\n" for number in range(2000)}
    texts["MEMORY.md"] = "- [Gone](gone.md)\n"
    groups = problem_groups(check(texts).problems, rows=10)
    assert [(g.kind, g.total, len(g.shown), g.more) for g in groups] == [
        ("dangling", 1, 1, 0),
        ("orphan", 2000, 10, 1990),
        ("no-frontmatter", 2000, 10, 1990),
    ]
    assert [p.key for p in groups[1].shown][:2] == ["n0000.md", "n0001.md"]


def test_a_notice_opens_only_for_the_session_it_was_sealed_for() -> None:
    sessions = Sessions(lambda: "s" * 40)
    mine = Session("id-1", "binding", "csrf-one")
    other = Session("id-1", "binding", "csrf-two")
    sealed = sessions.seal_notice(mine, "Deleted a.md for the team (version 2).")
    assert sessions.open_notice(mine, sealed) == "Deleted a.md for the team (version 2)."
    assert sessions.open_notice(other, sealed) is None
    assert sessions.open_notice(mine, sealed[: len(sealed) // 2]) is None  # cut
    assert sessions.open_notice(mine, "x.y.z") is None  # forged
    assert sessions.open_notice(mine, None) is None
    # Another server key signs nothing this one reads.
    assert Sessions(lambda: "t" * 40).open_notice(mine, sealed) is None
    long = sessions.open_notice(mine, sessions.seal_notice(mine, "k" * 5000))
    assert long is not None
    assert len(long) == NOTICE_CHARS
    assert long.endswith("…")


def test_a_proposed_key_is_shown_against_the_teams_text_now() -> None:
    def kind(entry: ProposalEntry) -> tuple[str, bool, list[str]]:
        change = change_of(entry, "kim")
        return change.kind, change.moved, [line.text for line in change.diff if line.kind != "head"]

    assert kind(ProposalEntry("a.md", "put", "c2", None, "new\n")) == (
        "new",
        False,
        ["@@ -0,0 +1 @@", "+new"],
    )
    edit = ProposalEntry("a.md", "put", "c2", "c1", "a\nb\n", "a\n", "a\nteam\n", "c3")
    assert kind(edit) == ("edit", True, ["@@ -1,2 +1,2 @@", " a", "-team", "+b"])
    same = ProposalEntry("a.md", "put", "c2", "c1", "a\n", "x\n", "a\n", "c2")
    assert kind(same)[:2] == ("same", False)
    gone = ProposalEntry("a.md", "delete", None, "c1", None, "a\n", "a\n", "c1")
    assert kind(gone) == ("delete", False, ["@@ -1 +0,0 @@", "-a"])
    assert kind(ProposalEntry("a.md", "delete", None, "c1", None, "a\n"))[0] == "same"
    long = ProposalEntry("a.md", "put", "c2", None, "".join(f"{n}\n" for n in range(999)))
    cut = change_of(long, "kim")
    assert (len(cut.diff), cut.cut) == (DIFF_LINES, True)


def test_a_proposal_of_many_keys_shows_the_first_ones_and_counts_the_rest() -> None:
    entries = [ProposalEntry(f"n{n:03}.md", "put", "c", None, "x\n") for n in range(KEYS_SHOWN + 7)]
    proposal = Proposal(1, "acme/app", "kim", "kim", None, datetime.now(UTC), "pending", 1, entries)
    view = view_of(proposal)
    assert (len(view.changes), view.hidden) == (KEYS_SHOWN, 7)
    assert view.changes[0].key == "n000.md"


def test_the_inbox_diffs_a_key_again_only_when_the_team_text_or_the_proposal_differs() -> None:
    cache = ChangeCache(2)
    first = ProposalEntry("a.md", "put", "c2", "c1", "a\nb\n", "a\n", "a\n", "c1")
    assert cache.get(first, "kim") is cache.get(first, "kim")
    moved = ProposalEntry("a.md", "put", "c2", "c1", "a\nb\n", "a\n", "z\n", "c3")
    again = cache.get(moved, "kim")
    assert again is not cache.get(first, "kim")
    assert [line.text for line in again.diff if line.kind == "del"] == ["-z"]
    cache.get(ProposalEntry("b.md", "put", "c4", None, "b\n"), "kim")  # the oldest goes
    assert cache.get(moved, "kim") is not again
