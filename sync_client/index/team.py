"""The team index on disk: its health for `status`, `doctor`, `push` and the watcher,
`memsync index --fix`, the lines `memsync rm` takes out, and the guard every write of
an index goes through (`keep_team_lines`: a rewrite never drops the only line of a note
that still exists).

The rules are `index.memory`'s (pure); this module reads the team dir's Markdown
files and writes an index back atomically, inside the team dir, like any edit a
person makes: the next push (or the watcher) sends it.

The index's problems and the lines the guard kept are also said here, once, as the
lines `status`, `push`, `sync`, `doctor` and `index` print and the watcher logs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sync_client.index import memory as memory_index
from sync_client.index.memory import INDEX_NAME, IndexReport
from sync_client.local import LocalScan
from sync_client.objects import ObjectStore
from sync_client.state import SyncState, load_state
from sync_client.team_files import read_entry, write_entry

# Skip reasons that mean the team's index is not being shared at all.
_BLOCKING = {
    "secret",
    "too-large",
    "binary",
    "not-utf8",
    "invalid-text",
    "invalid-key",
    "unreadable",
}


def markdown_texts(team_dir: Path, keys: Iterable[str]) -> dict[str, str]:
    """key -> text of the synced Markdown files among `keys` (a vanished one is left
    out)."""
    texts: dict[str, str] = {}
    for key in keys:
        if not key.endswith(".md"):
            continue
        try:
            texts[key] = read_entry(team_dir, key)
        except (OSError, UnicodeDecodeError, ValueError):
            continue
    return texts


def health(team_dir: Path, scan: LocalScan, state_dir: Path | None = None) -> IndexReport:
    """The index report over what a scan found: synced notes count, and a link to any
    other file here (synced, or skipped by the scan) is not dangling.

    With the repo's `state_dir`, what the check needs of each file is kept there by
    checksum (`facts`): only files changed since the last check are read.
    """
    from sync_client.index.facts import facts_of

    facts = facts_of(team_dir, scan.checksums, state_dir)
    present = [key for key in scan.checksums if key not in facts]
    present.extend(item.key for item in scan.skipped)
    return memory_index.check_facts(facts, present=present)


def blocked(skipped_rows: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The skip row of the root index when it cannot be shared (a secret, too large,
    not UTF-8...), else None."""
    for row in skipped_rows:
        if row.get("key") == INDEX_NAME and row.get("reason") in _BLOCKING:
            return dict(row)
    return None


def fix(team_dir: Path, scan: LocalScan, *, team_text: str | None = None) -> dict[str, Any]:
    """`memsync index --fix`: write the fixed indexes; `{changed, added, removed,
    written, restored}` (`written`: the index keys rewritten).

    `team_text`: the team's `MEMORY.md` (its base text) when the file is missing here.
    It is written back first (`restored`) and fixed on top, so a fix never starts a new
    index over the team's.
    """
    restored = False
    if team_text is not None and not _present(team_dir, INDEX_NAME):
        write_entry(team_dir, INDEX_NAME, team_text)
        restored = True
    texts = markdown_texts(team_dir, [*scan.checksums, *([INDEX_NAME] if restored else [])])
    planned = memory_index.fix(texts, present=[item.key for item in scan.skipped])
    for key, text in sorted(planned.texts.items()):
        write_entry(team_dir, key, text)
    return {
        "changed": planned.changed or restored,
        "added": planned.added,
        "removed": planned.removed,
        "written": sorted({*planned.texts, *([INDEX_NAME] if restored else [])}),
        "restored": restored,
    }


def team_deleted(state: SyncState) -> dict[str, Any] | None:
    """The delete of the team's MEMORY.md the server last reported (`{version, author,
    at, last_version}`, see `deleted`) while the last sync has no MEMORY.md."""
    from sync_client.index.deleted import current

    return current(state.index_deleted, state.bases)


def _present(team_dir: Path, key: str) -> bool:
    return os.path.lexists(os.path.join(team_dir, key))


def team_text(state_dir: Path | None, key: str = INDEX_NAME) -> str | None:
    """The team's text of `key` as of the last sync (its base text), or None: no state,
    no base, or a text the base store does not hold. Read-only; no request."""
    if state_dir is None:
        return None
    base = load_state(state_dir).bases.get(key)
    if base is None:
        return None
    store = ObjectStore(state_dir)
    try:
        return store.get(base)
    finally:
        store.close()


def missing_team_index(team_dir: Path, state_dir: Path | None) -> str | None:
    """The team's `MEMORY.md` when the file is missing here and the team has one (what a
    pull, or a running watcher, writes back), else None."""
    if _present(team_dir, INDEX_NAME):
        return None
    return team_text(state_dir)


