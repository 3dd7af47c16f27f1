"""The team index on disk: its health for `status`, `doctor`, `push` and the watcher,
`memsync index --fix`, and the lines `memsync rm` takes out.

The rules are `memory_index`'s (pure); this module reads the team dir's Markdown
files and writes an index back atomically, inside the team dir, like any edit a
person makes: the next push (or the watcher) sends it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sync_client import memory_index
from sync_client.local import LocalScan, read_entry, write_entry
from sync_client.memory_index import INDEX_NAME, IndexReport

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
    checksum (`index_facts`): only files changed since the last check are read.
    """
    from sync_client.index_facts import facts_of

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


def fix(team_dir: Path, scan: LocalScan) -> dict[str, Any]:
    """`memsync index --fix`: write the fixed indexes; `{changed, added, removed,
    written}` (`written`: the index keys rewritten)."""
    texts = markdown_texts(team_dir, scan.checksums)
    planned = memory_index.fix(texts, present=[item.key for item in scan.skipped])
    for key, text in sorted(planned.texts.items()):
        write_entry(team_dir, key, text)
    return {
        "changed": planned.changed,
        "added": planned.added,
        "removed": planned.removed,
        "written": sorted(planned.texts),
    }


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
    from sync_client.local import read_ignore_rules, scan_team_dir

    if not team_dir.is_dir():
        return LocalScan()
    return scan_team_dir(team_dir, {}, ignore=read_ignore_rules(team_dir))
