"""The team's MEMORY.md deleted for the team: what the server's history says of the
delete (who, which version, the version of its last text), kept in the sync state, and
the words `status`, `push`, `index`, `doctor`, the watcher, the session-start block and
MCP `memory_index` say of it.

The record comes from the server (`GET /deleted`), never from a missing local file: a
MEMORY.md missing here is the team's to write back, a MEMORY.md deleted for the team is
the team's to restore (`memsync restore MEMORY.md`), and neither is a reason to start a
new index. It is learned when a pull or `status` sees the index gone from the server
(and by `memsync rm MEMORY.md --delete-team-index`); it holds only while the last sync
has no MEMORY.md (no base): once the team has an index again it says nothing.

This module is on the session-start block's fast path: it imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from memsync_protocol.claude_text import INDEX_NAME

if TYPE_CHECKING:
    from sync_client.workspace import Workspace

RESTORE = f"memsync restore {INDEX_NAME}"
# The flag without which `memsync rm` refuses an index.
DELETE_FLAG = "--delete-team-index"
# The `supports` name of a server that lists deleted keys (docs/protocol.md 3.5).
_DELETED = "deleted"


def current(record: object, bases: object) -> dict[str, Any] | None:
    """The delete row (`{version, author, at, last_version}`) of the team's MEMORY.md
    from the state's `index_deleted` record, while the last sync has no MEMORY.md."""
    if isinstance(bases, Mapping) and INDEX_NAME in bases:
        return None
    row = record.get("row") if isinstance(record, Mapping) else None
    if not isinstance(row, Mapping) or not isinstance(row.get("version"), int):
        return None
    return dict(row)


def of_state(state: Mapping[str, Any]) -> dict[str, Any] | None:
    """`current` of a state file read as JSON (the session-start block's way)."""
    return current(state.get("index_deleted"), state.get("bases"))


def learn(workspace: Workspace, version: int | None = None) -> dict[str, Any] | None:
    """Ask the server whether the team's MEMORY.md is deleted (and by whom), keep the
    answer in the state (`index_deleted`, saved with the state) and return the delete
    row, or None. A server that cannot say (too old, unreachable) changes nothing."""
    from sync_client.errors import MemsyncError
    from sync_client.retries import with_retries

    state = workspace.state
    if state.supports is not None and _DELETED not in state.supports:
        return current(state.index_deleted, state.bases)
    try:
        rows = with_retries(workspace.api.deleted, attempts=2)
    except MemsyncError:
        return current(state.index_deleted, state.bases)
    found = next((row for row in rows if row.get("key") == INDEX_NAME), None)
    fields = ("version", "author", "at", "last_version")
    row = None if found is None else {name: found.get(name) for name in fields}
    state.index_deleted = {"checked": version, "row": row}
    return current(state.index_deleted, state.bases)


def last_text(workspace: Workspace, row: Mapping[str, Any]) -> str | None:
    """The text of the deleted index's last version (`row["last_version"]`), from the
    server's history; None when it has none."""
    from sync_client.retries import with_retries

    last = row.get("last_version")
    if not isinstance(last, int):
        return None
    found = with_retries(lambda: workspace.api.version(INDEX_NAME, last), attempts=2)
    content = found.get("content")
    return content if isinstance(content, str) else None


def follow(workspace: Workspace, *, live: bool, version: int | None, news: bool) -> None:
    """After an answer of the server at `version`: forget the record when MEMORY.md is
    `live`; else learn it once per server version when the answer may be `news` of a
    delete (it deleted MEMORY.md, or lists every key), or when nothing was learned yet."""
    state = workspace.state
    if workspace.api.space:
        return  # a person's own space: its MEMORY.md is not the team's
    if live:
        state.index_deleted = None
        return
    known = state.index_deleted
    if isinstance(known, Mapping) and (not news or known.get("checked") == version):
        return
    learn(workspace, version)


def rm_command(key: str) -> str:
    """The command that deletes `key` for the team: an index needs its flag."""
    index = key == INDEX_NAME or key.endswith("/" + INDEX_NAME)
    return f"memsync rm {key}" + (f" {DELETE_FLAG}" if index else "")


def who(row: Mapping[str, Any]) -> str:
    """`by bob (version 7)`."""
    return f"by {row.get('author')} (version {row.get('version')})"


def line(row: Mapping[str, Any]) -> str:
    """The one line commands print and the watcher logs."""
    last = row.get("last_version")
    back = f"its last version ({last})" if isinstance(last, int) else "it"
    return (
        f"index: the team's {INDEX_NAME} was deleted for the team {who(row)}: Claude Code "
        f"finds no note through it; `{RESTORE}` brings back {back} (never start a new one)"
    )


def agent_words(row: Mapping[str, Any]) -> str:
    """What an agent is told (the session-start block, MCP `memory_index`)."""
    return (
        f"The team {INDEX_NAME} was deleted for the team {who(row)}: do not start a new "
        f"index; ask the user to run `{RESTORE}`, which brings the team's back (its "
        "heading, order and wording). Meanwhile read the notes in the team memory folder."
    )