def live_notes(state: SyncState, local_keys: Iterable[str]) -> set[str]:
    """The notes an index must keep listing: the team's (every key with a base: one
    deleted here comes back with the next pull) and this team dir's, less the keys the
    team deleted while they were edited here."""
    return ({*state.bases, *local_keys}) - set(state.deleted_on_server)


def keep_team_lines(
    index_key: str, old_text: str | None, new_text: str, live: set[str]
) -> tuple[str, list[dict[str, Any]]]:
    """`new_text` with every line of `old_text` put back that was the only link to a
    note of `live` (see `memory_index.keep_listed`); (text, `{index, line, targets}`
    rows of the lines put back). Without an old text there is nothing to keep."""
    if old_text is None or not memory_index.is_index_key(index_key):
        return new_text, []
    text, kept = memory_index.keep_listed(index_key, old_text, new_text, live)
    return text, [
        {"index": index_key, "line": item.line, "targets": list(item.targets)} for item in kept
    ]


def without_links_to(team_dir: Path, scan: LocalScan, key: str) -> dict[str, tuple[str, list[int]]]:
    """index key -> (its text without the lines that link only to `key`, the removed
    line numbers), for every index of the team dir that has such lines. Nothing is
    written."""
    texts = markdown_texts(team_dir, scan.checksums)
    changes: dict[str, tuple[str, list[int]]] = {}
    for index_key in memory_index.reachable_indexes(texts) or []:
        new_text, removed = memory_index.drop_lines_linking(index_key, texts[index_key], {key})
        if removed:
            changes[index_key] = (new_text, removed)
    return changes


def scan_alone(team_dir: Path) -> LocalScan:
    """A scan of the team dir without a sync state (for `memsync index` and `doctor`,
    which need no server): every file is read, `.memsyncignore` applies."""
    from sync_client.ignore_rules import read_ignore_rules
    from sync_client.local import scan_team_dir

    if not team_dir.is_dir():
        return LocalScan()
    return scan_team_dir(team_dir, {}, ignore=read_ignore_rules(team_dir))


# Lines shown per kind of problem; the rest are counted in one line.
SHOWN_PER_KIND = 3
_KIND_WORDS = {
    "dangling": "index lines that link to missing notes",
    "orphan": "notes no index line lists",
    "no-frontmatter": "notes without name and description",
}


def problem_lines(
    index: dict[str, Any] | None, *, shown_per_kind: int = SHOWN_PER_KIND
) -> list[str]:
    """`index: ...` lines for an index report (`IndexReport.as_json`), a few per kind,
    each with its fix; first, when the report's `team_deleted` holds the delete of the
    team's MEMORY.md, who deleted it and `memsync restore MEMORY.md`."""
    if not index:
        return []
    from sync_client.index.deleted import line as deleted_line

    lines: list[str] = []
    counts: dict[str, int] = {}
    orphans = [problem for problem in index["problems"] if problem["kind"] == "orphan"]
    deleted = index.get("team_deleted")
    if deleted:
        # Deleted for the team: restoring it is the way back, never a new index.
        lines.append(deleted_line(deleted))
    if orphans and not index["exists"] and (index.get("team_copy") or deleted):
        # Missing here only, or deleted: the team's index comes back, listing them.
        counts["orphan"] = -len(orphans)
    elif orphans and not index["exists"]:
        # One line, not one per note: with no index at all, every note is unlisted.
        noun = "the note" if len(orphans) == 1 else f"the {len(orphans):,} notes"
        lines.append(
            f"index: there is no MEMORY.md, so Claude Code finds none of {noun} here "
            "(`memsync index --fix` creates it, with a line for each)"
        )
        counts["orphan"] = -len(orphans)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for problem in index["problems"]:
        if counts.get(problem["kind"], 0) >= 0:
            by_kind.setdefault(problem["kind"], []).append(problem)
    # Each kind's first lines, then the count of the rest of that kind, beside them.
    shown = max(shown_per_kind, 0)
    for kind, problems in by_kind.items():
        lines.extend(f"index: {row['detail']} ({row['fix']})" for row in problems[:shown])
        if len(problems) > shown:
            more = len(problems) - shown
            words = _KIND_WORDS.get(kind, kind)
            lines.append(f"index: {more:,} more {words} (`memsync index --json` lists every one)")
    return lines


def kept_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per index line an edit dropped and the guard put back (`index_kept`
    rows): which note it lists and how to drop it for real. Names keys, never the
    line's text (a watcher logs these)."""
    lines = []
    for row in rows:
        targets = ", ".join(row["targets"])
        lines.append(
            f"kept: the line of {row['index']} that links {targets}, at its end: the edit "
            f"dropped the only link to a note that still exists (`memsync rm "
            f"{row['targets'][0]}` deletes a note and its line for the team)"
        )
    return lines
