"""The three-way merge of one note, and the base-text store behind it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memsync_protocol.checksums import entry_checksum
from sync_client.merge import NoteMerge, merge_notes, merge_texts
from sync_client.objects import OBJECTS_FILE, ObjectStore, base_texts


def _by_checksum(*texts: str) -> dict[str, str]:
    return {entry_checksum(text): text for text in texts}


BASE = "# Decisions\n\none\ntwo\nthree\nfour\nfive\n"


def test_edits_on_different_lines_merge() -> None:
    mine = BASE.replace("one", "ONE")
    theirs = BASE.replace("five", "FIVE")
    assert merge_texts(BASE, mine, theirs) == BASE.replace("one", "ONE").replace("five", "FIVE")


def test_additions_at_both_ends_merge() -> None:
    mine = "intro\n" + BASE
    theirs = BASE + "outro\n"
    assert merge_texts(BASE, mine, theirs) == "intro\n" + BASE + "outro\n"


@pytest.mark.parametrize(
    ("mine", "theirs"),
    [
        (BASE.replace("three", "3 (mine)"), BASE.replace("three", "3 (theirs)")),
        # Adjacent lines conflict, as in git.
        (BASE.replace("two", "2 (mine)"), BASE.replace("three", "3 (theirs)")),
        # One side appended, the other changed the last line: not pure insertions.
        (BASE + "mine\n", BASE.replace("five", "5 (theirs)")),
        # Both appended, and one also removed the line they appended after.
        (BASE.replace("five\n", "") + "mine\n", BASE + "theirs\n"),
    ],
)
def test_overlapping_edits_are_a_conflict(mine: str, theirs: str) -> None:
    assert merge_texts(BASE, mine, theirs) is None
    assert merge_notes(BASE, mine, theirs) is None


def test_additions_at_the_same_place_keep_both_blocks_the_servers_first() -> None:
    merged = merge_notes(BASE, BASE + "mine\n", BASE + "theirs\n")
    assert merged == NoteMerge(BASE + "theirs\nmine\n", kept_both_additions=True)
    # In the middle too, and with other edits elsewhere.
    mine = BASE.replace("two\n", "two\nmine a\nmine b\n").replace("# Decisions", "# DECISIONS")
    theirs = BASE.replace("two\n", "two\ntheirs\n")
    merged = merge_notes(BASE, mine, theirs)
    assert merged is not None
    assert merged.text == BASE.replace("two\n", "two\ntheirs\nmine a\nmine b\n").replace(
        "# Decisions", "# DECISIONS"
    )
    assert merged.kept_both_additions


def test_a_line_both_sides_added_is_kept_once() -> None:
    mine = BASE + "- [db](db.md) — the database\n- [mine](mine.md)\n"
    theirs = BASE + "- [theirs](theirs.md)\n- [db](db.md) — the database\n"
    merged = merge_texts(BASE, mine, theirs)
    assert (
        merged == BASE + "- [theirs](theirs.md)\n- [db](db.md) — the database\n- [mine](mine.md)\n"
    )


def test_the_order_is_the_same_whoever_merges() -> None:
    """Server first: whichever of two teammates merges, the team ends with one order."""
    first = merge_texts(BASE, BASE + "bob\n", BASE + "alice\n")
    assert first == BASE + "alice\nbob\n"
    # Bob's text is now on the server; carol appended meanwhile.
    assert merge_texts(BASE, BASE + "carol\n", first or "") == BASE + "alice\nbob\ncarol\n"


def test_appends_to_a_file_without_its_last_newline_merge() -> None:
    base = "# Index\n- [a](a.md)"
    merged = merge_texts(base, base + "\n- [mine](m.md)", base + "\n- [theirs](t.md)\n")
    assert merged == "# Index\n- [a](a.md)\n- [theirs](t.md)\n- [mine](m.md)\n"
    # Neither side ends with a newline: nor does the merge.
    merged = merge_texts(base, base + "\n- [mine](m.md)", base + "\n- [theirs](t.md)")
    assert merged == "# Index\n- [a](a.md)\n- [theirs](t.md)\n- [mine](m.md)"


def test_lines_removed_beside_lines_added_keep_the_additions() -> None:
    base = BASE + "- [cache](cache.md)\n"
    removed = BASE
    appended = base + "- [queue](queue.md)\n"
    assert merge_texts(base, removed, appended) == BASE + "- [queue](queue.md)\n"
    assert merge_texts(base, appended, removed) == BASE + "- [queue](queue.md)\n"
    # Removed on one side, edited on the other: a conflict.
    assert merge_texts(base, removed, BASE + "- [cache](cache.md) edited\n") is None


def test_without_union_both_insertions_conflict() -> None:
    """Two notes created from nothing are not additions to one note."""
    assert merge_notes("", "mine\n", "theirs\n", union=False) is None
    assert merge_notes("", "mine\n", "theirs\n") == NoteMerge("theirs\nmine\n", True)


def test_one_sided_and_identical_edits_need_no_merge() -> None:
    edited = BASE.replace("two", "TWO")
    assert merge_texts(BASE, edited, BASE) == edited
    assert merge_texts(BASE, BASE, edited) == edited
    assert merge_texts(BASE, edited, edited) == edited


def test_a_merge_never_writes_conflict_markers() -> None:
    merged = merge_texts(BASE, BASE.replace("one", "1"), BASE.replace("four", "4"))
    assert merged is not None
    assert "<<<<<<<" not in merged
    assert "=======" not in merged


def test_objects_round_trip_by_checksum(tmp_path: Path) -> None:
    store = ObjectStore(tmp_path)
    assert store.get(entry_checksum("never stored")) is None
    assert not (tmp_path / OBJECTS_FILE).exists()  # reading creates nothing
    store.put_many(_by_checksum("first\n", "second ✓\n"))
    assert store.get(entry_checksum("second ✓\n")) == "second ✓\n"
    store.close()
    reopened = ObjectStore(tmp_path)
    bases = {"a.md": entry_checksum("first\n"), "b.md": entry_checksum("gone\n")}
    assert base_texts(reopened, bases, ["a.md", "b.md", "c.md"]) == {"a.md": "first\n"}
    assert (tmp_path / OBJECTS_FILE).stat().st_mode & 0o077 == 0
    reopened.close()


def test_keep_only_drops_unreferenced_objects(tmp_path: Path) -> None:
    store = ObjectStore(tmp_path)
    store.put_many(_by_checksum("keep\n", "drop\n"))
    store.keep_only({entry_checksum("keep\n")})
    assert store.get(entry_checksum("keep\n")) == "keep\n"
    assert store.get(entry_checksum("drop\n")) is None
    store.close()


def test_a_tampered_object_reads_as_missing(tmp_path: Path) -> None:
    store = ObjectStore(tmp_path)
    store.put_many(_by_checksum("honest\n"))
    store.close()
    with sqlite3.connect(tmp_path / OBJECTS_FILE) as db:
        db.execute("UPDATE objects SET text = 'forged\n'")
    db.close()
    assert ObjectStore(tmp_path).get(entry_checksum("honest\n")) is None


def test_a_damaged_store_reads_as_empty_and_is_replaced_by_the_next_write(
    tmp_path: Path,
) -> None:
    (tmp_path / OBJECTS_FILE).write_bytes(b"this is not a database" * 100)
    store = ObjectStore(tmp_path)
    assert store.get(entry_checksum("text\n")) is None
    store.keep_only(set())
    store.put_many(_by_checksum("text\n"))
    assert store.get(entry_checksum("text\n")) == "text\n"
    store.close()
