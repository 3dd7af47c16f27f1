"""One search: the web page and MCP's `search_notes` rank the same notes the same way."""

from __future__ import annotations

from memsync_protocol.search import Note, matched_fields, notes_of
from sync_client.notes import search as mcp_search
from sync_server.ui.render import search as page_search


def _note(name: str, description: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n\n{body}\n"


TEXTS = {
    "MEMORY.md": "# Team memory\n- [Deploy](deploy.md) — how we deploy to production\n",
    "deploy.md": _note("Deploy", "how we deploy to production", "Run make release."),
    "ops/rollback.md": _note("Rollback", "undo a bad release", "Deploys roll back in 2 min."),
    "db.md": _note("Database", "which database", "PostgreSQL 16; deploy migrations first."),
    "style.md": _note("Style", "code style", "Tabs. Never deploy on Fridays, deploy Mondays."),
    "notes.txt": "deploy deploy deploy: not a note (not Markdown)",
}


def test_the_page_and_mcp_return_the_same_notes_in_the_same_order() -> None:
    # The notes as the client's NoteCache has them: the Markdown files but the index.
    notes = {
        key: Note.parse(key, text)
        for key, text in TEXTS.items()
        if key.endswith(".md") and key != "MEMORY.md"
    }
    for query in ("deploy", "release production", "database deploys", "tabs", "nothing here"):
        from_mcp = [hit.key for hit in mcp_search(notes, query, limit=100)]
        from_page = [hit.note.key for hit in page_search(TEXTS, query)]
        assert from_page == from_mcp, query
    # Ranked, not filtered by every word: a name or description match comes first, and a
    # note holding one of the words is still an answer. The index and non-notes never are.
    ranked = [hit.note.key for hit in page_search(TEXTS, "deploy")]
    assert ranked == ["deploy.md", "style.md", "db.md", "ops/rollback.md"]
    assert [hit.note.key for hit in page_search(TEXTS, "release production")] == [
        "deploy.md",
        "ops/rollback.md",
    ]


def test_the_page_says_where_a_note_matched() -> None:
    notes = notes_of(TEXTS)
    assert matched_fields(notes["style.md"], "code deploy") == ["description", "text"]
    assert matched_fields(notes["ops/rollback.md"], "rollback") == ["name"]
    hit = page_search(TEXTS, "fridays")[0]
    assert (hit.note.key, hit.fields) == ("style.md", ["text"])
    assert hit.snippet == "Tabs. Never deploy on Fridays, deploy Mondays."


def test_a_demoted_note_goes_below_an_equally_relevant_one_only() -> None:
    from memsync_protocol.search import SearchIndex

    same = "Retry with backoff, in the client."
    notes = {
        key: Note.parse(key, _note("Retry", "how we retry", body))
        for key, body in (("a.md", same), ("b.md", same), ("c.md", "retry " * 5))
    }
    index = SearchIndex.of(notes)
    assert [hit.key for hit in index.search("retry")] == ["c.md", "a.md", "b.md"]
    assert [hit.key for hit in index.search("retry", demote={"a.md"})] == ["c.md", "b.md", "a.md"]
    # A tie-breaker only: a better match stays above the notes it ties with nothing.
    assert [hit.key for hit in index.search("retry", demote={"c.md"})] == ["c.md", "a.md", "b.md"]
