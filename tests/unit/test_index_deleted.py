"""The team's MEMORY.md deleted for the team: the record's rules and the version
`memsync restore MEMORY.md` brings back after a rebuild (pure parts)."""

from __future__ import annotations

from typing import Any

from sync_client.history import _index_before_delete
from sync_client.index.deleted import agent_words, current, line

ROW = {"version": 7, "author": "bob", "at": "2026-12-01T10:00:00Z", "last_version": 6}


def _v(version: int, op: str, checksum: str | None) -> dict[str, Any]:
    return {"version": version, "op": op, "checksum": checksum, "author": "a", "at": "x"}


def test_the_record_holds_only_while_the_last_sync_has_no_index() -> None:
    assert current({"checked": 8, "row": ROW}, {}) == ROW
    assert current({"checked": 8, "row": ROW}, {"MEMORY.md": "sha256:x"}) is None
    assert current({"checked": 8, "row": None}, {}) is None
    assert current(None, {}) is None
    assert current({"row": {"version": "7"}}, {}) is None  # not the server's shape


def test_the_words_name_who_and_the_way_back() -> None:
    assert "deleted for the team by bob (version 7)" in line(ROW)
    assert "`memsync restore MEMORY.md` brings back its last version (6)" in line(ROW)
    assert "do not start a new index" in agent_words(ROW)


def test_restore_after_a_rebuild_takes_the_last_version_before_the_delete() -> None:
    rebuilt = [_v(1, "put", "a"), _v(2, "put", "b"), _v(3, "delete", None), _v(4, "put", "c")]
    assert _index_before_delete("MEMORY.md", rebuilt) == 2
    # Restored since (the same text is current again): nothing to bring back.
    assert _index_before_delete("MEMORY.md", [*rebuilt, _v(5, "restore", "b")]) is None
    # Never deleted, or a note (not an index): the old answer stands.
    assert _index_before_delete("MEMORY.md", rebuilt[:2]) is None
    assert _index_before_delete("db.md", rebuilt) is None
    assert _index_before_delete("docs/MEMORY.md", rebuilt) == 2
